//! The world's MySQL server: its host (the MariaDB model of `crate::mysql`, every
//! accepted connection wrapped by the link-fault registry as a Redis server's is, so
//! a crashed client's or a reset link's connections end on both sides and the server
//! releases what they held) and the observation that moves its record into the
//! history.
//!
//! Recorded as server events, at true time: every connection logged in and ended
//! (`MySqlConnection`, with the user locks its end released), and the lock as the
//! server's record says it is held, in the terms every checker reads:
//! - `mysql-unique-index` and the other row designs (a table with an `owner` column): a
//!   committed row named by the key is the key's value (its `owner`): `Written` by the
//!   inserting connection's host, `Removed` (`command`) by the deleting one's; an
//!   `UPDATE` that changes the owner is a takeover, which the designs only make of a
//!   row whose `expires_at` the taker's clock has passed: `Removed` (`expired`, by
//!   `expiry`: the lease ran out, by a client's clock) then `Written`; one that empties
//!   the owner (a release that keeps the row) `Removed` (`command`);
//! - `mysql-for-update`: the row lock on the key's row, held by a transaction, is the
//!   key's value `connection-<id>` (the holding connection, as the guard names it):
//!   `Written` when locked, `Removed` (`command`) when its transaction ended, `Removed`
//!   (`connection-closed`) when its connection ended and rolled it back;
//! - `mysql-get-lock`: the user lock named by the key is the key's value
//!   `connection-<id>` (the holder's connection, which the design's guard names too):
//!   `Written` when taken, `Removed` (`command`) on `RELEASE_LOCK`, `Removed`
//!   (`connection-closed`, by `connection-closed`) when its connection ended;
//! - a server that crashed keeps what `innodb_flush_log_at_trx_commit` made durable
//!   and recovers it when it starts again: at that start `MySqlRestart` (what the
//!   crash cost, in words), then `Removed` (`lost`, by the server) for a lock its
//!   record held that did not come back and `Written` (by the server) for a lock row
//!   that came back (its removal was not flushed). Nothing is recorded at the crash:
//!   a server that never restarts (the failover world's primary) has no record to
//!   compare.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::history::{EventKind, ServerEvent};
use crate::mysql::innodb::BinlogEvent;
use crate::mysql::{ConnId, MYSQL_PORT, MySqlConfig, ServerEvent as MyEvent, SharedMySql};
use crate::recorder::Recorder;

mod host;
pub mod spec;
mod vip;

use self::spec::{MySqlReplicaSpec, MySqlSpec};
use super::system::{
    Build, ClientHooks, LockSystem, LockWrite, SystemInfo, SystemReach, SystemSpec, WorkloadPart,
    WriteMoment,
};
use crate::pause::PauseGate;
use crate::seed::{stream, sub_seed};
use host::{Host, Recovered, locked};

/// What a MySQL world has (see [`crate::system`]): a server that pauses, crashes and
/// recovers what its redo log kept, locks owned by connections it can end, and an
/// asynchronous replica promoted behind the clients' address.
pub const MYSQL_CAPABILITIES: &[crate::system::Capability] = &[
    crate::system::Capability::LockServer,
    crate::system::Capability::ServingAtStart,
    crate::system::Capability::ConnectionLocks,
    crate::system::Capability::AsyncReplicaPromotion,
    crate::system::Capability::RedoLogRecovery,
];

/// The owner value of a `GET_LOCK` held by connection `id` (the guard's owner too).
pub fn get_lock_owner(id: ConnId) -> String {
    lock_impl::designs::get_lock_owner(id)
}

/// Set while the primary's host runs; cleared when turmoil drops its software (a
/// crash), which is how the replica's IO thread and the orchestrator notice it is gone.
struct Up(Arc<AtomicBool>);

