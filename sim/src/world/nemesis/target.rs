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
use crate::world::system::{LockWrite, WriteMoment};

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
            .systems
            .first(|s| s.lock_owner(&world.key))
            .filter(|h| world.clients.contains_key(h))
            .into_iter()
            .collect(),
        Target::LockServer => world
            .systems
            .first(|s| s.lock_server(&world.key))
            .into_iter()
            .collect(),
        Target::UnreplicatedLockMaster { .. } => lock_write(world, WriteMoment::Unreplicated)
            .map(|w| w.server)
            .into_iter()
            .collect(),
        Target::FreshLockMaster { .. } => lock_write(world, WriteMoment::Fresh)
            .map(|w| w.server)
            .into_iter()
            .collect(),
        Target::LockServerOf { client, .. } => {
            server_of_holder(world, client).into_iter().collect()
        }
        Target::MidAcquire { .. } => pick(granted_acquirers(world)),
        Target::Leader | Target::LeaderAfterLockCreate { .. } => {
            world.systems.first(|s| s.leader()).into_iter().collect()
        }
        Target::BusiestFollower => world
            .systems
            .first(|s| s.busiest_follower())
            .into_iter()
            .collect(),
        Target::AllServers => world.server_names(),
        Target::AllClients => world.clients.keys().cloned().collect(),
        Target::Rest => {
            // The clients, the lock servers, then the helpers (Sentinels).
            let servers = world.server_names();
            let helpers: Vec<String> = world
                .systems
                .hosts()
                .into_iter()
                .filter(|h| !servers.contains(h))
                .collect();
            world
                .clients
                .keys()
                .cloned()
                .chain(servers)
                .chain(helpers)
                .collect()
        }
    }
}

/// The lock write `moment` names, on whichever system has one (see
/// [`LockSystem::lock_write`](crate::world::system::LockSystem::lock_write)).
fn lock_write(world: &WorldCtl, moment: WriteMoment) -> Option<LockWrite> {
    world
        .systems
        .first(|s| s.lock_write(&world.key, &world.recorder, moment))
}

/// The first server (in world order) whose record holds the lock key with the owner
/// value the history shows `client` holding, while it holds it.
fn server_of_holder(world: &WorldCtl, client: &str) -> Option<String> {
    let owner = world.recorder.holder_owner(client)?;
    world
        .systems
        .first(|s| s.server_holding_value(&world.key, &owner))
}

/// Clients with an acquire in flight that some server's record already shows as the
/// lock key's writer.
fn granted_acquirers(world: &WorldCtl) -> Vec<String> {
    let writers: std::collections::BTreeSet<String> = world
        .systems
        .0
        .iter()
        .flat_map(|s| s.lock_writers(&world.key))
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
    /// The leader committed a lock entry's create (`zk-leader-after-lock-create`).
    LockCreate,
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
        Target::LeaderAfterLockCreate { within_ms } => Some((*within_ms, Moment::LockCreate)),
        _ => None,
    })
}

/// Why the moment a fault of `kind` waited for is the one, as its start record says it
/// (` (…)`); empty for a fault that waits for nothing.
pub(super) fn moment(kind: &FaultKind, world: &WorldCtl) -> String {
    match waits_for(kind) {
        Some((_, Moment::Unreplicated)) => {
            lock_write(world, WriteMoment::Unreplicated).map(|w| w.detail)
        }
        Some((_, Moment::Fresh)) => lock_write(world, WriteMoment::Fresh).map(|w| w.detail),
        Some((_, Moment::HeldBy(client))) => server_of_holder(world, &client).map(|_| {
            let owner = world.recorder.holder_owner(&client).unwrap_or_default();
            format!("{client} holds the lock, owner={owner}")
        }),
        Some((_, Moment::MidAcquire)) => {
            Some("a server has granted the acquisition in flight".to_string())
        }
        Some((_, Moment::LockCreate)) => world
            .systems
            .first(|s| s.committed_lock_create().map(|c| c.detail)),
        None => None,
    }
    .filter(|d| !d.is_empty())
    .map(|d| format!(" ({d})"))
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
        let mut first_seen = |moment: WriteMoment| {
            lock_write(world, moment)
                .map(|w| *self.write_seen.entry((w.server, w.position)).or_insert(now))
        };
        let (unreplicated_since, fresh_since) = (
            first_seen(WriteMoment::Unreplicated),
            first_seen(WriteMoment::Fresh),
        );
        let ripe = |moment: &Moment, armed_at: Duration| {
            let since = match moment {
                Moment::Unreplicated => unreplicated_since,
                Moment::Fresh => fresh_since,
                Moment::HeldBy(client) => return server_of_holder(world, client).is_some(),
                Moment::MidAcquire => return !granted_acquirers(world).is_empty(),
                Moment::LockCreate => {
                    return world
                        .systems
                        .first(|s| s.committed_lock_create())
                        .is_some_and(|c| c.seen > armed_at);
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
