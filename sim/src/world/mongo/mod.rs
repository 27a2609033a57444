//! The world's MongoDB replica set: one host per member (the model of `crate::mongo`,
//! every connection wrapped by the link-fault registry on both ends, so partitions,
//! delays, resets and crashes reach clients and the members' own heartbeats, votes and
//! oplog reads alike), what each member keeps across a crash, and the observation that
//! moves each member's record into the history.
//!
//! A member's record, in the terms every checker reads (each member records on its own
//! host, as each Redis server does):
//! - the lock is the document of the `locks` collection whose `_id` is the key; its
//!   value is the document's `owner`, unless its `expiresAt` is the epoch (the fenced
//!   design's release);
//! - `Written` when the value appears (by the client whose command wrote it, on the
//!   primary and, as the entry replicates, on each secondary); `Removed` when it goes:
//!   `command` (a release, on the member where the client's command ran),
//!   `replicated` (a secondary applied that release from its sync source's oplog;
//!   `by` names the client whose command it copies, which may have crashed since:
//!   the copy is no new command of it), `expired` (another client's `findAndModify`
//!   took it over because its `expiresAt` had passed by that client's clock; `by` is
//!   that client), `rolled-back` (by `rollback`: the member undid the write, see
//!   `MongoRollback`);
//! - `Role` `primary (term n)` / `secondary (term n)` at every change (with why), and
//!   `MongoRollback` for every rollback.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::mongo::{Document, Value};
use lock_impl::zk::{StreamDial, StreamDialer, ZkStream};

use crate::history::{EventKind, ServerEvent};
use crate::mongo::{
    MONGO_PORT, MemberEvent, MongoConfig, OpTime, Origin, Role, SharedMember, serve_connection,
    start_background,
};
use crate::net::{NetFaults, until_reachable};
use crate::recorder::Recorder;

pub mod spec;

use self::spec::MongoSpec;
use super::system::{
    Build, LockSystem, LockWrite, SystemInfo, SystemReach, SystemSpec, WorkloadPart, WriteMoment,
};
use crate::clock::SimClock;
use crate::pause::PauseGate;
use crate::seed::{stream, sub_seed};

/// What a MongoDB world has (see [`crate::system`]): members that pause, crash and
/// restart, and elections that roll back what a majority never had.
pub const MONGO_CAPABILITIES: &[crate::system::Capability] = &[
    crate::system::Capability::LockServer,
    crate::system::Capability::ServingAtStart,
    crate::system::Capability::ElectionRollback,
    crate::system::Capability::Quorum,
];

/// The lock's value in a document: its owner, unless released (`expiresAt` the epoch).
fn lock_value(doc: &Document) -> Option<String> {
    if doc.get("expiresAt") == Some(&Value::DateTime(0)) {
        return None;
    }
    Some(doc.get_str("owner").unwrap_or("").to_string())
}

/// One member's host.
pub(crate) struct MemberCtl {
    pub name: String,
    /// The running member (the last one, after a crash: its durable state is what the
    /// restart reads back).
    slot: Arc<Mutex<Option<SharedMember>>>,
    /// The key's holder by this member's record: (value, writer host).
    holder: Option<(String, String)>,
    /// The optime of the write that made the current holder, if a client's.
    written_at: Option<OpTime>,
    role: Role,
    /// Its pause gate: every task of the member freezes with its host.
    gate: PauseGate,
}

