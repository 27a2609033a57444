//! The world's etcd cluster: `EtcdSpec::members` hosts (`etcd-1` … `etcd-3` by
//! default), each running the model of `crate::etcd` (its gRPC services on every
//! accepted client connection, wrapped by the link-fault registry as a Redis
//! server's are; its Raft node, its links to the other members on the peer port, and
//! its lessor), under its own pause gate and on its own clock; what a member keeps
//! across a crash; and the observation that moves the cluster's record into the
//! history.
//!
//! The record, in the terms every checker reads: the lock is the key under
//! `<key>/` with the lowest create revision (`concurrency.Mutex`'s owner; the
//! `v3lock` service's too); its value is that etcd key (`<key>/<lease in hex>`, the
//! design's owner value). `Written` by the client host whose put created it when it
//! becomes the lowest; `Removed` when it goes: `command` by the client whose delete
//! (or lease revoke) removed it, `expired` (by `expiry`) when the leader's lessor
//! revoked its lease after the TTL ran out on the leader's clock. The record follows
//! the *applied* log (each change once, from the first member seen to apply its
//! entry), under the first member's name (one record, as the cluster keeps one);
//! each member's Raft role changes as `Role` (`leader (term N)`, `follower of
//! etcd-K`, `candidate (term N)`).
//!
//! A crash keeps a member's Raft log and hard state and its applied store (etcd
//! syncs its WAL before it answers, and replays it at a restart); the restarted
//! member's lessor is a follower's until it leads again, when it gives every lease a
//! full TTL plus an election timeout (`Promote`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::SimClock;
use crate::etcd::raft::{ELECTION_TICKS, HEARTBEAT_MILLIS};
use crate::etcd::{
    Change, ClusterView, DeleteCause, ETCD_PORT, EtcdMember, LocalExec, MEMBER_IDS, PEER_PORT,
    RaftLink, SharedEtcd, Store,
};
use crate::history::{EventKind, ServerEvent};
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::system::Capability;

use super::system::{
    Build, CommittedCreate, LockSystem, SystemInfo, SystemReach, SystemSpec, WorkloadPart,
};
use serde::{Deserialize, Serialize};

/// The world's etcd (the v3.4 model of `crate::etcd`): a cluster of `members`, at real
/// time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// The first member's host name (`etcd-1`); the others count on from its number
    /// (`etcd-2`, `etcd-3`).
    pub name: String,
    /// How many members (1, 3 or 5; 3 by default, as a production cluster).
    #[serde(default = "default_members")]
    pub members: u32,
    /// The lessor's minimum TTL, seconds: 2, etcd's at its default election timeout
    /// (1 s: `ceil(1.5 × 1 s)`).
    pub min_lease_ttl_s: i64,
    /// How long etcd's second is in this world, µs: 1,000,000 at real time; a world
    /// that shrinks the lease shrinks it alike (`EtcdSpec::for_lease`), so lease TTLs,
    /// the lessor's half-second pass, Raft's heartbeat and election timeout and the
    /// client's constants keep their proportions (`lock_impl::scale::ETCD_SECOND`).
    pub second_us: u64,
}

fn default_members() -> u32 {
    3
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            name: "etcd-1".into(),
            members: default_members(),
            min_lease_ttl_s: crate::etcd::MIN_LEASE_TTL,
            second_us: 1_000_000,
        }
    }
}

impl EtcdSpec {
    /// The cluster of a world whose lease is `lease_ms`: etcd's second at that world's
    /// scale (`lock_impl::TimeScale::for_lease`).
    pub fn for_lease(lease_ms: u64) -> EtcdSpec {
        let second = lock_impl::TimeScale::for_lease(lease_ms).exact(
            std::time::Duration::from_millis(lock_impl::scale::ETCD_SECOND.real_ms),
        );
        EtcdSpec {
            second_us: second.as_micros().max(1) as u64,
            ..EtcdSpec::default()
        }
    }

    /// The members' host names, in Raft ID order.
    pub fn names(&self) -> Vec<String> {
        if self.members <= 1 {
            return vec![self.name.clone()];
        }
        let stem = self.name.trim_end_matches(|c: char| c.is_ascii_digit());
        let first: u32 = self.name[stem.len()..].parse().unwrap_or(1);
        (0..self.members)
            .map(|i| format!("{stem}{}", first + i))
            .collect()
    }
}

/// What an etcd world has (see [`crate::system`]): members that pause, crash and
/// restart from their log, serving from the run's start, a Raft leader whose lessor
/// decides every lease's expiry and that commits each write on a majority before it
/// answers, and a quorum that elects a new leader when the one serving is cut off.
pub const ETCD_CAPABILITIES: &[Capability] = &[
    Capability::LockServer,
    Capability::ServingAtStart,
    Capability::QuorumLeader,
    Capability::Quorum,
];

