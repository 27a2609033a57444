//! The nemesis: applies the fault plan between simulation steps, and ends each fault
//! when its time comes. Every start and end is recorded as a fault event on the host
//! it hit.
//!
//! Faults compose: two pauses of one host end when the later ends (the pause gate keeps
//! the latest end), two partitions or delays of one link are tracked per fault (the
//! link heals when the last ends), and a crash of a host that is already down is a
//! no-op.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::faults::{FaultKind, FaultPlan, Target};
use crate::history::{EventKind, FaultPhase};
use crate::net::NetFaults;
use crate::recorder::Recorder;

use super::config::sub_seed;
use super::observe::Observer;
use super::servers::ServerCtl;

/// Per-client handles the nemesis reaches into.
pub(crate) struct ClientCtl {
    pub gate: crate::pause::PauseGate,
    /// Extra critical-section time for the next hold (slow-work faults).
    pub slow_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A pause armed for the next write (fault index, duration).
    pub pause_before_write: super::client::PauseBeforeWrite,
}

/// Everything in the world the nemesis can hurt, and what it aims with.
pub(crate) struct WorldCtl {
    pub recorder: Recorder,
    pub net: NetFaults,
    pub clients: BTreeMap<String, ClientCtl>,
    /// In world order (`Deps.servers` order).
    pub servers: Vec<ServerCtl>,
    /// The Sentinels, if any.
    pub sentinels: Vec<super::sentinels::SentinelCtl>,
    pub observer: Observer,
    /// Every host's clock, by host name.
    pub clocks: BTreeMap<String, crate::clock::HostClock>,
    /// The lock key (for the targets that follow the server's record).
    pub key: String,
    /// The longest one-way latency plus a tick: a reply sent that long ago has reached
    /// its client.
    pub reply_delay: Duration,
}

impl WorldCtl {
    fn server(&self, name: &str) -> Option<&ServerCtl> {
        self.servers.iter().find(|s| s.name == name)
    }

    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    fn sentinel(&self, name: &str) -> Option<&super::sentinels::SentinelCtl> {
        self.sentinels.iter().find(|s| s.name == name)
    }

    fn is_host(&self, name: &str) -> bool {
        self.clients.contains_key(name)
            || self.server(name).is_some()
            || self.sentinel(name).is_some()
    }

    /// Drains every server's and Sentinel's record now (before a memory goes).
    pub fn observe(&mut self, now: Duration) {
        self.observer.drain(&self.servers, &self.recorder, now);
        self.observer
            .drain_sentinels(&self.sentinels, &self.recorder, now);
    }
}

/// The master whose record holds the lock key written at a replication offset that no
/// replica has acknowledged (by the master's record) or received (by the replicas'
/// own offsets), with a description of the offsets.
fn unreplicated_lock_master(world: &WorldCtl) -> Option<(String, String, u64)> {
    lock_master(world, true)
}

/// The master whose record holds the lock key with replicas attached, the offset of
/// its last lock write and a description; with `unreplicated`, only if no replica
/// acknowledged, received or holds the key (see [`unreplicated_lock_master`]).
fn lock_master(world: &WorldCtl, unreplicated: bool) -> Option<(String, String, u64)> {
    for server in &world.servers {
        if !world.observer.holds(&server.name, &world.key) {
            continue;
        }
        let Some(engine) = server.engine() else {
            continue;
        };
        let found = engine.with_engine(|e| {
            let repl = e.engine.replication();
            if repl.role != crate::redis::replication::Role::Master || repl.replicas.is_empty() {
                return None;
            }
            // A write made before any replica connected went into no stream (offset
            // 0): it is not a moment of replication.
            let written = e.engine.write_offset(&world.key).filter(|w| *w > 0)?;
            let acked = repl
                .replicas
                .values()
                .map(|r| r.ack_offset)
                .max()
                .unwrap_or(0);
            (!unreplicated || acked < written).then(|| {
                let acks: Vec<String> = repl
                    .replicas
                    .values()
                    .map(|r| format!("{}={}", r.ip, r.ack_offset))
                    .collect();
                (written, acks.join(" "))
            })
        });
        let Some((written, acks)) = found else {
            continue;
        };
        // A fresh grant counts once it is in the client's hands: the history shows the
        // writer holding the lock (its acquire completed, `WAIT` included).
        if !unreplicated
            && !world
                .observer
                .writer_on(&server.name, &world.key)
                .is_some_and(|w| world.recorder.holders().iter().any(|h| h == w))
        {
            continue;
        }
        // What the replicas themselves have applied: the write must not have reached
        // any of them yet.
        let mut applied = Vec::new();
        for r in &world.servers {
            let Some(e) = r.engine() else { continue };
            let offset = e.with_engine(|e| {
                let repl = e.engine.replication();
                match &repl.role {
                    crate::redis::replication::Role::Replica { host, .. }
                        if *host == server.name =>
                    {
                        Some(repl.offset)
                    }
                    _ => None,
                }
            });
            if let Some(o) = offset {
                applied.push((r.name.clone(), o));
            }
        }
        // ... and none of them holds the lock key at all: promoted, it would grant the
        // lock afresh (a replica that still holds an older grant would only block).
        if unreplicated
            && applied
                .iter()
                .any(|(name, o)| *o >= written || world.observer.holds(name, &world.key))
        {
            continue;
        }
        let applied: Vec<String> = applied.iter().map(|(n, o)| format!("{n}={o}")).collect();
        return Some((
            server.name.clone(),
            format!(
                "lock write at offset {written}; acknowledged: {acks}; applied: {}",
                applied.join(" ")
            ),
            written,
        ));
    }
    None
}