impl MemberCtl {
    fn shared(&self) -> Option<SharedMember> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The replica set's handle: its members and what the observer has seen.
pub(crate) struct MongoCtl {
    pub members: Vec<MemberCtl>,
    key: String,
    ns_suffix: String,
    /// Which client host wrote each optime (a secondary's record names the client
    /// whose write it copied).
    writers: BTreeMap<OpTime, String>,
}

/// Dials a peer member under the link-fault registry (a dial across a partition
/// waits, as an unanswered SYN does), and runs background tasks on the host, under its
/// pause gate.
struct PeerDialer {
    me: String,
    net: NetFaults,
    gate: PauseGate,
}

impl StreamDialer for PeerDialer {
    fn dial(&self, host: &str, port: u16) -> StreamDial<'_> {
        let host = host.to_string();
        Box::pin(async move {
            until_reachable(&self.net, &self.me, &host).await;
            let s = turmoil::net::TcpStream::connect((host.as_str(), port)).await?;
            Ok(Box::new(self.net.wrap(s, &self.me, &host)) as ZkStream)
        })
    }

    fn spawn(&self, task: lock_impl::Task) {
        tokio::task::spawn_local(self.gate.wrap(task));
    }
}

impl MongoCtl {
    pub fn new(spec: &MongoSpec, key: &str) -> Self {
        MongoCtl {
            members: spec
                .members
                .iter()
                .map(|name| MemberCtl {
                    name: name.clone(),
                    slot: Arc::default(),
                    holder: None,
                    written_at: None,
                    role: Role::Secondary,
                    gate: PauseGate::new(),
                })
                .collect(),
            key: key.to_string(),
            ns_suffix: format!("{}.locks", spec.database),
            writers: BTreeMap::new(),
        }
    }

