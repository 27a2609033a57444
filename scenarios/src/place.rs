//! Faults where they hurt: the moments of a run at which the main job places its
//! scenario's fault, read from the history of the run without it.
//!
//! A violation needs its fault at a moment of the protocol (the pause between the
//! acquire's reply and the write, the crash between a grant and its replication), and
//! a seed's random times hit such a moment by luck. So the adaptive search
//! ([`crate::adaptive`]) also runs the cell's *bare* run (its world's standing faults
//! only, [`Placement::Bare`]), reads from its history the steps of the first
//! acquisition after warm-up (the acquiring client's operations from that acquire to
//! the release that follows it, each command of the client's that a server ran, the
//! servers' records of its requests and those no client caused: a role change, a
//! commit) and places the scenario's first timed fault just before the first step and
//! just after each ([`Placement::At`]), at most as many as the cell's budget buys
//! ([`affordable`], [`spots_in`]).
//! Everything before the placed fault is the bare run, so a placement lands where the
//! history says. Placement reads the history only.

use sim::history::fact::{LockFact, Removal};
use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use crate::catalog::{Placement, Scenario};
use crate::explore::Step;
use crate::sweep::{DesignSpec, RunSummary, run_seed};
use sim::world::RunError;

/// One place for the fault: its start, and the step it comes just before or after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    /// The fault's start, ms (before that millisecond's tick runs).
    pub at_ms: u64,
    /// `before <step>` or `after <step>`.
    pub label: String,
}

impl Spot {
    /// The placement that puts the fault here.
    pub fn placement(&self) -> Placement {
        Placement::At(self.at_ms)
    }
}

/// The steps of the first acquisition invoked at or after `from_ms` (any client's):
/// that client's operations from the acquire to the completion of the release that
/// follows its first successful acquire (or the run's end), its commands the servers
/// ran (when the run traced them), and the servers' records in that span of its
/// requests and of nobody's (not the other clients' contention), in history order.
pub fn steps(h: &History, from_ms: u64) -> Vec<Step> {
    let from_us = from_ms.saturating_mul(1_000);
    let Some(first) = h.events.iter().position(|e| {
        e.at_us >= from_us
            && matches!(&e.kind, EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Invoke)
    }) else {
        return Vec::new();
    };
    let client = h.events[first].host.clone();
    let mut out = Vec::new();
    let mut acquired = false;
    for e in &h.events[first..] {
        match &e.kind {
            EventKind::Op(op) if e.host == client => {
                if acquired && op.f == OpF::Acquire && op.phase == Phase::Invoke {
                    break;
                }
                out.push(Step {
                    at_us: e.at_us,
                    label: format!("{client} {} {}", op.f.name(), op.phase.name()),
                });
                acquired |= op.f == OpF::Acquire && op.phase == Phase::Ok;
                if acquired && op.f == OpF::Release && op.phase != Phase::Invoke {
                    break;
                }
            }
            EventKind::Server(ServerEvent::Command { by, command }) if *by == client => {
                out.push(Step {
                    at_us: e.at_us,
                    label: format!("{} ran {command}", e.host),
                });
            }
            // What the servers recorded of this client's requests, and what no client
            // caused (a role change, a commit, a replica's lag); not the other
            // clients' contention.
            EventKind::Server(s) if by(&s.fact()).is_none_or(|b| b == client) => {
                out.push(Step {
                    at_us: e.at_us,
                    label: format!("{} {}", e.host, s.wording()),
                });
            }
            _ => {}
        }
    }
    out
}

/// The client whose request a server record is of, if it is of one.
fn by<'a>(fact: &LockFact<'a>) -> Option<&'a str> {
    match fact {
        LockFact::Written { by, .. }
        | LockFact::ExpirySet { by, .. }
        | LockFact::FieldRemoved { by, .. }
        | LockFact::Command { by, .. } => Some(by),
        LockFact::Removed { by, why, .. } => (*why == Removal::Command).then_some(*by),
        _ => None,
    }
}

/// Where to place the fault over `steps`: just before the first, and just after each
/// (one millisecond later: the step's tick has run), once per millisecond, in time
/// order. Steps in one millisecond share their places.
pub fn spots(steps: &[Step]) -> Vec<Spot> {
    let mut out: Vec<Spot> = Vec::new();
    if let Some(first) = steps.first() {
        out.push(Spot {
            at_ms: first.at_us / 1_000,
            label: format!("before {}", first.label),
        });
    }
    for s in steps {
        let at_ms = s.at_us / 1_000 + 1;
        if out.iter().any(|o| o.at_ms == at_ms) {
            continue;
        }
        out.push(Spot {
            at_ms,
            label: format!("after {}", s.label),
        });
    }
    out.sort_by_key(|s| s.at_ms);
    out
}

