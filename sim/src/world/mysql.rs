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
//!   (`connection-closed`, by `connection-closed`) when its connection ended.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::history::{EventKind, ServerEvent};
use crate::mysql::innodb::BinlogEvent;
use crate::mysql::{
    ConnId, MYSQL_PORT, MySqlConfig, ServerEvent as MyEvent, SharedMySql, serve_connection,
};
use crate::net::NetFaults;
use crate::recorder::Recorder;

use super::config::{MySqlReplicaSpec, MySqlSpec};

/// The owner value of a `GET_LOCK` held by connection `id` (the guard's owner too).
pub fn get_lock_owner(id: ConnId) -> String {
    lock_impl::designs::get_lock_owner(id)
}

/// One MySQL host: its name and its running server (`None` before it started).
#[derive(Clone)]
struct Host {
    name: String,
    slot: Arc<Mutex<Option<SharedMySql>>>,
}

impl Host {
    fn new(name: &str) -> Self {
        Host {
            name: name.to_string(),
            slot: Arc::default(),
        }
    }

    fn shared(&self) -> Option<SharedMySql> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs the server on this host: a fresh one on every start (nothing on disk is
    /// modelled yet), accepting connections until the host goes.
    async fn serve(
        &self,
        shared: SharedMySql,
        net: NetFaults,
    ) -> Result<(), Box<dyn std::error::Error>> {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
        let listener =
            turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, MYSQL_PORT)).await?;
        loop {
            let Ok((stream, addr)) = listener.accept().await else {
                continue;
            };
            let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
            let stream = net.wrap(stream, &self.name, &peer);
            tokio::task::spawn_local(serve_connection(shared.clone(), stream, peer));
        }
    }
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
    /// Whether the replica's role was recorded yet.
    role_recorded: bool,
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
            role_recorded: false,
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

    /// Adds the hosts to the simulation.
    pub fn add_host(
        &self,
        sim: &mut turmoil::Sim<'_>,
        spec: &MySqlSpec,
        seed: u64,
        net: &NetFaults,
    ) {
        let config = MySqlConfig {
            user: spec.user.clone(),
            password: spec.password.clone(),
            database: spec.database.clone(),
            seed,
            wait_timeout_s: spec.wait_timeout_s,
            ..MySqlConfig::default()
        };
        let up = Arc::new(AtomicBool::new(false));
        let (primary, net1, config1, up1) = (
            self.primary.clone(),
            net.clone(),
            config.clone(),
            up.clone(),
        );
        sim.host(spec.name.as_str(), move || {
            let (primary, net, config, up) =
                (primary.clone(), net1.clone(), config1.clone(), up1.clone());
            async move {
                up.store(true, Ordering::SeqCst);
                let _up = Up(up);
                primary.serve(SharedMySql::new(config), net).await
            }
        });
        let (Some(replica), Some(rspec)) = (self.replica.clone(), spec.replica.clone()) else {
            return;
        };
        let (primary, vip, net) = (self.primary.clone(), self.vip.clone(), net.clone());
        let config = MySqlConfig {
            seed: seed ^ 0x5eed,
            ..config
        };
        let replica_name = rspec.name.clone();
        sim.host(replica_name.as_str(), move || {
            let (primary, replica, vip, net, config, up, rspec) = (
                primary.clone(),
                replica.clone(),
                vip.clone(),
                net.clone(),
                config.clone(),
                up.clone(),
                rspec.clone(),
            );
            async move {
                let shared = SharedMySql::new(config);
                tokio::task::spawn_local(replicate(
                    primary,
                    shared.clone(),
                    up,
                    vip,
                    replica.name.clone(),
                    rspec,
                ));
                replica.serve(shared, net).await
            }
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
                }
                MyEvent::RowLocked { conn, name, .. } if name == self.key => {
                    let host = host_of(&self.hosts, conn);
                    let value = get_lock_owner(conn);
                    self.set_holder(recorder, at, server, Some((value, host)), "command");
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
        }
    }
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
            if let Some(p) = primary.shared() {
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
