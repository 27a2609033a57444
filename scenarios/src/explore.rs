//! Systematic fault placement in the small (`locksim explore`): random seeds find the
//! wide windows; this finds the narrow ones (a crash between `SETNX` and `PEXPIRE`, a
//! lease running out between `GET` and `DEL`) at seed 0, every time.
//!
//! 1. Run the scenario's workload once without faults, tracing every client command
//!    the servers run ([`sim::world::Workload::trace_commands`]).
//! 2. Take one client's first few acquisitions as steps: its operations (acquire,
//!    read, write, release: invoked and completed) and each command of its that a
//!    server ran, in true time.
//! 3. For every step, place each fault kind just before the step (at the step's
//!    millisecond, before that tick runs: a message already on the wire still
//!    arrives) and just after it (one millisecond later),
//!    with each duration of a small set; run each placement once, from the same seed.
//!    Everything before the fault is the fault-free run, so a placement lands exactly
//!    where the trace says.
//! 4. Judge every run with every checker; a placement *breaks* a checker that the
//!    fault-free run did not already fail.
//!
//! Steps in the same millisecond share their placements: a row is a placement time,
//! named by the steps on either side of it. The result depends only on the inputs (not
//! on the thread count).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, OpF, Phase, ServerEvent};

use crate::catalog::Scenario;
use crate::sweep::{DesignSpec, run_seed};

/// A fault kind explore places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sort {
    /// The client stops (a GC pause) for the duration.
    Pause,
    /// The client crashes and restarts after the duration.
    Crash,
    /// Messages to and from the client take the duration longer, for as long.
    Delay,
    /// The server holding the lock crashes (no persistence) and restarts after the
    /// duration.
    ServerCrash,
}

/// Every sort, in grid order.
pub const SORTS: [Sort; 4] = [Sort::Pause, Sort::Crash, Sort::Delay, Sort::ServerCrash];

impl Sort {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Sort::Pause => "pause",
            Sort::Crash => "crash",
            Sort::Delay => "delay",
            Sort::ServerCrash => "server-crash",
        }
    }

    /// Parses `pause,crash,…`; the error names the flag and the allowed values.
    pub fn parse_list(text: &str) -> Result<Vec<Sort>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let s = SORTS.into_iter().find(|s| s.name() == part).ok_or_else(|| {
                format!(
                    "invalid --faults '{text}': unknown fault '{part}'; allowed: {} (comma separated)",
                    SORTS.map(Sort::name).join(", ")
                )
            })?;
            if !out.contains(&s) {
                out.push(s);
            }
        }
        if out.is_empty() {
            return Err(format!(
                "invalid --faults '{text}': name at least one of {}",
                SORTS.map(Sort::name).join(", ")
            ));
        }
        out.sort();
        Ok(out)
    }

    fn fault(self, client: &str, at_ms: u64, duration_ms: u64) -> Fault {
        let host = Target::Host(client.to_string());
        let kind = match self {
            Sort::Pause => FaultKind::Pause {
                target: host,
                duration_ms,
            },
            Sort::Crash => FaultKind::Crash {
                target: host,
                restart_after_ms: Some(duration_ms),
            },
            Sort::Delay => FaultKind::Delay {
                target: host,
                latency_ms: duration_ms,
                duration_ms,
            },
            Sort::ServerCrash => FaultKind::Crash {
                target: Target::LockServer,
                restart_after_ms: Some(duration_ms),
            },
        };
        Fault { at_ms, kind }
    }
}

/// One protocol step of the explored client, as the wire and the history saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// True time, µs.
    pub at_us: u64,
    /// What happened: `acquire invoke`, `redis: SETNX lock:stock`, `release ok`…
    pub label: String,
}

/// One fault at one place, and what it broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The fault kind.
    pub sort: Sort,
    /// Its duration, ms.
    pub duration_ms: u64,
    /// When it starts, ms.
    pub at_ms: u64,
    /// The checkers it broke (invalid here, valid without the fault), in checker order.
    pub broken: Vec<String>,
    /// Whether some checker could not judge the run.
    pub unknown: bool,
}

