//! The catalog matrix: the main job (`locksim` with no subcommand), how its cells
//! print (the matrix, `--detail`, JSON, the adaptive seeds' footer) and `locksim merge`,
//! which prints shard files' cells the same way.

use std::process::ExitCode;

use scenarios::catalog::{self, Scenario};
use scenarios::sweep::DesignSpec;

use crate::cells::progress;
use crate::exit::{EXIT_BAD_INPUT, EXIT_UNKNOWN, code_of, exit_code};
use crate::input::BadInput;
use crate::seeds::Seeds;
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
