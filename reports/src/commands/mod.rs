//! What the `locksim` subcommands do: one front end per subcommand (the catalog
//! matrix, `list`, `run`, `replay`, `shrink`, `sweep`, `report`, `merge`); `main.rs`
//! only parses arguments, and `gate` and `explore` have modules of their own.
//!
//! The front ends sit on top: they call `report`, `shard` and `sweeps`, which with
//! them build on the core ([`crate::cells`], [`crate::input`], [`crate::exit`]), and
//! nothing below imports a front end back.

mod list;
mod parity;

pub use crate::seeds::Seeds;
pub use list::{list, time_scale_table, unfit_cells_table};
pub use parity::parity;

use std::ops::Range;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use scenarios::catalog::{self, Scenario};
use scenarios::checkers::{self, Verdict};
use scenarios::sweep::{DesignSpec, replay_command};
use serde::Serialize;

use crate::cells::{progress, replay_for, run_cell_with_latency, shrink_command};
use crate::exit::{EXIT_BAD_INPUT, EXIT_INVALID, EXIT_UNKNOWN, code_of, exit_code};
use crate::input::BadInput;
use crate::table::{CellResult, render_text};

/// Prints cells as the catalog command does: the 120-column matrix, the detailed
/// table (`detail`) or JSON.
fn print_cells(cells: &[CellResult], json: bool, detail: bool, title: &str) {
    if json {
        println!("{}", crate::table::render_json(cells));
        return;
    }
    if !title.is_empty() {
        println!("locksim: {title}");
    }
    if !detail {
        use std::io::IsTerminal;
        let color = std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        // Rows and columns in the order the cells came (the catalog's order).
        let mut names: Vec<&str> = Vec::new();
        let mut scenario_names: Vec<&str> = Vec::new();
        for c in cells {
            if !names.contains(&c.design.as_str()) {
                names.push(&c.design);
            }
            if !scenario_names.contains(&c.scenario.as_str()) {
                scenario_names.push(&c.scenario);
            }
        }
        let order: Vec<&str> = catalog::catalog().iter().map(|s| s.name).collect();
        scenario_names.sort_by_key(|s| order.iter().position(|o| o == s).unwrap_or(usize::MAX));
        print!(
            "{}",
            crate::table::render_matrix(cells, &names, &scenario_names, color)
        );
        let failing = cells
            .iter()
            .filter(|c| c.first_invalid_seed.is_some())
            .count();
        println!("\n{}", matrix_footer(failing, cells.len()));
        return;
    }
    print!("{}", render_text(cells));
    let failing: Vec<&str> = cells.iter().filter_map(|c| c.replay.as_deref()).collect();
    if !failing.is_empty() {
        println!("\nshrink each failing cell's first invalid run to a minimal one:");
        for replay in failing {
            // The shrinker takes the replay's own flags.
            println!(
                "  {}",
                replay.replacen("locksim replay", "locksim shrink", 1)
            );
        }
    }
    println!(
        "\nchecker columns count invalid runs; replay any first invalid seed with the command shown, or shrink it to a minimal run with the command above."
    );
    println!("{}", rate_legend());
    println!(
        "fault counts the runs in which the scenario's fault really happened. class counts runs per safety class: unsafe = harm at the storage or server (lost-update, ownership, reentrancy), or believed holds overlapped, the older holder wrote after the newer grant and nothing refused it; fenced = believed holds overlapped and the storage refused the stale holder, nothing lost; overlap = believed holds overlapped, but the older holder wrote nothing to the storage after the newer grant (no harm reached it, no fence was tested); promise = a promise broken without harm or overlap (token-order: a fencing token issued twice or out of order); unknown = a safety checker could not judge; no-fault = nothing broke but the fault never happened (no evidence of safety); liveness checkers do not change it."
    );
}

/// What the `unsafe, 95%` column and the rate lines mean.
fn rate_legend() -> String {
    format!(
        "unsafe, 95% is unsafe runs / runs with the rate's 95% interval (exact {}): `3/30 2.1–27%` is a two-sided interval; `0/60 <4.9%` bounds the rate from above, `30/30 >90%` from below (one-sided, 95%).",
        "Clopper–Pearson"
    )
}

