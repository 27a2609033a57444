//! Seeds spent where the verdict is open: the main job's default stopping rule, and a
//! scheduler that runs many cells under it on a few threads, deterministically.
//!
//! A counterexample is a proof after one run; a "safe" is a statistical claim whose
//! strength is the number of clean runs behind it. So each cell runs seeds `0, 1, 2, …`
//! in order and stops at the first of:
//! - an **unsafe** run ([`Safety::Unsafe`]): the cell is settled, by that seed;
//! - [`Rule::clean`] **clean** runs (60 by default): runs of any class but `unsafe` and
//!   `unknown` (`safe`, `fenced`, `overlap`, `promise`; a safe run whose fault never
//!   happened counts too, as it does in the unsafe rate's denominator). Zero unsafe in
//!   60 clean runs bounds the unsafe rate below `1 − 0.05^(1/60)` = 4.87 % at 95 %
//!   (the exact Clopper–Pearson bound of [`crate::stats`]);
//! - more than [`Rule::unknown`] **unknown** runs (a safety checker could not judge, or
//!   the run did not finish): such a run is no evidence either way, and a cell made of
//!   them would otherwise spend seeds for nothing. The cell is bounded by the clean runs
//!   it has, and the bound is marked weak;
//! - its **budget** ([`Rule::budget`]): the host runs (`RunStats::host_runs`, the unit a
//!   run's cost is made of, counted by the simulator and the same on every machine and
//!   thread count) its runs have spent. A cell that hits it is bounded by the clean runs
//!   it has, marked weak. The budget is what keeps the main job's time bounded when a
//!   few worlds cost a hundred times the others.
//!
//! Classes other than `unsafe` (`fenced`, `overlap`, `promise`, a liveness checker's
//! failure) never stop a cell: they are what the cell's 60 runs show, with their counts,
//! and the unsafe rate's bound still needs the runs.
//!
//! Determinism: the rule reads runs strictly in seed order, and the scheduler keeps a
//! run's result until every lower seed of its cell is in; results past the seed that
//! settled a cell are dropped. Threads only change which runs are computed and thrown
//! away, never which are kept: the same rule gives the same cells on 1 thread or 16.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sim::history::History;
use sim::world::{DEFAULT_WALL_BUDGET, RunError, run_bounded};

use crate::catalog::Scenario;
use crate::checkers::Safety;
use crate::stats::Rate;
use crate::sweep::{DesignSpec, RunSummary, config, summarize, unfinished};

/// Clean runs that bound a cell's unsafe rate: 60, the fewest with a 95 % bound under
/// 5 % (`1 − 0.05^(1/60)` = 4.87 %).
pub const CLEAN_RUNS: u64 = 60;

/// Unknown runs a cell may have before it stops with what it has.
pub const UNKNOWN_RUNS: u64 = 10;

/// The main job's budget per cell, in host runs: see [`Rule::budget`]. `--budget N`
/// (or `none`) on `locksim` and `locksim run` asks for more.
///
/// The main job must finish in under two minutes on two cores, and 60 clean runs
/// behind every cell do not fit: without a budget (`locksim --budget none`) the job is
/// 32,194 runs, 510.8 million host runs, 23 min 40 s on two cores (921 cells), and the
/// etcd and five-master Redlock cells are 60 % of it. At 300,000 host runs a cell the
/// job takes 285 s on two cores (161 million host runs, 546 s of CPU): 388 cells
/// settled by an unsafe run, 120 bounded by 60 clean runs, 413 weak. From that run's
/// cells (each one's host runs per run; a cell stops after the run that crosses its
/// budget), 80,000 keeps 378 of the 388 unsafe cells settled (the other ten need more
/// seeds than it buys: each is a miss of `locksim completeness`) for about a third of
/// the host runs, 54 million, and 95 s; the cells without an unsafe run are then all
/// weak but seven. A single-master world's run is 3,000 to 12,000 host runs, so such a
/// cell gets 7 to 25 runs; a five-master or etcd world's, 40,000 to 75,000: two runs.
/// Measured in docs/performance.md ("The main job", its budget table, and "The depth
/// run").
pub const BUDGET_HOST_RUNS: u64 = 80_000;

