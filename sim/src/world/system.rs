//! The interface every lock-server system implements: its hosts, which of them holds or
//! serves the lock now, which write of the lock is not yet replicated, what a crash does
//! to it, and how its record moves into the history. The world builds each system a
//! workload names ([`systems_of`]) and keeps them in one list;
//! the nemesis's targets, pauses, crashes and lost notifications, and the observer's
//! drain, are loops over that list. Every host of every system gets the same kit from
//! the world: a host clock ([`crate::clock::HostClock`]), a pause gate
//! ([`crate::pause::PauseGate`]) and the link-fault layer ([`crate::net::NetFaults`]).
//!
//! The five implementations: Redis with its replicas and Sentinels
//! ([`super::redis::RedisSystem`]), ZooKeeper (`ZkCtl`), MySQL (`MySqlCtl`),
//! MongoDB (`MongoCtl`) and etcd (`EtcdCtl`). What a system offers scenarios is its capability list
//! ([`crate::system`]).
//!
//! Adding a system: its model, its world module with a `LockSystem`, a [`SystemSpec`]
//! (its hosts, and its part of each client's `Deps`) and its record ([`SystemInfo`]:
//! backend, capabilities, how a workload names it); then its line in [`SYSTEMS`], its
//! `Workload` field, and its row in `lock_impl`'s systems table.

use std::time::Duration;

use std::sync::Arc;

use crate::clock::{ClockSpec, HostClock};
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::system::Capability;

use super::config::Workload;
use lock_impl::Backend;

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

    /// The follower serving the most clients, if any serves one.
    fn busiest_follower(&self) -> Option<String> {
        None
    }

    /// The last committed create of a lock node (its zxid, when first seen), if the
    /// system commits creates through a leader.
    fn lock_create(&self) -> Option<(i64, Duration)> {
        None
    }

    /// What a fault that waited for the lock create at `position` says of it.
    fn lock_create_detail(&self, position: i64) -> String {
        format!("a lock node's create committed at zxid 0x{position:x}")
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

    /// Sets this system's part of a client's `deps` (how to reach its servers). Redis's
    /// part is the connections every client dials first (`Deps::conn`, `servers`).
    fn client_deps(&self, _deps: &mut lock_impl::Deps, _reach: &super::client::SystemReach) {}
}

/// A lock-server system's one record in the simulator: what it has, and how a
/// workload names it. Each system's world module holds its record (`SYSTEM`), and
/// `SYSTEMS` lists them; the world's build (`systems_of`), the scenarios' fit
/// ([`capabilities`]), `Workload::on_system` and `Workload::validate` read them, so a
/// new system is its modules plus its line in `SYSTEMS` (and its `Workload` field).
pub struct SystemInfo {
    /// The system, as designs name theirs ([`lock_impl::DesignInfo::backend`]).
    pub backend: Backend,
    /// What it offers scenarios ([`crate::system`]).
    pub capabilities: &'static [Capability],
    /// Its spec in a workload, as the world builds it, if the workload names it.
    pub(crate) spec: fn(&Workload) -> Option<Box<dyn SystemSpec + '_>>,
    /// Puts its default for the workload's lease in the workload, unless the workload
    /// names its own (`Workload::on_system`).
    pub(crate) install: fn(&mut Workload),
    /// Takes it out of the workload.
    pub(crate) remove: fn(&mut Workload),
    /// Checks its part of the workload: the error names the field and what is allowed.
    pub(crate) validate: fn(&Workload) -> Result<(), String>,
}

/// Every system the simulator models, one line each, in world order (the order a
/// world builds them and `Backend::ALL`'s).
pub(crate) static SYSTEMS: &[&SystemInfo] = &[
    &super::redis::SYSTEM,
    &super::zookeeper::SYSTEM,
    &super::mysql::SYSTEM,
    &super::mongo::SYSTEM,
    &super::etcd::SYSTEM,
];

/// The record of the system behind `backend`, if the simulator models it.
pub(crate) fn info(backend: Backend) -> Option<&'static SystemInfo> {
    SYSTEMS.iter().copied().find(|s| s.backend == backend)
}

/// The lock-server systems this workload names, in world order ([`SYSTEMS`]). The
/// one place a world learns which systems it has.
pub(crate) fn systems_of(w: &Workload) -> Vec<Box<dyn SystemSpec + '_>> {
    SYSTEMS.iter().filter_map(|s| (s.spec)(w)).collect()
}

/// The systems other than Redis this workload names, by name (a Redis-only world:
/// none).
pub(crate) fn other_systems(w: &Workload) -> Vec<&'static str> {
    w.systems()
        .into_iter()
        .filter(|b| *b != Backend::Redis)
        .map(|b| b.name())
        .collect()
}

/// The systems of a running world, in world order (Redis, ZooKeeper, MySQL, MongoDB).
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

/// What the system behind `backend` has (nothing, for a system the simulator does
/// not model).
pub fn capabilities(backend: Backend) -> &'static [Capability] {
    info(backend).map_or(&[], |s| s.capabilities)
}

/// The first of `needs` that the system behind `backend` lacks.
pub fn missing(backend: Backend, needs: &[Capability]) -> Option<Capability> {
    let has = capabilities(backend);
    needs.iter().copied().find(|n| !has.contains(n))
}
