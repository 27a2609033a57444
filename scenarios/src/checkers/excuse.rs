//! What a fault explains: which refusals and waits the liveness rules must excuse.
//!
//! A liveness rule says "this client should have got the lock". A fault excuses the
//! client only if it could have caused the refusal or the wait; excusing every
//! acquire that overlaps any fault on any host left nothing to judge in every world
//! whose fault lasts the run (a lagging replica, a permanent partition, a drifting
//! clock). The rule, per fault kind, from the history alone (the plan's kinds, the
//! fault events' hosts and a partition's two sides, the servers' recorded roles):
//!
//! - **The client itself stalled**: a `pause`, `crash`, `machine-crash` or `delay` of
//!   the client's own host, or a `pause-before-write` of it, overlapping the acquire.
//! - **The servers it needs were out of reach**: at some instant of the acquire, the
//!   masters it could not reach (crashed, paused or delayed, or on the other side of a
//!   partition from it) were every master there was (a single logical lock server,
//!   `params.masters` = 1, replicated or not: a client needs *a* master), or at least
//!   half of them, so no majority was left (independent masters, Redlock: a majority is
//!   what the algorithm needs). Replicas are not needed: a lagging or cut-off replica
//!   excuses nothing until it is promoted. Any delay counts, however small: the
//!   checker cannot know a client's timeouts, so it errs toward excusing.
//! - **Nothing else**: a clock jump or drift (the rules judge "free" by the servers'
//!   own records, which already show a key expired early or kept late), slow work
//!   (it keeps the lock held, which no rule calls free), lost pub/sub messages (a
//!   waiter must not depend on one message: Redisson's falls back to the lock's TTL),
//!   and any fault of a failover monitor or the storage.
//!
//! A history recorded before servers recorded their role at the start has no roles:
//! then every server counts as a master (the conservative reading).

use std::collections::{BTreeMap, BTreeSet};

use sim::faults::FaultKind;
use sim::history::fact::{LockFact, Rank};
use sim::history::{EventKind, History};

use super::model::{self, FaultWindow};

/// The faults of one history, sorted by what they can explain.
#[derive(Debug, Clone)]
pub struct Excuses {
    /// Windows that stall their own host (on a client: excuses its acquires).
    stalls: Vec<FaultWindow>,
    /// Partition windows, with both sides.
    partitions: Vec<FaultWindow>,
    /// Per server: its role changes as (time, is master), in time order.
    roles: BTreeMap<String, Vec<(u64, bool)>>,
    /// Independent masters: a majority of them is needed (`params.masters` ≥ 2).
    majority: bool,
}

impl Excuses {
    /// Reads the fault windows and the servers' roles of `h`.
    pub fn new(h: &History) -> Self {
        let mut roles: BTreeMap<String, Vec<(u64, bool)>> = BTreeMap::new();
        for e in &h.events {
            if let EventKind::Server(s) = &e.kind {
                let entry = roles.entry(e.host.clone()).or_default();
                // A master, an elected primary or leader: each world's one master.
                if let LockFact::Role { rank, .. } = s.fact() {
                    entry.push((e.at_us, matches!(rank, Rank::Master | Rank::Elected)));
                }
            }
        }
        let kind = |w: &FaultWindow| h.plan.faults.get(w.fault).map(|f| &f.kind);
        let (partitions, rest): (Vec<FaultWindow>, Vec<FaultWindow>) = model::fault_windows(h)
            .into_iter()
            .partition(|w| matches!(kind(w), Some(FaultKind::Partition { .. })));
        let stalls = rest
            .into_iter()
            .filter(|w| {
                matches!(
                    kind(w),
                    Some(
                        FaultKind::Pause { .. }
                            | FaultKind::Crash { .. }
                            | FaultKind::MachineCrash { .. }
                            | FaultKind::Delay { .. }
                            | FaultKind::PauseBeforeWrite { .. }
                    )
                )
            })
            .collect();
        Excuses {
            stalls,
            partitions,
            roles,
            majority: h.params.masters >= 2,
        }
    }

    /// The fault (its index in the plan) that explains why `client` was refused, or
    /// kept waiting, at some time in `[from_us, to_us]`; `None` if no fault can.
    pub fn explains(&self, client: &str, from_us: u64, to_us: u64) -> Option<usize> {
        if let Some(w) = self
            .stalls
            .iter()
            .find(|w| w.host == client && w.overlaps(from_us, to_us))
        {
            return Some(w.fault);
        }
        // The instants at which the set of reachable masters can change: the start,
        // each fault start and each role change inside the interval.
        let mut instants: Vec<u64> = vec![from_us];
        instants.extend(
            self.stalls
                .iter()
                .chain(&self.partitions)
                .map(|w| w.start_us)
                .chain(self.roles.values().flatten().map(|(t, _)| *t))
                .filter(|t| (from_us..=to_us).contains(t)),
        );
        instants.sort_unstable();
        instants.dedup();
        instants
            .into_iter()
            .find_map(|t| self.masters_out_of_reach(client, t))
    }

    /// The servers that are masters at `t`: by each server's last recorded role at or
    /// before `t` (its first record, its role at the start, if none is that early);
    /// every server if no roles were recorded.
    fn masters_at(&self, t: u64) -> Vec<&str> {
        self.roles
            .iter()
            .filter(|(_, changes)| {
                let at = changes.iter().rev().find(|(at, _)| *at <= t);
                at.or(changes.first()).is_none_or(|(_, master)| *master)
            })
            .map(|(s, _)| s.as_str())
            .collect()
    }

    /// If at `t` the masters `client` cannot reach leave it without the lock service
    /// (every master, or no majority of independent masters), the fault of one of them.
    fn masters_out_of_reach(&self, client: &str, t: u64) -> Option<usize> {
        let masters = self.masters_at(t);
        let mut out: BTreeSet<&str> = BTreeSet::new();
        let mut why: Option<usize> = None;
        for m in &masters {
            let down = self.stalls.iter().find(|w| w.host == *m && w.active_at(t));
            let cut = || {
                self.partitions.iter().find(|w| {
                    w.active_at(t)
                        && ((w.host == *m && w.peers.iter().any(|p| p == client))
                            || (w.host == client && w.peers.iter().any(|p| p == m)))
                })
            };
            if let Some(w) = down.or_else(cut) {
                out.insert(m);
                why.get_or_insert(w.fault);
            }
        }
        let needed = if self.majority {
            masters.len() - masters.len() / 2
        } else {
            masters.len()
        };
        if masters.is_empty() {
            // No master at all: nobody could grant the lock. The fault is the last
            // to start before `t` that hit a server.
            return self
                .stalls
                .iter()
                .chain(&self.partitions)
                .filter(|w| w.start_us <= t && self.roles.contains_key(&w.host))
                .map(|w| w.fault)
                .next_back();
        }
        (out.len() >= needed).then_some(why).flatten()
    }
}