/// A row of the grid: one placement time, between two steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// The fault's start, ms: before that millisecond's tick runs.
    pub at_ms: u64,
    /// The last step before it (index into [`Exploration::steps`]), if any.
    pub after: Option<usize>,
    /// The first step at or after it, if any.
    pub before: Option<usize>,
    /// One outcome per column.
    pub outcomes: Vec<Outcome>,
}

/// What explore found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exploration {
    /// The design.
    pub design: String,
    /// The scenario whose workload ran.
    pub scenario: String,
    /// The seed of every run.
    pub seed: u64,
    /// The explored client.
    pub client: String,
    /// The lease, ms (durations are multiples of it).
    pub lease_ms: u64,
    /// Checkers the fault-free run already failed (never counted as broken).
    pub baseline_invalid: Vec<String>,
    /// The explored client's steps.
    pub steps: Vec<Step>,
    /// Columns: fault kind and duration.
    pub columns: Vec<(Sort, u64)>,
    /// Rows: every placement time (each step's millisecond and the next), ascending.
    pub rows: Vec<Row>,
    /// Runs made (one per row and column).
    pub runs: usize,
}

/// What to explore.
#[derive(Debug, Clone)]
pub struct Params {
    /// The fault kinds.
    pub sorts: Vec<Sort>,
    /// The explored client's acquisitions to cover.
    pub acquisitions: usize,
    /// Durations, as fractions of the lease (½, 1, 2, 4 by default).
    pub lease_multiples: Vec<f64>,
    /// The client whose steps are explored.
    pub client: String,
    /// The seed.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sorts: SORTS.to_vec(),
            acquisitions: 2,
            lease_multiples: vec![0.5, 1.0, 2.0, 4.0],
            client: "client-1".into(),
            seed: 0,
            threads: 1,
        }
    }
}

/// The scenario with `plan` in place of the seed's (named for replay commands).
pub fn with_plan(scenario: &Scenario, plan: FaultPlan, label: &str) -> Scenario {
    let mut s = scenario.clone();
    s.fixed_plan = Some((plan, label.to_string()));
    s
}

/// The explored client's steps in the fault-free run: from its first acquire to the
/// completion of the release that follows its `acquisitions`-th acquisition.
pub fn steps(h: &sim::history::History, client: &str, acquisitions: usize) -> Vec<Step> {
    let mut out = Vec::new();
    let mut started = false;
    let mut acquired = 0usize;
    for e in &h.events {
        match &e.kind {
            EventKind::Op(op) if e.host == client => {
                if op.f == OpF::Acquire && op.phase == Phase::Invoke {
                    if acquired >= acquisitions {
                        break;
                    }
                    started = true;
                }
                if !started {
                    continue;
                }
                out.push(Step {
                    at_us: e.at_us,
                    label: format!("{client} {} {}", op.f.name(), op.phase.name()),
                });
                if op.f == OpF::Acquire && op.phase == Phase::Ok {
                    acquired += 1;
                }
            }
            EventKind::Server(ServerEvent::Command { by, command }) if by == client && started => {
                out.push(Step {
                    at_us: e.at_us,
                    label: format!("{} ran {command}", e.host),
                });
            }
            _ => {}
        }
    }
    out
}