impl Drop for Up {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The MySQL hosts' handle: the running servers (a primary, and a replica if the world
/// has one), the address clients dial, and what the observer has seen.
pub(crate) struct MySqlCtl {
    pub name: String,
    primary: Host,
    replica: Option<Host>,
    /// The host the clients' address points at: the primary, until a failover.
    vip: Arc<Mutex<String>>,
    key: String,
    /// (server, connection) → client host.
    hosts: BTreeMap<(String, ConnId), String>,
    /// The key's holder by each server's record: server → (value, host, the write's
    /// number among all recorded writes).
    holders: BTreeMap<String, (String, String, u64)>,
    /// Writes of the key recorded so far (on any server).
    writes: u64,
    /// When each server's record took its current holder (µs of true time), and
    /// whether the hold is a connection's (a `GET_LOCK`, a row lock) rather than a
    /// committed row.
    held_at: BTreeMap<String, (u64, bool)>,
    /// Whether the replica's role was recorded yet.
    role_recorded: bool,
    /// `innodb_flush_log_at_trx_commit`, as the restart's record names it.
    flush_setting: u8,
}

impl MySqlCtl {
    pub fn new(spec: &MySqlSpec, key: &str) -> Self {
        MySqlCtl {
            name: spec.name.clone(),
            primary: Host::new(&spec.name),
            replica: spec.replica.as_ref().map(|r| Host::new(&r.name)),
            vip: Arc::new(Mutex::new(spec.name.clone())),
            key: key.to_string(),
            hosts: BTreeMap::new(),
            holders: BTreeMap::new(),
            writes: 0,
            held_at: BTreeMap::new(),
            role_recorded: false,
            flush_setting: spec.innodb_flush_log_at_trx_commit,
        }
    }

    /// Every MySQL host's name.
    pub fn names(&self) -> Vec<String> {
        std::iter::once(self.name.clone())
            .chain(self.replica.iter().map(|r| r.name.clone()))
            .collect()
    }

    /// The address clients dial: the primary's name, re-pointed by a failover.
    pub fn vip(&self) -> Arc<Mutex<String>> {
        self.vip.clone()
    }

    /// Adds the hosts to the simulation, each on its clock and under its pause gate.
    fn add_hosts(&self, b: &mut Build<'_, '_>, spec: &MySqlSpec) {
        let seed = sub_seed(b.seed, stream::MYSQL);
        let config = MySqlConfig {
            user: spec.user.clone(),
            password: spec.password.clone(),
            database: spec.database.clone(),
            seed,
            wait_timeout_s: spec.wait_timeout_s,
            flush_log_at_trx_commit: spec.innodb_flush_log_at_trx_commit,
            ..MySqlConfig::default()
        };
        *locked(&self.primary.clock) = Some((b.clock_of)(&self.primary.name, b.server_clock));
        let up = Arc::new(AtomicBool::new(false));
        let (primary, net1, config1, up1) = (
            self.primary.clone(),
            b.net.clone(),
            config.clone(),
            up.clone(),
        );
        b.sim.host(spec.name.as_str(), move || {
            let (primary, net, config, up) =
                (primary.clone(), net1.clone(), config1.clone(), up1.clone());
            let gate = primary.gate.clone();
            gate.wrap(async move {
                up.store(true, Ordering::SeqCst);
                let _up = Up(up);
                let shared = primary.start(config);
                primary.serve(shared, net).await
            })
        });
        let (Some(replica), Some(rspec)) = (self.replica.clone(), spec.replica.clone()) else {
            return;
        };
        *locked(&replica.clock) = Some((b.clock_of)(&replica.name, b.server_clock));
        let (primary, vip, net) = (self.primary.clone(), self.vip.clone(), b.net.clone());
        let config = MySqlConfig {
            seed: seed ^ stream::MYSQL_REPLICA_MASK,
            ..config
        };
        let replica_name = rspec.name.clone();
        b.sim.host(replica_name.as_str(), move || {
            let (primary, replica, vip, net, config, up, rspec) = (
                primary.clone(),
                replica.clone(),
                vip.clone(),
                net.clone(),
                config.clone(),
                up.clone(),
                rspec.clone(),
            );
            let gate = replica.gate.clone();
            gate.clone().wrap(async move {
                let shared = replica.on_clock(SharedMySql::new(config));
                tokio::task::spawn_local(gate.wrap(replicate(
                    primary,
                    shared.clone(),
                    up,
                    vip,
                    replica.name.clone(),
                    rspec,
                )));
                replica.serve(shared, net).await
            })
        });
    }

