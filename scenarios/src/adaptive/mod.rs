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
//! Classes other than `unsafe` never stop a cell: they are what its runs show.
//!
//! **Placed faults** ([`crate::place`]): a cell its first seed leaves open, whose
//! scenario has a timed fault and whose runs are cheap (three like its seed 0 fit in
//! half the budget), runs its bare run and its fault placed at each step the bare run
//! gives (as many as the budget buys, [`crate::place::affordable`]), the first followed
//! by seed 1, then the seeds after. A placed unsafe run settles the cell as a seed's
//! does ([`Settled::Violation`] names its placement); clean placed runs are no sample
//! of the seeds' rate, and [`Cover`] says how many ran. The budget never stops a cell
//! before its placements and [`MIN_SEEDS`] seeded runs.
//!
//! Determinism: the rule reads a cell's runs strictly in order, and the scheduler keeps
//! a run's result until every earlier run of its cell is in; nothing past a cell's
//! first seed is handed out before that seed is read (it decides whether the cell
//! places), nor past its bare run before that run is in (it gives the placements);
//! results past the run that settled a cell are dropped. Threads only change which
//! runs are computed and thrown away, never which are kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::Placement;
use crate::checkers::Safety;
use crate::stats::Rate;

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

/// Seeded runs every cell gets before its budget can stop it (besides its placements):
/// a five-master or etcd world's run costs as much as ten of a single master's, and
/// such a cell gets two runs, as many as its budget bought before placements.
pub const MIN_SEEDS: u64 = 2;

/// When a cell stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Clean runs that bound the cell (stop there).
    pub clean: u64,
    /// Unknown runs tolerated; one more stops the cell, its bound weak.
    pub unknown: u64,
    /// Host runs the cell may spend; `None` for no limit. The run that crosses it is
    /// kept, and the cell stops after it, its bound weak (unless that run settled it).
    /// It never stops a cell before its placements and [`Rule::min_seeds`] seeded runs.
    pub budget: Option<u64>,
    /// Seeded runs a cell has before its budget may stop it.
    pub min_seeds: u64,
    /// Whether the cell's fault is also placed at its protocol's steps
    /// ([`crate::place`]): after a first seed that did not settle it, the bare run,
    /// then each placement interleaved with the next seeds.
    pub placed: bool,
}

impl Rule {
    /// The main job's rule: 60 clean runs, 10 unknown, [`BUDGET_HOST_RUNS`].
    pub const DEFAULT: Rule = Rule {
        clean: CLEAN_RUNS,
        unknown: UNKNOWN_RUNS,
        budget: Some(BUDGET_HOST_RUNS),
        min_seeds: MIN_SEEDS,
        placed: true,
    };

    /// Seeds `start..start + n` searched for a first unsafe run, nothing else stopping
    /// it (the deep pass of `locksim completeness`).
    pub fn search(n: u64) -> Rule {
        Rule {
            clean: n,
            unknown: n,
            budget: None,
            min_seeds: 0,
            placed: false,
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
        /// Where the run placed the fault, for a placed run (`None`: the seed's plan).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        place: Option<Placement>,
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
        /// Its placements: how many ran clean of how many its steps gave (`None` when
        /// nothing was placed: the rule did not place, or the scenario has no timed
        /// fault).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placed: Option<Cover>,
    },
}

/// How much of a cell's placement space its placed runs covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cover {
    /// Placements run, none unsafe.
    pub tried: u64,
    /// Placements its bare run's steps gave.
    pub of: u64,
    /// The checkers some placed run found invalid (none of them unsafe: a stuck lock,
    /// an overrun, a fenced write), with how many placed runs each: what placing found
    /// short of a violation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broke: Vec<(String, u64)>,
}

impl Cover {
    /// Whether every placement was tried.
    pub fn exhaustive(&self) -> bool {
        self.tried >= self.of
    }

    /// Whether every placement was tried and every placed run was valid.
    pub fn clean(&self) -> bool {
        self.exhaustive() && self.broke.is_empty()
    }
}

impl Settled {
    /// The seed of the first violation, if an unsafe run settled the cell.
    pub fn violation(&self) -> Option<u64> {
        match self {
            Settled::Violation { seed, .. } => Some(*seed),
            Settled::Bounded { .. } => None,
        }
    }

    /// Where the violation's fault was placed, if a placed run settled the cell.
    pub fn placement(&self) -> Option<Placement> {
        match self {
            Settled::Violation { place, .. } => *place,
            Settled::Bounded { .. } => None,
        }
    }

    /// The placements a clean cell covered, if it placed any.
    pub fn cover(&self) -> Option<&Cover> {
        match self {
            Settled::Bounded { placed, .. } => placed.as_ref(),
            Settled::Violation { .. } => None,
        }
    }

    /// Whether the cell is bounded, but by fewer clean runs than the rule wanted.
    pub fn is_weak(&self) -> bool {
        matches!(self, Settled::Bounded { weak: Some(_), .. })
    }

