//! What a run is made of: the workload, the servers, the clocks and the fault plan.

use std::sync::Arc;

use lock_impl::{Deps, LockDesign};
use serde::{Deserialize, Serialize};

use crate::clock::ClockSpec;
use crate::faults::FaultPlan;

pub use super::etcd::EtcdSpec;
pub use super::mongo::spec::MongoSpec;
pub use super::mysql::spec::{MySqlReplicaSpec, MySqlSpec};
pub use super::redis::spec::{SentinelSpec, ServerSpec, default_servers};
pub use super::zookeeper::spec::ZkSpec;

/// Builds a design over a client's dependencies: any [`LockDesign`], built-in or the
/// user's own.
pub type DesignFactory = Arc<dyn Fn(Deps) -> Arc<dyn LockDesign> + Send + Sync>;

/// The factory of a built-in design, by name (its record's [`lock_impl::DesignInfo::build`];
/// the error names the allowed values).
pub fn builtin_factory(name: &str) -> Result<DesignFactory, lock_impl::LockError> {
    let info = lock_impl::design(name)?;
    Ok(Arc::new(move |deps| (info.build)(deps)))
}

fn default_connect_timeout() -> u64 {
    lock_impl::ReconnectPolicy::default().connect_timeout_ms
}

/// What each client does, and the world's shape. Units are in the names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Client hosts.
    pub clients: u32,
    /// The lock key.
    pub key: String,
    /// Lease per acquisition.
    pub lease_ms: u64,
    /// Wait budget per acquisition (0: try once).
    pub wait_ms: u64,
    /// Time inside the critical section between the read and the write.
    pub work_ms: u64,
    /// Largest pause between a client's attempts (uniform in 0..=think_ms_max).
    pub think_ms_max: u64,
    /// How long clients keep starting new acquisitions.
    pub duration_ms: u64,
    /// Extra time after `duration_ms` for in-flight work to finish.
    pub drain_ms: u64,
    /// The redis crate's response timeout: past it a reply is an unknown outcome.
    pub response_timeout_ms: u64,
    /// Stock at the start.
    pub initial_stock: i64,
    /// Fencing storage: refuse reads and writes whose token is lower than the highest
    /// seen (requests without a token are never checked, so designs without tokens see
    /// a plain storage).
    pub fencing: bool,
    /// Nested acquisitions per round (1: none); a reentrant design counts them.
    pub reentrant_depth: u32,
    /// Liveness slack added to the lease.
    pub liveness_slack_ms: u64,
    /// One-way network latency range between any two hosts.
    pub latency_ms_min: u64,
    /// See `latency_ms_min`.
    pub latency_ms_max: u64,
    /// The Redis servers. A client's `Deps.conn` reaches the first; `Deps.servers`
    /// reaches all of them, in this order.
    #[serde(default = "default_servers")]
    pub servers: Vec<ServerSpec>,
    /// A client's dial of a Redis server gives up after this long (the command that
    /// needed it fails, outcome known: it was never sent).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// Before writing, a client checks `Guard::remaining` and abandons the write
    /// (recorded as a failed write) unless at least this much validity is left, as
    /// careful code does; `None`: clients write whatever their validity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_validity_ms: Option<u64>,
    /// Sentinels (none by default). With them, a client's `Deps.conn` reaches whichever
    /// server the Sentinels name as master, checked with `ROLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<SentinelSpec>,
    /// Record every client command each server runs as a `Command` event (the wire
    /// trace `locksim explore` places faults by). Off by default: histories stay small.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace_commands: bool,
    /// The lock-server systems other than Redis this world runs (none by default),
    /// each a field of its own in the workload's JSON (`zookeeper`, `mysql`, `mongo`,
    /// `etcd`),
    /// flattened here so histories read as before.
    #[serde(flatten)]
    pub systems: SystemSpecs,
    /// A read/write mix: this percentage (0 to 100) of rounds take the lock in read
    /// (shared) mode (`LockDesign::acquire_read`) and only read the storage; the rest
    /// take it in write mode (`acquire`) and read-modify-write. Each acquisition's
    /// mode is recorded (`Op::mode`). `None` (the default): every round writes and no
    /// mode is recorded, as before the knob existed. A design without a read mode
    /// refuses the read rounds (`LockError::NoReadMode`, recorded as a failed
    /// acquisition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_share: Option<u8>,
    /// The segmented stock of Dewu's article (docs/designs.md; "expand the inventory to different nodes ... like
    /// ConcurrentHashMap's segmented locks"): the stock is split into this many
    /// segments (2 to 64; [`crate::history::segment_stocks`]), segment `i` a counter of
    /// its own guarded by the lock key `<key>:<i>`. Each round a client picks a segment
    /// at random, takes that segment's lock, reads its stock and sells one unit only
    /// if any is left (a sold-out segment is read and released; the buyer tries again
    /// next round). `None` (the default): one counter under `key`, written down
    /// whatever it holds, as before the knob existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u32>,
}

/// The specs of the lock-server systems other than Redis in a [`Workload`]
/// (`Workload::systems`, flattened into it): one field per system, `None` (the
/// default) when the world does not run it. The registry (`world::registry`) maps each
/// field to its system; nothing else lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemSpecs {
    /// A ZooKeeper server or ensemble: the world of the ZooKeeper designs. With it,
    /// `servers` may be empty and a client's `Deps` carries its ensemble.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper: Option<ZkSpec>,
    /// A MySQL (MariaDB 10.11 model) server: the world of the MySQL designs. With it,
    /// `servers` may be empty and a client's `Deps` carries its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<MySqlSpec>,
    /// A MongoDB replica set: the world of the MongoDB designs. With it, `servers` may
    /// be empty and a client's `Deps` carries its members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mongo: Option<MongoSpec>,
    /// An etcd member: the world of the etcd designs. With it, `servers` may be empty
    /// and a client's `Deps` carries its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdSpec>,
}

