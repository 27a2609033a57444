//! `locksim parity`: the headline cells, against real servers and in the simulator,
//! side by side. Per cell, each side's runs, safety classes, unsafe rate with its 95 %
//! interval, how often the scenario's fault really happened, and the acquire latency;
//! a cell is flagged when one side shows a class the other never shows, or when the
//! unsafe rates' intervals do not overlap. A cell the real runner cannot run yet says
//! why and stays model-only.

use std::ops::Range;

use scenarios::sweep::DesignSpec;
use serde::Serialize;

use crate::cells::{progress, run_cell_with_latency, run_real_cell_with};
use crate::table::CellResult;

/// The cells parity runs by default: the headline cells (a failover, a server
/// restart, a split brain, Redlock's restart and clock jump, ZooKeeper's leader crash,
/// MariaDB's dropped connection, a crashed client holding a row), then the pause of a
/// holder on every system the real runner reaches, with and without fencing, and
/// ZooKeeper's session expiry.
pub const HEADLINE: &[(&str, &str)] = &[
    ("set-nx-px-lua", "gc-pause"),
    ("set-nx-px-lua", "failover"),
    ("set-nx-px-lua", "server-restart"),
    ("set-nx-px-lua", "split-brain"),
    ("wait-synced", "failover-wait"),
    ("redlock", "redlock-restart"),
    ("redlock", "redlock-clock-jump"),
    ("reentrant-watchdog", "gc-pause"),
    ("zk-curator", "gc-pause"),
    ("zk-curator", "leader-crash"),
    ("mysql-get-lock", "mysql-connection-drop"),
    ("mysql-unique-index", "client-crash"),
    ("fenced", "gc-pause"),
    ("zk-curator-fenced", "gc-pause"),
    ("mysql-get-lock", "gc-pause"),
    ("redis-py", "gc-pause"),
    // Flagged once by the runner's own record (`docs/parity.md`, "Found by parity"):
    // Redisson's fenced lock's grant order, a ZooKeeper session's expiry.
    ("redisson-fenced", "gc-pause"),
    ("zk-curator", "zk-session-expiry"),
    // Speed under contention, fault-free (the seeds' "Redis is much faster than
    // ZooKeeper or MySQL"): one design per system the real runner reaches.
    ("set-nx-px-lua", "no-faults"),
    ("zk-curator", "no-faults"),
    ("mysql-get-lock", "no-faults"),
    ("mysql-unique-index", "no-faults"),
];

/// One side of a cell.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The cell as the table prints it (runs, classes, per-checker counts, latency).
    #[serde(serialize_with = "crate::table::serialize_cell")]
    pub cell: CellResult,
    /// Acquisitions that succeeded per second of the workload's time (all clients).
    pub acquisitions_per_s: f64,
}

impl Side {
    fn of(cell: CellResult, runs: &[scenarios::sweep::RunSummary], duration_ms: u64) -> Self {
        let acquired: u64 = runs.iter().map(|r| r.acquisitions).sum();
        let seconds = runs.len() as f64 * duration_ms as f64 / 1000.0;
        Side {
            cell,
            acquisitions_per_s: if seconds > 0.0 {
                acquired as f64 / seconds
            } else {
                0.0
            },
        }
    }
}

/// One cell, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The design.
    pub design: String,
    /// The scenario.
    pub scenario: String,
    /// The simulator's side.
    pub model: Side,
    /// The real servers' side, or why there is none.
    pub real: Result<Side, String>,
    /// What disagrees, significantly.
    pub flags: Vec<String>,
    /// What one side shows and the other never does, too rare to be a flag.
    pub notes: Vec<String>,
}

/// Checkers that judge a real run as they judge a simulated one (they read the
/// clients' operations and the storage's record, never a lock server's; `overrun`
/// needs the server's record for a lock without expiry, whose end only the server knows).
const JUDGED_ON_BOTH: [&str; 3] = ["mutual-exclusion", "lost-update", "token-order"];

/// Classes a run is put in before an unknown verdict is looked at (see
/// `scenarios::checkers::safety`): an unknown verdict cannot hide them.
const NEVER_HIDDEN: [&str; 2] = ["unsafe", "overlap"];

/// The flags of a cell: a class one side shows and the other never does, a checker
/// that judges both sides alike invalid on one side only, unsafe rates whose 95 %
/// intervals do not overlap. A class or checker seen on one side only is a flag when
/// its share there is significant against the other side's none (its 95 % interval
/// lies above the bound of 0 in the other side's runs); a rare one (`overlap` in 1 of
/// 100 model runs against 20 real runs) is a note, which [`notes`] lists. A class the
/// other side's unknown runs could hide is neither: a real run has no server's
/// record, so it is `unknown` where a simulated one is `safe` or `fenced`.
pub fn flags(model: &CellResult, real: &CellResult) -> Vec<String> {
    one_sided(model, real)
        .into_iter()
        .filter(|(_, significant)| *significant)
        .map(|(f, _)| f)
        .chain((|| {
            let (m, r) = (model.unsafe_rate()?, real.unsafe_rate()?);
            (m.high < r.low || r.high < m.low)
                .then(|| "unsafe rates' 95% intervals do not overlap".to_string())
        })())
        .collect()
}

/// What one side shows and the other never does, too rare to be a flag.
pub fn notes(model: &CellResult, real: &CellResult) -> Vec<String> {
    one_sided(model, real)
        .into_iter()
        .filter(|(_, significant)| !*significant)
        .map(|(f, _)| f)
        .collect()
}

