//! What a run is made of: the workload, the servers, the clocks and the fault plan.

use std::sync::Arc;

use lock_impl::{Deps, LockDesign};
use serde::{Deserialize, Serialize};

use crate::clock::ClockSpec;
use crate::faults::FaultPlan;
use crate::redis::persistence::Persistence;

/// Builds a design over a client's dependencies: any [`LockDesign`], built-in or the
/// user's own.
pub type DesignFactory = Arc<dyn Fn(Deps) -> Arc<dyn LockDesign> + Send + Sync>;

/// The factory of a built-in design, by name (its record's [`lock_impl::DesignInfo::build`];
/// the error names the allowed values).
pub fn builtin_factory(name: &str) -> Result<DesignFactory, lock_impl::LockError> {
    let info = lock_impl::design(name)?;
    Ok(Arc::new(move |deps| (info.build)(deps)))
}

/// One Redis server of the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Its host name (`redis`, `redis-2`): what faults target and events name.
    pub name: String,
    /// Its clock; `None` uses the run's `redis_clock`.
    #[serde(default)]
    pub clock: Option<ClockSpec>,
    /// What survives its crashes (default: nothing, as Redis without a snapshot).
    #[serde(default)]
    pub persistence: Persistence,
    /// `replicaof <server> 6379` in its configuration: it starts as a replica of the
    /// named server (default: a master).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_of: Option<String>,
    /// `replica-priority` (Sentinel promotes the lowest non-zero; 0 never).
    #[serde(default = "default_priority")]
    pub replica_priority: u64,
    /// `min-replicas-to-write` (0: off).
    #[serde(default)]
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`, seconds.
    #[serde(default = "default_max_lag")]
    pub min_replicas_max_lag_s: u64,
}

fn default_priority() -> u64 {
    100
}

fn default_max_lag() -> u64 {
    10
}

impl ServerSpec {
    /// A server called `name` with the run's default clock.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            clock: None,
            persistence: Persistence::None,
            replica_of: None,
            replica_priority: default_priority(),
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: default_max_lag(),
        }
    }
}

/// Sentinels watching the world's master (`sentinel-1` … `sentinel-N`, port 26379).
/// Clients then find the master by asking them, as a Sentinel-aware client does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentinelSpec {
    /// How many Sentinels.
    #[serde(default = "default_sentinels")]
    pub count: u32,
    /// The name they monitor the master under.
    #[serde(default = "default_master_name")]
    pub master_name: String,
    /// The server they start monitoring (default: the first server that replicates
    /// from nobody).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Sentinels that must agree the master is down.
    #[serde(default = "default_quorum")]
    pub quorum: u32,
    /// `down-after-milliseconds` (Redis's default is 30000; scenarios use less so a
    /// failover fits a short run).
    pub down_after_ms: u64,
    /// `failover-timeout` (Redis's default is 180000).
    pub failover_timeout_ms: u64,
    /// `parallel-syncs`.
    #[serde(default = "default_parallel_syncs")]
    pub parallel_syncs: u32,
}

fn default_sentinels() -> u32 {
    3
}
fn default_master_name() -> String {
    "mymaster".into()
}
fn default_quorum() -> u32 {
    2
}
fn default_parallel_syncs() -> u32 {
    1
}

impl Default for SentinelSpec {
    fn default() -> Self {
        Self {
            count: default_sentinels(),
            master_name: default_master_name(),
            monitor: None,
            quorum: default_quorum(),
            down_after_ms: 30_000,
            failover_timeout_ms: 180_000,
            parallel_syncs: default_parallel_syncs(),
        }
    }
}

fn default_connect_timeout() -> u64 {
    lock_impl::ReconnectPolicy::default().connect_timeout_ms
}

/// The default topology: one server called `redis`.
pub fn default_servers() -> Vec<ServerSpec> {
    vec![ServerSpec::named("redis")]
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
/// default) when the world does not run it. A system's [`super::system::SystemInfo`]
/// reads and writes its field; nothing else lists them.
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
    pub etcd: Option<super::etcd::EtcdSpec>,
}

/// The world's MySQL server: its host name and the account clients log in with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MySqlSpec {
    /// Its host name (`mysql-1`).
    pub name: String,
    /// The user clients log in as.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The database.
    pub database: String,
    /// The server's global `wait_timeout`, seconds: a connection idle that long is
    /// closed (with its `GET_LOCK`s). MariaDB's default, 28800, unless set.
    #[serde(
        default = "default_wait_timeout_s",
        skip_serializing_if = "is_default_wait_timeout"
    )]
    pub wait_timeout_s: u64,
    /// `innodb_flush_log_at_trx_commit`: 1 (MariaDB's default) flushes the redo log
    /// at every commit, so a crash loses no committed transaction; 2 writes it to the
    /// operating system at every commit and flushes it once a second, so a machine
    /// crash loses up to a second of commits (a crash of mysqld alone, none); 0 writes
    /// and flushes once a second, so any crash loses up to a second; 3 flushes at
    /// prepare and at commit (as durable as 1). Anything else is refused.
    #[serde(
        default = "default_flush_log_at_trx_commit",
        skip_serializing_if = "is_default_flush_log_at_trx_commit"
    )]
    pub innodb_flush_log_at_trx_commit: u8,
    /// An asynchronous replica and the failover that promotes it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<MySqlReplicaSpec>,
}

/// A MySQL replica of the world's server, replicating asynchronously (the binlog's row
/// events reach it `lag_ms` after their commit, unless the primary is down by then),
/// and an orchestrator (as orchestrator or MHA does it) that promotes it once the
/// primary has been down `failover_after_ms`, re-pointing the clients' address (a
/// virtual IP) at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MySqlReplicaSpec {
    /// Its host name (`mysql-2`).
    pub name: String,
    /// How long a committed change takes to reach it, ms.
    pub lag_ms: u64,
    /// How long the primary must be down before the promotion, ms.
    pub failover_after_ms: u64,
}

impl Default for MySqlReplicaSpec {
    fn default() -> Self {
        MySqlReplicaSpec {
            name: "mysql-2".into(),
            lag_ms: 10,
            failover_after_ms: 1_000,
        }
    }
}

fn default_wait_timeout_s() -> u64 {
    28_800
}

fn is_default_wait_timeout(s: &u64) -> bool {
    *s == default_wait_timeout_s()
}

fn default_flush_log_at_trx_commit() -> u8 {
    1
}

fn is_default_flush_log_at_trx_commit(v: &u8) -> bool {
    *v == default_flush_log_at_trx_commit()
}

impl Default for MySqlSpec {
    fn default() -> Self {
        MySqlSpec {
            name: "mysql-1".into(),
            user: "locksim".into(),
            password: "locksim".into(),
            database: "locksim".into(),
            wait_timeout_s: default_wait_timeout_s(),
            innodb_flush_log_at_trx_commit: default_flush_log_at_trx_commit(),
            replica: None,
        }
    }
}

/// The world's MongoDB replica set (the MongoDB 7.0 model of `crate::mongo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MongoSpec {
    /// Its members' host names, in configuration order (`mongo-1` … `mongo-3`).
    pub members: Vec<String>,
    /// `replSetName`.
    pub set_name: String,
    /// The database the locks live in.
    pub database: String,
    /// `heartbeatIntervalMillis`: 200 (MongoDB's default is 2 000; scaled down with the
    /// election timeout, as the Sentinel worlds scale `down-after-milliseconds`, so a
    /// failover takes about a second and a run stays short).
    pub heartbeat_ms: u64,
    /// `electionTimeoutMillis`: 1 000 (MongoDB's default is 10 000).
    pub election_timeout_ms: u64,
}

