//! Shrinking: from a failing run to the smallest run that still fails the same checker.
//!
//! Every run is deterministic, so a candidate (a workload and a fault plan, with the
//! original seed) either fails the checker or it does not, and the search never needs
//! to re-check. Passes, in the order of preference the reader of a counterexample
//! cares about:
//!
//! 1. **fewer faults**: delta debugging (Zeller's ddmin) over the plan's faults;
//! 2. **shorter faults**: each fault's duration (pause, delay, partition, dropped
//!    pushes, extra work, downtime before a restart) and a delay's latency, bisected
//!    down;
//! 3. **earlier faults**: each fault's start bisected towards the run's start, which
//!    lets the next pass cut the run short;
//! 4. **fewer clients**: the smallest count that still fails, trying 1, 2, … in order;
//! 5. **shorter run**: `duration_ms` bisected down;
//! 6. **smaller latency range**: `latency_ms_max` down to `latency_ms_min`.
//!
//! The passes repeat until a whole round changes nothing or the run budget is spent.
//! Candidates are tried in a fixed order and the first failing one is taken, so the
//! result does not depend on the number of threads; threads only try the next few
//! candidates at once. `runs` counts the candidates a one-thread search would have
//! run, so it does not depend on threads either.
//!
//! A candidate that names a host the smaller world does not have (a fault aimed at
//! `client-7` with two clients) is skipped, never run. The minimal result is run once
//! more at the end and must fail again: a shrink never reports a plan that does not
//! reproduce.

use std::time::{Duration, Instant};

use sim::faults::{FaultKind, FaultPlan};
use sim::world::{RunConfig, RunError, Workload, run_bounded};

use crate::catalog::Scenario;
use crate::checkers::{self, Verdict};
use crate::sweep::DesignSpec;

/// One point of the search: the world and the faults, run with the original seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The workload.
    pub workload: Workload,
    /// The faults.
    pub plan: FaultPlan,
}

/// How big a candidate is, in the terms the passes shrink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Faults in the plan.
    pub faults: usize,
    /// Sum of the faults' durations (and latencies, extra work, downtime), in ms.
    pub fault_ms: u64,
    /// Client hosts.
    pub clients: u32,
    /// How long clients start new acquisitions, in ms.
    pub duration_ms: u64,
    /// The largest one-way latency, in ms.
    pub latency_ms_max: u64,
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fault{} ({} ms of fault), {} client{}, {} ms run, latency up to {} ms",
            self.faults,
            if self.faults == 1 { "" } else { "s" },
            self.fault_ms,
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.duration_ms,
            self.latency_ms_max
        )
    }
}

impl Candidate {
    /// Its size.
    pub fn size(&self) -> Size {
        Size {
            faults: self.plan.faults.len(),
            fault_ms: self
                .plan
                .faults
                .iter()
                .map(|f| knobs(&f.kind).iter().map(|k| k.value).sum::<u64>())
                .sum(),
            clients: self.workload.clients,
            duration_ms: self.workload.duration_ms,
            latency_ms_max: self.workload.latency_ms_max,
        }
    }
}

/// The search's limits.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Candidate runs (counted as a one-thread search would).
    pub max_runs: usize,
    /// Real time; past it the search stops with the smallest failing run so far
    /// (which then may depend on the machine's speed: the report says so).
    pub wall: Duration,
    /// Worker threads trying candidates.
    pub threads: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_runs: 400,
            wall: Duration::from_secs(120),
            threads: 1,
        }
    }
}

/// The search's result.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The checker the minimal run still fails.
    pub checker: String,
    /// Where the search started.
    pub original: Candidate,
    /// The smallest failing run found.
    pub minimal: Candidate,
    /// The minimal run's violation.
    pub evidence: String,
    /// The scenario's probe on the minimal run (`None`: its fault did not happen there).
    pub fault_seen: Option<String>,
    /// Candidate runs, as a one-thread search counts them.
    pub runs: usize,
    /// Each accepted step, in order.
    pub steps: Vec<String>,
    /// Why the search stopped early, if it did.
    pub stopped: Option<String>,
}