/// Classes and checkers seen on one side only, each with whether that is significant.
fn one_sided(model: &CellResult, real: &CellResult) -> Vec<(String, bool)> {
    let count = |c: &CellResult, class: &str| c.classes.get(class).copied().unwrap_or(0);
    let significant = |n: usize, one: &CellResult, other: &CellResult| match (
        scenarios::stats::Rate::of(n as u64, one.runs),
        scenarios::stats::Rate::of(0, other.runs),
    ) {
        (Some(seen), Some(none)) => seen.low > none.high,
        _ => false,
    };
    let mut out = Vec::new();
    for (one, other, side) in [
        (model, real, "only in the model"),
        (real, model, "only against real servers"),
    ] {
        for (class, n) in &one.classes {
            let hidden = !NEVER_HIDDEN.contains(&class.as_str()) && count(other, "unknown") > 0;
            if *n > 0 && class != "unknown" && count(other, class) == 0 && !hidden {
                out.push((
                    format!("{class} {side} ({n}/{})", one.runs),
                    significant(*n, one, other),
                ));
            }
        }
        for checker in JUDGED_ON_BOTH {
            let invalid = |c: &CellResult| c.per_checker.get(checker).copied().unwrap_or(0);
            let n = invalid(one);
            if n > 0 && invalid(other) == 0 {
                out.push((
                    format!("{checker} invalid {side} ({n}/{})", one.runs),
                    significant(n, one, other),
                ));
            }
        }
    }
    out
}

/// Runs `cells`: `real_runs` real runs each (seeds 0..real_runs, the same plans the
/// simulator draws for them) and `model_seeds` in the simulator, with client
/// processes started from `exe`.
pub fn run(
    cells: &[(String, String)],
    real_runs: u64,
    model_seeds: Range<u64>,
    threads: usize,
    exe: &std::path::Path,
    show_progress: bool,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (d, s) in cells {
        let design = crate::input::design(d).map_err(|e| e.0)?;
        let scenario = crate::input::scenario(s).map_err(|e| e.0)?;
        crate::input::check_pair(&design, &scenario).map_err(|e| e.0)?;
        let bar = progress(model_seeds.end - model_seeds.start, show_progress);
        bar.set_message(format!("{d} × {s} (model)"));
        let duration_ms = scenario
            .workload_for(design.backend, design.masters)
            .duration_ms;
        let (model, model_runs, _) =
            run_cell_with_latency(&design, &scenario, model_seeds.clone(), threads, &bar)?;
        bar.finish_and_clear();
        let real = match real_refusals(&design, &scenario, 0..real_runs) {
            why if !why.is_empty() => Err(why.join("; ")),
            _ => {
                let bar = progress(real_runs, show_progress);
                bar.set_message(format!("{d} × {s} (real)"));
                let r = run_real_cell_with(&design, &scenario, 0..real_runs, &bar, exe);
                bar.finish_and_clear();
                r.map(|(cell, runs, _)| Side::of(cell, &runs, duration_ms))
            }
        };
        let (flags, notes) = match &real {
            Ok(r) => (flags(&model, &r.cell), notes(&model, &r.cell)),
            Err(_) => (Vec::new(), Vec::new()),
        };
        rows.push(Row {
            design: d.clone(),
            scenario: s.clone(),
            model: Side::of(model, &model_runs, duration_ms),
            real,
            flags,
            notes,
        });
    }
    Ok(rows)
}

/// Why the real runner cannot run `design × scenario` over `seeds` (empty: it can).
pub fn real_refusals(
    design: &DesignSpec,
    scenario: &scenarios::catalog::Scenario,
    seeds: Range<u64>,
) -> Vec<String> {
    let mut why = Vec::new();
    for seed in seeds {
        let cfg = scenarios::sweep::config(design, scenario, seed);
        for r in crate::real::refusals(&cfg.design, &cfg.workload, &cfg.plan) {
            if !why.contains(&r) {
                why.push(r);
            }
        }
    }
    why
}

fn classes(c: &CellResult) -> String {
    let parts: Vec<String> = c
        .classes
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn side_cells(side: &Side) -> [String; 6] {
    let c = &side.cell;
    [
        c.runs.to_string(),
        format!("{}/{}", c.fault_seen, c.runs),
        classes(c),
        c.unsafe_rate().map_or("-".into(), |r| r.text()),
        if c.latency.count > 0 {
            format!("{:.1} / {:.1}", c.latency.p50_ms, c.latency.p99_ms)
        } else {
            "-".into()
        },
        if side.acquisitions_per_s < 10.0 {
            format!("{:.1}", side.acquisitions_per_s)
        } else {
            format!("{:.0}", side.acquisitions_per_s)
        },
    ]
}

/// The table, in Markdown: one row per cell and side.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| cell | side | runs | fault seen | classes | unsafe (95% CI) | acquire p50 / p99 ms | acquired /s | flags |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let cell = format!("`{} × {}`", r.design, r.scenario);
        let m = side_cells(&r.model);
        out.push_str(&format!(
            "| {cell} | model | {} | {} | {} | {} | {} | {} | |\n",
            m[0], m[1], m[2], m[3], m[4], m[5]
        ));
        match &r.real {
            Ok(side) => {
                let x = side_cells(side);
                let mut flags = if r.flags.is_empty() {
                    "agree".to_string()
                } else {
                    format!("**{}**", r.flags.join("; "))
                };
                if !r.notes.is_empty() {
                    flags.push_str(&format!(
                        " (seen on one side only, not significant: {})",
                        r.notes.join("; ")
                    ));
                }
                out.push_str(&format!(
                    "| | real | {} | {} | {} | {} | {} | {} | {flags} |\n",
                    x[0], x[1], x[2], x[3], x[4], x[5]
                ));
            }
            Err(why) => out.push_str(&format!(
                "| | real | - | - | - | - | - | model only: {why} |\n"
            )),
        }
    }
    out
}
