//! Running cells: one design × one scenario over a seed range, every run judged and
//! gathered into a table cell with its latency histograms; the progress bar that
//! counts the runs; and the replay and shrink commands a cell names for a failing run.
//!
//! This is the core that the commands build on (the catalog matrix, `run`, `sweep`,
//! `report`, `gate`): it imports none of them, so the imports go one way (commands →
//! report, shard, sweeps, gate, … → cells), and a new command, or a new way of running
//! cells, touches one place.

use std::ops::Range;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use scenarios::catalog::Scenario;
use scenarios::sweep::{DesignSpec, RunSummary, replay_command, sweep, sweep_cells_into};

use crate::latency::LatencySummary;
use crate::table::CellResult;

/// A bar that counts `total` runs; hidden unless `show`.
pub fn progress(total: u64, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed} {msg}")
            .expect("static template"),
    );
    bar
}

/// One cell: runs the seeds, fills the table cell, and returns the summaries and the
/// cell's latency histograms (what a shard file carries so that shards merge exactly).
pub fn run_cell_with_latency(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    threads: usize,
    bar: &ProgressBar,
) -> Result<(CellResult, Vec<RunSummary>, LatencySummary), String> {
    run_cell_observed(design, scenario, seeds, threads, bar, &|_, _| {})
}

/// [`run_cell_with_latency`], also showing each run's history and summary to
/// `observe` as it ends (the project's own gate test pins the histories it judges).
pub fn run_cell_observed(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    threads: usize,
    bar: &ProgressBar,
    observe: &(dyn Fn(&sim::history::History, &RunSummary) + Sync),
) -> Result<(CellResult, Vec<RunSummary>, LatencySummary), String> {
    let latency = Mutex::new(LatencySummary::default());
    let runs = sweep(
        design,
        scenario,
        seeds,
        threads,
        false,
        &|history, summary| {
            observe(history, summary);
            if let Ok(l) = LatencySummary::from_history(history) {
                latency.lock().expect("poisoned").merge(&l);
            }
            bar.inc(1);
        },
    )
    .map_err(|e| e.to_string())?;
    let latency = latency.into_inner().expect("poisoned");
    let cell = cell_of(design, scenario, &runs, &latency);
    Ok((cell, runs, latency))
}

/// One cell of [`run_cells_fixed`].
pub struct FixedCell {
    /// The table cell.
    pub cell: CellResult,
    /// Its runs' latency histograms, merged (if asked for: a shard file's).
    pub latency: Option<LatencySummary>,
    /// The exit code its runs alone would give (`crate::exit::exit_code`).
    pub exit: u8,
}

/// Every cell of `pairs` over the same `seeds` (the catalog table's, the gate's and a sweep's
/// fixed seeds), on `threads` workers across the cells rather than one cell at a time:
/// a cell with fewer seeds left than workers does not leave a core idle. Each cell as [`run_cell_with_latency`] gives it alone,
/// in `pairs`' order. A cell is made as its last run ends and its runs' summaries
/// dropped (its histograms too unless `keep_latency`), so a long table does not hold
/// every run of every cell at once. The bar counts runs and names the cell whose first seed ended last. A
/// bad configuration is an error naming its cell.
pub fn run_cells_fixed(
    pairs: &[(&DesignSpec, &Scenario)],
    seeds: Range<u64>,
    threads: usize,
    keep_latency: bool,
    bar: &ProgressBar,
) -> Result<Vec<FixedCell>, String> {
    // Each cell's histograms, made at its first run and taken at its last.
    let latency: Vec<Mutex<Option<LatencySummary>>> =
        pairs.iter().map(|_| Mutex::new(None)).collect();
    sweep_cells_into(
        pairs,
        seeds.clone(),
        threads,
        false,
        &|cell, history, _| {
            if history.seed == seeds.start {
                let (d, s) = pairs[cell];
                bar.set_message(format!("{} / {}{}", d.name, s.name, s.param_flags()));
            }
            if let Ok(l) = LatencySummary::from_history(history) {
                latency[cell]
                    .lock()
                    .expect("poisoned")
                    .get_or_insert_with(LatencySummary::default)
                    .merge(&l);
            }
            bar.inc(1);
        },
        &|cell, runs| {
            let (design, scenario) = pairs[cell];
            let merged = latency[cell]
                .lock()
                .expect("poisoned")
                .take()
                .unwrap_or_default();
            FixedCell {
                cell: cell_of(design, scenario, &runs, &merged),
                exit: crate::exit::exit_code(&runs),
                latency: keep_latency.then_some(merged),
            }
        },
    )
    .map_err(|(i, e)| format!("{} / {}: {e}", pairs[i].0.name, pairs[i].1.name))
}

/// [`run_cell_with_latency`] against real servers (`locksim run --real`): each seed's
/// world and fault plan, one run at a time, with client processes started from this
/// binary; every history judged by the same checkers.
pub fn run_real_cell(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    bar: &ProgressBar,
) -> Result<(CellResult, Vec<RunSummary>, LatencySummary), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    run_real_cell_with(design, scenario, seeds, bar, &exe)
}

