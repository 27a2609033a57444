//! Running a design under a scenario over many seeds, on every core, and judging each
//! run as it finishes.
//!
//! Runs are independent, so a sweep hands seeds to worker threads and collects one
//! small [`RunSummary`] per seed; a history is dropped as soon as it is judged unless
//! the caller asks to keep it, which keeps a 1,000-seed sweep's memory flat. Results
//! come back sorted by seed, whatever order the threads finished in.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sim::history::{History, OpF, Phase};
use sim::world::{DEFAULT_WALL_BUDGET, DesignFactory, RunConfig, RunError, run_bounded};

use crate::catalog::Scenario;
use crate::checkers::{Verdict, check_all};

/// A design as a sweep runs it: its name and how to build it.
#[derive(Clone)]
pub struct DesignSpec {
    /// The name shown in reports.
    pub name: String,
    /// Builds it.
    pub factory: DesignFactory,
    /// Independent masters it locks on (1 unless it is a Redlock): decides the world
    /// it runs in (see [`Scenario::workload_for`]).
    pub masters: usize,
    /// The system it locks on: with `masters`, decides the world it runs in.
    pub backend: lock_impl::Backend,
}

impl DesignSpec {
    /// A built-in design by name, or an error listing the allowed names.
    pub fn builtin(name: &str) -> Result<Self, String> {
        lock_impl::design(name)
            .map(Self::from_info)
            .map_err(|e| e.to_string())
    }

    /// A built-in design from its record: the name, builder, masters and system all
    /// come from the one [`lock_impl::DesignInfo`].
    pub fn from_info(info: &'static lock_impl::DesignInfo) -> Self {
        Self {
            name: info.name.to_string(),
            factory: Arc::new(move |deps| (info.build)(deps)),
            masters: info.masters,
            backend: info.backend,
        }
    }
}

fn yes() -> bool {
    true
}

/// What one seed's run came to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// The seed.
    pub seed: u64,
    /// Each checker's verdict, in the checkers' fixed order.
    pub verdicts: Vec<(String, Verdict)>,
    /// The scenario's fault probe: a description of the fault as it happened, or
    /// `None` if the fault the scenario is about never happened in this run.
    pub fault_seen: Option<String>,
    /// Acquisitions that completed ok.
    pub acquisitions: u64,
    /// Operations completed (any outcome).
    pub ops: u64,
    /// The history's digest.
    pub digest: u64,
    /// Whether the storage refused anyone (what a `fenced` class needs).
    #[serde(default)]
    pub storage_refused: bool,
    /// Whether a stale holder's write was accepted after a newer holder's grant
    /// ([`crate::checkers::stale_write_accepted`]): what tells `unsafe` from
    /// `overlap`. Summaries written before it existed read as yes (as they were
    /// classed then).
    #[serde(default = "yes")]
    pub stale_write: bool,
    /// Whether its first safety violation began before the scenario's first fault
    /// ([`crate::checkers::broke_before_fault`]): the world broke the design, not the
    /// fault.
    #[serde(default)]
    pub before_fault: bool,
    /// Where its scenario's fault was placed, for a placed run
    /// ([`crate::catalog::Placement`]); `None` for a seed's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::catalog::Placement>,
    /// The history, when the sweep was asked to keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

impl RunSummary {
    /// True if any checker said Invalid.
    pub fn is_invalid(&self) -> bool {
        self.verdicts.iter().any(|(_, v)| v.is_invalid())
    }

    /// The run's safety class.
    pub fn safety(&self) -> crate::checkers::Safety {
        crate::checkers::safety(&self.verdicts, self.facts())
    }

    /// What the storage saw, as [`crate::checkers::safety`] needs it.
    pub fn facts(&self) -> crate::checkers::StorageFacts {
        crate::checkers::StorageFacts {
            refused: self.storage_refused,
            stale_write: self.stale_write,
        }
    }