/// Why a shrink could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// No such checker.
    #[error("unknown checker '{0}'; allowed: {1}")]
    UnknownChecker(String, String),
    /// The starting run does not fail (that checker).
    #[error("{0}: nothing to shrink")]
    NotFailing(String),
    /// The starting run could not run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The minimal run did not fail again when re-run.
    #[error(
        "the minimal run did not fail again when re-run: the simulation is not deterministic ({0})"
    )]
    NotReproducible(String),
}

/// A size knob of a fault, with where to write it back.
struct Knob {
    name: &'static str,
    value: u64,
    min: u64,
}

fn knobs(kind: &FaultKind) -> Vec<Knob> {
    let k = |name, value, min| Knob { name, value, min };
    match kind {
        FaultKind::Pause { duration_ms, .. } | FaultKind::PauseBeforeWrite { duration_ms, .. } => {
            vec![k("duration_ms", *duration_ms, 1)]
        }
        FaultKind::Crash {
            restart_after_ms, ..
        }
        | FaultKind::MachineCrash {
            restart_after_ms, ..
        } => restart_after_ms
            .map(|r| vec![k("restart_after_ms", r, 1)])
            .unwrap_or_default(),
        FaultKind::Delay {
            latency_ms,
            duration_ms,
            ..
        } => vec![
            k("duration_ms", *duration_ms, 1),
            k("latency_ms", *latency_ms, 1),
        ],
        FaultKind::DropPushes { duration_ms } | FaultKind::Partition { duration_ms, .. } => {
            vec![k("duration_ms", *duration_ms, 1)]
        }
        FaultKind::SlowWork { extra_ms, .. } => vec![k("extra_ms", *extra_ms, 1)],
        FaultKind::ResetConnections { .. } => Vec::new(),
        // A smaller step or a gentler drift, keeping its direction.
        FaultKind::ClockJump { delta_ms, .. } | FaultKind::ClockSlew { delta_ms, .. } => {
            vec![k("delta_ms", delta_ms.unsigned_abs(), 1)]
        }
        FaultKind::ClockDrift {
            drift_ppm,
            duration_ms,
            ..
        } => {
            let mut v: Vec<Knob> = duration_ms
                .map(|d| vec![k("duration_ms", d, 1)])
                .unwrap_or_default();
            v.push(k("drift_ppm", drift_ppm.unsigned_abs(), 1));
            v
        }
    }
}

fn set_knob(kind: &mut FaultKind, name: &str, v: u64) {
    match (kind, name) {
        (FaultKind::Pause { duration_ms, .. }, "duration_ms")
        | (FaultKind::PauseBeforeWrite { duration_ms, .. }, "duration_ms")
        | (FaultKind::Delay { duration_ms, .. }, "duration_ms")
        | (FaultKind::DropPushes { duration_ms }, "duration_ms")
        | (FaultKind::Partition { duration_ms, .. }, "duration_ms") => *duration_ms = v,
        (FaultKind::Delay { latency_ms, .. }, "latency_ms") => *latency_ms = v,
        (FaultKind::SlowWork { extra_ms, .. }, "extra_ms") => *extra_ms = v,
        (
            FaultKind::ClockJump { delta_ms, .. } | FaultKind::ClockSlew { delta_ms, .. },
            "delta_ms",
        ) => *delta_ms = delta_ms.signum() * v.min(i64::MAX as u64) as i64,
        (FaultKind::ClockDrift { drift_ppm, .. }, "drift_ppm") => {
            *drift_ppm = drift_ppm.signum() * v.min(i64::MAX as u64) as i64
        }
        (FaultKind::ClockDrift { duration_ms, .. }, "duration_ms") => *duration_ms = Some(v),
        (
            FaultKind::Crash {
                restart_after_ms, ..
            }
            | FaultKind::MachineCrash {
                restart_after_ms, ..
            },
            "restart_after_ms",
        ) => *restart_after_ms = Some(v),
        _ => unreachable!("knob {name} comes from knobs()"),
    }
}

