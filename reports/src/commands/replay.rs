//! `locksim replay` and `locksim shrink`: one seed of one cell, re-run with its
//! timeline and diagram, or cut down to the smallest run that still fails.

use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use scenarios::catalog::{self, Scenario};
use scenarios::checkers::{self, Verdict};
use scenarios::sweep::{DesignSpec, replay_command};
use serde::Serialize;

use crate::cells::replay_for;
use crate::exit::{EXIT_BAD_INPUT, EXIT_INVALID, EXIT_UNKNOWN, exit_code};
use crate::input::BadInput;

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
    // The plan file holds every fault, a placed one too: no `--place` beside it.
    let replay = format!(
        "{}{} --plan {}",
        replay_command(&design.name, scenario.name, seed),
        scenario.clone().placed(None).param_flags(),
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