    /// Adds every member's host to the simulation, each on its clock and under its
    /// pause gate.
    fn add_hosts(&self, b: &mut Build<'_, '_>, spec: &MongoSpec) {
        let seed = sub_seed(b.seed, stream::MONGO);
        let addrs: Vec<String> = spec
            .members
            .iter()
            .map(|m| format!("{m}:{MONGO_PORT}"))
            .collect();
        for (me, member) in self.members.iter().enumerate() {
            let config = MongoConfig {
                set_name: spec.set_name.clone(),
                members: addrs.clone(),
                me,
                heartbeat_ms: spec.heartbeat_ms,
                election_timeout_ms: spec.election_timeout_ms,
                seed,
            };
            let clock = (b.clock_of)(&member.name, b.server_clock);
            let (slot, net, name, gate) = (
                member.slot.clone(),
                b.net.clone(),
                member.name.clone(),
                member.gate.clone(),
            );
            b.sim.host(member.name.as_str(), move || {
                let (slot, net, name, config, gate, clock) = (
                    slot.clone(),
                    net.clone(),
                    name.clone(),
                    config.clone(),
                    gate.clone(),
                    clock.clone(),
                );
                gate.clone().wrap(async move {
                    // What the member had on disk: everything it wrote (see the
                    // model's durability note); a first start has nothing.
                    let durable = slot
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .as_ref()
                        .map(|s| s.read(|m| m.durable().clone()));
                    let first_start = durable.is_none();
                    let shared = SharedMember::on_clock(
                        config,
                        durable.unwrap_or_default(),
                        Arc::new(SimClock::new(clock)),
                    );
                    if first_start {
                        // The set was initiated before the run: mongo-1 is primary.
                        shared.with(|m| m.initiate(0, Duration::ZERO));
                    }
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
                    start_background(
                        &shared,
                        Arc::new(PeerDialer {
                            me: name.clone(),
                            net: net.clone(),
                            gate: gate.clone(),
                        }),
                    );
                    let listener = turmoil::net::TcpListener::bind((
                        std::net::Ipv4Addr::UNSPECIFIED,
                        MONGO_PORT,
                    ))
                    .await?;
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
    }

    /// The members' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.name.as_str())
    }

    /// The member that is primary by the observer's record and holds the lock.
    fn primary_holding(&self) -> Option<&MemberCtl> {
        self.members
            .iter()
            .find(|m| m.role == Role::Primary && m.holder.is_some())
    }

    /// The host of the lock's holder, by the primary's record.
    pub fn owner(&self) -> Option<&str> {
        self.primary_holding()
            .and_then(|m| m.holder.as_ref())
            .map(|(_, h)| h.as_str())
    }

    /// The primary, if it holds the lock.
    pub fn server_holding(&self) -> Option<String> {
        self.primary_holding().map(|m| m.name.clone())
    }

    /// The writer host of the lock on `member`, by its record.
    pub fn writer_on(&self, member: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.name == member)
            .and_then(|m| m.holder.as_ref())
            .map(|(_, h)| h.as_str())
    }

    /// The primary whose record holds the lock by a client's write, the write's
    /// position and a description; with `unreplicated`, only while no other member has
    /// applied that entry (by their own oplogs) or holds the lock at all.
    pub fn lock_primary(&self, unreplicated: bool) -> Option<(String, String, u64)> {
        let p = self.primary_holding()?;
        let written = p.written_at?;
        let mut applied = Vec::new();
        for m in self.members.iter().filter(|m| m.name != p.name) {
            let Some(s) = m.shared() else { continue };
            let (last, has_it) = s.read(|mm| {
                let last = mm.last_applied();
                let has = mm
                    .durable()
                    .oplog
                    .get(written.ts as usize - 1)
                    .is_some_and(|e| e.optime == written);
                (last, has)
            });
            if unreplicated && (has_it || m.holder.is_some()) {
                return None;
            }
            applied.push(format!("{}={last}", m.name));
        }
        Some((
            p.name.clone(),
            format!(
                "lock write at optime {written} on the primary alone; applied: {}",
                applied.join(" ")
            ),
            written.ts,
        ))
    }

    /// Moves every member's new events into the history at `now`.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        let at = now.as_micros() as u64;
        for i in 0..self.members.len() {
            let Some(shared) = self.members[i].shared() else {
                continue;
            };
            let events = shared.with(|m| m.take_events());
            let name = self.members[i].name.clone();
            let record = |kind: ServerEvent| recorder.record_at(at, &name, EventKind::Server(kind));
            for event in events {
                match event {
                    MemberEvent::Role { role, term, why } => {
                        self.members[i].role = if role == "PRIMARY" {
                            Role::Primary
                        } else {
                            Role::Secondary
                        };
                        record(ServerEvent::Role {
                            role: format!("{} (term {term}): {why}", role.to_lowercase()),
                        });
                    }
                    MemberEvent::Rollback {
                        common,
                        undone,
                        last_undone,
                        source,
                    } => record(ServerEvent::MongoRollback {
                        source,
                        common: common.to_string(),
                        last_undone: last_undone.to_string(),
                        undone: undone as u64,
                    }),
                    MemberEvent::Changed {
                        ns,
                        id,
                        before,
                        after,
                        optime,
                        origin,
                    } => {
                        if !ns.ends_with(&self.ns_suffix) || id.as_str() != Some(self.key.as_str())
                        {
                            continue;
                        }
                        if let Origin::Client(host) = &origin {
                            self.writers.insert(optime, host.clone());
                        }
                        let by = match &origin {
                            Origin::Client(h) => h.clone(),
                            Origin::Replicated => self
                                .writers
                                .get(&optime)
                                .cloned()
                                .unwrap_or_else(|| "replication".into()),
                            Origin::RolledBack => "rollback".into(),
                        };
                        let old = before.as_ref().and_then(lock_value);
                        let new = after.as_ref().and_then(lock_value);
                        if old == new {
                            continue;
                        }
                        let m = &mut self.members[i];
                        if let Some(value) = old {
                            // A secondary that applies a release from the oplog runs
                            // no client command: the command ran on the primary (whose
                            // record says so), perhaps in a life of its client that
                            // has since crashed. Its copy is `replicated`, so no
                            // checker reads it as a new command by the client's
                            // current life.
                            let cause = match (&origin, &new) {
                                (Origin::RolledBack, _) => "rolled-back",
                                (_, Some(_)) => "expired",
                                (Origin::Replicated, None) => "replicated",
                                (Origin::Client(_), None) => "command",
                            };
                            recorder.record_at(
                                at,
                                &name,
                                EventKind::Server(ServerEvent::Removed {
                                    by: by.clone(),
                                    key: self.key.clone(),
                                    value,
                                    cause: cause.into(),
                                }),
                            );
                            m.holder = None;
                            m.written_at = None;
                        }
                        if let Some(value) = new {
                            recorder.record_at(
                                at,
                                &name,
                                EventKind::Server(ServerEvent::Written {
                                    by: by.clone(),
                                    key: self.key.clone(),
                                    value: value.clone(),
                                }),
                            );
                            m.written_at = matches!(origin, Origin::Client(_)).then_some(optime);
                            m.holder = Some((value, by));
                        }
                    }
                }
            }
        }
    }
}

impl SystemSpec for MongoSpec {
    fn host_names(&self) -> Vec<String> {
        self.members.clone()
    }

    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let ctl = MongoCtl::new(self, b.key);
        ctl.add_hosts(b, self);
        Box::new(ctl)
    }

    fn client_deps(&self, deps: &mut lock_impl::Deps, reach: &SystemReach) {
        deps.systems.insert(lock_impl::mongo::MongoServer {
            seeds: self
                .members
                .iter()
                .map(|m| (m.clone(), MONGO_PORT))
                .collect(),
            database: self.database.clone(),
            dialer: reach.dialer.clone(),
            timeout_ms: reach.response_timeout_ms,
        });
    }
}

impl LockSystem for MongoCtl {
    fn hosts(&self) -> Vec<String> {
        self.names().map(String::from).collect()
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        self.members
            .iter()
            .find(|m| m.name == host)
            .map(|m| m.gate.clone())
    }