/// The search state shared by the passes.
struct Search<'a> {
    design: &'a DesignSpec,
    scenario: &'a Scenario,
    seed: u64,
    checker: String,
    /// The original run saw the scenario's fault: every candidate must see it too, so
    /// the minimal run tells the same story (a smaller pause that no longer outlasts
    /// the lease is a different failure, or none).
    need_fault: bool,
    budget: Budget,
    started: Instant,
    runs: usize,
    stopped: Option<String>,
    progress: &'a (dyn Fn(usize, Option<&Candidate>) + Sync),
}

impl Search<'_> {
    fn config(&self, c: &Candidate) -> RunConfig {
        let mut cfg = crate::sweep::config(self.design, self.scenario, self.seed);
        cfg.workload = c.workload.clone();
        cfg.plan = c.plan.clone();
        cfg
    }

    /// The violation's sentence if `c` fails the checker (and shows the fault, when
    /// that is needed); `None` if it passes, cannot run, or names a missing host.
    fn run(&self, c: &Candidate) -> Option<String> {
        if c.workload.validate().is_err()
            || crate::plancheck::check_hosts(&c.plan, &c.workload).is_err()
        {
            return None;
        }
        let history = run_bounded(&self.config(c), Duration::from_secs(30)).ok()?;
        let all = checkers::for_history(&history);
        let only: Vec<_> = all
            .into_iter()
            .filter(|ch| ch.name() == self.checker)
            .collect();
        match checkers::check_with(&only, &history).pop() {
            Some((_, Verdict::Invalid(ev)))
                if !self.need_fault || self.scenario.probe(&history).is_some() =>
            {
                Some(ev.summary)
            }
            _ => None,
        }
    }

    fn out_of_budget(&mut self) -> bool {
        if self.stopped.is_some() {
            return true;
        }
        if self.runs >= self.budget.max_runs {
            self.stopped = Some(format!("run budget of {} spent", self.budget.max_runs));
        } else if self.started.elapsed() >= self.budget.wall {
            self.stopped = Some(format!(
                "wall-clock budget of {} s spent (the result may depend on this machine's speed)",
                self.budget.wall.as_secs()
            ));
        }
        self.stopped.is_some()
    }

    /// The first candidate, in order, that fails; `None` if none does (or the budget
    /// ran out first). Tries `threads` candidates at once.
    fn first_failing(&mut self, cands: Vec<Candidate>) -> Option<Candidate> {
        let width = self.budget.threads.max(1);
        let mut rest = cands.into_iter().peekable();
        while rest.peek().is_some() {
            if self.out_of_budget() {
                return None;
            }
            let room = self.budget.max_runs - self.runs;
            let batch: Vec<Candidate> = rest.by_ref().take(width.min(room)).collect();
            let this = &*self;
            let fails: Vec<bool> = std::thread::scope(|s| {
                let runs: Vec<_> = batch
                    .iter()
                    .map(|c| s.spawn(move || this.run(c).is_some()))
                    .collect();
                // A run that panicked is no evidence of failure.
                runs.into_iter()
                    .map(|r| r.join().unwrap_or(false))
                    .collect()
            });
            if let Some(i) = fails.iter().position(|f| *f) {
                self.runs += i + 1;
                let c = batch.into_iter().nth(i).expect("in the batch");
                (self.progress)(self.runs, Some(&c));
                return Some(c);
            }
            self.runs += batch.len();
            (self.progress)(self.runs, None);
        }
        None
    }

    /// Lowers one number of `cur` (now `now`, known to fail) towards `lo` by
    /// bisection, keeping the smallest value that still fails; records the step.
    fn lower(
        &mut self,
        cur: &mut Candidate,
        steps: &mut Vec<String>,
        what: &str,
        lo: u64,
        now: u64,
        set: &dyn Fn(&mut Candidate, u64),
    ) {
        if lo >= now {
            return;
        }
        let make = |v: u64| {
            let mut c = cur.clone();
            set(&mut c, v);
            c
        };
        // Try the floor first: often the number does not matter at all.
        let mut best = self.first_failing(vec![make(lo)]).map(|c| (c, lo));
        let (mut ok, mut fail) = (lo, now);
        // Stop within 2% (at least 1 ms): the last few milliseconds tell nobody anything.
        while best.as_ref().is_none_or(|(_, v)| *v != lo) && fail - ok > (now / 50).max(1) {
            let mid = ok + (fail - ok) / 2;
            match self.first_failing(vec![make(mid)]) {
                Some(c) => {
                    fail = mid;
                    best = Some((c, mid));
                }
                None if self.stopped.is_some() => break,
                None => ok = mid,
            }
        }
        if let Some((c, v)) = best {
            steps.push(format!("{what} {now} -> {v}"));
            *cur = c;
        }
    }
}

