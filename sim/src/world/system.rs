//! The neutral interface of a lock-server system in the simulated world: what a
//! workload's part builds ([`SystemSpec`], [`WorkloadPart`]), what a running system
//! answers the nemesis and the observer ([`LockSystem`]), and its record ([`SystemInfo`]).
//! This module imports no system: each system's world module implements these traits,
//! and `world::registry` lists the systems. Every host of every system gets the same kit
//! from the world: a host clock ([`crate::clock::HostClock`]), a pause gate
//! ([`crate::pause::PauseGate`]) and the link-fault layer ([`crate::net::NetFaults`]).

use std::time::Duration;

use std::sync::Arc;

use crate::clock::{ClockSpec, HostClock};
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::system::Capability;

use lock_impl::Backend;
use lock_impl::zk::StreamDialer;

/// A lock write the nemesis can aim at: the server that has it, a description for the
/// fault's record (empty: none), and the write's position (a replication offset, an
/// optime, a grant's number) that tells one write from the next.
pub(crate) struct LockWrite {
    pub server: String,
    pub detail: String,
    pub position: u64,
}

/// Which lock write a target waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteMoment {
    /// One that no replica has yet (`unreplicated-lock-master`).
    Unreplicated,
    /// A fresh grant in its client's hands (`fresh-lock-master`).
    Fresh,
}

/// One lock-server system in a running world, as the nemesis and the observer see it.
pub(crate) trait LockSystem {
    /// Every host of the system (its servers and helpers such as Sentinels), in world
    /// order.
    fn hosts(&self) -> Vec<String>;

    /// The hosts that serve the lock (`all-servers`): every host but helpers.
    fn servers(&self) -> Vec<String> {
        self.hosts()
    }

    /// The pause gate of `host`, if it is one of this system's.
    fn gate(&self, host: &str) -> Option<PauseGate>;

    /// The client host whose lock the system's record holds now.
    fn lock_owner(&self, key: &str) -> Option<String>;

    /// The host that holds the lock now (the master, the leader, the primary).
    fn lock_server(&self, key: &str) -> Option<String>;

    /// The server holding the lock with `value` (a client's owner value), while it does.
    fn server_holding_value(&self, _key: &str, _value: &str) -> Option<String> {
        None
    }

    /// The client hosts whose write of the lock some server's record shows now.
    fn lock_writers(&self, _key: &str) -> Vec<String> {
        Vec::new()
    }

    /// The lock write a waiting target aims at, if there is one now.
    fn lock_write(
        &self,
        _key: &str,
        _recorder: &Recorder,
        _moment: WriteMoment,
    ) -> Option<LockWrite> {
        None
    }

    /// The leader of a quorum, if the system has one serving.
    fn leader(&self) -> Option<String> {
        None
    }

    /// The follower (a server of the quorum other than its leader) serving the most
    /// clients, if any serves one.
    fn busiest_follower(&self) -> Option<String> {
        None
    }

    /// The last create of a lock entry the leader committed, if the system commits
    /// creates through a leader.
    fn committed_lock_create(&self) -> Option<CommittedCreate> {
        None
    }

    /// `host` (one of this system's) was just crashed (its machine, with `machine`):
    /// what the crash does to what the system keeps.
    fn crashed(&mut self, host: &str, machine: bool, now: Duration, recorder: &Recorder);

    /// Moves the system's record into the history at true time `now`.
    fn drain(&mut self, recorder: &Recorder, now: Duration);

    /// Drops (or, with `false`, delivers again) the release notifications the system
    /// sends waiters; the host the fault is recorded on, or `None` if it sends none.
    fn drop_notifications(&self, _drop: bool) -> Option<String> {
        None
    }

    /// Commands its servers executed (run statistics).
    fn commands_processed(&self) -> u64 {
        0
    }

    /// What a client of this system waits for or dials through (see [`ClientHooks`]).
    fn client_hooks(&self) -> ClientHooks {
        ClientHooks::default()
    }
}

/// A lock entry's create that a leader committed, as a fault that waited for it sees
/// it.
pub(crate) struct CommittedCreate {
    /// When the world first saw the commit.
    pub seen: Duration,
    /// What the fault's record says of it, in the system's words (its position in the
    /// system's log).
    pub detail: String,
}