/// The rate lines of one cell: the unsafe share and each checker's invalid share, each
/// with its 95 % interval (`locksim run`).
pub fn rate_lines(cell: &CellResult) -> String {
    use std::fmt::Write as _;
    // The counts line up: `unsafe` padded to the checkers' `NAME invalid`.
    let width = cell
        .per_checker
        .keys()
        .map(|k| k.len() + " invalid".len())
        .max()
        .unwrap_or(0);
    let unsafe_text = cell.unsafe_text();
    let counts = unsafe_text.strip_prefix("unsafe ").unwrap_or(&unsafe_text);
    let mut out = format!(
        "rates (95%, exact Clopper–Pearson):\n  {:<width$} {counts}\n",
        "unsafe"
    );
    for (name, n) in &cell.per_checker {
        let _ = writeln!(
            out,
            "  {}",
            scenarios::stats::describe(
                &format!("{:<width$}", format!("{name} invalid")),
                *n as u64,
                cell.runs
            )
        );
    }
    out
}

/// The lines under the matrix, wrapped to the 120 columns the matrix fits.
pub fn matrix_footer(failing: usize, cells: usize) -> String {
    format!(
        "{failing} of {cells} cells have an invalid run. `locksim --detail`: every cell with its checkers, latency,\n\
         replay and shrink commands; `locksim run --design D --scenario S`: one cell; `locksim report`: plots and\n\
         timelines in a page; `locksim explore --design D`: where each fault breaks the lock."
    )
}