    /// Whether the current primary's record has the lock held.
    pub fn holds(&self) -> bool {
        self.holders.contains_key(&self.current())
    }

    /// The lock holder's host, by the current primary's record.
    pub fn owner(&self) -> Option<&str> {
        self.holders
            .get(&self.current())
            .map(|(_, h, _)| h.as_str())
    }

    /// The host the clients' address points at.
    fn current(&self) -> String {
        self.vip.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The primary and its grant's number, if it holds the lock by its record while
    /// its replica's record lacks that value (a grant not yet replicated): the moment a
    /// crash loses the lock.
    pub fn unreplicated_lock_master(&self) -> Option<(String, u64)> {
        let replica = self.replica.as_ref()?;
        let (value, _, write) = self.holders.get(&self.name)?;
        let copied = self
            .holders
            .get(&replica.name)
            .is_some_and(|(v, _, _)| v == value);
        (self.current() == self.name && !copied).then(|| (self.name.clone(), *write))
    }

    /// The server the clients' address points at and its grant's number, if its
    /// record holds the lock (a `fresh-lock-master` target waits for a grant made
    /// after it was armed).
    pub fn fresh_lock_master(&self) -> Option<(String, u64)> {
        let current = self.current();
        let (_, _, write) = self.holders.get(&current)?;
        Some((current, *write))
    }

    /// Moves the servers' new events into the history at `now`.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        let at = now.as_micros() as u64;
        if let Some(replica) = &self.replica
            && !self.role_recorded
        {
            self.role_recorded = true;
            recorder.record_at(
                at,
                &replica.name,
                EventKind::Server(ServerEvent::Role {
                    role: format!("replica of {}", self.name),
                }),
            );
        }
        let hosts: Vec<Host> = std::iter::once(self.primary.clone())
            .chain(self.replica.clone())
            .collect();
        for host in hosts {
            let recovered = locked(&host.recovered).take();
            if let (Some(r), Some(shared)) = (recovered, host.shared()) {
                let now = shared.with(|m| m.lock_row(&self.key));
                self.recovered(recorder, at, &host.name, r, now);
            }
            if let Some(shared) = host.shared() {
                let events = shared.with(|m| m.take_events());
                self.observe(recorder, at, &host.name, events);
            }
        }
    }