/// The most places a cell's fault is put.
pub const MAX_SPOTS: usize = 12;

/// The fewest places a cell's fault is put when its steps give that many, however
/// costly its runs (a five-master or etcd world's run costs ten of a single master's).
pub const MIN_SPOTS: usize = 3;

/// How many places a cell with `budget` host runs (`None`: no budget) can afford when
/// its bare run cost `bare`: as many runs as the budget holds, within [`MIN_SPOTS`]
/// and [`MAX_SPOTS`].
pub fn affordable(budget: Option<u64>, bare: u64) -> usize {
    match budget {
        None => MAX_SPOTS,
        Some(b) => usize::try_from(b / bare.max(1))
            .unwrap_or(MAX_SPOTS)
            .clamp(MIN_SPOTS, MAX_SPOTS),
    }
}

/// The places for `scenario`'s fault in its bare run's history (none if the scenario
/// has no timed fault to place), at most `most`, and how many its steps gave. The
/// steps are those of the grant and after: the client's own operations throughout,
/// the servers' records from a lease before the acquire's success (earlier ones are
/// attempts that failed under contention). When there are more than `most`: the
/// places around the client's operations first (spread evenly over them when even
/// they are too many), then those around what the servers recorded, then around its
/// commands (a retry loop's many attempts). In time order.
pub fn spots_in(scenario: &Scenario, bare: &History, most: usize) -> (Vec<Spot>, usize) {
    if scenario.timed_faults() == 0 {
        return (Vec::new(), 0);
    }
    let all = steps(bare, scenario.fault_window().start);
    let lease_us = scenario.workload.lease_ms * 1_000;
    let is_op = |s: &Step| s.label.starts_with("client-");
    let granted = all
        .iter()
        .find(|s| is_op(s) && s.label.ends_with(" acquire ok"))
        .map_or(0, |s| s.at_us.saturating_sub(lease_us));
    let kept: Vec<Step> = all
        .into_iter()
        .filter(|s| s.at_us >= granted || is_op(s))
        .collect();
    let every = spots(&kept);
    let n = every.len();
    if n <= most {
        return (every, n);
    }
    let rank = |s: &Spot| {
        let step = s.label.split_once(' ').map_or("", |(_, rest)| rest);
        if step.starts_with("client-") {
            0
        } else if step.contains(" ran ") {
            2
        } else {
            1
        }
    };
    let (ops, rest): (Vec<Spot>, Vec<Spot>) = every.into_iter().partition(|s| rank(s) == 0);
    let mut chosen: Vec<Spot> = if ops.len() > most {
        (0..most)
            .map(|i| ops[i * (ops.len() - 1) / (most - 1).max(1)].clone())
            .collect()
    } else {
        let mut rest = rest;
        rest.sort_by_key(|s| (rank(s), s.at_ms));
        rest.truncate(most - ops.len());
        ops.into_iter().chain(rest).collect()
    };
    chosen.sort_by_key(|s| s.at_ms);
    chosen.dedup_by_key(|s| s.at_ms);
    (chosen, n)
}

/// The placed runs of `design` in `scenario` at `seed`, outside the main job's search
/// (for a test of a user's lock): the bare run, then the fault at each of its places
/// (at most [`MAX_SPOTS`]), every run judged. Nothing when the scenario has no timed
/// fault. Only a bad configuration is an error.
pub fn placed_runs(
    design: &DesignSpec,
    scenario: &Scenario,
    seed: u64,
) -> Result<Vec<RunSummary>, RunError> {
    if scenario.timed_faults() == 0 {
        return Ok(Vec::new());
    }
    let mut bare = scenario.clone().placed(Some(Placement::Bare));
    bare.workload.trace_commands = true;
    let mut first = run_seed(design, &bare, seed, true)?;
    let Some(history) = first.history.take() else {
        return Ok(vec![first]);
    };
    let (spots, _) = spots_in(scenario, &history, MAX_SPOTS);
    let mut runs = vec![first];
    for spot in spots {
        let placed = scenario.clone().placed(Some(spot.placement()));
        runs.push(run_seed(design, &placed, seed, false)?);
    }
    Ok(runs)
}