/// One member's slot: the running member (the last one, after a crash: its store and
/// log are what the restart reads back) and whether it runs now.
#[derive(Default)]
struct Slot {
    member: Option<SharedEtcd>,
    up: bool,
}

type SharedSlot = Arc<Mutex<Slot>>;

/// The cluster's hosts and what the observer has seen.
pub(crate) struct EtcdCtl {
    names: Vec<String>,
    slots: Vec<SharedSlot>,
    gates: Vec<PauseGate>,
    /// Each member's first election timeout, in ticks (drawn from the run's seed).
    election_ticks: Vec<usize>,
    /// Each member's stream for its later ones (etcd draws one at every reset).
    timeout_seeds: Vec<u64>,
    /// The prefix of the lock's keys (`<key>/`) and the key as the history names it.
    prefix: String,
    key: String,
    /// Every live key under the prefix: its create revision and its writer host.
    keys: BTreeMap<String, (i64, String)>,
    /// The lock's holder by the record: (etcd key, writer host).
    holder: Option<(String, String)>,
    /// The last log index whose changes were recorded.
    seen_index: u64,
    /// The last committed create of a lock key: its revision, when first seen.
    lock_create: Option<(i64, Duration)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl EtcdCtl {
    fn new(spec: &EtcdSpec, key: &str, seed: u64) -> Self {
        use rand::{RngExt, SeedableRng};
        let names = spec.names();
        // etcd randomises each member's election timeout in [10, 20) ticks; the
        // world draws distinct ones from the run's seed.
        let mut rng =
            rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ crate::seed::stream::ETCD_ELECTION_MASK);
        let mut pool: Vec<usize> = (ELECTION_TICKS..2 * ELECTION_TICKS).collect();
        let election_ticks = names
            .iter()
            .map(|_| pool.remove(rng.random_range(0..pool.len())))
            .collect();
        let timeout_seeds = names.iter().map(|_| rng.random::<u64>()).collect();
        EtcdCtl {
            slots: names.iter().map(|_| SharedSlot::default()).collect(),
            gates: names.iter().map(|_| PauseGate::new()).collect(),
            names,
            election_ticks,
            timeout_seeds,
            prefix: format!("{key}/"),
            key: key.to_string(),
            keys: BTreeMap::new(),
            holder: None,
            seen_index: 0,
            lock_create: None,
        }
    }