    fn lock_owner(&self, _key: &str) -> Option<String> {
        self.owner().map(String::from)
    }

    fn lock_server(&self, _key: &str) -> Option<String> {
        self.server_holding()
    }

    fn lock_writers(&self, _key: &str) -> Vec<String> {
        self.members
            .iter()
            .filter_map(|m| self.writer_on(&m.name).map(String::from))
            .collect()
    }

    /// A primary holding the lock by a client's write (that no other member has, for
    /// the unreplicated moment; in its writer's hands, for the fresh one).
    fn lock_write(
        &self,
        _key: &str,
        recorder: &Recorder,
        moment: WriteMoment,
    ) -> Option<LockWrite> {
        let unreplicated = moment == WriteMoment::Unreplicated;
        let (server, detail, position) = self.lock_primary(unreplicated)?;
        let in_hand = unreplicated
            || self
                .writer_on(&server)
                .is_some_and(|w| recorder.holders().iter().any(|h| h == w));
        in_hand.then_some(LockWrite {
            server,
            detail,
            position,
        })
    }

    fn crashed(&mut self, _host: &str, _machine: bool, _now: Duration, _recorder: &Recorder) {
        // What a member keeps is read back from its last run at its restart.
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        MongoCtl::drain(self, recorder, now);
    }
}

/// MongoDB's record: `SystemSpecs::mongo` (the workload's `mongo`), by default
/// [`MongoSpec::default`].
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::MongoDb,
    capabilities: MONGO_CAPABILITIES,
};

impl WorkloadPart for MongoSpec {
    fn default_for_lease(_lease_ms: u64) -> Self {
        MongoSpec::default()
    }

    fn validate(&self) -> Result<(), String> {
        let m = self;
        if m.members.is_empty() || m.members.len() > 7 {
            return Err(format!(
                "workload.mongo.members has {} members: a replica set here has 1 to 7",
                m.members.len()
            ));
        }
        if m.heartbeat_ms == 0 || m.election_timeout_ms == 0 {
            return Err(
                "workload.mongo heartbeat_ms and election_timeout_ms must be positive".into(),
            );
        }
        Ok(())
    }
}