    /// The verdict of checker `name`.
    pub fn verdict(&self, name: &str) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// The run configuration for one seed.
pub fn config(design: &DesignSpec, scenario: &Scenario, seed: u64) -> RunConfig {
    RunConfig {
        seed,
        design: design.name.clone(),
        factory: design.factory.clone(),
        scenario: scenario.name.to_string(),
        workload: scenario.workload_for(design.backend, design.masters),
        client_clocks: Vec::new(),
        server_clock: Default::default(),
        plan: scenario.plan(seed),
        stepping: Default::default(),
    }
}

/// Runs and judges one seed.
pub fn run_seed(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
    keep_history: bool,
) -> Result<RunSummary, RunError> {
    run_seed_within(design, scenario, seed, keep_history, DEFAULT_WALL_BUDGET)
}

/// [`run_seed`] with a wall-clock budget: a run that does not finish in time, or whose
/// simulation fails, is judged Unknown by every checker, with the reason; only a bad
/// configuration is an error.
pub fn run_seed_within(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
    keep_history: bool,
    wall_budget: std::time::Duration,
) -> Result<RunSummary, RunError> {
    match run_bounded(&config(design, scenario, seed), wall_budget) {
        Ok(history) => {
            let mut summary = summarize(scenario, &history);
            summary.history = keep_history.then_some(history);
            Ok(summary)
        }
        Err(e @ RunError::Config(_)) => Err(e),
        Err(e) => Ok(unfinished(seed, &e)),
    }
}

/// The summary of a run that never finished: nothing to judge, so every checker says
/// Unknown (never Valid), with the reason.
pub fn unfinished(seed: u64, why: &RunError) -> RunSummary {
    RunSummary {
        seed,
        verdicts: crate::checkers::names()
            .into_iter()
            .map(|n| {
                (
                    n.to_string(),
                    Verdict::Unknown {
                        reason: format!("the run did not finish: {why}"),
                    },
                )
            })
            .collect(),
        fault_seen: None,
        acquisitions: 0,
        ops: 0,
        digest: 0,
        storage_refused: false,
        stale_write: false,
        before_fault: false,
        placement: None,
        history: None,
    }
}

/// Judges a finished history (the summary does not keep it; callers that want it set
/// `history`).
pub fn summarize(scenario: &Scenario, history: &History) -> RunSummary {
    let verdicts: Vec<(String, Verdict)> = check_all(history)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    let before_fault = crate::checkers::broke_before_fault(history, &verdicts);
    let fault_seen = scenario.probe(history);
    let completions = history.ops().filter(|(_, op)| op.phase != Phase::Invoke);
    let (mut ops, mut acquisitions) = (0, 0);
    for (_, op) in completions {
        ops += 1;
        if op.f == OpF::Acquire && op.phase == Phase::Ok {
            acquisitions += 1;
        }
    }
    RunSummary {
        seed: history.seed,
        verdicts,
        fault_seen,
        acquisitions,
        ops,
        digest: history.digest(),
        storage_refused: crate::checkers::storage_refused(history),
        stale_write: crate::checkers::stale_write_accepted(history),
        before_fault,
        placement: scenario.placement,
        history: None,
    }
}

/// Runs `seeds` on `threads` worker threads (at least one) and returns one summary per
/// seed, sorted by seed. `on_done` sees each run's history and summary before the
/// history is dropped (for progress bars and latency histograms).
pub fn sweep(
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    threads: usize,
    keep_history: bool,
    on_done: &(dyn Fn(&History, &RunSummary) + Sync),
) -> Result<Vec<RunSummary>, RunError> {
    sweep_cells(
        &[(design, scenario)],
        seeds,
        threads,
        keep_history,
        &|_, history, summary| on_done(history, summary),
    )
    .map(|mut cells| cells.pop().unwrap_or_default())
    .map_err(|(_, e)| e)
}

/// [`sweep`] over many cells at once: every seed of `seeds` in every cell of `cells`,
/// handed to `threads` workers in order (the first cell's seeds, then the next
/// cell's), so that a cell with fewer seeds left than threads leaves no core idle: the
/// next cell's seeds start beside its last ones. One list of summaries per cell, in
/// the cells' order, each sorted by seed: what [`sweep`] returns for that cell alone,
/// whatever `threads`. `on_done` sees the cell's index with each run. A bad
/// configuration stops every worker and names its cell's index.
pub fn sweep_cells(
    cells: &[(&DesignSpec, &Scenario)],
    seeds: Range<u64>,
    threads: usize,
    keep_history: bool,
    on_done: &(dyn Fn(usize, &History, &RunSummary) + Sync),
) -> Result<Vec<Vec<RunSummary>>, (usize, RunError)> {
    sweep_cells_into(cells, seeds, threads, keep_history, on_done, &|_, runs| {
        runs
    })
}

/// [`sweep_cells`], each cell's summaries (sorted by seed) handed to `finish` with the
/// cell's index as soon as its last run ends, and what `finish` makes of them kept
/// instead: a caller that needs only each cell's totals does not hold every run's
/// summary of every cell at once.
pub fn sweep_cells_into<R: Send>(
    cells: &[(&DesignSpec, &Scenario)],
    seeds: Range<u64>,
    threads: usize,
    keep_history: bool,
    on_done: &(dyn Fn(usize, &History, &RunSummary) + Sync),
    finish: &(dyn Fn(usize, Vec<RunSummary>) -> R + Sync),
) -> Result<Vec<R>, (usize, RunError)> {
    let per_cell = seeds.end.saturating_sub(seeds.start);
    let total = per_cell.saturating_mul(cells.len() as u64);
    let next = AtomicU64::new(0);
    let pending: Mutex<Vec<Vec<RunSummary>>> = Mutex::new(vec![Vec::new(); cells.len()]);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..cells.len()).map(|_| None).collect());
    let failure: Mutex<Option<(usize, RunError)>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    if job >= total || failure.lock().expect("poisoned").is_some() {
                        break;
                    }
                    let cell = (job / per_cell) as usize;
                    let seed = seeds.start + job % per_cell;
                    let (design, scenario) = cells[cell];
                    let summary =
                        match run_bounded(&config(design, scenario, seed), DEFAULT_WALL_BUDGET) {
                            Ok(history) => {
                                let mut summary = summarize(scenario, &history);
                                on_done(cell, &history, &summary);
                                if keep_history {
                                    summary.history = Some(history);
                                }
                                summary
                            }
                            Err(e @ RunError::Config(_)) => {
                                failure.lock().expect("poisoned").get_or_insert((cell, e));
                                continue;
                            }
                            Err(e) => unfinished(seed, &e),
                        };
                    let done = {
                        let mut pending = pending.lock().expect("poisoned");
                        pending[cell].push(summary);
                        (pending[cell].len() as u64 == per_cell)
                            .then(|| std::mem::take(&mut pending[cell]))
                    };
                    if let Some(mut runs) = done {
                        runs.sort_by_key(|r| r.seed);
                        let made = finish(cell, runs);
                        results.lock().expect("poisoned")[cell] = Some(made);
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().expect("poisoned") {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .expect("poisoned")
        .into_iter()
        .enumerate()
        .map(|(cell, made)| made.unwrap_or_else(|| finish(cell, Vec::new())))
        .collect())
}

/// The first seed in `seeds` (in seed order) whose run `checker` calls Invalid,
/// searching sequentially: what a test uses to show a predicted violation is found.
pub fn first_invalid(
    design: &DesignSpec,
    scenario: &Scenario,
    checker: &str,
    seeds: Range<u64>,
) -> Result<Option<RunSummary>, RunError> {
    for seed in seeds {
        let summary = run_seed(design, scenario, seed, false)?;
        if summary.verdict(checker).is_some_and(Verdict::is_invalid) {
            return Ok(Some(summary));
        }
    }
    Ok(None)
}

/// The command that replays one run.
pub fn replay_command(design: &str, scenario: &str, seed: u64) -> String {
    format!("locksim replay --design {design} --scenario {scenario} --seed {seed}")
}
