//! The world's ZooKeeper server: its host (the model of `crate::zk`, run as
//! `crate::zk::zk_host` runs it, with every accepted connection wrapped by the
//! link-fault registry as a Redis server's is, so a crashed client's connections reset
//! on both ends and its bytes still in flight are never read) and the observation that
//! moves its record into the history.
//!
//! Recorded as server events, at true time: every session created, expired (with the
//! ephemeral nodes it took) or closed (`ZkSession`); every create and delete of a node
//! under the lock's directory (`ZkNode`); and the lock as the server's record says it
//! is held, in the terms every checker reads: the lowest-sequence child of the lock's
//! directory is the key's value (`Written` by its creator's host when it becomes the
//! lowest, `Removed` when it goes: `command` for a client's delete, `expired` when its
//! session expired). So `belief`, `ownership` and `liveness` judge a ZooKeeper lock
//! by the same server record as a Redis one.
//!
//! An ensemble (`ZkSpec::servers` 3 or 5: hosts `zk-1` … `zk-N`, each the model of
//! `crate::zk::ensemble` run by `crate::zk::peer_host` under its own pause gate, with
//! its txn log on a disk that survives its crashes) is recorded the same way, with
//! these rules: the lock's record follows the *committed* txns (read from the serving
//! server that applied the most), recorded under the first server's name (`zk-1`,
//! whichever server leads: one record, as the ensemble keeps one); session events on
//! the server that decided them (created: the one the client connected to; expired:
//! the leader); each server's role changes as `Role` (`leader (epoch N)`, `follower of
//! zk-K`, `looking (why)`); and a follower serving clients that stayed behind the
//! leader's commits for a tick or more as `ZkFollowerLag`, when it catches up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::designs::ZK_LOCK_ROOT;

use crate::clock::HostClock;
use crate::history::{EventKind, ServerEvent};
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::zk::ensemble::{EnsembleConfig, PeerState, RoleEvent, SharedDisk, Sid};
use crate::zk::peer_host::{PeerHost, SharedPeer};
use crate::zk::tree::{Txn, TxnBody};
use crate::zk::{SharedZk, ZK_PORT, ZkConfig, serve_connection, session_tracker};

pub mod spec;

use self::spec::ZkSpec;
use super::system::{
    Build, ClientHooks, CommittedCreate, LockSystem, SystemInfo, SystemReach, SystemSpec,
    WorkloadPart,
};

/// What a ZooKeeper world has (see [`crate::system`]): servers that pause, crash and
/// recover from their txn log, sessions whose expiry deletes their ephemeral lock
/// nodes, a quorum leader, and followers that serve reads.
pub const ZOOKEEPER_CAPABILITIES: &[crate::system::Capability] = &[
    crate::system::Capability::LockServer,
    crate::system::Capability::SessionExpiry,
    crate::system::Capability::QuorumLeader,
    crate::system::Capability::FollowerReads,
    crate::system::Capability::Quorum,
];