    /// The running members, with their index.
    fn running(&self) -> Vec<(usize, SharedEtcd)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = lock(s);
                s.member.clone().filter(|_| s.up).map(|m| (i, m))
            })
            .collect()
    }

    fn add_host(&self, b: &mut Build<'_, '_>, spec: &EtcdSpec, i: usize) {
        let name = self.names[i].clone();
        let clock = (b.clock_of)(&name, b.server_clock);
        let (slot, net, gate) = (self.slots[i].clone(), b.net.clone(), self.gates[i].clone());
        let members: Vec<(u64, String)> = self
            .names
            .iter()
            .enumerate()
            .map(|(j, n)| (j as u64 + 1, n.clone()))
            .collect();
        let view = ClusterView {
            me: i as u64 + 1,
            members,
            election_ticks: self.election_ticks[i],
            timeout_seed: self.timeout_seeds[i],
            campaign_at_start: i == 0,
        };
        let min_ttl = spec.min_lease_ttl_s;
        let second = Duration::from_micros(spec.second_us);
        let host = name.clone();
        b.sim.host(host.as_str(), move || {
            let (slot, net, name, gate, clock, view) = (
                slot.clone(),
                net.clone(),
                name.clone(),
                gate.clone(),
                clock.clone(),
                view.clone(),
            );
            gate.clone().wrap(async move {
                let clock: Arc<dyn lock_impl::Clock> = Arc::new(SimClock::new(clock));
                // What the member had on disk: its log and its applied store; a first
                // start has neither.
                let before = lock(&slot).member.clone();
                let (store, storage) = match before {
                    Some(m) => {
                        let mut s = m.with(|s| s.clone());
                        s.demote();
                        (s, Some(m.raft.storage.clone()))
                    }
                    None => (
                        Store::new(
                            MEMBER_IDS[(view.me as usize - 1) % MEMBER_IDS.len()],
                            min_ttl,
                            second,
                        ),
                        None,
                    ),
                };
                let mut outbox = BTreeMap::new();
                let tick = second * HEARTBEAT_MILLIS / 1000;
                for (id, to) in &view.members {
                    if *id == view.me {
                        continue;
                    }
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    outbox.insert(*id, tx);
                    let (me, to, net, g) = (name.clone(), to.clone(), net.clone(), gate.clone());
                    let dial = move || {
                        let (me, to, net, g) = (me.clone(), to.clone(), net.clone(), g.clone());
                        async move {
                            crate::net::dial_host(&net, &me, &g, &to, PEER_PORT, None)
                                .await
                                .map(|(s, _)| s)
                        }
                    };
                    tokio::task::spawn_local(gate.wrap(crate::etcd::raft::write_link(
                        rx,
                        dial,
                        clock.clone(),
                        tick,
                    )));
                }
                let member = EtcdMember::new(store, clock, RaftLink::new(view, storage, outbox));
                *lock(&slot) = Slot {
                    member: Some(member.clone()),
                    up: true,
                };
                let g = gate.clone();
                let exec = LocalExec(std::rc::Rc::new(move |fut| {
                    tokio::task::spawn_local(g.wrap(fut));
                }));
                tokio::task::spawn_local(gate.wrap(crate::etcd::raft::run_node(member.clone())));
                tokio::task::spawn_local(gate.wrap(member.clone().run_lessor()));
                let peers =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, PEER_PORT))
                        .await?;
                let (m2, net2, gate2, name2, exec2) = (
                    member.clone(),
                    net.clone(),
                    gate.clone(),
                    name.clone(),
                    exec.clone(),
                );
                tokio::task::spawn_local(gate.wrap(async move {
                    loop {
                        let Ok((stream, addr)) = peers.accept().await else {
                            continue;
                        };
                        let from =
                            turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                        let stream = gate2.wrap_io(net2.wrap(stream, &name2, &from));
                        let exec = exec2.clone();
                        tokio::task::spawn_local(gate2.wrap(crate::etcd::raft::read_link(
                            m2.clone(),
                            stream,
                            move |t| (exec.0)(t),
                        )));
                    }
                }));
                let routes = crate::etcd::router(&member);
                let listener =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ETCD_PORT))
                        .await?;
                loop {
                    let Ok((stream, addr)) = listener.accept().await else {
                        continue;
                    };
                    let peer =
                        turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                    let stream = net.wrap(stream, &name, &peer);
                    tokio::task::spawn_local(gate.wrap(crate::etcd::serve_connection(
                        stream,
                        peer,
                        routes.clone(),
                        exec.clone(),
                    )));
                }
            })
        });
    }

    /// Moves the cluster's changes and its members' role changes into the history at
    /// `now`.
    fn drain_changes(&mut self, recorder: &Recorder, now: Duration) {
        let at = now.as_micros() as u64;
        // Every member applies the same entries; each index's changes are recorded
        // once, from the first member (in Raft ID order) that shows them.
        let mut by_index: BTreeMap<u64, Vec<Change>> = BTreeMap::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(member) = lock(slot).member.clone() else {
                continue;
            };
            for role in member.raft.take_roles() {
                recorder.record_at(
                    at,
                    &self.names[i],
                    EventKind::Server(ServerEvent::Role { role }),
                );
            }
            let mut mine: BTreeMap<u64, Vec<Change>> = BTreeMap::new();
            for (index, change) in member.with(|s| s.take_changes()) {
                if index > self.seen_index {
                    mine.entry(index).or_default().push(change);
                }
            }
            for (index, changes) in mine {
                by_index.entry(index).or_insert(changes);
            }
        }
        for (index, changes) in by_index {
            self.seen_index = self.seen_index.max(index);
            for change in changes {
                self.record_change(recorder, at, now, change);
            }
        }
    }

    fn record_change(&mut self, recorder: &Recorder, at: u64, now: Duration, change: Change) {
        match change {
            Change::Put {
                key,
                revision,
                create_revision,
                by,
                ..
            } if key.starts_with(&self.prefix) => {
                if revision == create_revision {
                    self.lock_create = Some((create_revision, now));
                }
                self.keys.entry(key).or_insert((create_revision, by));
                self.update_holder(recorder, at, "command", "");
            }
            Change::Delete { key, cause, .. } if key.starts_with(&self.prefix) => {
                self.keys.remove(&key);
                let (cause, by) = match cause {
                    DeleteCause::Command(h) | DeleteCause::Revoked(h) => ("command", h),
                    DeleteCause::Expired => ("expired", "expiry".to_string()),
                };
                self.update_holder(recorder, at, cause, &by);
            }
            _ => {}
        }
    }
    /// Records a change of the lowest key as the lock's removal and write.
    fn update_holder(&mut self, recorder: &Recorder, at: u64, cause: &str, by: &str) {
        let lowest = self
            .keys
            .iter()
            .min_by_key(|(k, (rev, _))| (*rev, (*k).clone()))
            .map(|(k, (_, host))| (k.clone(), host.clone()));
        if lowest == self.holder {
            return;
        }
        if let Some((value, _)) = self.holder.take() {
            recorder.record_at(
                at,
                &self.names[0],
                EventKind::Server(ServerEvent::Removed {
                    by: by.to_string(),
                    key: self.key.clone(),
                    value,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((value, host)) = &lowest {
            recorder.record_at(
                at,
                &self.names[0],
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key: self.key.clone(),
                    value: value.clone(),
                }),
            );
        }
        self.holder = lowest;
    }
}

impl SystemSpec for EtcdSpec {
    fn host_names(&self) -> Vec<String> {
        self.names()
    }

    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let ctl = EtcdCtl::new(self, b.key, b.seed);
        for i in 0..ctl.names.len() {
            ctl.add_host(b, self, i);
        }
        Box::new(ctl)
    }

    fn client_deps(&self, deps: &mut lock_impl::Deps, reach: &SystemReach) {
        // A call's deadline is the service's reply timeout, the world's (it scales
        // with the lease, as the MySQL and MongoDB clients' do).
        let mut server =
            lock_impl::etcd::EtcdServer::new(&self.name, ETCD_PORT, reach.dialer.clone());
        server.endpoints = self.names().into_iter().map(|n| (n, ETCD_PORT)).collect();
        server.request_timeout = Duration::from_millis(reach.response_timeout_ms);
        deps.systems.insert(server);
    }
}