impl Default for MongoSpec {
    fn default() -> Self {
        MongoSpec {
            members: (1..=3).map(|i| format!("mongo-{i}")).collect(),
            set_name: "rs0".into(),
            database: "locksim".into(),
            heartbeat_ms: 200,
            election_timeout_ms: 1_000,
        }
    }
}

/// The world's ZooKeeper servers: one standalone server (the model of
/// `crate::zk::server`), or an ensemble of 3 or 5 (`crate::zk::ensemble`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZkSpec {
    /// The first server's host name (`zk-1`); an ensemble's are `zk-1` … `zk-N`.
    pub name: String,
    /// How many servers: 1 (standalone, the default), 3 or 5 (an ensemble).
    #[serde(default = "one_server", skip_serializing_if = "is_one_server")]
    pub servers: u8,
    /// The model's `tickTime`, ms: sessions may last 2 to 20 ticks.
    pub tick_time_ms: u32,
    /// The session timeout each client asks for, ms (the server clamps it to
    /// [2, 20] × `tick_time_ms`).
    pub session_timeout_ms: u32,
}

impl ZkSpec {
    /// The world's server for a lease of `lease_ms`: `zk-1` with a `tickTime` of a
    /// quarter lease between 50 ms and ZooKeeper's default 2,000 ms (50 ms for the
    /// catalog's 200 ms lease; 2,000 ms for a real 30 s lease), and a session timeout of
    /// 1.5 leases (300 ms for the catalog's lease), so that a client fault of 2 leases or
    /// more outlasts the session, bucket rounding included; the server clamps it to
    /// `[2, 20]` ticks (a 30 s lease asks 45 s and gets 40 s, as Curator's default 60 s
    /// would against a default server).
    pub fn for_lease(lease_ms: u64) -> ZkSpec {
        let tick_time_ms = (lease_ms / 4).clamp(50, 2_000) as u32;
        let tick = u64::from(tick_time_ms);
        let session = (lease_ms * 3 / 2).clamp(2 * tick, 20 * tick) as u32;
        ZkSpec {
            name: "zk-1".into(),
            servers: 1,
            tick_time_ms,
            session_timeout_ms: session,
        }
    }