/// The ZooKeeper host's handle: the running server (replaced by a restart) and what
/// the observer has already moved into the history.
pub(crate) struct ZkCtl {
    /// The first server's name: the host the lock's record is recorded on.
    pub name: String,
    /// Every server's name (one for a standalone server).
    pub names: Vec<String>,
    slot: Arc<Mutex<Option<SharedZk>>>,
    /// An ensemble's running servers by id (replaced by a restart), their disks and
    /// pause gates; empty for a standalone server.
    peers: Arc<Mutex<BTreeMap<Sid, SharedPeer>>>,
    disks: BTreeMap<Sid, SharedDisk>,
    gates: BTreeMap<String, PauseGate>,
    /// The last committed zxid moved into the history (an ensemble).
    seen_zxid: i64,
    /// The last committed create of a lock node: its zxid and when it was first seen.
    pub lock_create: Option<(i64, Duration)>,
    /// Followers behind the leader while serving clients: since when, the most txns
    /// behind, the clients.
    lagging: BTreeMap<Sid, (Duration, u64, usize)>,
    /// Crashes of each host so far, and of its host when each session was created: a
    /// request a session's client sent before it crashed can commit after the crash
    /// (a follower had forwarded it), and is then its previous life's act.
    crashes: BTreeMap<String, u32>,
    session_life: BTreeMap<i64, u32>,
    /// The ensemble's `tickTime`: a follower behind for less is not recorded lagging.
    tick: Duration,
    /// Set once a leader first serves (clients start then).
    pub ready: Arc<std::sync::atomic::AtomicBool>,
    /// The lock's directory (`/locksim/<key>`).
    dir: String,
    /// Txns of the running server already seen.
    seen: usize,
    /// Session → (client host, timeout).
    sessions: BTreeMap<i64, (String, u32)>,
    /// Sessions that expired (not closed).
    expired: std::collections::BTreeSet<i64>,
    /// The lock directory's children: path → owner session.
    children: BTreeMap<String, i64>,
    /// The lowest child, as last recorded (path, creator host).
    holder: Option<(String, String)>,
}

fn session_name(id: i64) -> String {
    format!("0x{id:x}")
}

/// A lock node's sequence number (the ten digits after `-lock-`).
fn sequence(path: &str) -> Option<u64> {
    path.rsplit_once("-lock-")?.1.parse().ok()
}

impl ZkCtl {
    pub fn new(spec: &ZkSpec, key: &str) -> Self {
        let names = spec.names();
        let ensemble = names.len() > 1;
        ZkCtl {
            name: names[0].clone(),
            disks: if ensemble {
                (1..=names.len() as Sid)
                    .map(|i| (i, SharedDisk::default()))
                    .collect()
            } else {
                BTreeMap::new()
            },
            gates: names
                .iter()
                .map(|n| (n.clone(), PauseGate::new()))
                .collect(),
            names,
            peers: Arc::default(),
            seen_zxid: 0,
            lock_create: None,
            lagging: BTreeMap::new(),
            crashes: BTreeMap::new(),
            session_life: BTreeMap::new(),
            ready: Arc::default(),
            tick: Duration::from_millis(u64::from(spec.tick_time_ms)),
            slot: Arc::default(),
            dir: format!("{ZK_LOCK_ROOT}/{key}"),
            seen: 0,
            sessions: BTreeMap::new(),
            expired: Default::default(),
            children: BTreeMap::new(),
            holder: None,
        }
    }

    /// Whether this is an ensemble.
    pub fn is_ensemble(&self) -> bool {
        self.names.len() > 1
    }

    /// A server's pause gate (an ensemble's servers have one).
    pub fn gate(&self, host: &str) -> Option<PauseGate> {
        self.gates.get(host).cloned()
    }