    /// The claim in words: `unsafe at seed 3`, `unsafe at seed 0, fault placed at 412
    /// ms`, `60 clean runs: unsafe rate < 4.9% at 95%; all 14 placements clean`, `23 of
    /// 60 clean runs (budget spent): unsafe rate < 13% at 95%`.
    pub fn text(&self) -> String {
        match self {
            Settled::Violation { seed, place } => match place {
                None => format!("unsafe at seed {seed}"),
                Some(Placement::Bare) => {
                    format!("unsafe at seed {seed} without its timed faults")
                }
                Some(Placement::At(ms)) => {
                    format!("unsafe at seed {seed}, fault placed at {ms} ms")
                }
            },
            Settled::Bounded {
                clean,
                wanted,
                weak,
                placed,
                ..
            } => {
                let claim = Rate::of(0, *clean).map_or_else(|| "no bound".into(), |r| r.claim());
                let seeded = match weak {
                    None => format!("{clean} clean runs: unsafe {claim}"),
                    Some(w) => format!(
                        "{clean} of {wanted} clean runs ({}): unsafe {claim}",
                        w.text()
                    ),
                };
                let Some(c) = placed else {
                    return seeded;
                };
                let ran = if c.exhaustive() {
                    format!("all {} placements", c.of)
                } else {
                    format!("{} of {} placements", c.tried, c.of)
                };
                if c.broke.is_empty() {
                    return format!("{seeded}; {ran} clean");
                }
                let broke: Vec<String> =
                    c.broke.iter().map(|(k, n)| format!("{k} in {n}")).collect();
                format!("{seeded}; {ran} not unsafe, invalid: {}", broke.join(", "))
            }
        }
    }
}

/// Reads one cell's runs in order and says when the rule stops it: its seeded runs
/// ([`Tracker::push`]), its bare run and its placed runs ([`Tracker::push_placed`]).
#[derive(Debug, Clone)]
pub struct Tracker {
    rule: Rule,
    /// Seeded runs read.
    runs: u64,
    clean: u64,
    unknown: u64,
    cost: u64,
    /// Placements the cell runs, once its bare run told (0: nothing to place).
    placements: Option<u64>,
    /// Placements its steps gave (more than it runs when they were spread).
    offered: u64,
    /// Placed runs read (the bare run not counted).
    placed: u64,
    /// The checkers placed runs found invalid, with how many runs each.
    broke: BTreeMap<String, u64>,
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
            placements: (!rule.placed).then_some(0),
            offered: 0,
            placed: 0,
            broke: BTreeMap::new(),
            settled: None,
        }
    }

    /// How many placements the cell runs (known from its bare run; 0 when nothing is
    /// placed) of how many its steps gave (`of`: more when spread, see
    /// [`crate::place::affordable`]).
    pub fn set_placements(&mut self, n: u64, of: u64) {
        self.placements = Some(n);
        self.offered = of.max(n);
    }

    /// The next seeded run in order: its seed, class and cost in host runs. Returns how
    /// the cell stopped if this run stopped it. A run after that is a caller's bug.
    ///
    /// # Panics
    /// If the cell has already stopped.
    pub fn push(&mut self, seed: u64, class: Safety, cost: u64) -> Option<&Settled> {
        assert!(self.settled.is_none(), "a run after the cell stopped");
        self.runs += 1;
        match class {
            Safety::Unknown => self.unknown += 1,
            Safety::Unsafe => {}
            _ => self.clean += 1,
        }
        self.read(seed, None, class, cost)
    }

    /// A placed run about to be read found these checkers invalid (see [`Cover::broke`]).
    pub fn placed_invalid<'a>(&mut self, checkers: impl IntoIterator<Item = &'a str>) {
        for c in checkers {
            *self.broke.entry(c.to_string()).or_insert(0) += 1;
        }
    }

    /// The next placed run in order (`Placement::Bare` for the bare run, which is read
    /// before the placements and is not one of them).
    ///
    /// # Panics
    /// If the cell has already stopped.
    pub fn push_placed(
        &mut self,
        seed: u64,
        place: Placement,
        class: Safety,
        cost: u64,
    ) -> Option<&Settled> {
        assert!(self.settled.is_none(), "a run after the cell stopped");
        if matches!(place, Placement::At(_)) {
            self.placed += 1;
        }
        if class == Safety::Unknown {
            self.unknown += 1;
        }
        self.read(seed, Some(place), class, cost)
    }

    fn read(
        &mut self,
        seed: u64,
        place: Option<Placement>,
        class: Safety,
        cost: u64,
    ) -> Option<&Settled> {
        self.cost = self.cost.saturating_add(cost);
        if class == Safety::Unsafe {
            self.settled = Some(Settled::Violation { seed, place });
            return self.settled.as_ref();
        }
        let placed_all = self.placements.is_some_and(|p| self.placed >= p);
        let weak = if self.clean >= self.rule.clean && placed_all {
            None
        } else if self.unknown > self.rule.unknown {
            Some(Weak::Unknown)
        } else if placed_all
            && self.runs >= self.rule.min_seeds
            && self.rule.budget.is_some_and(|b| self.cost >= b)
        {
            Some(Weak::Budget)
        } else {
            return None;
        };
        self.settled = Some(Settled::Bounded {
            clean: self.clean,
            wanted: self.rule.clean,
            upper: Rate::of(0, self.clean).map(|r| r.high),
            weak,
            placed: self.placements.filter(|p| *p > 0).map(|_| Cover {
                tried: self.placed,
                of: self.offered,
                broke: self.broke.iter().map(|(k, n)| (k.clone(), *n)).collect(),
            }),
        });
        self.settled.as_ref()
    }

    /// How the cell stopped, once it has.
    pub fn settled(&self) -> Option<&Settled> {
        self.settled.as_ref()
    }

    /// Seeded runs read so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }
}

mod run;

pub use run::{Job, Outcome, run_cells};