    /// [`ZkSpec::for_lease`] as an ensemble of three servers, `zk-1` to `zk-3`.
    pub fn ensemble_for_lease(lease_ms: u64) -> ZkSpec {
        ZkSpec {
            servers: 3,
            ..Self::for_lease(lease_ms)
        }
    }

    /// The servers' host names.
    pub fn names(&self) -> Vec<String> {
        if self.servers <= 1 {
            vec![self.name.clone()]
        } else {
            (1..=self.servers).map(|i| format!("zk-{i}")).collect()
        }
    }
}

fn one_server() -> u8 {
    1
}

fn is_one_server(n: &u8) -> bool {
    *n == 1
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
    /// This workload with the system behind `backend` in the lock's place: every other
    /// system goes, and the world gets that system's default for its lease unless it
    /// names its own (a ZooKeeper ensemble of three at the lease's `tickTime`, a MySQL
    /// server, a MongoDB replica set). The client faults and targets (`lock-server`,
    /// `all-servers`...) then reach that system instead of the one Redis master. A
    /// Redis workload is returned as it is.
    pub fn on_system(mut self, backend: lock_impl::Backend) -> Workload {
        if backend == lock_impl::Backend::Redis {
            return self;
        }
        for other in super::system::SYSTEMS {
            if other.backend != backend {
                (other.remove)(&mut self);
            }
        }
        if let Some(system) = super::system::info(backend) {
            (system.install)(&mut self);
        }
        self
    }

    /// The lock-server systems this workload names, in world order (the order the world
    /// builds them): Redis if it names Redis servers or Sentinels, then each other
    /// system whose field it sets.
    pub fn systems(&self) -> Vec<lock_impl::Backend> {
        super::system::SYSTEMS
            .iter()
            .filter(|s| (s.spec)(self).is_some())
            .map(|s| s.backend)
            .collect()
    }

    /// Checks the knobs, naming the field and what is allowed.
    pub fn validate(&self) -> Result<(), RunError> {
        let bad = |msg: String| Err(RunError::Config(msg));
        if self.clients == 0 {
            return bad("workload.clients must be at least 1".into());
        }
        if self.lease_ms == 0 {
            return bad("workload.lease_ms must be positive".into());
        }
        if self.connect_timeout_ms == 0 {
            return bad("workload.connect_timeout_ms must be positive".into());
        }
        if let Some(share) = self.read_share
            && share > 100
        {
            return bad(format!(
                "workload.read_share={share} is a percentage of rounds: 0 to 100"
            ));
        }
        if self.read_share.is_some() && self.reentrant_depth > 1 {
            return bad(
                "workload.read_share and workload.reentrant_depth > 1 cannot be combined: \
                 nested acquisitions of a read/write mix are not modelled"
                    .into(),
            );
        }
        if let Some(n) = self.segments {
            if !(2..=MAX_SEGMENTS).contains(&n) {
                return bad(format!(
                    "workload.segments={n} splits the stock into segments: 2 to {MAX_SEGMENTS} \
                     (leave it out for one counter)"
                ));
            }
            if self.initial_stock < i64::from(n) {
                return bad(format!(
                    "workload.initial_stock={} cannot fill workload.segments={n}: every \
                     segment needs at least one unit",
                    self.initial_stock
                ));
            }
            if self.read_share.is_some() {
                return bad(
                    "workload.segments and workload.read_share cannot be combined: a read/write \
                     mix over a segmented stock is not modelled"
                        .into(),
                );
            }
            let others = super::system::other_systems(self);
            if !others.is_empty() {
                return bad(format!(
                    "workload.segments needs Redis servers: the {} world follows one lock key",
                    others.join(" and ")
                ));
            }
        }
        if self.latency_ms_min > self.latency_ms_max {
            return bad("workload.latency_ms_min must not exceed latency_ms_max".into());
        }
        for system in super::system::SYSTEMS {
            (system.validate)(self).map_err(RunError::Config)?;
        }
        if self.servers.is_empty() && super::system::other_systems(self).is_empty() {
            return bad("workload.servers must name at least one Redis server".into());
        }
        for (i, s) in self.servers.iter().enumerate() {
            let reserved = s.name == "storage"
                || s.name.starts_with("client-")
                || s.name.starts_with("sentinel-")
                || s.name.is_empty()
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if reserved {
                return bad(format!(
                    "workload.servers[{i}].name '{}' is not allowed: use letters, digits, '-' \
                     or '_', and not 'storage', 'client-N' or 'sentinel-N'",
                    s.name
                ));
            }
            if let Some(master) = &s.replica_of
                && (master == &s.name || !self.servers.iter().any(|o| &o.name == master))
            {
                return bad(format!(
                    "workload.servers[{i}].replica_of '{master}' must name another server of \
                     workload.servers"
                ));
            }
            if self.servers[..i].iter().any(|o| o.name == s.name) {
                return bad(format!(
                    "workload.servers[{i}].name '{}' is used twice",
                    s.name
                ));
            }
        }
        if let Some(sn) = &self.sentinel {
            if sn.count == 0 {
                return bad("workload.sentinel.count must be at least 1".into());
            }
            if sn.quorum == 0 || sn.quorum > sn.count {
                return bad(format!(
                    "workload.sentinel.quorum must be between 1 and workload.sentinel.count ({})",
                    sn.count
                ));
            }
            if sn.down_after_ms == 0 || sn.failover_timeout_ms == 0 {
                return bad(
                    "workload.sentinel.down_after_ms and failover_timeout_ms must be positive"
                        .into(),
                );
            }
            if sn.master_name.is_empty() || sn.master_name.contains([' ', ',']) {
                return bad(format!(
                    "workload.sentinel.master_name '{}' must be non-empty, without spaces or commas",
                    sn.master_name
                ));
            }
            if let Some(m) = &sn.monitor
                && !self.servers.iter().any(|s| &s.name == m)
            {
                return bad(format!(
                    "workload.sentinel.monitor '{m}' must name a server of workload.servers"
                ));
            }
            if self.monitored().is_none() {
                return bad(
                    "workload.sentinel needs a master to monitor: a server without replica_of"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The server the Sentinels start monitoring, if there are Sentinels.
    pub fn monitored(&self) -> Option<&str> {
        let sn = self.sentinel.as_ref()?;
        match &sn.monitor {
            Some(m) => Some(m.as_str()),
            None => self
                .servers
                .iter()
                .find(|s| s.replica_of.is_none())
                .map(|s| s.name.as_str()),
        }
    }

    /// The Sentinels' host names.
    pub fn sentinel_names(&self) -> Vec<String> {
        let n = self.sentinel.as_ref().map_or(0, |s| s.count);
        (1..=n).map(|i| format!("sentinel-{i}")).collect()
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
    /// The clock of every Redis server whose spec names none.
    pub redis_clock: ClockSpec,
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
