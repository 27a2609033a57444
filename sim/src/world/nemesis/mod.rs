//! The nemesis: applies the fault plan between simulation steps, and ends each fault
//! when its time comes. Every start and end is recorded as a fault event on the host
//! it hit.
//!
//! Faults compose: two pauses of one host end when the later ends (the pause gate keeps
//! the latest end), two partitions or delays of one link are tracked per fault (the
//! link heals when the last ends), and a crash of a host that is already down is a
//! no-op.
//!
//! Layout: this module is the loop (which faults are due, which wait for their moment,
//! which ends are due) and the one map from the plan's [`FaultKind`]s to their units;
//! a unit per kind holds the kind's start, its end (a closure its start schedules) and
//! what both record: `pause` (also a pause armed for a client's next write), `crash`
//! (process and machine), `delay`, `partition`, `pubsub` (lost pub/sub messages),
//! `clock` (steps and drift) and `slow_work`. `target` aims them (which hosts a target
//! names; when a waiting target's moment has come); `cx` is what a unit works with
//! ([`cx::Cx`]: the simulation, the world's handles, the time, the fault's index, its
//! record); `ctl` holds the world's handles ([`WorldCtl`]).
//!
//! Adding a fault kind: its variant in [`crate::faults::FaultKind`] (the plan's data),
//! a module here with its `start`, and its line in [`start`].

mod clock;
mod crash;
mod ctl;
mod cx;
mod delay;
mod partition;
mod pause;
mod pubsub;
mod reset;
mod slow_work;
mod target;

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::faults::{FaultKind, FaultPlan};

use crate::seed::sub_seed;
pub(crate) use ctl::{ClientCtl, WorldCtl};
use cx::{Cx, End};
use target::Waiting;

/// The fault plan's state during a run.
pub(crate) struct Nemesis {
    plan: FaultPlan,
    /// Fault indices by start time (stable: plan order breaks ties).
    order: Vec<usize>,
    next: usize,
    /// Fault ends still to apply: when, which fault, what.
    ends: Vec<(Duration, usize, End)>,
    /// Faults waiting for their moment (a target such as `unreplicated-lock-master`).
    waiting: Waiting,
    /// Picks among a target's candidates (which holder, which acquirer).
    rng: ChaCha8Rng,
}

impl Nemesis {
    pub fn new(plan: &FaultPlan, seed: u64) -> Self {
        let mut order: Vec<usize> = (0..plan.faults.len()).collect();
        order.sort_by_key(|&i| plan.faults[i].at_ms);
        Self {
            plan: plan.clone(),
            order,
            next: 0,
            ends: Vec::new(),
            waiting: Waiting::default(),
            rng: ChaCha8Rng::seed_from_u64(sub_seed(seed, crate::seed::stream::NEMESIS)),
        }
    }

    /// When the nemesis must be asked again, if nothing else happens first: the next
    /// fault start or end; every tick while a fault waits for its moment (whether it
    /// came is judged on each tick's state).
    pub fn next_due(&self, now: Duration) -> Duration {
        if !self.waiting.is_empty() {
            return now;
        }
        let start = self
            .order
            .get(self.next)
            .map(|&i| Duration::from_millis(self.plan.faults[i].at_ms));
        let end = self.ends.iter().map(|(at, _, _)| *at).min();
        start.into_iter().chain(end).min().unwrap_or(Duration::MAX)
    }

    /// Applies every fault end and start due at `now`: ends first, in due order.
    /// Returns whether it started or ended anything (and so may have woken a host's
    /// task from outside the simulation: the caller then runs every host in the next
    /// step, [`turmoil::Sim::wake_all`]). Before the first action, every host skipped
    /// as idle is run up to now ([`turmoil::Sim::catch_up`]), so that a task the fault
    /// wakes runs in the next step after its messages, as tick-by-tick stepping runs
    /// it, not in its host's catch-up before them. An error is the software's, from
    /// that catch-up.
    pub fn apply_due(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut WorldCtl,
        now: Duration,
    ) -> Result<bool, String> {
        let mut acted = false;
        let settle = |sim: &mut turmoil::Sim<'_>, acted: &mut bool| {
            if !std::mem::replace(acted, true) {
                sim.catch_up().map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        };
        self.ends.sort_by_key(|(at, _, _)| *at);
        while self.ends.first().is_some_and(|(at, _, _)| *at <= now) {
            settle(sim, &mut acted)?;
            let (_, fault, end) = self.ends.remove(0);
            end(&mut self.cx(sim, world, now, fault, String::new()));
        }
        while self.next < self.order.len()
            && Duration::from_millis(self.plan.faults[self.order[self.next]].at_ms) <= now
        {
            let index = self.order[self.next];
            self.next += 1;
            if !self.waiting.arm(index, &self.plan.faults[index].kind, now) {
                settle(sim, &mut acted)?;
                self.start(sim, world, now, index);
            }
        }
        for index in self.waiting.ripe(world, now, world.reply_delay) {
            settle(sim, &mut acted)?;
            self.start(sim, world, now, index);
        }
        Ok(acted)
    }

    /// Starts fault `index` now.
    fn start(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut WorldCtl,
        now: Duration,
        index: usize,
    ) {
        let kind = self.plan.faults[index].kind.clone();
        let moment = target::moment(&kind, world);
        start(&mut self.cx(sim, world, now, index, moment), &kind);
    }

    /// Fault `fault`'s view of the world now.
    fn cx<'a, 's>(
        &'a mut self,
        sim: &'a mut turmoil::Sim<'s>,
        world: &'a mut WorldCtl,
        now: Duration,
        fault: usize,
        moment: String,
    ) -> Cx<'a, 's> {
        Cx {
            sim,
            world,
            now,
            fault,
            moment,
            rng: &mut self.rng,
            ends: &mut self.ends,
        }
    }
}

/// Starts the fault `cx.fault` of `kind` through its kind's unit: the one place that
/// maps the plan's data to the units.
fn start(cx: &mut Cx, kind: &FaultKind) {
    match kind {
        FaultKind::Pause {
            target,
            duration_ms,
        } => pause::start(cx, target, *duration_ms),
        FaultKind::PauseBeforeWrite {
            target,
            duration_ms,
        } => pause::before_write(cx, target, *duration_ms),
        FaultKind::Crash {
            target,
            restart_after_ms,
        } => crash::start(cx, target, *restart_after_ms, false),
        FaultKind::MachineCrash {
            target,
            restart_after_ms,
        } => crash::start(cx, target, *restart_after_ms, true),
        FaultKind::Delay {
            target,
            latency_ms,
            duration_ms,
        } => delay::start(cx, target, *latency_ms, *duration_ms),
        FaultKind::DropPushes { duration_ms } => pubsub::start(cx, *duration_ms),
        FaultKind::Partition {
            a,
            b,
            one_way,
            duration_ms,
        } => partition::start(cx, a, b, *one_way, *duration_ms),
        FaultKind::ClockJump { target, delta_ms } => clock::jump(cx, target, *delta_ms),
        FaultKind::ClockDrift {
            target,
            drift_ppm,
            duration_ms,
        } => clock::drift(cx, target, *drift_ppm, *duration_ms),
        FaultKind::ClockSlew {
            target,
            delta_ms,
            rate_ppm,
        } => clock::slew(cx, target, *delta_ms, *rate_ppm),
        FaultKind::SlowWork { target, extra_ms } => slow_work::start(cx, target, *extra_ms),
        FaultKind::ResetConnections { target } => reset::start(cx, target),
    }
}