/// What a client host takes from its world's system at start-up.
#[derive(Default, Clone)]
pub(crate) struct ClientHooks {
    /// Set once the system serves (a ZooKeeper ensemble's first leader): the client
    /// starts only then, as a service starts once its ZooKeeper is up.
    pub ready: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The primary's address, re-pointed by a failover (a MySQL primary with a replica).
    pub primary_address: Option<Arc<std::sync::Mutex<String>>>,
}

/// What building a system's hosts is given: the simulation, each host's clock (made by
/// the world from a spec, recorded if imperfect), the spec servers' clocks start from,
/// the link-fault layer, the lock key, the run's seed and whether commands are traced.
pub(crate) struct Build<'a, 's> {
    pub sim: &'a mut turmoil::Sim<'s>,
    pub clock_of: &'a mut dyn FnMut(&str, ClockSpec) -> HostClock,
    pub server_clock: ClockSpec,
    pub net: &'a NetFaults,
    pub key: &'a str,
    pub seed: u64,
    pub trace_commands: bool,
}

/// A system as a workload names it: builds its hosts into a world, and gives each
/// client its part of the design's `Deps`.
pub(crate) trait SystemSpec {
    /// Adds the system's hosts to the world and returns its handle.
    fn build(&self, build: &mut Build<'_, '_>) -> Box<dyn LockSystem>;

    /// The names of the hosts it adds (its servers and helpers), in world order: what
    /// a plan file's fault may target by name before any world is built.
    fn host_names(&self) -> Vec<String>;

    /// How many independent masters a client locks on at once (Redlock's; one for a
    /// single lock service): the history's `masters`.
    fn masters(&self) -> u32 {
        1
    }

    /// Sets this system's part of a client's `deps` (how to reach its servers). Redis's
    /// part is the connections every client dials first (`Deps::conn`, `servers`).
    fn client_deps(&self, _deps: &mut lock_impl::Deps, _reach: &SystemReach) {}
}

/// A system's part of a workload (its field in the workload's JSON), as the registry
/// hands it to the system: the default a workload gets for its lease, and the checks.
pub(crate) trait WorkloadPart: SystemSpec + Clone + Sized {
    /// The system's default for a workload whose lease is `lease_ms`
    /// (`Workload::on_system`).
    fn default_for_lease(lease_ms: u64) -> Self;

    /// Checks the part: the error names the field and what is allowed.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// How a client reaches a system's servers: its dialer (every stream gated and
/// faultable), the primary's address if a failover can move it (a primary behind a
/// virtual address), its reply timeout and the world's time scale. A system's
/// [`SystemSpec::client_deps`] makes its part of `Deps` from it.
pub(crate) struct SystemReach {
    pub dialer: Arc<dyn StreamDialer>,
    pub primary_address: Option<Arc<std::sync::Mutex<String>>>,
    pub response_timeout_ms: u64,
    pub scale: lock_impl::TimeScale,
}

/// A lock-server system's one record in the simulator: which system it is and what
/// it offers scenarios. Each system's world module holds its record (`SYSTEM`); the
/// registry lists them.
pub struct SystemInfo {
    /// The system, as designs name theirs ([`lock_impl::DesignInfo::backend`]).
    pub backend: Backend,
    /// What it offers scenarios ([`crate::system`]).
    pub capabilities: &'static [Capability],
}

/// The systems of a running world, in world order (the registry's).
#[derive(Default)]
pub(crate) struct Systems(pub Vec<Box<dyn LockSystem>>);

impl Systems {
    /// The first answer of any system, in world order.
    pub fn first<T>(&self, f: impl FnMut(&Box<dyn LockSystem>) -> Option<T>) -> Option<T> {
        self.0.iter().find_map(f)
    }

    /// Every system's lock servers.
    pub fn servers(&self) -> Vec<String> {
        self.0.iter().flat_map(|s| s.servers()).collect()
    }

    /// Every system's hosts.
    pub fn hosts(&self) -> Vec<String> {
        self.0.iter().flat_map(|s| s.hosts()).collect()
    }

    /// The pause gate of `host`, whichever system it is in.
    pub fn gate(&self, host: &str) -> Option<PauseGate> {
        self.first(|s| s.gate(host))
    }

    /// Tells every system that `host` crashed.
    pub fn crashed(&mut self, host: &str, machine: bool, now: Duration, recorder: &Recorder) {
        for s in &mut self.0 {
            s.crashed(host, machine, now, recorder);
        }
    }

    /// Drains every system's record.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        for s in &mut self.0 {
            s.drain(recorder, now);
        }
    }
}