/// `locksim` with no arguments: every design of `designs` × every scenario that fits it.
pub fn catalog_table(
    designs: &[DesignSpec],
    seeds: Seeds,
    threads: usize,
    json: bool,
    detail: bool,
    shard: Option<(crate::shard::Shard, std::path::PathBuf)>,
) -> ExitCode {
    let scenarios = catalog::catalog();
    let pairs: Vec<(&DesignSpec, &Scenario)> = designs
        .iter()
        .flat_map(|d| {
            scenarios
                .iter()
                .filter(|s| s.applies_to(d.backend, d.masters))
                .map(move |s| (d, s))
        })
        .collect();
    let seeds = match seeds {
        Seeds::Fixed(seeds) => seeds,
        Seeds::Adaptive(rule) => {
            // A shard runs its share of the cells, each whole (`Shard::cells_of`).
            let of_cells = pairs.len();
            let pairs: Vec<(&DesignSpec, &Scenario)> = match &shard {
                Some((s, _)) => s.cells_of(of_cells).map(|i| pairs[i]).collect(),
                None => pairs,
            };
            if !json {
                let share = match &shard {
                    Some((s, _)) if s.count > 1 => {
                        format!(", shard {s}: {} of {of_cells} cells", pairs.len())
                    }
                    _ => String::new(),
                };
                println!(
                    "locksim: {} designs × {} scenarios, {}, {} threads{share}",
                    designs.len(),
                    scenarios.len(),
                    Seeds::Adaptive(rule).describe(),
                    threads
                );
            }
            let bar = crate::cells::progress_cells(pairs.len() as u64, !json);
            let cells = match crate::cells::run_cells_adaptive(&pairs, rule, 0, threads, &bar) {
                Ok(cells) => cells,
                Err(e) => {
                    bar.finish_and_clear();
                    eprintln!("locksim: {e}");
                    return ExitCode::from(EXIT_UNKNOWN);
                }
            };
            bar.finish_and_clear();
            let all_runs: Vec<_> = cells.iter().flat_map(|c| c.runs.iter().cloned()).collect();
            if let Some((s, path)) = &shard {
                let part = cells
                    .iter()
                    .map(|c| crate::shard::ShardCell {
                        cell: c.cell.clone(),
                        latency: c.latency.clone(),
                    })
                    .collect();
                let rule = Seeds::Adaptive(rule).describe();
                if let Err(e) = crate::shard::write_cells(path, &rule, *s, of_cells, part) {
                    eprintln!("locksim: {}", e.0);
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
            let cells: Vec<CellResult> = cells.into_iter().map(|c| c.cell).collect();
            print_adaptive(&cells, json, detail, "");
            return ExitCode::from(exit_code(&all_runs));
        }
    };
    let whole = seeds.clone();
    let seeds = shard
        .as_ref()
        .map_or(seeds.clone(), |(s, _)| s.seeds_of(&seeds));
    if !json {
        println!(
            "locksim: {} designs × {} scenarios, seeds {}..{}, {} threads",
            designs.len(),
            scenarios.len(),
            seeds.start,
            seeds.end,
            threads
        );
    }
    let total = pairs.len() as u64 * (seeds.end - seeds.start);
    let bar = progress(total, !json);
    // A shard file carries each cell's histograms; the table alone needs none.
    let keep_latency = shard.is_some();
    let ran =
        match crate::cells::run_cells_fixed(&pairs, seeds.clone(), threads, keep_latency, &bar) {
            Ok(ran) => ran,
            Err(e) => {
                bar.finish_and_clear();
                eprintln!("locksim: {e}");
                return ExitCode::from(EXIT_UNKNOWN);
            }
        };
    let mut cells = Vec::new();
    let mut shard_cells = Vec::new();
    let mut codes = Vec::new();
    for c in ran {
        codes.push(c.exit);
        if let Some(latency) = c.latency {
            shard_cells.push(crate::shard::ShardCell {
                cell: c.cell.clone(),
                latency,
            });
        }
        cells.push(c.cell);
    }
    bar.finish_and_clear();
    if let Some((s, path)) = &shard
        && let Err(e) = crate::shard::write(path, &whole, *s, shard_cells)
    {
        eprintln!("locksim: {}", e.0);
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    print_cells(&cells, json, detail, "");
    if !json {
        // The lock-service comparison, by system and fault class, if it fits 120 columns.
        let by_system = crate::compare::for_terminal(&crate::compare::Comparison::of(&cells));
        if !by_system.is_empty() {
            println!("\n{}", by_system.trim_end());
        }
    }
    ExitCode::from(crate::exit::code_of_parts(codes))
}

/// The main job's cells under adaptive seeds: the matrix (or table, or JSON), then,
/// for people, what the seeds came to and the comparison by system.
fn print_adaptive(cells: &[CellResult], json: bool, detail: bool, title: &str) {
    print_cells(cells, json, detail, title);
    if !json {
        println!("{}", adaptive_footer(cells));
        let by_system = crate::compare::for_terminal(&crate::compare::Comparison::of(cells));
        if !by_system.is_empty() {
            println!("\n{}", by_system.trim_end());
        }
    }
}

/// What the main job's adaptive seeds came to, under the matrix: cells settled by a
/// violation, cells bounded by the rule's clean runs, and the weak ones, named.
pub fn adaptive_footer(cells: &[CellResult]) -> String {
    use scenarios::adaptive::Settled;
    let settled = cells
        .iter()
        .filter(|c| matches!(c.settled, Some(Settled::Violation { .. })))
        .count();
    let weak: Vec<&CellResult> = cells
        .iter()
        .filter(|c| c.settled.as_ref().is_some_and(Settled::is_weak))
        .collect();
    let bounded = cells
        .iter()
        .filter(|c| matches!(c.settled, Some(Settled::Bounded { .. })))
        .count()
        - weak.len();
    let runs: u64 = cells.iter().map(|c| c.runs).sum();
    let clean = scenarios::adaptive::Rule::DEFAULT.clean;
    let mut out = format!(
        "{settled} cells settled by an unsafe run, {bounded} bounded by {clean} clean runs (unsafe rate {} at 95%), {} with a weak bound; {runs} runs.",
        scenarios::stats::Rate::of(0, clean).map_or_else(String::new, |r| r.interval()),
        weak.len()
    );
    let shown = 12;
    let more = weak.len().saturating_sub(shown);
    for c in weak.into_iter().take(shown) {
        out.push_str(&format!(
            "\n  ~ {} × {}: {}",
            c.design,
            c.scenario,
            c.settled.as_ref().map_or_else(String::new, Settled::text)
        ));
    }
    if more > 0 {
        out.push_str(&format!(
            "\n  … and {more} more weak cells (`--detail`: every cell's stop)"
        ));
    }
    // Where the job's time went: host runs are its unit of cost (the same on every
    // machine; `--json` has every cell's).
    let total: u64 = cells.iter().filter_map(|c| c.host_runs).sum();
    if total > 0 {
        let mut costly: Vec<&CellResult> = cells.iter().filter(|c| c.host_runs.is_some()).collect();
        costly.sort_by_key(|c| std::cmp::Reverse(c.host_runs));
        out.push_str(&format!(
            "\n{total} host runs in all; the costliest cells (host runs, share, runs):"
        ));
        for c in costly.into_iter().take(5) {
            let h = c.host_runs.unwrap_or_default();
            out.push_str(&format!(
                "\n  {} × {}: {h}, {:.1}%, {} runs",
                c.design,
                c.scenario,
                100.0 * h as f64 / total as f64,
                c.runs
            ));
        }
    }
    out
}

#[derive(Serialize)]
struct RunReport<'a> {
    design: &'a str,
    scenario: &'a str,
    seeds: String,
    /// The cell with its `rates` (every share with its 95 % interval).
    #[serde(serialize_with = "crate::table::serialize_cell")]
    cell: &'a CellResult,
    /// Every run with a non-Valid verdict, with its evidence and replay command.
    runs: Vec<RunEntry<'a>>,
}

#[derive(Serialize)]
struct RunEntry<'a> {
    seed: u64,
    verdicts: &'a [(String, Verdict)],
    fault_seen: &'a Option<String>,
    replay: String,
}

/// `locksim run`.
pub fn run(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Seeds,
    threads: usize,
    json: bool,
    real: bool,
    shard: Option<(crate::shard::Shard, std::path::PathBuf)>,
) -> ExitCode {
    let (seeds, cell, runs) = match seeds {
        Seeds::Adaptive(rule) => {
            if !json {
                println!(
                    "locksim run: design={} scenario={} {} threads={threads}",
                    design.name,
                    scenario.name,
                    Seeds::Adaptive(rule).describe()
                );
            }
            let bar = progress(rule.max_seeds(), false);
            match crate::cells::run_cells_adaptive(&[(design, scenario)], rule, 0, threads, &bar) {
                Ok(mut cells) => {
                    let c = cells.remove(0);
                    (0..c.cell.runs, c.cell, c.runs)
                }
                Err(e) => {
                    eprintln!("locksim run: {e}");
                    return ExitCode::from(EXIT_UNKNOWN);
                }
            }
        }
        Seeds::Fixed(seeds) => {
            let whole = seeds.clone();
            let seeds = shard.as_ref().map_or(seeds, |(s, _)| s.seeds_of(&whole));
            if !json {
                println!(
                    "locksim run: design={} scenario={} seeds={}..{} {}",
                    design.name,
                    scenario.name,
                    seeds.start,
                    seeds.end,
                    if real {
                        "against real servers (one run at a time)".to_string()
                    } else {
                        format!("threads={threads}")
                    }
                );
            }
            let bar = progress(seeds.end - seeds.start, !json);
            let ran = if real {
                crate::cells::run_real_cell(design, scenario, seeds.clone(), &bar)
            } else {
                run_cell_with_latency(design, scenario, seeds.clone(), threads, &bar)
            };
            let (cell, runs) = match ran {
                Ok((cell, runs, latency)) => {
                    if let Some((s, path)) = &shard {
                        let part = crate::shard::ShardCell {
                            cell: cell.clone(),
                            latency,
                        };
                        if let Err(e) = crate::shard::write(path, &whole, *s, vec![part]) {
                            bar.finish_and_clear();
                            eprintln!("locksim run: {}", e.0);
                            return ExitCode::from(EXIT_BAD_INPUT);
                        }
                    }
                    (cell, runs)
                }
                Err(e) => {
                    bar.finish_and_clear();
                    eprintln!("locksim run: {e}");
                    return ExitCode::from(EXIT_UNKNOWN);
                }
            };
            bar.finish_and_clear();
            (seeds, cell, runs)
        }
    };
    let entries: Vec<RunEntry> = runs
        .iter()
        .filter(|r| r.verdicts.iter().any(|(_, v)| !v.is_valid()))
        .map(|r| RunEntry {
            seed: r.seed,
            verdicts: &r.verdicts,
            fault_seen: &r.fault_seen,
            replay: replay_for(design, scenario, r.seed),
        })
        .collect();
    if json {
        let report = RunReport {
            design: &design.name,
            scenario: scenario.name,
            seeds: format!("{}..{}", seeds.start, seeds.end),
            cell: &cell,
            runs: entries,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serializable")
        );
    } else {
        print!("{}", render_text(std::slice::from_ref(&cell)));
        let faulted = runs.iter().filter(|r| r.fault_seen.is_some()).count();
        println!(
            "the scenario's fault ({}) happened in {faulted} of {} runs",
            scenario.fault_about,
            runs.len()
        );
        if let Some(settled) = &cell.settled {
            println!("adaptive seeds stopped the cell: {}", settled.text());
        }
        print!("{}", rate_lines(&cell));
        for e in entries.iter().take(10) {
            for (name, v) in e.verdicts {
                match v {
                    Verdict::Invalid(ev) => {
                        println!("seed {}: {name} INVALID: {}", e.seed, ev.summary)
                    }
                    Verdict::Unknown { reason } => {
                        println!("seed {}: {name} UNKNOWN: {reason}", e.seed)
                    }
                    Verdict::Valid => {}
                }
            }
            if let Some(fault) = e.fault_seen {
                println!("  fault: {fault}");
            }
            println!("  replay: {}", e.replay);
            println!(
                "  shrink: {}",
                shrink_command(&design.name, scenario, e.seed)
            );
        }
        if entries.len() > 10 {
            println!(
                "… and {} more runs with violations (see --json)",
                entries.len() - 10
            );
        }
    }
    ExitCode::from(exit_code(&runs))
}

/// Where `replay --diagram` writes, and how.
#[derive(Debug, Clone)]
pub struct DiagramTarget {
    /// The file.
    pub path: std::path::PathBuf,
    /// Mermaid text rather than SVG.
    pub mermaid: bool,
    /// Every host over the whole run.
    pub full: bool,
}

/// Checks `--diagram`: `.svg` or `.mmd`, and never over a file locksim did not write.
pub fn diagram_target(path: &std::path::Path, full: bool) -> Result<DiagramTarget, BadInput> {
    let mermaid = match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => false,
        Some("mmd") => true,
        _ => {
            return Err(BadInput(format!(
                "invalid --diagram {}: the file name must end in .svg (an SVG picture) or .mmd (Mermaid text)",
                path.display()
            )));
        }
    };
    if let Ok(existing) = std::fs::read_to_string(path)
        && !crate::diagram::is_ours(&existing)
    {
        return Err(BadInput(format!(
            "--diagram {} exists and is not a diagram locksim wrote; choose another file",
            path.display()
        )));
    }
    if path.exists() && std::fs::read_to_string(path).is_err() {
        return Err(BadInput(format!(
            "--diagram {} exists and is not a diagram locksim wrote; choose another file",
            path.display()
        )));
    }
    Ok(DiagramTarget {
        path: path.to_path_buf(),
        mermaid,
        full,
    })
}