    fn peer_list(&self) -> Vec<(Sid, SharedPeer)> {
        self.peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(s, p)| (*s, p.clone()))
            .collect()
    }

    fn name_of(&self, sid: Sid) -> String {
        self.names
            .get(sid as usize - 1)
            .cloned()
            .unwrap_or_default()
    }

    /// A host crashed. A server of the ensemble: its state is gone until it restarts
    /// (which registers the new one); a client: its sessions belong to its previous
    /// life.
    pub fn crashed(&mut self, host: &str) {
        *self.crashes.entry(host.to_string()).or_default() += 1;
        if let Some(i) = self.names.iter().position(|n| n == host) {
            self.peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(i as Sid + 1));
        }
    }

    /// The ensemble's serving leader now, if any.
    pub fn leader(&self) -> Option<String> {
        self.peer_list()
            .into_iter()
            .find(|(_, p)| p.with(|p, _| p.state() == PeerState::Leading && p.serving()))
            .map(|(sid, _)| self.name_of(sid))
    }

    /// The serving followers now, with how many client sessions each serves, most
    /// first (ties: name order).
    pub fn followers(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .peer_list()
            .into_iter()
            .filter_map(|(sid, p)| {
                p.with(|p, _| {
                    (p.state() == PeerState::Following && p.serving())
                        .then(|| (self.name_of(sid), p.client_sessions()))
                })
            })
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// Adds the host (every server of an ensemble) to the simulation.
    pub fn add_host(
        &self,
        sim: &mut turmoil::Sim<'_>,
        spec: &ZkSpec,
        clock: &dyn Fn(&str) -> HostClock,
        net: &NetFaults,
    ) {
        if self.is_ensemble() {
            return self.add_ensemble(sim, spec, clock, net);
        }
        let clock = clock(&self.name);
        let config = ZkConfig {
            tick_time_ms: spec.tick_time_ms,
            ..ZkConfig::default()
        };
        let (slot, net, name) = (self.slot.clone(), net.clone(), self.name.clone());
        let gate = self.gates[&self.name].clone();
        sim.host(spec.name.as_str(), move || {
            let (slot, net, name, clock, gate) = (
                slot.clone(),
                net.clone(),
                name.clone(),
                clock.clone(),
                gate.clone(),
            );
            gate.clone().wrap(async move {
                // A fresh server on every start (no snapshot or txn log yet).
                let shared = SharedZk::new(config, Arc::new(clock));
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
                let listener =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ZK_PORT))
                        .await?;
                tokio::task::spawn_local(gate.wrap(session_tracker(shared.clone())));
                loop {
                    let Ok((stream, addr)) = listener.accept().await else {
                        continue;
                    };
                    let peer =
                        turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                    let stream = net.wrap(stream, &name, &peer);
                    tokio::task::spawn_local(gate.wrap(serve_connection(
                        shared.clone(),
                        stream,
                        peer,
                    )));
                }
            })
        });
    }

    fn add_ensemble(
        &self,
        sim: &mut turmoil::Sim<'_>,
        spec: &ZkSpec,
        clock: &dyn Fn(&str) -> HostClock,
        net: &NetFaults,
    ) {
        let zk = ZkConfig {
            tick_time_ms: spec.tick_time_ms,
            ..ZkConfig::default()
        };
        let cfg = EnsembleConfig::of(self.names.len() as u64, zk);
        let names: BTreeMap<Sid, String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (i as Sid + 1, n.clone()))
            .collect();
        for (sid, name) in &names {
            let clock = clock(name);
            let (cfg, names, net, peers, sid) = (
                cfg.clone(),
                names.clone(),
                net.clone(),
                self.peers.clone(),
                *sid,
            );
            let disk = self.disks[&sid].clone();
            let gate = self.gates[name].clone();
            sim.host(name.as_str(), move || {
                let host = PeerHost {
                    cfg: cfg.clone(),
                    me: sid,
                    names: names.clone(),
                    disk: disk.clone(),
                    clock: Arc::new(clock.clone()),
                    net: net.clone(),
                    gate: gate.clone(),
                };
                let peers = peers.clone();
                gate.wrap(async move {
                    host.run(move |p| {
                        peers
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(sid, p);
                    })
                    .await
                })
            });
        }
    }

    /// Whether the server's record has the lock held (the directory has a child).
    pub fn holds(&self) -> bool {
        self.holder.is_some()
    }

    /// The lock holder's host, by the server's record.
    pub fn owner(&self) -> Option<&str> {
        self.holder.as_ref().map(|(_, h)| h.as_str())
    }

    /// Moves the servers' new sessions, roles and committed txns into the history at
    /// `now`.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        let at = now.as_micros() as u64;
        let (events, txns) = if self.is_ensemble() {
            self.drain_ensemble(recorder, now)
        } else {
            let Some(shared) = self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
                return;
            };
            let (events, txns) = shared.with(|s, _| {
                let log = s.log();
                let new = log.get(self.seen..).unwrap_or_default().to_vec();
                (s.take_events(), new)
            });
            self.seen += txns.len();
            let name = self.name.clone();
            (
                events.into_iter().map(|e| (name.clone(), e)).collect(),
                txns,
            )
        };
        let name = self.name.clone();
        let record = |kind: ServerEvent| {
            recorder.record_at(at, &name, EventKind::Server(kind));
        };
        for (host, event) in events {
            let record = |kind: ServerEvent| {
                recorder.record_at(at, &host, EventKind::Server(kind));
            };
            match event {
                crate::zk::ServerEvent::SessionCreated {
                    session_id,
                    peer,
                    timeout_ms,
                } => {
                    self.sessions.insert(session_id, (peer.clone(), timeout_ms));
                    let life = self.crashes.get(&peer).copied().unwrap_or(0);
                    self.session_life.insert(session_id, life);
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client: peer,
                        event: "created".into(),
                        timeout_ms,
                        ephemerals: Vec::new(),
                    });
                }
                crate::zk::ServerEvent::SessionExpired {
                    session_id,
                    ephemerals,
                } => {
                    self.expired.insert(session_id);
                    let (client, timeout_ms) =
                        self.sessions.get(&session_id).cloned().unwrap_or_default();
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client,
                        event: "expired".into(),
                        timeout_ms,
                        ephemerals,
                    });
                }
                crate::zk::ServerEvent::SessionClosed { session_id } => {
                    let (client, timeout_ms) =
                        self.sessions.get(&session_id).cloned().unwrap_or_default();
                    let ephemerals = self
                        .children
                        .iter()
                        .filter(|(_, s)| **s == session_id)
                        .map(|(p, _)| p.clone())
                        .collect();
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client,
                        event: "closed".into(),
                        timeout_ms,
                        ephemerals,
                    });
                }
            }
        }
        let prefix = format!("{}/", self.dir);
        for txn in txns {
            if let TxnBody::Create { path, .. } = &txn.body
                && path.starts_with(&prefix)
            {
                self.lock_create = Some((txn.zxid, now));
            }
            let host_of = |s: i64, sessions: &BTreeMap<i64, (String, u32)>| -> String {
                sessions.get(&s).map(|(h, _)| h.clone()).unwrap_or_default()
            };
            match txn.body {
                TxnBody::Create {
                    path,
                    ephemeral_owner,
                    ..
                } if path.starts_with(&prefix) => {
                    let owner = if ephemeral_owner != 0 {
                        ephemeral_owner
                    } else {
                        txn.session_id
                    };
                    self.children.insert(path.clone(), owner);
                    record(ServerEvent::ZkNode {
                        by: host_of(txn.session_id, &self.sessions),
                        session: session_name(txn.session_id),
                        path,
                        op: "created".into(),
                    });
                    self.update_holder(recorder, at, "command");
                }
                TxnBody::Delete { path } if self.children.contains_key(&path) => {
                    self.children.remove(&path);
                    record(ServerEvent::ZkNode {
                        by: host_of(txn.session_id, &self.sessions),
                        session: session_name(txn.session_id),
                        path,
                        op: "deleted".into(),
                    });
                    let cause = self.command_cause(txn.session_id);
                    self.update_holder(recorder, at, cause);
                }
                TxnBody::CloseSession => {
                    let gone: Vec<String> = self
                        .children
                        .iter()
                        .filter(|(_, s)| **s == txn.session_id)
                        .map(|(p, _)| p.clone())
                        .collect();
                    for path in gone {
                        self.children.remove(&path);
                        record(ServerEvent::ZkNode {
                            by: host_of(txn.session_id, &self.sessions),
                            session: session_name(txn.session_id),
                            path,
                            op: "deleted-with-session".into(),
                        });
                    }
                    let cause = if self.expired.contains(&txn.session_id) {
                        "expired"
                    } else {
                        self.command_cause(txn.session_id)
                    };
                    self.update_holder(recorder, at, cause);
                }
                _ => {}
            }
        }
    }

    /// An ensemble's new session events and role changes (recorded here), and its
    /// committed txns since the last call, from the serving server that applied the
    /// most.
    fn drain_ensemble(
        &mut self,
        recorder: &Recorder,
        now: Duration,
    ) -> (Vec<(String, crate::zk::ServerEvent)>, Vec<Txn>) {
        let at = now.as_micros() as u64;
        let mut events = Vec::new();
        let mut best: Option<(i64, SharedPeer)> = None;
        let mut leader_zxid = None;
        let mut serving = Vec::new();
        for (sid, p) in self.peer_list() {
            let host = self.name_of(sid);
            let (evs, roles, state, zxid, clients) = p.with(|p, _| {
                (
                    p.take_events(),
                    p.take_roles(),
                    (p.state(), p.serving()),
                    p.tree().last_zxid(),
                    p.client_sessions(),
                )
            });
            for r in roles {
                let role = match r {
                    RoleEvent::Looking { why } => format!("looking ({why})"),
                    RoleEvent::Leading { epoch } => format!("leader (epoch {epoch})"),
                    RoleEvent::Following { leader, epoch } => {
                        format!("follower of {} (epoch {epoch})", self.name_of(leader))
                    }
                };
                recorder.record_at(at, &host, EventKind::Server(ServerEvent::Role { role }));
            }
            events.extend(evs.into_iter().map(|e| (host.clone(), e)));
            if state.1 {
                if state.0 == PeerState::Leading {
                    self.ready.store(true, std::sync::atomic::Ordering::Relaxed);
                    leader_zxid = Some((sid, zxid));
                } else {
                    serving.push((sid, zxid, clients));
                }
                if best.as_ref().is_none_or(|(z, _)| zxid > *z) {
                    best = Some((zxid, p.clone()));
                }
            }
        }
        // Followers serving clients behind the leader's commits.
        let mut still = BTreeMap::new();
        if let Some((leader, lz)) = leader_zxid {
            for (sid, zxid, clients) in serving {
                if zxid < lz && clients > 0 {
                    let behind = (lz - zxid) as u64;
                    let e = self.lagging.get(&sid).copied().unwrap_or((now, 0, 0));
                    still.insert(sid, (e.0, e.1.max(behind), e.2.max(clients)));
                }
            }
            let tick = self.tick;
            for (sid, (since, behind, clients)) in std::mem::take(&mut self.lagging) {
                if still.contains_key(&sid) || now < since + tick {
                    continue;
                }
                recorder.record_at(
                    at,
                    &self.name_of(sid),
                    EventKind::Server(ServerEvent::ZkFollowerLag {
                        leader: self.name_of(leader),
                        since_us: since.as_micros() as u64,
                        txns_behind: behind,
                        clients: clients as u32,
                    }),
                );
            }
        }
        self.lagging = still;
        let txns = match best {
            Some((zxid, p)) if zxid > self.seen_zxid => {
                let t = p.with(|p, _| p.applied_after(self.seen_zxid));
                self.seen_zxid = zxid;
                t
            }
            _ => Vec::new(),
        };
        (events, txns)
    }

    /// The cause of a removal by `session`'s command: `command`, or
    /// `command-before-crash` if its client crashed since it created the session (the
    /// request was sent by the life that crashed; it committed after).
    fn command_cause(&self, session: i64) -> &'static str {
        let host = self.sessions.get(&session).map(|(h, _)| h.as_str());
        let now = host.and_then(|h| self.crashes.get(h)).copied().unwrap_or(0);
        let then = self.session_life.get(&session).copied().unwrap_or(0);
        if now > then {
            "command-before-crash"
        } else {
            "command"
        }
    }

    /// Records a change of the lowest child as the key's removal and write.
    fn update_holder(&mut self, recorder: &Recorder, at: u64, cause: &str) {
        let lowest = self
            .children
            .iter()
            .min_by_key(|(p, _)| (sequence(p).unwrap_or(u64::MAX), (*p).clone()))
            .map(|(p, s)| {
                let host = self.sessions.get(s).map(|(h, _)| h.clone());
                (p.clone(), host.unwrap_or_default())
            });
        if lowest == self.holder {
            return;
        }
        let key = self
            .dir
            .strip_prefix(&format!("{ZK_LOCK_ROOT}/"))
            .unwrap_or(&self.dir)
            .to_string();
        if let Some((path, host)) = self.holder.take() {
            let by = if cause == "expired" {
                "expiry".to_string()
            } else {
                host
            };
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Removed {
                    by,
                    key: key.clone(),
                    value: path,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((path, host)) = &lowest {
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key,
                    value: path.clone(),
                }),
            );
        }
        self.holder = lowest;
    }
}