/// When a cell stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Clean runs that bound the cell (stop there).
    pub clean: u64,
    /// Unknown runs tolerated; one more stops the cell, its bound weak.
    pub unknown: u64,
    /// Host runs the cell may spend; `None` for no limit. The run that crosses it is
    /// kept, and the cell stops after it, its bound weak (unless that run settled it).
    pub budget: Option<u64>,
}

impl Rule {
    /// The main job's rule: 60 clean runs, 10 unknown, [`BUDGET_HOST_RUNS`].
    pub const DEFAULT: Rule = Rule {
        clean: CLEAN_RUNS,
        unknown: UNKNOWN_RUNS,
        budget: Some(BUDGET_HOST_RUNS),
    };

    /// Seeds `start..start + n` searched for a first unsafe run, nothing else stopping
    /// it (the deep pass of `locksim completeness`).
    pub fn search(n: u64) -> Rule {
        Rule {
            clean: n,
            unknown: n,
            budget: None,
        }
    }

    /// The most seeds a cell can run under the rule: every run is clean or unknown
    /// until one is unsafe, so one of the two limits is met by then.
    pub fn max_seeds(&self) -> u64 {
        self.clean.saturating_add(self.unknown).saturating_add(1)
    }
}

impl Default for Rule {
    fn default() -> Self {
        Rule::DEFAULT
    }
}

/// Why a bounded cell's bound is weaker than the rule asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Weak {
    /// The cell spent its budget of host runs first.
    Budget,
    /// More runs than the rule tolerates were unknown.
    Unknown,
}

impl Weak {
    /// A few words for tables.
    pub fn text(self) -> &'static str {
        match self {
            Weak::Budget => "budget spent",
            Weak::Unknown => "too many unknown runs",
        }
    }
}

/// How a cell stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum Settled {
    /// An unsafe run settled it: the seed of its first violation.
    Violation {
        /// The seed.
        seed: u64,
    },
    /// It stopped without an unsafe run: `clean` clean runs bound its unsafe rate
    /// below `upper` at 95 % (`None` with no clean run: no bound at all).
    Bounded {
        /// Clean runs (not unsafe, not unknown).
        clean: u64,
        /// The rule's clean runs: the bound is weak if `clean` is fewer.
        wanted: u64,
        /// The 95 % upper bound of the unsafe rate (Clopper–Pearson at 0 of `clean`).
        upper: Option<f64>,
        /// Why the cell stopped short of `wanted`, if it did.
        weak: Option<Weak>,
    },
}

impl Settled {
    /// The seed of the first violation, if an unsafe run settled the cell.
    pub fn violation(&self) -> Option<u64> {
        match self {
            Settled::Violation { seed } => Some(*seed),
            Settled::Bounded { .. } => None,
        }
    }

    /// Whether the cell is bounded, but by fewer clean runs than the rule wanted.
    pub fn is_weak(&self) -> bool {
        matches!(self, Settled::Bounded { weak: Some(_), .. })
    }

    /// The claim in words: `unsafe at seed 3`, `60 clean runs: unsafe rate < 4.9% at
    /// 95%`, `23 of 60 clean runs (budget spent): unsafe rate < 13% at 95%`.
    pub fn text(&self) -> String {
        match self {
            Settled::Violation { seed } => format!("unsafe at seed {seed}"),
            Settled::Bounded {
                clean,
                wanted,
                weak,
                ..
            } => {
                let claim = Rate::of(0, *clean).map_or_else(|| "no bound".into(), |r| r.claim());
                match weak {
                    None => format!("{clean} clean runs: unsafe {claim}"),
                    Some(w) => format!(
                        "{clean} of {wanted} clean runs ({}): unsafe {claim}",
                        w.text()
                    ),
                }
            }
        }
    }
}

/// Reads one cell's runs in seed order and says when the rule stops it.
#[derive(Debug, Clone)]
pub struct Tracker {
    rule: Rule,
    /// Runs read.
    runs: u64,
    clean: u64,
    unknown: u64,
    cost: u64,
    settled: Option<Settled>,
}