/// `locksim replay`: one seed, its knobs, its verdicts, and the timeline around the
/// first violation.
pub fn replay_one(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
    context: usize,
    json: bool,
    diagram: Option<DiagramTarget>,
) -> ExitCode {
    let cfg = scenarios::sweep::config(design, scenario, seed);
    let history = match sim::world::run(&cfg) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("locksim replay: {e}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let summary = scenarios::sweep::summarize(scenario, &history);
    let history = &history;
    if let Some(target) = &diagram {
        let d = crate::diagram::build(history, &summary.verdicts, target.full);
        let text = if target.mermaid {
            crate::diagram::mermaid(&d)
        } else {
            crate::diagram::svg(&d)
        };
        if let Err(e) = std::fs::write(&target.path, text) {
            eprintln!(
                "locksim replay: cannot write --diagram {}: {e}",
                target.path.display()
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        eprintln!(
            "diagram written to {} ({} lanes: {})",
            target.path.display(),
            d.lanes.len(),
            d.lanes.join(", ")
        );
    }
    if json {
        #[derive(Serialize)]
        struct Replay<'a> {
            verdicts: &'a [(String, Verdict)],
            fault_seen: &'a Option<String>,
            history: &'a sim::history::History,
        }
        let out = Replay {
            verdicts: &summary.verdicts,
            fault_seen: &summary.fault_seen,
            history,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serializable")
        );
        return ExitCode::from(exit_code([&summary]));
    }
    println!(
        "seed {seed}: design={} scenario={}",
        design.name, scenario.name
    );
    if let Some((_, file)) = &scenario.fixed_plan {
        println!("fault plan: from {file} (hand-written or shrunk, not the seed's)");
    }
    println!(
        "workload: {}",
        serde_json::to_string(&cfg.workload).expect("serializable")
    );
    println!(
        "faults: {}",
        serde_json::to_string(&cfg.plan).expect("serializable")
    );
    println!(
        "history digest {:016x}, {} events",
        history.digest(),
        history.events.len()
    );
    match &summary.fault_seen {
        Some(w) => println!("fault seen: {w}"),
        None => println!(
            "fault NOT seen: {} never happened in this run",
            scenario.fault_about
        ),
    }
    for (name, v) in &summary.verdicts {
        match v {
            Verdict::Valid => println!("{name:>17}: valid"),
            Verdict::Invalid(ev) => println!("{name:>17}: INVALID: {}", ev.summary),
            Verdict::Unknown { reason } => println!("{name:>17}: unknown: {reason}"),
        }
    }
    let first = summary
        .verdicts
        .iter()
        .filter_map(|(_, v)| v.evidence())
        .min_by_key(|ev| ev.at_us);
    if let Some(ev) = first {
        println!(
            "\ntimeline around the first violation ({}):",
            checkers::fmt_s(ev.at_us)
        );
        print!("{}", crate::timeline::render_evidence(history, ev, context));
    }
    println!("\nreplay: {}", replay_for(design, scenario, seed));
    ExitCode::from(exit_code([&summary]))
}

/// `locksim shrink`: exit 1 with the minimal failing run written to `out`; 2 on bad
/// input (unknown checker, a seed that does not fail, `out` exists without `force`);
/// 3 if the search could not finish (a run that cannot run, or does not reproduce).
pub fn shrink(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
    checker: Option<&str>,
    budget: scenarios::shrink::Budget,
    out: &std::path::Path,
    force: bool,
) -> Result<ExitCode, BadInput> {
    use scenarios::shrink::ShrinkError;
    if out.exists() && !force {
        return Err(BadInput(format!(
            "--out {} exists; pass --force to overwrite it or choose another --out",
            out.display()
        )));
    }
    println!(
        "locksim shrink: design={} scenario={} seed={seed}",
        design.name, scenario.name
    );
    let bar = ProgressBar::new(budget.max_runs as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed} {msg}")
            .expect("static template"),
    );
    let started = std::time::Instant::now();
    let result = scenarios::shrink::shrink(design, scenario, seed, checker, budget, &|runs, c| {
        bar.set_position(runs as u64);
        if let Some(c) = c {
            bar.set_message(c.size().to_string());
        }
    });
    bar.finish_and_clear();
    let shrunk = match result {
        Ok(s) => s,
        Err(e @ (ShrinkError::UnknownChecker(..) | ShrinkError::NotFailing(_))) => {
            return Err(BadInput(e.to_string()));
        }
        Err(e) => {
            eprintln!("locksim shrink: {e}");
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
    };
    // Against the catalog's workload, not `scenario`'s: a run that started from a plan
    // file already carries that file's workload changes, and the new file must too.
    let base = catalog::find(scenario.name)
        .and_then(|s| s.with_profile(scenario.profile))
        .map(|s| s.workload)
        .unwrap_or_else(|_| scenario.workload.clone());
    let file =
        scenarios::planfile::PlanFile::new(&shrunk.minimal.plan, &shrunk.minimal.workload, &base);
    if let Err(e) = std::fs::write(out, file.to_json()) {
        return Err(BadInput(format!(
            "cannot write --out {}: {e}",
            out.display()
        )));
    }
    println!("checker: {}", shrunk.checker);
    println!("before:  {}", shrunk.original.size());
    println!("after:   {}", shrunk.minimal.size());
    println!("runs:    {}", shrunk.runs);
    if let Some(why) = &shrunk.stopped {
        println!("stopped early: {why}");
    }
    for s in &shrunk.steps {
        println!("  step: {s}");
    }
    println!("violation: {}", shrunk.evidence);
    match &shrunk.fault_seen {
        Some(f) => println!("fault: {f}"),
        None => println!(
            "fault NOT seen in the minimal run ({}): the violation needs less than the scenario's fault",
            scenario.fault_about
        ),
    }
    println!("minimal plan written to {}:", out.display());
    print!("{}", file.to_json());
    let replay = format!(
        "{}{} --plan {}",
        replay_command(&design.name, scenario.name, seed),
        scenario.param_flags(),
        out.display()
    );
    println!("replay:  {replay}");
    println!("diagram: {replay} --diagram shrunk.svg");
    eprintln!(
        "locksim shrink: {} runs in {:.1} s",
        shrunk.runs,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::from(EXIT_INVALID))
}

/// Where `locksim sweep` puts its result besides the table.
pub struct SweepOutput<'a> {
    /// Print JSON instead of the table.
    pub json: bool,
    /// Draw the plot to this `.svg` or `.png` file.
    pub plot: Option<&'a std::path::Path>,
    /// Run one shard of the seeds and write it to this file.
    pub shard: Option<(crate::shard::Shard, std::path::PathBuf)>,
}

/// `locksim sweep`: every design at every value of one parameter.
pub fn sweep_cmd(
    designs: &[DesignSpec],
    scenario: &Scenario,
    range: &scenarios::params::ParamRange,
    seeds: Range<u64>,
    threads: usize,
    out: SweepOutput<'_>,
) -> Result<ExitCode, BadInput> {
    let SweepOutput {
        json,
        plot: plot_to,
        shard,
    } = out;
    crate::sweeps::check(designs, scenario, range)?;
    let whole = seeds.clone();
    let seeds = shard.as_ref().map_or(seeds, |(s, _)| s.seeds_of(&whole));
    let plot_to = plot_to.map(plot_target).transpose()?;
    if !json {
        println!(
            "locksim sweep: scenario={}{} {}={} seeds={}..{} designs={} threads={threads}",
            scenario.name,
            scenario.param_flags(),
            range.param,
            range
                .values
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            seeds.start,
            seeds.end,
            designs
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let total = designs.len() as u64 * range.values.len() as u64 * (seeds.end - seeds.start);
    let bar = progress(total, !json);
    let result = crate::sweeps::run(designs, scenario, range, seeds.clone(), threads, &bar);
    bar.finish_and_clear();
    let (part, exit) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("locksim sweep: {e}");
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
    };
    let result = crate::sweeps::of_shard(&part, &format!("{}..{}", seeds.start, seeds.end));
    if let Some((s, path)) = &shard {
        let whole_text = format!("{}..{}", whole.start, whole.end);
        crate::shard::write_file(
            path,
            &crate::shard::ShardFile {
                seeds: whole_text.clone(),
                shard: s.to_string(),
                split: crate::shard::Split::Seeds,
                of_cells: None,
                cells: Vec::new(),
                sweep_seeds: Some(whole_text),
                sweeps: vec![part],
            },
        )?;
    }
    if let Some((path, png)) = &plot_to {
        let written = if *png {
            crate::plot::render(&result.plot(), Some(path)).map(|_| ())
        } else {
            crate::plot::render(&result.plot(), None).and_then(|svg| {
                std::fs::write(path, svg)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            })
        };
        if let Err(e) = written {
            eprintln!("locksim sweep: --plot: {e}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).expect("serializable")
        );
    } else {
        print!("{}", result.render_text());
        println!(
            "cells count unsafe runs / runs; * marks a point where the scenario's fault did not happen in every run."
        );
        for (design, value, replay) in result.replays().into_iter().take(20) {
            println!("{design} at {}={value}: {replay}", result.param);
        }
        if let Some((path, _)) = &plot_to {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::from(exit))
}

/// Checks `--plot`: `.svg` or `.png`, never over an existing file. Returns the path and
/// whether it is a PNG.
fn plot_target(path: &std::path::Path) -> Result<(std::path::PathBuf, bool), BadInput> {
    let png = match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => false,
        Some("png") => true,
        _ => {
            return Err(BadInput(format!(
                "invalid --plot {}: the file name must end in .svg or .png",
                path.display()
            )));
        }
    };
    if path.exists() {
        return Err(BadInput(format!(
            "--plot {} exists; choose another file (locksim never writes over one)",
            path.display()
        )));
    }
    Ok((path.to_path_buf(), png))
}

/// `locksim report`.
pub fn report(args: &crate::report::ReportArgs) -> ExitCode {
    println!(
        "locksim report: {} designs × {} scenarios, {}, sweeps {}, into {}",
        args.designs.len(),
        args.scenarios.len(),
        args.seeds.describe(),
        if args.sweeps {
            format!("seeds {}..{}", args.sweep_seeds.start, args.sweep_seeds.end)
        } else {
            "off".into()
        },
        args.out.display()
    );
    match crate::report::build(args) {
        Ok((results, page)) => {
            let failing = results
                .cells
                .iter()
                .filter(|c| c.first_invalid_seed.is_some())
                .count();
            println!(
                "wrote {} (open it in a browser), {}, {} and {} ({failing} of {} cells have an invalid run)",
                page.display(),
                args.out.join("summary.md").display(),
                args.out.join("results.json").display(),
                if args.full {
                    format!("{} (every plot)", args.out.join("png").display())
                } else {
                    format!(
                        "{} (a page per failing cell)",
                        args.out.join("cells").display()
                    )
                },
                results.cells.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("locksim report: {e}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

/// `locksim merge FILES…`: the shards' cells added back together, printed as the
/// unsharded run prints them (matrix, `--detail` table or `--json`), with its exit
/// code.
pub fn merge_files(
    paths: &[std::path::PathBuf],
    json: bool,
    detail: bool,
) -> Result<ExitCode, BadInput> {
    let files = crate::shard::read_files(paths)?;
    let m = crate::shard::merge_all(&files).map_err(BadInput)?;
    let (seeds, cells): (String, Vec<CellResult>) = (
        m.seeds.clone(),
        m.cells.iter().map(|c| c.cell.clone()).collect(),
    );
    let sweeps = crate::sweeps::from_shards(&m);
    if files[0].1.split == crate::shard::Split::Cells {
        // The main job's cells, as its unsharded run prints them (cell shards carry no
        // sweeps: the merge refuses them).
        print_adaptive(
            &cells,
            json,
            detail,
            &format!("merged {} shard files, {seeds}", files.len()),
        );
    } else if !cells.is_empty() || sweeps.is_empty() {
        print_cells(
            &cells,
            json,
            detail,
            &format!("merged {} shard files, seeds {seeds}", files.len()),
        );
    }
    for s in &sweeps {
        if json {
            println!("{}", serde_json::to_string_pretty(s).expect("serializable"));
        } else {
            println!("\nsweep {} × {} (seeds {}):", s.scenario, s.param, s.seeds);
            print!("{}", s.render_text());
        }
    }
    let points = sweeps.iter().flat_map(|s| &s.lines).flat_map(|l| &l.points);
    Ok(ExitCode::from(code_of(
        cells.iter().any(|c| c.invalid() > 0) || points.clone().any(|p| p.cell.invalid() > 0),
        cells.iter().any(|c| c.unknown > 0) || points.clone().any(|p| p.cell.unknown > 0),
    )))
}