impl SystemSpec for ZkSpec {
    fn host_names(&self) -> Vec<String> {
        self.names()
    }

    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let ctl = ZkCtl::new(self, b.key);
        let clocks: BTreeMap<String, HostClock> = self
            .names()
            .into_iter()
            .map(|n| {
                let c = (b.clock_of)(&n, b.server_clock);
                (n, c)
            })
            .collect();
        let clock = |name: &str| {
            clocks
                .get(name)
                .cloned()
                .unwrap_or_else(|| HostClock::new(crate::clock::ClockSpec::default()))
        };
        ctl.add_host(b.sim, self, &clock, b.net);
        Box::new(ctl)
    }

    fn client_deps(&self, deps: &mut lock_impl::Deps, reach: &SystemReach) {
        deps.systems.insert(lock_impl::zk::ZkEnsemble {
            servers: self.names().into_iter().map(|n| (n, ZK_PORT)).collect(),
            dialer: reach.dialer.clone(),
            session_timeout_ms: self.session_timeout_ms,
            scale: reach.scale,
        });
    }
}

impl LockSystem for ZkCtl {
    fn hosts(&self) -> Vec<String> {
        self.names.clone()
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        ZkCtl::gate(self, host)
    }

    fn lock_owner(&self, _key: &str) -> Option<String> {
        self.owner().map(String::from)
    }