/// The first server (in world order) whose record holds the lock key with the owner
/// value the history shows `client` holding, while it holds it.
fn server_of_holder(world: &WorldCtl, client: &str) -> Option<String> {
    let owner = world.recorder.holder_owner(client)?;
    world
        .observer
        .server_holding_value(&world.servers, &world.key, &owner)
}

/// Clients with an acquire in flight that some server's record already shows as the
/// lock key's writer.
fn granted_acquirers(world: &WorldCtl) -> Vec<String> {
    let writers: std::collections::BTreeSet<&str> = world
        .servers
        .iter()
        .filter_map(|s| world.observer.writer_on(&s.name, &world.key))
        .collect();
    world
        .recorder
        .acquirers()
        .into_iter()
        .filter(|c| writers.contains(c.as_str()))
        .collect()
}

/// A fault end still to apply.
enum Pending {
    PauseEnd {
        fault: usize,
        host: String,
    },
    Restart {
        fault: usize,
        host: String,
        machine: bool,
    },
    DelayEnd {
        fault: usize,
        host: String,
    },
    PushesBack {
        fault: usize,
    },
    RateBack {
        fault: usize,
        host: String,
        drift_ppm: i64,
    },
    Heal {
        fault: usize,
        hosts: Vec<String>,
        detail: String,
    },
}

/// The fault plan's state during a run.
pub(crate) struct Nemesis {
    plan: FaultPlan,
    /// Fault indices by start time (stable: plan order breaks ties).
    order: Vec<usize>,
    next: usize,
    pending: Vec<(Duration, Pending)>,
    /// Faults waiting for their moment (an `unreplicated-lock-master` target), with the
    /// time they give up.
    armed: Vec<Armed>,
    /// When each lock write (server, offset) was first seen by a waiting fault.
    write_seen: BTreeMap<(String, u64), Duration>,
    rng: ChaCha8Rng,
}

/// A fault waiting for its moment.
struct Armed {
    fault: usize,
    since: Duration,
    until: Duration,
    moment: Moment,
}

/// The moment a waiting fault waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Moment {
    /// A lock write no replica has (`unreplicated-lock-master`).
    Unreplicated,
    /// A fresh grant in the client's hands (`fresh-lock-master`).
    Fresh,
    /// The named client holds the lock (`lock-server-of`).
    HeldBy(String),
    /// A granted acquisition is still in flight (`mid-acquire`).
    MidAcquire,
}