/// [`run_real_cell`] with the client processes started from `exe` (a `locksim`
/// binary: tests name the one cargo built). The servers' logs and the history
/// (`history.json`) of every run with an Invalid verdict (of every run, with
/// `LOCKSIM_KEEP_REAL_LOGS` set) are kept in
/// `$TMPDIR/locksim-real-logs/<design>-<scenario>-seed-<N>/`.
pub fn run_real_cell_with(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    bar: &ProgressBar,
    exe: &std::path::Path,
) -> Result<(CellResult, Vec<RunSummary>, LatencySummary), String> {
    let mut latency = LatencySummary::default();
    let mut runs = Vec::new();
    for seed in seeds {
        let cfg = scenarios::sweep::config(design, scenario, seed);
        // Each server's log, kept only for a run with an Invalid verdict.
        let logs = std::env::temp_dir().join("locksim-real-logs").join(format!(
            "{}-{}-seed-{seed}",
            design.name.replace('/', "_"),
            scenario.name
        ));
        let history = crate::real::run_real(&cfg, exe, Some(&logs))?;
        runs.push(judge_real(scenario, &history, &logs, &mut latency));
        bar.inc(1);
    }
    let cell = cell_of(design, scenario, &runs, &latency);
    Ok((cell, runs, latency))
}

/// Judges a real run's history, adds its latency to `latency`, and writes the history
/// beside the servers' logs in `logs` (a timeline of what the servers did), which are
/// kept only for a run with an Invalid verdict (every run's with
/// `LOCKSIM_KEEP_REAL_LOGS` set).
pub(crate) fn judge_real(
    scenario: &Scenario,
    history: &sim::history::History,
    logs: &std::path::Path,
    latency: &mut LatencySummary,
) -> RunSummary {
    if let Ok(l) = LatencySummary::from_history(history) {
        latency.merge(&l);
    }
    let summary = scenarios::sweep::summarize(scenario, history);
    if let Ok(json) = serde_json::to_string(history) {
        let _ = std::fs::write(logs.join("history.json"), json);
    }
    let keep = summary.verdicts.iter().any(|(_, v)| v.is_invalid())
        || std::env::var_os("LOCKSIM_KEEP_REAL_LOGS").is_some();
    if !keep {
        let _ = std::fs::remove_dir_all(logs);
    }
    summary
}

/// The table cell of `runs` (sorted by seed) with their merged latency.
pub fn cell_of(
    design: &DesignSpec,
    scenario: &Scenario,
    runs: &[RunSummary],
    latency: &LatencySummary,
) -> CellResult {
    let mut cell = CellResult::new(&design.name, scenario.name);
    for r in runs {
        cell.record_run(r);
    }
    // The first invalid run's replay: a placed run's names its placement.
    cell.replay = runs.iter().find(|r| r.is_invalid()).map(|r| {
        let placed = scenario.clone().placed(r.placement.or(scenario.placement));
        replay_for(design, &placed, r.seed)
    });
    cell.latency = latency.ok();
    cell
}

/// The command that replays `seed`, with the hand-written plan if there is one.
pub(crate) fn replay_for(design: &DesignSpec, scenario: &Scenario, seed: u64) -> String {
    let base = format!(
        "{}{}",
        replay_command(&design.name, scenario.name, seed),
        scenario.param_flags()
    );
    match &scenario.fixed_plan {
        Some((_, file)) => format!("{base} --plan {file}"),
        None => base,
    }
}

/// The command that shrinks one failing run.
pub fn shrink_command(design: &str, scenario: &Scenario, seed: u64) -> String {
    let base = format!(
        "locksim shrink --design {design} --scenario {} --seed {seed}{}",
        scenario.name,
        scenario.param_flags()
    );
    match &scenario.fixed_plan {
        Some((_, file)) => format!("{base} --plan {file}"),
        None => base,
    }
}

/// One cell as the main job's adaptive seeds left it: the table cell (with
/// [`CellResult::settled`]), the runs the rule read, their merged latency, and the wall
/// time its runs took (dropped runs ahead of a settling seed included).
pub struct AdaptiveCell {
    /// The table cell.
    pub cell: CellResult,
    /// The runs, in seed order.
    pub runs: Vec<RunSummary>,
    /// Their latency histograms, merged.
    pub latency: LatencySummary,
    /// Host runs its runs spent (what the adaptive budget counts).
    pub cost: u64,
    /// Wall time its runs took on their threads.
    pub wall: std::time::Duration,
}

/// Every pair of `pairs` under `rule` ([`scenarios::adaptive`]), on `threads` threads
/// across the cells; the bar counts cells. The cells do not depend on `threads`.
pub fn run_cells_adaptive(
    pairs: &[(&DesignSpec, &Scenario)],
    rule: scenarios::adaptive::Rule,
    start: u64,
    threads: usize,
    bar: &ProgressBar,
) -> Result<Vec<AdaptiveCell>, String> {
    use scenarios::adaptive::{Job, run_cells};
    let jobs: Vec<Job> = pairs
        .iter()
        .map(|(design, scenario)| Job {
            design,
            scenario,
            start,
        })
        .collect();
    let outcomes = run_cells(
        &jobs,
        rule,
        threads,
        &|history, _| history.and_then(|h| LatencySummary::from_history(h).ok()),
        &|acc: &mut LatencySummary, l| {
            if let Some(l) = l {
                acc.merge(&l);
            }
        },
        &|_, _| bar.inc(1),
    )
    .map_err(|(i, e)| format!("{} / {}: {e}", pairs[i].0.name, pairs[i].1.name))?;
    Ok(outcomes
        .into_iter()
        .zip(pairs)
        .map(|(o, (design, scenario))| {
            let (runs, latency) = (o.runs, o.acc);
            let mut cell = cell_of(design, scenario, &runs, &latency);
            cell.settled = Some(o.settled);
            cell.host_runs = Some(o.cost);
            AdaptiveCell {
                cell,
                runs,
                latency,
                cost: o.cost,
                wall: o.wall,
            }
        })
        .collect())
}

/// A bar that counts `total` cells; hidden unless `show`.
pub(crate) fn progress_cells(total: u64, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} cells {elapsed} {msg}")
            .expect("static template"),
    );
    bar
}
