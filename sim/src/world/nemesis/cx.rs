//! What a fault kind's start and end work with: the simulation, the world's handles,
//! the time, the fault's index in the plan, its targeting, and its record.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;

use crate::faults::Target;
use crate::history::{EventKind, FaultPhase};

use super::ctl::WorldCtl;

/// A fault's end, scheduled by its start: run at its time with the same [`Cx`] (the
/// fault's index in `cx.fault`).
pub(super) type End = Box<dyn FnOnce(&mut Cx<'_, '_>)>;

/// One fault's view of the world while it starts or ends.
pub(super) struct Cx<'a, 's> {
    /// The simulation (crashes and restarts of hosts).
    pub sim: &'a mut turmoil::Sim<'s>,
    /// The world's handles: pause gates, links, clocks, servers, the record.
    pub world: &'a mut WorldCtl,
    /// True time now.
    pub now: Duration,
    /// The fault's index in the plan, which its events carry.
    pub fault: usize,
    /// At a start: why the moment a waiting fault waited for is the one (` (…)`, for
    /// its start record); empty otherwise.
    pub moment: String,
    pub(super) rng: &'a mut ChaCha8Rng,
    pub(super) ends: &'a mut Vec<(Duration, usize, End)>,
}

impl Cx<'_, '_> {
    /// The hosts `target` names now (see [`super::target::resolve`]).
    pub fn resolve(&mut self, target: &Target) -> Vec<String> {
        super::target::resolve(target, self.world, self.rng)
    }

    /// `ms` from now.
    pub fn after(&self, ms: u64) -> Duration {
        self.now + Duration::from_millis(ms)
    }

    /// Runs `end` `ms` from now, as this fault's end.
    pub fn end_after(&mut self, ms: u64, end: impl FnOnce(&mut Cx<'_, '_>) + 'static) {
        self.ends.push((self.after(ms), self.fault, Box::new(end)));
    }

    /// Records this fault's start or end on `host`.
    pub fn record(&self, host: &str, phase: FaultPhase, detail: String) {
        self.record_cut(host, phase, detail, Vec::new());
    }

    /// Records this fault's start or end on `host`, naming the hosts it is cut off
    /// from (a partition's other side).
    pub fn record_cut(&self, host: &str, phase: FaultPhase, detail: String, peers: Vec<String>) {
        self.world.recorder.record_at(
            self.now.as_micros() as u64,
            host,
            EventKind::Fault {
                fault: self.fault,
                phase,
                detail,
                peers,
            },
        );
    }

    /// Records `host`'s clock after a change (a step of `step_ms`, or 0 for a new
    /// rate).
    pub fn record_clock(&self, host: &str, clock: &crate::clock::HostClock, step_ms: i64) {
        self.world.recorder.record_at(
            self.now.as_micros() as u64,
            host,
            EventKind::Clock {
                wall_offset_us: clock.wall_offset_us(self.now),
                drift_ppm: clock.drift_ppm(),
                step_ms,
            },
        );
    }
}