/// How long a fault waits for its target's moment, and which moment, if it targets
/// one.
fn waits_for(kind: &FaultKind) -> Option<(u64, Moment)> {
    let of = |t: &Target| match t {
        Target::UnreplicatedLockMaster { within_ms } => Some((*within_ms, Moment::Unreplicated)),
        Target::FreshLockMaster { within_ms } => Some((*within_ms, Moment::Fresh)),
        Target::LockServerOf { client, within_ms } => {
            Some((*within_ms, Moment::HeldBy(client.clone())))
        }
        Target::MidAcquire { within_ms } => Some((*within_ms, Moment::MidAcquire)),
        _ => None,
    };
    match kind {
        FaultKind::Pause { target, .. }
        | FaultKind::Crash { target, .. }
        | FaultKind::MachineCrash { target, .. }
        | FaultKind::Delay { target, .. }
        | FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::PauseBeforeWrite { target, .. }
        | FaultKind::SlowWork { target, .. } => of(target),
        FaultKind::Partition { a, b, .. } => a.iter().chain(b).find_map(of),
        FaultKind::DropPushes { .. } => None,
    }
}

fn fault_event(
    recorder: &Recorder,
    now: Duration,
    host: &str,
    fault: usize,
    phase: FaultPhase,
    detail: String,
) {
    partition_event(recorder, now, host, fault, phase, detail, Vec::new());
}

/// A fault event naming the hosts `host` is cut off from (a partition's other side).
fn partition_event(
    recorder: &Recorder,
    now: Duration,
    host: &str,
    fault: usize,
    phase: FaultPhase,
    detail: String,
    peers: Vec<String>,
) {
    recorder.record_at(
        now.as_micros() as u64,
        host,
        EventKind::Fault {
            fault,
            phase,
            detail,
            peers,
        },
    );
}

/// Records a clock's state after a change.
fn clock_event(
    recorder: &Recorder,
    now: Duration,
    host: &str,
    clock: &crate::clock::HostClock,
    step_ms: i64,
) {
    recorder.record_at(
        now.as_micros() as u64,
        host,
        EventKind::Clock {
            wall_offset_us: clock.wall_offset_us(now),
            drift_ppm: clock.drift_ppm(),
            step_ms,
        },
    );
}

impl Nemesis {
    pub fn new(plan: &FaultPlan, seed: u64) -> Self {
        let mut order: Vec<usize> = (0..plan.faults.len()).collect();
        order.sort_by_key(|&i| plan.faults[i].at_ms);
        Self {
            plan: plan.clone(),
            order,
            next: 0,
            pending: Vec::new(),
            armed: Vec::new(),
            write_seen: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(sub_seed(seed, 1)),
        }
    }

    /// When the nemesis must be asked again, if nothing else happens first: the next
    /// fault start or end; every tick while a fault waits for its moment (whether it
    /// came is judged on each tick's state).
    pub fn next_due(&self, now: Duration) -> Duration {
        if !self.armed.is_empty() {
            return now;
        }
        let start = self
            .order
            .get(self.next)
            .map(|&i| Duration::from_millis(self.plan.faults[i].at_ms));
        let end = self.pending.iter().map(|(at, _)| *at).min();
        start.into_iter().chain(end).min().unwrap_or(Duration::MAX)
    }