    /// Records one server's events.
    fn observe(&mut self, recorder: &Recorder, at: u64, server: &str, events: Vec<MyEvent>) {
        let record = |kind: ServerEvent| recorder.record_at(at, server, EventKind::Server(kind));
        // A change the replication thread (connection 0) applied was made on the
        // primary: its writer is recorded as the primary, as a Redis replica's is.
        let primary = self.name.clone();
        let host_of = |hosts: &BTreeMap<(String, ConnId), String>, conn: ConnId| {
            if conn == 0 {
                primary.clone()
            } else {
                hosts
                    .get(&(server.to_string(), conn))
                    .cloned()
                    .unwrap_or_default()
            }
        };
        for event in events {
            match event {
                MyEvent::Connected { conn, host } => {
                    self.hosts.insert((server.to_string(), conn), host.clone());
                    record(ServerEvent::MySqlConnection {
                        connection: conn,
                        client: host,
                        event: "opened".into(),
                        released: Vec::new(),
                        row_locks: Vec::new(),
                    });
                }
                MyEvent::Disconnected {
                    conn,
                    host,
                    released,
                    row_locks,
                } => {
                    let lost = released.contains(&self.key) || row_locks.contains(&self.key);
                    record(ServerEvent::MySqlConnection {
                        connection: conn,
                        client: host.clone(),
                        event: "closed".into(),
                        released,
                        row_locks,
                    });
                    if lost {
                        self.set_holder(recorder, at, server, None, "connection-closed");
                    }
                }
                MyEvent::Promoted => {
                    record(ServerEvent::Role {
                        role: "master".into(),
                    });
                }
                MyEvent::Inserted {
                    conn,
                    name,
                    owner: Some(owner),
                    ..
                } if name == self.key => {
                    let host = host_of(&self.hosts, conn);
                    self.set_holder(recorder, at, server, Some((owner, host)), "command");
                }
                MyEvent::Deleted {
                    conn,
                    name,
                    owner: Some(_),
                    ..
                } if name == self.key => {
                    let by = host_of(&self.hosts, conn);
                    self.set_holder(recorder, at, server, None, &by);
                }
                MyEvent::Updated {
                    conn,
                    name,
                    before: Some(before),
                    owner: Some(owner),
                    ..
                } if name == self.key && before != owner => {
                    let by = host_of(&self.hosts, conn);
                    if owner.is_empty() {
                        // A release that keeps the row.
                        self.set_holder(recorder, at, server, None, &by);
                    } else {
                        if !before.is_empty() {
                            self.set_holder(recorder, at, server, None, "expiry");
                        }
                        self.set_holder(recorder, at, server, Some((owner, by)), "command");
                    }
                }
                MyEvent::LockTaken { conn, name } if name == self.key => {
                    let host = host_of(&self.hosts, conn);
                    let value = get_lock_owner(conn);
                    self.set_holder(recorder, at, server, Some((value, host)), "command");
                    self.held_at.insert(server.to_string(), (at, true));
                }
                MyEvent::RowLocked { conn, name, .. } if name == self.key => {
                    let host = host_of(&self.hosts, conn);
                    let value = get_lock_owner(conn);
                    self.set_holder(recorder, at, server, Some((value, host)), "command");
                    self.held_at.insert(server.to_string(), (at, true));
                }
                MyEvent::LockReleased { conn, name } | MyEvent::RowUnlocked { conn, name, .. }
                    if name == self.key =>
                {
                    let by = host_of(&self.hosts, conn);
                    self.set_holder(recorder, at, server, None, &by);
                }
                _ => {}
            }
        }
    }

