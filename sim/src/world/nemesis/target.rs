//! Targeting: which hosts a fault's [`Target`] names at its start, and, for a target
//! that waits for its moment (a fresh or unreplicated lock grant, a given client
//! holding the lock, a granted acquisition in flight), whether that moment has come.
//!
//! Every target reads the world as the nemesis sees it: the history's holders and
//! acquirers (the recorder), each server's own record of the lock key (the observer)
//! and the servers' replication state.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::faults::{FaultKind, Target};

use super::ctl::WorldCtl;

/// The hosts `target` names at this moment: none if it names nobody (then the fault is
/// a no-op and records nothing). A target that names one of several candidates
/// (the holder, an acquirer) picks it with `rng`.
pub(super) fn resolve(target: &Target, world: &WorldCtl, rng: &mut ChaCha8Rng) -> Vec<String> {
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
            .or_else(|| world.zk.as_ref().and_then(|z| z.owner()).map(String::from))
            .or_else(|| {
                world
                    .mysql
                    .as_ref()
                    .and_then(|m| m.owner())
                    .map(String::from)
            })
            .or_else(|| {
                world
                    .mongo
                    .as_ref()
                    .and_then(|m| m.owner())
                    .map(String::from)
            })
            .filter(|h| world.clients.contains_key(h))
            .into_iter()
            .collect(),
        Target::LockServer => world
            .observer
            .server_holding(&world.servers, &world.key)
            .or_else(|| {
                // An ensemble's lock server is its leader.
                world.zk.as_ref().filter(|z| z.holds()).and_then(|z| {
                    if z.is_ensemble() {
                        z.leader()
                    } else {
                        Some(z.name.clone())
                    }
                })
            })
            .or_else(|| {
                world
                    .mysql
                    .as_ref()
                    .filter(|m| m.holds())
                    .map(|m| m.name.clone())
            })
            .or_else(|| world.mongo.as_ref().and_then(|m| m.server_holding()))
            .into_iter()
            .collect(),
        Target::UnreplicatedLockMaster { .. } => lock_master(world, true)
            .map(|(name, _, _)| name)
            .or_else(|| {
                world
                    .mysql
                    .as_ref()
                    .and_then(|m| m.unreplicated_lock_master())
                    .map(|(name, _)| name)
            })
            .into_iter()
            .collect(),
        Target::FreshLockMaster { .. } => lock_master(world, false)
            .map(|(name, _, _)| name)
            .or_else(|| {
                world
                    .mysql
                    .as_ref()
                    .and_then(|m| m.fresh_lock_master())
                    .map(|(name, _)| name)
            })
            .into_iter()
            .collect(),
        Target::LockServerOf { client, .. } => {
            server_of_holder(world, client).into_iter().collect()
        }
        Target::MidAcquire { .. } => pick(granted_acquirers(world)),
        Target::ZkLeader | Target::ZkLeaderAfterLockCreate { .. } => world
            .zk
            .as_ref()
            .and_then(|z| z.leader())
            .into_iter()
            .collect(),
        Target::ZkBusiestFollower => world
            .zk
            .as_ref()
            .and_then(|z| z.followers().into_iter().find(|(_, n)| *n > 0))
            .map(|(f, _)| f)
            .into_iter()
            .collect(),
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

/// The master whose record holds the lock key with replicas attached, the offset of
/// its last lock write and a description; with `unreplicated`, only if the write is at
/// a replication offset that no replica has acknowledged (by the master's record) or
/// received (by the replicas' own offsets), and no replica holds the key at all.
fn lock_master(world: &WorldCtl, unreplicated: bool) -> Option<(String, String, u64)> {
    // A MongoDB primary holding the lock by a client's write (that no other member
    // has, for the unreplicated moment).
    if let Some(mongo) = &world.mongo
        && let Some((name, detail, ts)) = mongo.lock_primary(unreplicated)
    {
        let fresh_in_hand = unreplicated
            || mongo
                .writer_on(&name)
                .is_some_and(|w| world.recorder.holders().iter().any(|h| h == w));
        if fresh_in_hand {
            return Some((name, detail, ts));
        }
    }
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
    /// The ZooKeeper leader committed a lock node's create
    /// (`zk-leader-after-lock-create`).
    ZkLockCreate,
}

/// How long a fault waits for its target's moment, and which moment, if it targets
/// one.
fn waits_for(kind: &FaultKind) -> Option<(u64, Moment)> {
    kind.targets().into_iter().find_map(|t| match t {
        Target::UnreplicatedLockMaster { within_ms } => Some((*within_ms, Moment::Unreplicated)),
        Target::FreshLockMaster { within_ms } => Some((*within_ms, Moment::Fresh)),
        Target::LockServerOf { client, within_ms } => {
            Some((*within_ms, Moment::HeldBy(client.clone())))
        }
        Target::MidAcquire { within_ms } => Some((*within_ms, Moment::MidAcquire)),
        Target::ZkLeaderAfterLockCreate { within_ms } => Some((*within_ms, Moment::ZkLockCreate)),
        _ => None,
    })
}

/// Why the moment a fault of `kind` waited for is the one, as its start record says it
/// (` (…)`); empty for a fault that waits for nothing.
pub(super) fn moment(kind: &FaultKind, world: &WorldCtl) -> String {
    match waits_for(kind) {
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
        Some((_, Moment::ZkLockCreate)) => {
            world
                .zk
                .as_ref()
                .and_then(|z| z.lock_create)
                .map(|(zxid, _)| {
                    (
                        String::new(),
                        format!("a lock node's create committed at zxid 0x{zxid:x}"),
                        0,
                    )
                })
        }
        None => None,
    }
    .map(|(_, d, _)| format!(" ({d})"))
    .unwrap_or_default()
}

/// Faults waiting for their moment, with the time each gives up.
#[derive(Default)]
pub(super) struct Waiting {
    armed: Vec<Armed>,
    /// When each lock write (server, offset) was first seen by a waiting fault.
    write_seen: BTreeMap<(String, u64), Duration>,
}

/// A fault waiting for its moment.
struct Armed {
    fault: usize,
    since: Duration,
    until: Duration,
    moment: Moment,
}

impl Waiting {
    /// Whether no fault waits.
    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }

    /// Arms fault `fault` of `kind` at `now` if its target waits for a moment; false if
    /// it waits for nothing (start it now).
    pub fn arm(&mut self, fault: usize, kind: &FaultKind, now: Duration) -> bool {
        let Some((within, moment)) = waits_for(kind) else {
            return false;
        };
        self.armed.push(Armed {
            fault,
            since: now,
            until: now + Duration::from_millis(within),
            moment,
        });
        true
    }

    /// The waiting faults whose moment has come at `now`, in the order they were armed,
    /// no longer waiting; a fault whose wait ran out is dropped (a no-op). Whether a
    /// moment came is judged on the world as it is before any of them starts.
    pub fn ripe(&mut self, world: &WorldCtl, now: Duration, reply_delay: Duration) -> Vec<usize> {
        if self.armed.is_empty() {
            return Vec::new();
        }
        // The moment: a lock write made after the fault was armed, whose reply has had
        // time to reach its client (the master acknowledged it), and (for the
        // unreplicated kind) still on no replica.
        let mut first_seen = |unreplicated: bool| {
            lock_master(world, unreplicated)
                .map(|(server, _, offset)| (server, offset))
                .or_else(|| {
                    // A MySQL primary's grant its replica lacks (numbered by the
                    // world's record of the key's writes).
                    // (For the fresh kind: its grant, replicated or not.)
                    world.mysql.as_ref().and_then(|m| {
                        if unreplicated {
                            m.unreplicated_lock_master()
                        } else {
                            // In hand: the history shows its writer holding it.
                            m.fresh_lock_master().filter(|_| {
                                m.owner().is_some_and(|w| {
                                    world.recorder.holders().iter().any(|h| h == w)
                                })
                            })
                        }
                    })
                })
                .map(|(server, offset)| *self.write_seen.entry((server, offset)).or_insert(now))
        };
        let (unreplicated_since, fresh_since) = (first_seen(true), first_seen(false));
        let ripe = |moment: &Moment, armed_at: Duration| {
            let since = match moment {
                Moment::Unreplicated => unreplicated_since,
                Moment::Fresh => fresh_since,
                Moment::HeldBy(client) => return server_of_holder(world, client).is_some(),
                Moment::MidAcquire => return !granted_acquirers(world).is_empty(),
                Moment::ZkLockCreate => {
                    return world
                        .zk
                        .as_ref()
                        .and_then(|z| z.lock_create)
                        .is_some_and(|(_, seen)| seen > armed_at);
                }
            };
            since.is_some_and(|t| t > armed_at && now >= t + reply_delay)
        };
        let mut start = Vec::new();
        for a in std::mem::take(&mut self.armed) {
            let r = ripe(&a.moment, a.since);
            if now > a.until {
                continue;
            }
            if r {
                start.push(a.fault);
            } else {
                self.armed.push(a);
            }
        }
        start
    }
}