/// The most segments a stock may be split into (`Workload::segments`).
pub const MAX_SEGMENTS: u32 = 64;

impl Default for Workload {
    fn default() -> Self {
        Self {
            clients: 8,
            key: "lock:stock".into(),
            lease_ms: 200,
            wait_ms: 300,
            work_ms: 20,
            think_ms_max: 20,
            duration_ms: 5_000,
            drain_ms: 1_000,
            response_timeout_ms: 5_000,
            initial_stock: 100_000,
            fencing: true,
            reentrant_depth: 1,
            liveness_slack_ms: 500,
            latency_ms_min: 1,
            latency_ms_max: 2,
            servers: default_servers(),
            check_validity_ms: None,
            connect_timeout_ms: default_connect_timeout(),
            sentinel: None,
            trace_commands: false,
            systems: SystemSpecs::default(),
            read_share: None,
            segments: None,
        }
    }
}

impl Workload {
    /// Checks the knobs that are no system's, naming the field and what is allowed (the
    /// registry's `Workload::validate` adds each system's part).
    pub(crate) fn validate_knobs(&self) -> Result<(), String> {
        if self.clients == 0 {
            return Err("workload.clients must be at least 1".into());
        }
        if self.lease_ms == 0 {
            return Err("workload.lease_ms must be positive".into());
        }
        if self.connect_timeout_ms == 0 {
            return Err("workload.connect_timeout_ms must be positive".into());
        }
        if let Some(share) = self.read_share
            && share > 100
        {
            return Err(format!(
                "workload.read_share={share} is a percentage of rounds: 0 to 100"
            ));
        }
        if self.read_share.is_some() && self.reentrant_depth > 1 {
            return Err(
                "workload.read_share and workload.reentrant_depth > 1 cannot be combined: \
                 nested acquisitions of a read/write mix are not modelled"
                    .into(),
            );
        }
        if let Some(n) = self.segments {
            if !(2..=MAX_SEGMENTS).contains(&n) {
                return Err(format!(
                    "workload.segments={n} splits the stock into segments: 2 to {MAX_SEGMENTS} \
                     (leave it out for one counter)"
                ));
            }
            if self.initial_stock < i64::from(n) {
                return Err(format!(
                    "workload.initial_stock={} cannot fill workload.segments={n}: every \
                     segment needs at least one unit",
                    self.initial_stock
                ));
            }
            if self.read_share.is_some() {
                return Err(
                    "workload.segments and workload.read_share cannot be combined: a read/write \
                     mix over a segmented stock is not modelled"
                        .into(),
                );
            }
        }
        if self.latency_ms_min > self.latency_ms_max {
            return Err("workload.latency_ms_min must not exceed latency_ms_max".into());
        }
        Ok(())
    }

    /// The server the Sentinels start monitoring, if there are Sentinels.
    pub fn monitored(&self) -> Option<&str> {
        super::redis::spec::monitored(&self.servers, self.sentinel.as_ref())
    }

    /// The Sentinels' host names.
    pub fn sentinel_names(&self) -> Vec<String> {
        super::redis::spec::sentinel_names(self.sentinel.as_ref())
    }
}

/// Everything one run needs.
#[derive(Clone)]
pub struct RunConfig {
    /// The seed: turmoil's RNG, every client's entropy and think times derive from it.
    pub seed: u64,
    /// The design's name, for the history.
    pub design: String,
    /// Builds the design.
    pub factory: DesignFactory,
    /// The scenario's name, for the history.
    pub scenario: String,
    /// The workload.
    pub workload: Workload,
    /// Per-client clocks (`client-1` first); missing entries are perfect clocks.
    pub client_clocks: Vec<ClockSpec>,
    /// The clock of every lock server (and helper) whose spec names none of its own.
    pub server_clock: ClockSpec,
    /// The faults.
    pub plan: FaultPlan,
    /// How the world advances through time (the same history either way).
    pub stepping: Stepping,
}

/// How a run advances simulated time. Both give the same history; `Jump` costs what
/// happens in the world, `Tick` what time passes in it (kept to measure and to check
/// the other against).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stepping {
    /// Straight to the next moment anything can happen: a message's delivery, a timer
    /// (hinted through `turmoil::time`), a fault's start or end.
    #[default]
    Jump,
    /// One millisecond at a time, every host on every tick (turmoil's own stepping).
    Tick,
}

impl Stepping {
    /// The names `--stepping` takes.
    pub const NAMES: [&'static str; 2] = ["jump", "tick"];

    /// The stepping named `name` (see [`Stepping::NAMES`]).
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "jump" => Ok(Self::Jump),
            "tick" => Ok(Self::Tick),
            other => Err(format!(
                "unknown stepping {other:?}: expected one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The simulation itself failed (a host's software returned an error).
    #[error("simulation failed at {at_ms} ms: {message}")]
    Sim {
        /// When.
        at_ms: u64,
        /// turmoil's error.
        message: String,
    },
    /// The configuration is unusable.
    #[error("invalid run configuration: {0}")]
    Config(String),
    /// The run did not finish within its wall-clock budget: something in it never
    /// yields (a design that spins, a script that never returns). Its verdicts are
    /// unknown.
    #[error(
        "run exceeded its wall-clock budget of {budget_ms} ms (a task that never yields, \
         e.g. a design that spins without awaiting); verdicts unknown"
    )]
    Budget {
        /// The budget.
        budget_ms: u64,
    },
}

pub use crate::seed::sub_seed;