    /// Applies every fault end and start due at `now`: ends first, in due order.
    /// Returns whether it started or ended anything (and so may have woken a host's
    /// task from outside the simulation: the caller then runs every host in the next
    /// step, [`turmoil::Sim::wake_all`]). Before the first action, every host skipped
    /// as idle is run up to now ([`turmoil::Sim::catch_up`]), so that a task the fault
    /// wakes runs in the next step after its messages, as tick-by-tick stepping runs
    /// it, not in its host's catch-up before them. An error is the software's, from
    /// that catch-up.
    pub fn apply_due(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut WorldCtl,
        now: Duration,
    ) -> Result<bool, String> {
        let mut acted = false;
        let settle = |sim: &mut turmoil::Sim<'_>, acted: &mut bool| {
            if !std::mem::replace(acted, true) {
                sim.catch_up().map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        };
        self.pending.sort_by_key(|(at, _)| *at);
        while self.pending.first().is_some_and(|(at, _)| *at <= now) {
            settle(sim, &mut acted)?;
            let (_, p) = self.pending.remove(0);
            self.end(sim, world, now, p);
        }
        while self.next < self.order.len()
            && Duration::from_millis(self.plan.faults[self.order[self.next]].at_ms) <= now
        {
            let index = self.order[self.next];
            self.next += 1;
            if let Some((within, moment)) = waits_for(&self.plan.faults[index].kind) {
                self.armed.push(Armed {
                    fault: index,
                    since: now,
                    until: now + Duration::from_millis(within),
                    moment,
                });
            } else {
                settle(sim, &mut acted)?;
                self.start(sim, world, now, index);
            }
        }
        if self.armed.is_empty() {
            return Ok(acted);
        }
        // The moment: a lock write made after the fault was armed, whose reply has had
        // time to reach its client (the master acknowledged it), and (for the
        // unreplicated kind) still on no replica.
        let mut first_seen = |unreplicated: bool| {
            lock_master(world, unreplicated)
                .map(|(server, _, offset)| *self.write_seen.entry((server, offset)).or_insert(now))
        };
        let (unreplicated_since, fresh_since) = (first_seen(true), first_seen(false));
        let reply_delay = world.reply_delay;
        let ripe = |moment: &Moment, armed_at: Duration| {
            let since = match moment {
                Moment::Unreplicated => unreplicated_since,
                Moment::Fresh => fresh_since,
                Moment::HeldBy(client) => return server_of_holder(world, client).is_some(),
                Moment::MidAcquire => return !granted_acquirers(world).is_empty(),
            };
            since.is_some_and(|t| t > armed_at && now >= t + reply_delay)
        };
        let armed: Vec<(Armed, bool)> = std::mem::take(&mut self.armed)
            .into_iter()
            .map(|a| {
                let r = ripe(&a.moment, a.since);
                (a, r)
            })
            .collect();
        for (a, ripe) in armed {
            if now > a.until {
                continue;
            }
            if ripe {
                settle(sim, &mut acted)?;
                self.start(sim, world, now, a.fault);
            } else {
                self.armed.push(a);
            }
        }
        Ok(acted)
    }