    /// An ensemble's lock server is its leader.
    fn lock_server(&self, _key: &str) -> Option<String> {
        if !self.holds() {
            return None;
        }
        if self.is_ensemble() {
            self.leader()
        } else {
            Some(self.name.clone())
        }
    }

    fn lock_writers(&self, key: &str) -> Vec<String> {
        self.lock_owner(key).into_iter().collect()
    }

    fn leader(&self) -> Option<String> {
        ZkCtl::leader(self)
    }

    fn busiest_follower(&self) -> Option<String> {
        self.followers()
            .into_iter()
            .find(|(_, n)| *n > 0)
            .map(|(f, _)| f)
    }

    fn committed_lock_create(&self) -> Option<CommittedCreate> {
        self.lock_create.map(|(zxid, seen)| CommittedCreate {
            seen,
            detail: format!("a lock node's create committed at zxid 0x{zxid:x}"),
        })
    }

    fn crashed(&mut self, host: &str, _machine: bool, _now: Duration, _recorder: &Recorder) {
        ZkCtl::crashed(self, host);
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        ZkCtl::drain(self, recorder, now);
    }

    fn client_hooks(&self) -> ClientHooks {
        ClientHooks {
            ready: self.is_ensemble().then(|| self.ready.clone()),
            primary_address: None,
        }
    }
}

/// ZooKeeper's record: `SystemSpecs::zookeeper` (the workload's `zookeeper`), by
/// default an ensemble of three at the lease's `tickTime`
/// ([`ZkSpec::ensemble_for_lease`]).
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::ZooKeeper,
    capabilities: ZOOKEEPER_CAPABILITIES,
};

impl WorkloadPart for ZkSpec {
    fn default_for_lease(lease_ms: u64) -> Self {
        ZkSpec::ensemble_for_lease(lease_ms)
    }

    fn validate(&self) -> Result<(), String> {
        if ![1, 3, 5].contains(&self.servers) {
            return Err(format!(
                "workload.zookeeper.servers={} must be 1 (standalone), 3 or 5 (an ensemble)",
                self.servers
            ));
        }
        Ok(())
    }
}