    /// Records the end of the current hold (`how`: the releasing host,
    /// `connection-closed`, or `expiry`) and the start of `next`.
    fn set_holder(
        &mut self,
        recorder: &Recorder,
        at: u64,
        server: &str,
        next: Option<(String, String)>,
        how: &str,
    ) {
        if let Some((value, host, _)) = self.holders.remove(server)
            && next.is_none()
        {
            let (by, cause) = if how == "connection-closed" {
                ("connection-closed".to_string(), "connection-closed")
            } else if how == "expiry" {
                ("expiry".to_string(), "expired")
            } else if how == "command" {
                (host, "command")
            } else {
                (how.to_string(), "command")
            };
            recorder.record_at(
                at,
                server,
                EventKind::Server(ServerEvent::Removed {
                    by,
                    key: self.key.clone(),
                    value,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((value, host)) = &next {
            recorder.record_at(
                at,
                server,
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key: self.key.clone(),
                    value: value.clone(),
                }),
            );
        }
        if let Some((value, host)) = next {
            self.writes += 1;
            self.holders
                .insert(server.to_string(), (value, host, self.writes));
            self.held_at.insert(server.to_string(), (at, false));
        }
    }

    /// `host` crashed (its machine, with `machine`): its server's durable state is
    /// kept for its restart. Nothing is recorded yet: what the crash cost shows when
    /// the server recovers (a server that never restarts has no record to compare).
    pub fn crashed(&self, host: &str, machine: bool, now: Duration) {
        for h in std::iter::once(&self.primary).chain(self.replica.as_ref()) {
            if h.name == host {
                h.crashed(machine, now);
            }
        }
    }

    /// A server recovered from a crash: its record is compared with what recovery
    /// found. A lock its record held that did not come back (a row whose commit was
    /// not yet flushed, or a connection's lock: a restart has no connection) is
    /// `Removed` by the server (`lost`); a lock row that came back though its record
    /// had it gone or another's (a release or takeover that was not flushed) is
    /// `Written` by the server. `MySqlRestart` says why.
    fn recovered(
        &mut self,
        recorder: &Recorder,
        at: u64,
        server: &str,
        r: Recovered,
        now: Option<String>,
    ) {
        let setting = self.flush_setting;
        let held = self.holders.get(server).map(|(v, _, _)| v.clone());
        let (held_at, scoped) = self.held_at.get(server).copied().unwrap_or((0, false));
        let crash = if r.machine { "machine crash" } else { "crash" };
        let flushed = match r.flushed_at_us {
            Some(t) => format!("the last flush at {}", fmt_s(t)),
            None => "no flush since it started".to_string(),
        };
        let mut why = format!(
            "restarted after a {crash} at {} (innodb_flush_log_at_trx_commit={setting}, {flushed}; {} committed log entries lost)",
            fmt_s(r.crash_at_us),
            r.lost
        );
        let kept = held.is_some() && held == now;
        match (&held, kept) {
            (Some(v), true) => why.push_str(&format!(
                " and kept the lock row committed at {} (owner={v})",
                fmt_s(held_at)
            )),
            (Some(v), false) if scoped => why.push_str(&format!(
                " and lost the lock {v} took at {}: a lock of a connection, and a restart has no connection",
                fmt_s(held_at)
            )),
            (Some(v), false) => why.push_str(&format!(
                " and lost the lock row committed at {} (owner={v}): innodb_flush_log_at_trx_commit={setting} had not flushed it",
                fmt_s(held_at)
            )),
            (None, _) => {}
        }
        if let Some(n) = &now
            && !kept
        {
            why.push_str(&format!(
                "; the lock row owner={n} came back: its removal had not been flushed"
            ));
        }
        recorder.record_at(
            at,
            server,
            EventKind::Server(ServerEvent::MySqlRestart {
                flush_log_at_trx_commit: setting,
                machine: r.machine,
                lost_commits: r.lost as u64,
                held: held.clone(),
                kept,
                detail: why,
            }),
        );
        if kept {
            return;
        }
        if let Some(value) = held {
            self.holders.remove(server);
            self.held_at.remove(server);
            recorder.record_at(
                at,
                server,
                EventKind::Server(ServerEvent::Removed {
                    by: server.to_string(),
                    key: self.key.clone(),
                    value,
                    cause: "lost".into(),
                }),
            );
        }
        if let Some(value) = now {
            self.set_holder(
                recorder,
                at,
                server,
                Some((value, server.to_string())),
                "command",
            );
        }
    }
}

/// Seconds with milliseconds, as the checkers' evidence writes times.
fn fmt_s(us: u64) -> String {
    format!("{}.{:03} s", us / 1_000_000, (us % 1_000_000) / 1_000)
}

/// The replica's replication and the orchestrator, on the replica's host: every
/// millisecond, while the primary is up, the binlog events it committed since are
/// taken to arrive `lag_ms` later and are applied then; when the primary goes down,
/// whatever had not arrived is lost. Once the primary has been down
/// `failover_after_ms`, the replica is promoted and the clients' address re-pointed at
/// it (as orchestrator or MHA does it); replication stops.
async fn replicate(
    primary: Host,
    replica: SharedMySql,
    up: Arc<AtomicBool>,
    vip: Arc<Mutex<String>>,
    name: String,
    spec: MySqlReplicaSpec,
) {
    let lag = Duration::from_millis(spec.lag_ms);
    let mut read = 0;
    let mut in_flight: VecDeque<(Duration, BinlogEvent)> = VecDeque::new();
    let mut down_since: Option<Duration> = None;
    loop {
        turmoil::time::sleep(Duration::from_millis(1)).await;
        let now = turmoil::sim_elapsed().unwrap_or_default();
        if up.load(Ordering::SeqCst) {
            down_since = None;
            // A paused primary sends nothing (its binlog dump thread is frozen too).
            if primary.gate.paused_until().is_none()
                && let Some(p) = primary.shared()
            {
                let new = p.with(|m| m.binlog_from(read));
                read += new.len();
                in_flight.extend(new.into_iter().map(|e| (now + lag, e)));
            }
        } else {
            // The primary is gone: what it had sent but not yet delivered is lost
            // with it (asynchronous replication waits for no replica).
            in_flight.clear();
            let since = *down_since.get_or_insert(now);
            if now.saturating_sub(since) >= Duration::from_millis(spec.failover_after_ms) {
                replica.with(|m| m.promote());
                *vip.lock().unwrap_or_else(|e| e.into_inner()) = name;
                return;
            }
        }
        while in_flight.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, event)) = in_flight.pop_front() {
                replica.with(|m| m.apply(&event));
            }
        }
    }
}