impl Tracker {
    /// A cell with no runs yet.
    pub fn new(rule: Rule) -> Self {
        Tracker {
            rule,
            runs: 0,
            clean: 0,
            unknown: 0,
            cost: 0,
            settled: None,
        }
    }

    /// The next run in seed order: its seed, class and cost in host runs. Returns how
    /// the cell stopped if this run stopped it. A run after that is a caller's bug.
    ///
    /// # Panics
    /// If the cell has already stopped.
    pub fn push(&mut self, seed: u64, class: Safety, cost: u64) -> Option<&Settled> {
        assert!(self.settled.is_none(), "a run after the cell stopped");
        self.runs += 1;
        self.cost = self.cost.saturating_add(cost);
        match class {
            Safety::Unsafe => {
                self.settled = Some(Settled::Violation { seed });
                return self.settled.as_ref();
            }
            Safety::Unknown => self.unknown += 1,
            _ => self.clean += 1,
        }
        let weak = if self.clean >= self.rule.clean {
            None
        } else if self.unknown > self.rule.unknown {
            Some(Weak::Unknown)
        } else if self.rule.budget.is_some_and(|b| self.cost >= b) {
            Some(Weak::Budget)
        } else {
            return None;
        };
        self.settled = Some(Settled::Bounded {
            clean: self.clean,
            wanted: self.rule.clean,
            upper: Rate::of(0, self.clean).map(|r| r.high),
            weak,
        });
        self.settled.as_ref()
    }

    /// How the cell stopped, once it has.
    pub fn settled(&self) -> Option<&Settled> {
        self.settled.as_ref()
    }

    /// Runs read so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }
}

/// One cell to run: a design, a scenario, and the first seed.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The design.
    pub design: &'a DesignSpec,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The first seed (0 for the main job).
    pub start: u64,
}

/// What a cell came to under the rule.
#[derive(Debug)]
pub struct Outcome<A> {
    /// The runs the rule read, in seed order.
    pub runs: Vec<RunSummary>,
    /// The caller's extracts of those runs, folded in seed order.
    pub acc: A,
    /// How it stopped.
    pub settled: Settled,
    /// Host runs its kept runs spent (what the budget counts).
    pub cost: u64,
    /// Wall time its runs took on their threads, the dropped ones included (what the
    /// cell cost; varies from machine to machine, unlike everything else here).
    pub wall: Duration,
}

struct CellState<T, A> {
    next: u64,
    in_flight: usize,
    pending: BTreeMap<u64, (RunSummary, T, u64)>,
    kept: Vec<RunSummary>,
    acc: A,
    tracker: Tracker,
    wall: Duration,
    started: bool,
}

impl<T, A> CellState<T, A> {
    fn open(&self, rule: &Rule, start: u64) -> bool {
        self.tracker.settled().is_none() && self.next < start.saturating_add(rule.max_seeds())
    }
}

struct Sched<T, A> {
    cells: Vec<CellState<T, A>>,
    unstarted: usize,
    failure: Option<(usize, RunError)>,
}