    fn end(&mut self, sim: &mut turmoil::Sim<'_>, world: &mut WorldCtl, now: Duration, p: Pending) {
        let rec = &world.recorder;
        match p {
            Pending::PauseEnd { fault, host } => {
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("pause of {host} ends"),
                );
            }
            Pending::Restart {
                fault,
                host,
                machine,
            } => {
                if machine {
                    world.net.machine_back(&host);
                }
                sim.bounce(host.as_str());
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("{host} restarts"),
                );
            }
            Pending::PushesBack { fault } => {
                for server in &world.servers {
                    server.set_drop_pushes(false);
                }
                fault_event(
                    rec,
                    now,
                    &world.servers[0].name,
                    fault,
                    FaultPhase::End,
                    "the servers deliver pub/sub messages again".into(),
                );
            }
            Pending::RateBack {
                fault,
                host,
                drift_ppm,
            } => {
                if let Some(clock) = world.clocks.get(&host) {
                    clock.set_drift(now, drift_ppm);
                    clock_event(rec, now, &host, clock, 0);
                }
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("{host}'s clock runs at {drift_ppm} ppm again"),
                );
            }
            Pending::DelayEnd { fault, host } => {
                world.net.end_delay(fault);
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("messages to {host} on time again"),
                );
            }
            Pending::Heal {
                fault,
                hosts,
                detail,
            } => {
                world.net.release(fault);
                for host in hosts {
                    fault_event(
                        rec,
                        now,
                        &host,
                        fault,
                        FaultPhase::End,
                        format!("partition heals: {detail}"),
                    );
                }
            }
        }
    }

    /// The hosts `target` names at `now`: none if it names nobody (then the fault is a
    /// no-op and records nothing).
    fn resolve(&mut self, target: &Target, world: &WorldCtl) -> Vec<String> {
        let rng = &mut self.rng;
        let mut pick = |candidates: Vec<String>| {
            if candidates.is_empty() {
                Vec::new()
            } else {
                let i = rng.random_range(0..candidates.len());
                vec![candidates[i].clone()]
            }
        };
        match target {
            Target::Host(h) => {
                if world.is_host(h) {
                    vec![h.clone()]
                } else {
                    Vec::new()
                }
            }
            Target::Holder => pick(world.recorder.holders()),
            Target::Acquirer => pick(world.recorder.acquirers()),
            Target::LockOwner => world
                .observer
                .owner_of(&world.servers, &world.key)
                .filter(|h| world.clients.contains_key(h))
                .into_iter()
                .collect(),
            Target::LockServer => world
                .observer
                .server_holding(&world.servers, &world.key)
                .into_iter()
                .collect(),
            Target::UnreplicatedLockMaster { .. } => unreplicated_lock_master(world)
                .map(|(name, _, _)| name)
                .into_iter()
                .collect(),
            Target::FreshLockMaster { .. } => lock_master(world, false)
                .map(|(name, _, _)| name)
                .into_iter()
                .collect(),
            Target::LockServerOf { client, .. } => {
                server_of_holder(world, client).into_iter().collect()
            }
            Target::MidAcquire { .. } => pick(granted_acquirers(world)),
            Target::AllServers => world.server_names(),
            Target::AllClients => world.clients.keys().cloned().collect(),
            Target::Rest => world
                .clients
                .keys()
                .cloned()
                .chain(world.server_names())
                .chain(world.sentinels.iter().map(|s| s.name.clone()))
                .collect(),
        }
    }

    fn start(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut WorldCtl,
        now: Duration,
        index: usize,
    ) {
        let fault = self.plan.faults[index].clone();
        let after = |ms: u64| now + Duration::from_millis(ms);
        // Why the moment was the one a waiting fault waited for, for its record.
        let moment = match waits_for(&fault.kind) {
            Some((_, Moment::Unreplicated)) => lock_master(world, true),
            Some((_, Moment::Fresh)) => lock_master(world, false),
            Some((_, Moment::HeldBy(client))) => server_of_holder(world, &client).map(|s| {
                let owner = world.recorder.holder_owner(&client).unwrap_or_default();
                (s, format!("{client} holds the lock, owner={owner}"), 0)
            }),
            Some((_, Moment::MidAcquire)) => Some((
                String::new(),
                "a server has granted the acquisition in flight".to_string(),
                0,
            )),
            None => None,
        }
        .map(|(_, d, _)| format!(" ({d})"))
        .unwrap_or_default();
        match &fault.kind {
            FaultKind::DropPushes { duration_ms } => {
                for server in &world.servers {
                    server.set_drop_pushes(true);
                }
                fault_event(
                    &world.recorder,
                    now,
                    &world.servers[0].name,
                    index,
                    FaultPhase::Start,
                    format!("the servers drop pub/sub messages for {duration_ms} ms"),
                );
                self.pending
                    .push((after(*duration_ms), Pending::PushesBack { fault: index }));
            }
            FaultKind::Partition {
                a,
                b,
                one_way,
                duration_ms,
            } => {
                let side = |nemesis: &mut Self, targets: &[Target]| {
                    let mut hosts: Vec<String> = targets
                        .iter()
                        .flat_map(|t| nemesis.resolve(t, world))
                        .collect();
                    hosts.sort();
                    hosts.dedup();
                    hosts
                };
                let mut side_a = side(self, a);
                let mut side_b = side(self, b);
                if b.contains(&Target::Rest) {
                    side_b.retain(|h| !side_a.contains(h));
                } else if a.contains(&Target::Rest) {
                    side_a.retain(|h| !side_b.contains(h));
                }
                if side_a.is_empty() || side_b.is_empty() {
                    return;
                }
                world.net.hold(index, &side_a, &side_b);
                if !one_way {
                    world.net.hold(index, &side_b, &side_a);
                }
                let arrow = if *one_way { "->" } else { "<->" };
                let detail = format!("[{}] {arrow} [{}]", side_a.join(", "), side_b.join(", "));
                // Recorded on every host of side `a`: the side a fault is aimed at (the
                // holder cut off from the servers).
                for host in &side_a {
                    partition_event(
                        &world.recorder,
                        now,
                        host,
                        index,
                        FaultPhase::Start,
                        format!("partition {detail} for {duration_ms} ms{moment}"),
                        side_b.clone(),
                    );
                }
                self.pending.push((
                    after(*duration_ms),
                    Pending::Heal {
                        fault: index,
                        hosts: side_a,
                        detail,
                    },
                ));
            }
            FaultKind::Pause {
                target,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let gate = match world.clients.get(&host) {
                        Some(c) => c.gate.clone(),
                        None => match (world.server(&host), world.sentinel(&host)) {
                            (Some(s), _) => s.gate.clone(),
                            (None, Some(s)) => s.gate.clone(),
                            (None, None) => continue,
                        },
                    };
                    gate.pause_until(after(*duration_ms));
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("pause {host} for {duration_ms} ms"),
                    );
                    self.pending.push((
                        after(*duration_ms),
                        Pending::PauseEnd { fault: index, host },
                    ));
                }
            }
            FaultKind::Crash {
                target,
                restart_after_ms,
            }
            | FaultKind::MachineCrash {
                target,
                restart_after_ms,
            } => {
                let machine = matches!(fault.kind, FaultKind::MachineCrash { .. });
                for host in self.resolve(target, world) {
                    if !sim.is_host_running(host.as_str()) {
                        continue;
                    }
                    // The server's last record first: its memory is about to go.
                    world.observe(now);
                    sim.crash(host.as_str());
                    if machine {
                        world.net.black_hole(&host);
                    } else {
                        world.net.reset_host(&host);
                    }
                    world.recorder.forget_host(&host);
                    let what = if machine { "machine crash" } else { "crash" };
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{what} {host}{moment}"),
                    );
                    if let Some(sentinel) = world.sentinel(&host) {
                        sentinel.crash();
                    }
                    if let Some(server) = world.server(&host).cloned() {
                        if let Some(engine) = server.engine() {
                            world.observer.commands_of_dead_engines +=
                                engine.with_engine(|e| e.engine.commands_processed());
                        }
                        server.crash(machine);
                        if !server.persists() {
                            // Without persistence the memory was all there was; with it,
                            // what came back is compared with the record at restart.
                            world.observer.lose_all(&host, &world.recorder, now);
                        }
                    }
                    if let Some(ms) = restart_after_ms {
                        self.pending.push((
                            after(*ms),
                            Pending::Restart {
                                fault: index,
                                host,
                                machine,
                            },
                        ));
                    }
                }
            }
            FaultKind::Delay {
                target,
                latency_ms,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let from = if world.clients.contains_key(&host) {
                        world.server_names()
                    } else {
                        Vec::new()
                    };
                    world
                        .net
                        .delay(index, &host, &from, Duration::from_millis(*latency_ms));
                    let source = if from.is_empty() {
                        "every host".to_string()
                    } else {
                        from.join(", ")
                    };
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!(
                            "delay messages from {source} to {host} by {latency_ms} ms for {duration_ms} ms"
                        ),
                    );
                    self.pending.push((
                        after(*duration_ms),
                        Pending::DelayEnd { fault: index, host },
                    ));
                }
            }
            FaultKind::ClockJump { target, delta_ms } => {
                for host in self.resolve(target, world) {
                    let Some(clock) = world.clocks.get(&host) else {
                        continue;
                    };
                    clock.step(*delta_ms);
                    let direction = if *delta_ms >= 0 { "forward" } else { "back" };
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!(
                            "{host}'s wall clock jumps {direction} by {} ms{moment}",
                            delta_ms.unsigned_abs()
                        ),
                    );
                    clock_event(&world.recorder, now, &host, clock, *delta_ms);
                }
            }
            FaultKind::ClockDrift {
                target,
                drift_ppm,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let Some(clock) = world.clocks.get(&host) else {
                        continue;
                    };
                    let before = clock.drift_ppm();
                    clock.set_drift(now, *drift_ppm);
                    let how_long = duration_ms
                        .map(|ms| format!(" for {ms} ms"))
                        .unwrap_or_default();
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{host}'s clock runs at {drift_ppm} ppm{how_long}"),
                    );
                    clock_event(&world.recorder, now, &host, clock, 0);
                    if let Some(ms) = duration_ms {
                        self.pending.push((
                            after(*ms),
                            Pending::RateBack {
                                fault: index,
                                host,
                                drift_ppm: before,
                            },
                        ));
                    }
                }
            }
            FaultKind::PauseBeforeWrite {
                target,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let Some(ctl) = world.clients.get(&host) else {
                        continue;
                    };
                    *ctl.pause_before_write
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some((index, *duration_ms));
                }
            }
            FaultKind::SlowWork { target, extra_ms } => {
                for host in self.resolve(target, world) {
                    let Some(ctl) = world.clients.get(&host) else {
                        continue;
                    };
                    ctl.slow_ms.store(*extra_ms, Ordering::Relaxed);
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{host}'s next critical section runs {extra_ms} ms longer"),
                    );
                }
            }
        }
    }
}
