//! `locksim run`: one design × one scenario over a seed range (or the adaptive seeds),
//! in the simulator or against real servers.

use std::process::ExitCode;

use scenarios::catalog::Scenario;
use scenarios::checkers::Verdict;
use scenarios::sweep::DesignSpec;
use serde::Serialize;

use super::matrix::rate_lines;
use crate::cells::{progress, replay_for, run_cell_with_latency, shrink_command};
use crate::exit::{EXIT_BAD_INPUT, EXIT_UNKNOWN, exit_code};
use crate::seeds::Seeds;
use crate::table::{CellResult, render_text};

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
    #[serde(skip)]
    shrink: String,
}

/// `locksim run`; with `client`, each client of a real run is that foreign program.
#[allow(clippy::too_many_arguments)]
pub fn run(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Seeds,
    threads: usize,
    json: bool,
    real: bool,
    shard: Option<(crate::shard::Shard, std::path::PathBuf)>,
    client: Option<&crate::real::foreign::Foreign>,
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
            let ran = if let Some(f) = client {
                crate::real::foreign::run_cell(f, design, scenario, seeds.clone(), &bar)
            } else if real {
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
        .map(|r| {
            // A placed run's commands name its placement.
            let placed = r.placement.map(|p| scenario.clone().placed(Some(p)));
            let scenario = placed.as_ref().unwrap_or(scenario);
            RunEntry {
                seed: r.seed,
                verdicts: &r.verdicts,
                fault_seen: &r.fault_seen,
                replay: client.map_or_else(
                    || replay_for(design, scenario, r.seed),
                    |f| f.replay(scenario, r.seed),
                ),
                shrink: shrink_command(&design.name, scenario, r.seed),
            }
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
            if client.is_none() {
                println!("  shrink: {}", e.shrink);
            }
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