/// Runs every job under `rule` on `threads` threads (at least one) and returns each
/// cell's [`Outcome`], in the jobs' order. A thread keeps to one cell while it is open,
/// takes the next unstarted cell when its own stops, and when none is left joins the
/// open cell with the fewest runs in flight (running its next seed ahead; a result past
/// the settling seed is dropped). `extract` sees each run's history (`None` for a run
/// that did not finish), to keep what the caller needs of it, such as latency, and
/// `fold` adds each kept run's extract to its cell's accumulator, in seed order (so a
/// cell holds one accumulator, not an extract per run); `on_cell` is told when a cell stops (for a
/// progress bar). A bad configuration stops everything and is returned with its job's
/// index.
pub fn run_cells<T: Send, A: Default + Send>(
    jobs: &[Job<'_>],
    rule: Rule,
    threads: usize,
    extract: &(dyn Fn(Option<&History>, &RunSummary) -> T + Sync),
    fold: &(dyn Fn(&mut A, T) + Sync),
    on_cell: &(dyn Fn(usize, &Settled) + Sync),
) -> Result<Vec<Outcome<A>>, (usize, RunError)> {
    let sched = Mutex::new(Sched {
        cells: jobs
            .iter()
            .map(|j| CellState {
                next: j.start,
                in_flight: 0,
                pending: BTreeMap::new(),
                kept: Vec::new(),
                acc: A::default(),
                tracker: Tracker::new(rule),
                wall: Duration::ZERO,
                started: false,
            })
            .collect(),
        unstarted: 0,
        failure: None,
    });
    let pick = |s: &mut Sched<T, A>, mine: Option<usize>| -> Option<(usize, u64)> {
        if s.failure.is_some() {
            return None;
        }
        let open = |s: &Sched<T, A>, i: usize| s.cells[i].open(&rule, jobs[i].start);
        let chosen = match mine {
            Some(i) if open(s, i) => Some(i),
            _ => {
                while s.unstarted < jobs.len() && s.cells[s.unstarted].started {
                    s.unstarted += 1;
                }
                if s.unstarted < jobs.len() {
                    Some(s.unstarted)
                } else {
                    (0..jobs.len())
                        .filter(|i| open(s, *i))
                        .min_by_key(|i| (s.cells[*i].in_flight, *i))
                }
            }
        }?;
        let c = &mut s.cells[chosen];
        c.started = true;
        c.in_flight += 1;
        let seed = c.next;
        c.next += 1;
        Some((chosen, seed))
    };
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut mine = None;
                loop {
                    let Some((i, seed)) = pick(&mut sched.lock().expect("poisoned"), mine) else {
                        break;
                    };
                    mine = Some(i);
                    let job = jobs[i];
                    let began = Instant::now();
                    let result = run_one(job, seed, extract);
                    let took = began.elapsed();
                    let mut s = sched.lock().expect("poisoned");
                    let c = &mut s.cells[i];
                    c.in_flight -= 1;
                    c.wall += took;
                    match result {
                        Err(e) => {
                            s.failure.get_or_insert((i, e));
                        }
                        Ok(run) => {
                            if c.tracker.settled().is_some() {
                                // Run ahead of a seed that settled the cell: dropped.
                                continue;
                            }
                            c.pending.insert(seed, run);
                            // Read every run that is next in seed order.
                            while c.tracker.settled().is_none() {
                                let next = jobs[i].start + c.tracker.runs();
                                let Some((summary, extra, cost)) = c.pending.remove(&next) else {
                                    break;
                                };
                                c.tracker.push(next, summary.safety(), cost);
                                fold(&mut c.acc, extra);
                                c.kept.push(summary);
                            }
                            if let Some(settled) = c.tracker.settled() {
                                c.pending.clear();
                                on_cell(i, settled);
                            }
                        }
                    }
                }
            });
        }
    });
    let s = sched.into_inner().expect("poisoned");
    if let Some(failure) = s.failure {
        return Err(failure);
    }
    Ok(s.cells
        .into_iter()
        .map(|c| Outcome {
            settled: c
                .tracker
                .settled()
                .cloned()
                .expect("a cell is never left open: its seeds run until the rule stops it"),
            runs: c.kept,
            acc: c.acc,
            cost: c.tracker.cost,
            wall: c.wall,
        })
        .collect())
}

/// Runs and judges one seed of `job`: its summary, the caller's extract and its cost
/// in host runs (0 for a run that did not finish: it is unknown, and the unknown
/// limit bounds those). Only a bad configuration is an error.
fn run_one<T>(
    job: Job<'_>,
    seed: u64,
    extract: &(dyn Fn(Option<&History>, &RunSummary) -> T + Sync),
) -> Result<(RunSummary, T, u64), RunError> {
    match run_bounded(&config(job.design, job.scenario, seed), DEFAULT_WALL_BUDGET) {
        Ok(history) => {
            let summary = summarize(job.scenario, &history);
            let extra = extract(Some(&history), &summary);
            Ok((summary, extra, history.stats.host_runs))
        }
        Err(e @ RunError::Config(_)) => Err(e),
        Err(e) => {
            let summary = unfinished(seed, &e);
            let extra = extract(None, &summary);
            Ok((summary, extra, 0))
        }
    }
}