impl Candidate {
    fn with_faults(&self, keep: impl Fn(usize) -> bool) -> Candidate {
        Candidate {
            workload: self.workload.clone(),
            plan: FaultPlan {
                faults: self
                    .plan
                    .faults
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| keep(*i))
                    .map(|(_, f)| f.clone())
                    .collect(),
            },
        }
    }
}

/// Shrinks the run of `scenario` at `seed` (with the scenario's plan: its seed's or a
/// fixed one) to the smallest run that still fails `checker` (default: the first
/// safety checker, in report order, that it fails; else the first of any).
/// `progress` sees the runs so far, and each accepted candidate.
pub fn shrink(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
    checker: Option<&str>,
    budget: Budget,
    progress: &(dyn Fn(usize, Option<&Candidate>) + Sync),
) -> Result<Shrunk, ShrinkError> {
    if let Some(c) = checker
        && !checkers::all_names().contains(&c)
    {
        return Err(ShrinkError::UnknownChecker(
            c.to_string(),
            checkers::all_names().join(", "),
        ));
    }
    let original = Candidate {
        workload: scenario.workload_for(design.backend, design.masters),
        plan: scenario.plan(seed),
    };
    let first = crate::sweep::run_seed(design, scenario, seed, false)?;
    let invalid: Vec<&str> = first
        .verdicts
        .iter()
        .filter(|(_, v)| v.is_invalid())
        .map(|(n, _)| n.as_str())
        .collect();
    let checker = match checker {
        Some(c) if invalid.contains(&c) => c.to_string(),
        Some(c) => {
            return Err(ShrinkError::NotFailing(format!(
                "seed {seed} of {} under {} does not fail {c} (it fails: {})",
                design.name,
                scenario.name,
                if invalid.is_empty() {
                    "nothing".to_string()
                } else {
                    invalid.join(", ")
                }
            )));
        }
        None => invalid
            .iter()
            .find(|n| !checkers::LIVENESS_CHECKERS.contains(n))
            .or(invalid.first())
            .map(|n| n.to_string())
            .ok_or_else(|| {
                ShrinkError::NotFailing(format!(
                    "seed {seed} of {} under {} fails no checker",
                    design.name, scenario.name
                ))
            })?,
    };
    let mut search = Search {
        design,
        scenario,
        seed,
        checker: checker.clone(),
        need_fault: first.fault_seen.is_some(),
        budget,
        started: Instant::now(),
        runs: 1,
        stopped: None,
        progress,
    };
    let mut cur = original.clone();
    let mut steps = Vec::new();
    loop {
        let before = cur.clone();
        // 1. Fewer faults.
        if let Some(c) = ddmin(&mut search, &cur) {
            steps.push(format!(
                "faults {} -> {}",
                cur.plan.faults.len(),
                c.plan.faults.len()
            ));
            cur = c;
        }
        // 2. Shorter faults.
        for i in 0..cur.plan.faults.len() {
            for knob in knobs(&cur.plan.faults[i].kind) {
                search.lower(
                    &mut cur,
                    &mut steps,
                    &format!("fault {i} {}", knob.name),
                    knob.min,
                    knob.value,
                    &|c, v| set_knob(&mut c.plan.faults[i].kind, knob.name, v),
                );
            }
        }
        // 3. Earlier faults.
        for i in 0..cur.plan.faults.len() {
            let now = cur.plan.faults[i].at_ms;
            search.lower(
                &mut cur,
                &mut steps,
                &format!("fault {i} at_ms"),
                0,
                now,
                &|c, v| c.plan.faults[i].at_ms = v,
            );
        }
        // 4. Fewer clients.
        let fewer: Vec<Candidate> = (1..cur.workload.clients)
            .map(|n| {
                let mut c = cur.clone();
                c.workload.clients = n;
                c
            })
            .collect();
        if let Some(c) = search.first_failing(fewer) {
            steps.push(format!(
                "clients {} -> {}",
                cur.workload.clients, c.workload.clients
            ));
            cur = c;
        }
        // 5. Shorter run.
        let now = cur.workload.duration_ms;
        search.lower(&mut cur, &mut steps, "duration_ms", 1, now, &|c, v| {
            c.workload.duration_ms = v
        });
        // 6. Smaller latency range.
        let (lo, now) = (cur.workload.latency_ms_min, cur.workload.latency_ms_max);
        search.lower(&mut cur, &mut steps, "latency_ms_max", lo, now, &|c, v| {
            c.workload.latency_ms_max = v
        });
        if cur == before || search.stopped.is_some() {
            break;
        }
    }
    // Never report a plan that does not reproduce.
    let Some(evidence) = search.run(&cur) else {
        return Err(ShrinkError::NotReproducible(format!("{:?}", cur.plan)));
    };
    let fault_seen = sim::world::run(&search.config(&cur))
        .ok()
        .and_then(|h| scenario.probe(&h));
    Ok(Shrunk {
        checker,
        original,
        minimal: cur,
        evidence,
        fault_seen,
        runs: search.runs + 1,
        steps,
        stopped: search.stopped,
    })
}