/// Explores `design` in `scenario`'s workload (its own faults left out).
pub fn explore(
    design: &DesignSpec,
    scenario: &Scenario,
    p: &Params,
) -> Result<Exploration, String> {
    if !scenario.applies_to(design.backend, design.masters) {
        return Err(format!(
            "scenario {} does not run design {}",
            scenario.name, design.name
        ));
    }
    let mut traced = with_plan(scenario, FaultPlan::default(), "");
    traced.workload.trace_commands = true;
    let clients = traced.workload.clients;
    if !(1..=clients).any(|i| format!("client-{i}") == p.client) {
        return Err(format!(
            "invalid --client {}: the workload has client-1 … client-{clients}",
            p.client
        ));
    }
    let base = run_seed(design, &traced, p.seed, true).map_err(|e| e.to_string())?;
    let history = base
        .history
        .as_ref()
        .ok_or("the fault-free run kept no history")?;
    let baseline_invalid: Vec<String> = base
        .verdicts
        .iter()
        .filter(|(_, v)| v.is_invalid())
        .map(|(n, _)| n.clone())
        .collect();
    let steps = steps(history, &p.client, p.acquisitions.max(1));
    if steps.is_empty() {
        return Err(format!(
            "{} never acquired in the fault-free run of {} (seed {}): nothing to explore",
            p.client, scenario.name, p.seed
        ));
    }
    let lease = scenario.workload.lease_ms;
    let durations: Vec<u64> = p
        .lease_multiples
        .iter()
        .map(|m| ((lease as f64) * m).round().max(1.0) as u64)
        .collect();
    let columns: Vec<(Sort, u64)> = p
        .sorts
        .iter()
        .flat_map(|s| durations.iter().map(move |d| (*s, *d)))
        .collect();
    // Placements: each step's millisecond (just before it) and the next (just after),
    // once each.
    let times: Vec<u64> = {
        let mut t: Vec<u64> = steps
            .iter()
            .flat_map(|s| [s.at_us / 1_000, s.at_us / 1_000 + 1])
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    let jobs: Vec<(usize, u64)> = times
        .iter()
        .flat_map(|&at| (0..columns.len()).map(move |c| (c, at)))
        .collect();
    let next = AtomicUsize::new(0);
    // Per job: the checkers it broke and whether some checker said Unknown.
    type Judged = Result<(Vec<String>, bool), String>;
    let results: Mutex<Vec<Option<Judged>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|sc| {
        for _ in 0..p.threads.max(1) {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(c, at)) = jobs.get(i) else { break };
                    let (sort, d) = columns[c];
                    let plan = FaultPlan {
                        faults: vec![sort.fault(&p.client, at, d)],
                    };
                    let s = with_plan(scenario, plan, "");
                    let r = run_seed(design, &s, p.seed, false)
                        .map(|run| {
                            let broken = run
                                .verdicts
                                .iter()
                                .filter(|(n, v)| v.is_invalid() && !baseline_invalid.contains(n))
                                .map(|(n, _)| n.clone())
                                .collect();
                            let unknown = run.verdicts.iter().any(|(_, v)| v.is_unknown());
                            (broken, unknown)
                        })
                        .map_err(|e| e.to_string());
                    results.lock().expect("poisoned")[i] = Some(r);
                }
            });
        }
    });
    let results: Vec<(Vec<String>, bool)> = results
        .into_inner()
        .expect("poisoned")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect::<Result<_, _>>()?;
    let rows = times
        .iter()
        .enumerate()
        .map(|(ti, &at_ms)| Row {
            at_ms,
            after: steps.iter().rposition(|s| s.at_us / 1_000 < at_ms),
            before: steps.iter().position(|s| s.at_us / 1_000 >= at_ms),
            outcomes: columns
                .iter()
                .enumerate()
                .map(|(c, &(sort, duration_ms))| {
                    let (broken, unknown) = results[ti * columns.len() + c].clone();
                    Outcome {
                        sort,
                        duration_ms,
                        at_ms,
                        broken,
                        unknown,
                    }
                })
                .collect(),
        })
        .collect();
    Ok(Exploration {
        design: design.name.clone(),
        scenario: scenario.name.to_string(),
        seed: p.seed,
        client: p.client.clone(),
        lease_ms: lease,
        baseline_invalid,
        steps,
        columns,
        rows,
        runs: jobs.len(),
    })
}

impl Exploration {
    /// The plan of one outcome (a single fault), for a plan file.
    pub fn plan_of(&self, o: &Outcome) -> FaultPlan {
        FaultPlan {
            faults: vec![o.sort.fault(&self.client, o.at_ms, o.duration_ms)],
        }
    }

    /// Every (row, outcome) that broke something.
    pub fn breaking(&self) -> impl Iterator<Item = (&Row, &Outcome)> {
        self.rows
            .iter()
            .flat_map(|r| r.outcomes.iter().map(move |o| (r, o)))
            .filter(|(_, o)| !o.broken.is_empty())
    }
}