impl SystemSpec for MySqlSpec {
    fn host_names(&self) -> Vec<String> {
        std::iter::once(self.name.clone())
            .chain(self.replica.iter().map(|r| r.name.clone()))
            .collect()
    }

    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let ctl = MySqlCtl::new(self, b.key);
        ctl.add_hosts(b, self);
        Box::new(ctl)
    }

    fn client_deps(&self, deps: &mut lock_impl::Deps, reach: &SystemReach) {
        deps.systems.insert(lock_impl::mysql::MySqlServer {
            host: self.name.clone(),
            port: MYSQL_PORT,
            user: self.user.clone(),
            password: self.password.clone(),
            database: self.database.clone(),
            dialer: match &reach.primary_address {
                Some(vip) => Arc::new(vip::VipDialer {
                    inner: reach.dialer.clone(),
                    name: self.name.clone(),
                    vip: vip.clone(),
                }),
                None => reach.dialer.clone(),
            },
            timeout_ms: reach.response_timeout_ms,
        });
    }
}

impl LockSystem for MySqlCtl {
    fn hosts(&self) -> Vec<String> {
        self.names()
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        std::iter::once(&self.primary)
            .chain(self.replica.as_ref())
            .find(|h| h.name == host)
            .map(|h| h.gate.clone())
    }

    fn lock_owner(&self, _key: &str) -> Option<String> {
        self.owner().map(String::from)
    }

    fn lock_server(&self, _key: &str) -> Option<String> {
        self.holds().then(|| self.name.clone())
    }

    fn lock_writers(&self, key: &str) -> Vec<String> {
        self.lock_owner(key).into_iter().collect()
    }

    fn lock_write(
        &self,
        _key: &str,
        recorder: &Recorder,
        moment: WriteMoment,
    ) -> Option<LockWrite> {
        let (server, position) = match moment {
            WriteMoment::Unreplicated => self.unreplicated_lock_master()?,
            // In hand: the history shows its writer holding it.
            WriteMoment::Fresh => self.fresh_lock_master().filter(|_| {
                self.owner()
                    .is_some_and(|w| recorder.holders().iter().any(|h| h == w))
            })?,
        };
        Some(LockWrite {
            server,
            detail: String::new(),
            position,
        })
    }

    fn crashed(&mut self, host: &str, machine: bool, now: Duration, _recorder: &Recorder) {
        MySqlCtl::crashed(self, host, machine, now);
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        MySqlCtl::drain(self, recorder, now);
    }

    fn client_hooks(&self) -> ClientHooks {
        ClientHooks {
            ready: None,
            primary_address: self.replica.is_some().then(|| self.vip()),
        }
    }
}

/// MySQL's record: `SystemSpecs::mysql` (the workload's `mysql`), by default
/// [`MySqlSpec::default`].
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::MySql,
    capabilities: MYSQL_CAPABILITIES,
};

impl WorkloadPart for MySqlSpec {
    fn default_for_lease(_lease_ms: u64) -> Self {
        MySqlSpec::default()
    }

    fn validate(&self) -> Result<(), String> {
        if !crate::mysql::server::FLUSH_LOG_AT_TRX_COMMIT
            .contains(&self.innodb_flush_log_at_trx_commit)
        {
            return Err(format!(
                "workload.mysql.innodb_flush_log_at_trx_commit={} is not one of MariaDB's \
                 values: 0 (write and flush once a second), 1 (the default: flush at every \
                 commit), 2 (write at commit, flush once a second) or 3 (flush at prepare \
                 and commit)",
                self.innodb_flush_log_at_trx_commit
            ));
        }
        Ok(())
    }
}