/// Zeller's ddmin over the faults: the smallest subset (1-minimal) that still fails.
/// First the empty plan (a design that fails with no fault at all needs none).
fn ddmin(search: &mut Search<'_>, cur: &Candidate) -> Option<Candidate> {
    let n_all = cur.plan.faults.len();
    if n_all == 0 {
        return None;
    }
    if let Some(found) = search.first_failing(vec![cur.with_faults(|_| false)]) {
        return Some(found);
    }
    let mut best: Option<Candidate> = None;
    let mut c = cur.clone();
    let mut n = 2usize;
    while c.plan.faults.len() >= 2 {
        let len = c.plan.faults.len();
        let n_now = n.min(len);
        let chunk = |k: usize| (k * len / n_now)..((k + 1) * len / n_now);
        // Subsets first (keep one chunk), then complements (drop one chunk).
        let mut cands: Vec<Candidate> = (0..n_now)
            .map(|k| {
                let r = chunk(k);
                c.with_faults(|i| r.contains(&i))
            })
            .collect();
        if n_now > 2 {
            cands.extend((0..n_now).map(|k| {
                let r = chunk(k);
                c.with_faults(|i| !r.contains(&i))
            }));
        }
        let subsets = n_now;
        match search.first_failing(cands.clone()) {
            Some(found) => {
                let which = cands.iter().position(|x| *x == found).unwrap_or(0);
                n = if which < subsets {
                    2
                } else {
                    (n_now - 1).max(2)
                };
                c = found.clone();
                best = Some(found);
            }
            None if search.stopped.is_some() => break,
            None if n_now >= len => break,
            None => n = (n_now * 2).min(len),
        }
    }
    best
}