impl LockSystem for EtcdCtl {
    fn hosts(&self) -> Vec<String> {
        self.names.clone()
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        let i = self.names.iter().position(|n| n == host)?;
        Some(self.gates[i].clone())
    }

    fn lock_owner(&self, _key: &str) -> Option<String> {
        self.holder.as_ref().map(|(_, h)| h.clone())
    }

    /// The leader: its lessor decides when the lock's lease expires.
    fn lock_server(&self, _key: &str) -> Option<String> {
        self.holder.as_ref().and_then(|_| self.leader())
    }

    fn lock_writers(&self, _key: &str) -> Vec<String> {
        self.holder.iter().map(|(_, h)| h.clone()).collect()
    }

    /// The running member that leads, at the highest term if two believe they do (one
    /// cut off from the rest, not yet stepped down).
    fn leader(&self) -> Option<String> {
        self.running()
            .into_iter()
            .filter_map(|(i, m)| {
                let st = m.raft.status();
                st.leading.then_some((st.term, i))
            })
            .max()
            .map(|(_, i)| self.names[i].clone())
    }

    fn committed_lock_create(&self) -> Option<CommittedCreate> {
        self.lock_create.map(|(revision, seen)| CommittedCreate {
            seen,
            detail: format!("a lock key's create committed at revision {revision}"),
        })
    }

    fn crashed(&mut self, host: &str, _machine: bool, _now: Duration, _recorder: &Recorder) {
        // Its log and store are read back at the restart.
        if let Some(i) = self.names.iter().position(|n| n == host) {
            lock(&self.slots[i]).up = false;
        }
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        self.drain_changes(recorder, now);
    }
}

/// etcd's record: `SystemSpecs::etcd` (the workload's `etcd`), by default
/// [`EtcdSpec::for_lease`] the workload's lease.
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::Etcd,
    capabilities: ETCD_CAPABILITIES,
};

impl WorkloadPart for EtcdSpec {
    fn default_for_lease(lease_ms: u64) -> Self {
        EtcdSpec::for_lease(lease_ms)
    }

    fn validate(&self) -> Result<(), String> {
        let e = self;
        if e.name.is_empty() {
            return Err(
                "workload.etcd.name is empty: name the first member's host (etcd-1)".into(),
            );
        }
        if ![1, 3, 5].contains(&e.members) {
            return Err(format!(
                "workload.etcd.members is {}: allowed are 1, 3 and 5",
                e.members
            ));
        }
        if e.second_us == 0 {
            return Err(
                "workload.etcd.second_us is 0: etcd's second must last (1000000 at real time)"
                    .into(),
            );
        }
        if e.min_lease_ttl_s < 1 {
            return Err(format!(
                "workload.etcd.min_lease_ttl_s is {}: it must be at least 1 (etcd's default is 2)",
                e.min_lease_ttl_s
            ));
        }
        Ok(())
    }
}
