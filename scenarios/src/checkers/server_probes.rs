//! `sometimes` probes for faults on Redis servers and links: proof from the history
//! alone that a server crash, restart, pause or partition hit the lock.
//!
//! A server is a host the history shows writing or removing keys (its own record); a
//! server's record of the lock key is replayed from those events.

use std::collections::{BTreeMap, BTreeSet};

use sim::history::fact::{LockFact, Rank};
use sim::history::{
    Event, EventKind, FaultPhase, History, MONITORS, OpF, Phase, ServerEvent, is_monitor_host,
};

use super::model;
use super::{fmt_ms, fmt_s};

/// Hosts that keep a record of keys: the Redis servers.
pub(super) fn servers(h: &History) -> BTreeSet<&str> {
    h.events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Server(_)))
        .map(|e| e.host.as_str())
        .collect()
}

/// The host whose record of the lock stands for each server's: itself, except for
/// the members of a consensus quorum (hosts whose roles are a quorum member's: see
/// [`sim::history::fact::in_quorum`]), whose one record of the lock is kept on the
/// member that records it (the first server, whichever leads). A fault on any member
/// of the quorum hits the host that serves that record.
pub(super) fn record_hosts(h: &History) -> BTreeMap<&str, &str> {
    let key = h.params.key.as_str();
    let mut members: BTreeSet<&str> = BTreeSet::new();
    let mut recorder: Option<&str> = None;
    for e in &h.events {
        match &e.kind {
            EventKind::Server(s) if matches!(s.fact(), LockFact::Role { quorum: true, .. }) => {
                members.insert(e.host.as_str());
            }
            EventKind::Server(ServerEvent::Written { key: k, .. }) if k == key => {
                recorder.get_or_insert(e.host.as_str());
            }
            _ => {}
        }
    }
    let mut map: BTreeMap<&str, &str> = servers(h).into_iter().map(|s| (s, s)).collect();
    if let Some(r) = recorder.filter(|r| members.contains(r)) {
        for m in members {
            map.insert(m, r);
        }
    }
    map
}

/// Each fault's first end time, by fault index and host.
fn fault_ends(h: &History) -> BTreeMap<(usize, &str), u64> {
    let mut ends = BTreeMap::new();
    for e in &h.events {
        if let EventKind::Fault {
            fault,
            phase: FaultPhase::End,
            ..
        } = e.kind
        {
            ends.entry((fault, e.host.as_str())).or_insert(e.at_us);
        }
    }
    ends
}

/// Walks the history keeping, per server, the lock key's value as its record shows it,
/// and calls `f` at every fault start with that view.
fn at_fault_starts<T>(
    h: &History,
    mut f: impl FnMut(&Event, usize, &BTreeMap<&str, String>) -> Option<T>,
) -> Option<T> {
    let key = h.params.key.as_str();
    let mut held: BTreeMap<&str, String> = BTreeMap::new();
    for e in &h.events {
        match &e.kind {
            EventKind::Server(ServerEvent::Written { key: k, value, .. }) if k == key => {
                held.insert(e.host.as_str(), value.clone());
            }
            EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => {
                held.remove(e.host.as_str());
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Start,
                ..
            } => {
                if let Some(found) = f(e, *fault, &held) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

/// A server crashed while its record held the lock key and came back at least
/// `min_down_ms` later (a server still down at the run's end never came back).
pub fn server_crashed_holding_the_lock(h: &History, min_down_ms: u64) -> Option<String> {
    let records = record_hosts(h);
    let ends = fault_ends(h);
    at_fault_starts(h, |e, fault, held| {
        let record = records.get(e.host.as_str())?;
        if !model::is_crash(h, fault) {
            return None;
        }
        let owner = held.get(record)?;
        let back_us = *ends.get(&(fault, e.host.as_str()))?;
        let down_us = back_us.saturating_sub(e.at_us);
        (down_us >= min_down_ms * 1_000).then(|| {
            format!(
                "{} crashed at {} holding {} (owner={owner}) and restarted {} later",
                e.host,
                fmt_s(e.at_us),
                h.params.key,
                fmt_ms(down_us)
            )
        })
    })
}

/// A server restarted after a crash that struck the lock: it came back without the lock
/// key its record held ([`server_restart_lost_the_lock`]), or it crashed holding it and
/// came back with it (a system that keeps its locks on disk: a transaction log, a redo
/// log, a journal).
pub fn server_restart_struck_the_lock(h: &History) -> Option<String> {
    server_restart_lost_the_lock(h).or_else(|| server_crashed_holding_the_lock(h, 0))
}

/// A server came back from a crash without the lock key its record held before: the
/// lock was lost with the server's memory.
pub fn server_restart_lost_the_lock(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    let ends = fault_ends(h);
    let mut last_crash: BTreeMap<&str, usize> = BTreeMap::new();
    h.events.iter().find_map(|e| match &e.kind {
        EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            ..
        } if model::is_crash(h, *fault) => {
            last_crash.insert(e.host.as_str(), *fault);
            None
        }
        EventKind::Server(ServerEvent::Removed {
            key: k,
            value,
            cause,
            ..
        }) if k == key && cause == "lost" => {
            let fault = *last_crash.get(e.host.as_str())?;
            let back_us = ends.get(&(fault, e.host.as_str()))?;
            Some(format!(
                "{} lost {key} (owner={value}) in a crash at {} and restarted at {} without it",
                e.host,
                fmt_s(e.at_us),
                fmt_s(*back_us)
            ))
        }
        _ => None,
    })
}

/// A server paused for longer than the lease while its record held the lock key or a
/// client was acquiring it.
pub fn server_pause_outlasted_the_lease(h: &History) -> Option<String> {
    let records = record_hosts(h);
    let ends = fault_ends(h);
    let acquires: Vec<model::OpPair> = model::op_pairs(h)
        .ok()?
        .into_iter()
        .filter(|p| p.f == OpF::Acquire)
        .collect();
    let lease_us = h.params.lease_ms * 1_000;
    at_fault_starts(h, |e, fault, held| {
        let record = records.get(e.host.as_str())?;
        if !model::is_pause(h, fault) {
            return None;
        }
        let end_us = ends
            .get(&(fault, e.host.as_str()))
            .copied()
            .unwrap_or(h.end_us);
        let len_us = end_us.saturating_sub(e.at_us);
        if len_us <= lease_us {
            return None;
        }
        let why = if let Some(owner) = held.get(record) {
            format!("holding {} (owner={owner})", h.params.key)
        } else {
            let waiting = acquires
                .iter()
                .find(|a| a.invoke_us <= e.at_us && a.completion_us.is_none_or(|c| c > e.at_us))?;
            format!("{} acquiring", waiting.host)
        };
        Some(format!(
            "{} paused at {} for {} while {why}, lease {} ms",
            e.host,
            fmt_s(e.at_us),
            fmt_ms(len_us),
            h.params.lease_ms
        ))
    })
}

/// An acquire whose `ok` reached its client more than a lease after it was sent: the
/// lease it was granted may have run out before the client heard of it.
pub fn acquire_ok_later_than_lease(h: &History) -> Option<String> {
    let lease_us = h.params.lease_ms * 1_000;
    model::op_pairs(h).ok()?.into_iter().find_map(|p| {
        let done = p.completion_us?;
        (p.f == OpF::Acquire && p.outcome == Phase::Ok && done - p.invoke_us > lease_us).then(
            || {
                format!(
                    "{} sent an acquire at {} and heard ok {} later, lease {} ms",
                    p.host,
                    fmt_s(p.invoke_us),
                    fmt_ms(done - p.invoke_us),
                    h.params.lease_ms
                )
            },
        )
    })
}

/// A client that believed it held the lock was partitioned for longer than the lease.
pub fn holder_partitioned_past_the_lease(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    let ends = fault_ends(h);
    let lease_us = h.params.lease_ms * 1_000;
    h.events.iter().find_map(|e| {
        let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            detail,
            ..
        } = &e.kind
        else {
            return None;
        };
        let partition = h
            .plan
            .faults
            .get(*fault)
            .is_some_and(|f| matches!(f.kind, sim::faults::FaultKind::Partition { .. }));
        if !partition {
            return None;
        }
        let end_us = ends
            .get(&(*fault, e.host.as_str()))
            .copied()
            .unwrap_or(h.end_us);
        let len_us = end_us.saturating_sub(e.at_us);
        let hold = holds
            .iter()
            .find(|o| o.host == e.host && o.open_at(e.at_us))?;
        (len_us > lease_us).then(|| {
            format!(
                "{} held {} (owner={}) at {} when cut off ({detail}) for {}, lease {} ms",
                e.host,
                hold.key,
                hold.owner,
                fmt_s(e.at_us),
                fmt_ms(len_us),
                h.params.lease_ms
            )
        })
    })
}

/// A server whose record (a quorum's, for a quorum member) held the lock was cut
/// off from other servers for longer than the lease.
pub fn lock_server_isolated_past_the_lease(h: &History) -> Option<String> {
    let records = record_hosts(h);
    let ends = fault_ends(h);
    let lease_us = h.params.lease_ms * 1_000;
    at_fault_starts(h, |e, fault, held| {
        let record = records.get(e.host.as_str())?;
        let EventKind::Fault { peers, detail, .. } = &e.kind else {
            return None;
        };
        let partition = h
            .plan
            .faults
            .get(fault)
            .is_some_and(|f| matches!(f.kind, sim::faults::FaultKind::Partition { .. }));
        if !partition || !peers.iter().any(|p| records.contains_key(p.as_str())) {
            return None;
        }
        let owner = held.get(record)?;
        let end_us = ends
            .get(&(fault, e.host.as_str()))
            .copied()
            .unwrap_or(h.end_us);
        let len_us = end_us.saturating_sub(e.at_us);
        (len_us > lease_us).then(|| {
            format!(
                "{} was cut off ({detail}) at {} for {} while {record} held {} (owner={owner}), lease {} ms",
                e.host,
                fmt_s(e.at_us),
                fmt_ms(len_us),
                h.params.key,
                h.params.lease_ms
            )
        })
    })
}

/// A holder's lease came due while the lock's server was cut off from the rest of its
/// system: during a partition of a server that keeps the lock's record from the other
/// servers, a hold went on past the end of the validity it believed it had at the
/// isolation's start (or at its own grant, if later): its grant's `valid_until_us`, or
/// the last renewal's before that moment. The lock outlived that moment only if a
/// renewal got through while its server was isolated, which is what the isolation can
/// break. A hold without a validity (a lock that lives with a session, whose pings are
/// due every third of its timeout) counts when it went on through more than a lease of
/// the isolation. `None` if no hold needed a renewal during an isolation (its work
/// ended within the lease it had).
pub fn renewal_due_while_the_lock_server_was_isolated(h: &History) -> Option<String> {
    let records = record_hosts(h);
    let ends = fault_ends(h);
    let lease_us = h.params.lease_ms * 1_000;
    let holds = model::holds(h).ok()?;
    for e in &h.events {
        let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            peers,
            detail,
            ..
        } = &e.kind
        else {
            continue;
        };
        let partition = h
            .plan
            .faults
            .get(*fault)
            .is_some_and(|f| matches!(f.kind, sim::faults::FaultKind::Partition { .. }));
        if !partition
            || !records.contains_key(e.host.as_str())
            || !peers.iter().any(|p| records.contains_key(p.as_str()))
        {
            continue;
        }
        let (from_us, to_us) = (
            e.at_us,
            ends.get(&(*fault, e.host.as_str()))
                .copied()
                .unwrap_or(h.end_us),
        );
        for hold in holds.iter().filter(|d| d.key == h.params.key) {
            let start = hold.start_us.max(from_us);
            let end = hold.end_us.min(to_us);
            if start >= end {
                continue;
            }
            let granted = model::op_at(h, hold.acquire_event).and_then(|op| op.valid_until_us);
            // The validity believed at `start`: the grant's, or the last renewal's.
            let renewed = h.events[hold.acquire_event..]
                .iter()
                .take_while(|r| r.at_us <= start)
                .filter_map(|r| match &r.kind {
                    EventKind::Renewed {
                        owner,
                        valid_until_us,
                        ..
                    } if r.host == hold.host && *owner == hold.owner => Some(*valid_until_us),
                    _ => None,
                })
                .last();
            let due = match renewed.or(granted) {
                Some(until) => (start..end)
                    .contains(&until)
                    .then(|| format!("its validity ran out at {}", fmt_s(until))),
                None => (end - start > lease_us).then(|| {
                    format!(
                        "it held on, with no validity of its own, for {} of it",
                        fmt_ms(end - start)
                    )
                }),
            };
            if let Some(due) = due {
                return Some(format!(
                    "{} held {} (owner={}) from {} while {} was cut off ({detail}) from {} to {}: {due}, so the lock lived on only by a renewal during the isolation (lease {} ms)",
                    hold.host,
                    hold.key,
                    hold.owner,
                    fmt_s(hold.start_us),
                    e.host,
                    fmt_s(from_us),
                    fmt_s(to_us),
                    h.params.lease_ms
                ));
            }
        }
    }
    None
}

/// The server granted a client the lock while a delay on the messages to that client
/// was in force, and the client heard of it at least the delay later, or never in
/// time: its acquire ended unknown, or failed (it gave up, or failed for another reason,
/// with the grant's reply still held or come late: a waiter whose wait ran out
/// before the delayed watch event reached it, a Redlock client short of its quorum).
/// Proof from the server's record that replies, not requests or the retry loop, were
/// slow; what the design did about it is the checkers' to judge.
pub fn delayed_reply_to_a_granted_acquire(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    let ends = fault_ends(h);
    // Delay windows per host: (start, end, latency).
    let mut windows: BTreeMap<&str, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for e in &h.events {
        if let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            ..
        } = e.kind
            && let Some(sim::faults::FaultKind::Delay { latency_ms, .. }) =
                h.plan.faults.get(fault).map(|f| &f.kind)
        {
            let end = ends
                .get(&(fault, e.host.as_str()))
                .copied()
                .unwrap_or(h.end_us);
            windows
                .entry(e.host.as_str())
                .or_default()
                .push((e.at_us, end, latency_ms * 1_000));
        }
    }
    let pairs = model::op_pairs(h).ok()?;
    h.events.iter().find_map(|e| {
        let EventKind::Server(ServerEvent::Written { by, key: k, .. }) = &e.kind else {
            return None;
        };
        if k != key {
            return None;
        }
        let (_, end, latency) = windows
            .get(by.as_str())?
            .iter()
            .find(|(start, end, _)| *start <= e.at_us && e.at_us < *end)?;
        // A reply held by the delay arrives `latency` after it was sent, or when the
        // delay ends, whichever is first.
        let held = (*latency).min(end - e.at_us);
        // The acquire of `by` in flight at the grant.
        let acquire = pairs.iter().find(|p| {
            p.f == OpF::Acquire
                && p.host == *by
                && p.invoke_us <= e.at_us
                && p.completion_us.is_none_or(|c| c >= e.at_us)
        })?;
        let heard = match (acquire.outcome, acquire.completion_us) {
            (Phase::Ok, Some(c)) if c >= e.at_us + held => {
                format!("heard ok {} later", fmt_ms(c - e.at_us))
            }
            (Phase::Info, _) | (_, None) => "never heard in time (unknown outcome)".to_string(),
            (Phase::Fail, Some(c)) if c >= e.at_us + held => {
                format!("failed {} later, the grant's reply late", fmt_ms(c - e.at_us))
            }
            (Phase::Fail, Some(c)) => format!(
                "gave up {} later, before the grant's reply could reach it",
                fmt_ms(c - e.at_us)
            ),
            _ => return None,
        };
        Some(format!(
            "{} granted {key} to {by} at {} while messages to {by} were delayed by {}; {by} {heard}",
            e.host,
            fmt_s(e.at_us),
            fmt_ms(*latency)
        ))
    })
}

/// When each server became master (its `Role` events), in history order.
fn promotions(h: &History) -> Vec<(&str, u64)> {
    h.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(s)
                if matches!(
                    s.fact(),
                    LockFact::Role {
                        rank: Rank::Master,
                        ..
                    }
                ) =>
            {
                Some((e.host.as_str(), e.at_us))
            }
            _ => None,
        })
        .collect()
}

/// Whether `server`'s record held `value` under the lock key at `at_us`.
fn held_at(h: &History, server: &str, value: &str, at_us: u64) -> bool {
    let key = h.params.key.as_str();
    let mut held = None;
    for e in h
        .events
        .iter()
        .filter(|e| e.host == server && e.at_us <= at_us)
    {
        match &e.kind {
            EventKind::Server(ServerEvent::Written {
                key: k, value: v, ..
            }) if k == key => {
                held = Some(v.as_str());
            }
            EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => held = None,
            _ => {}
        }
    }
    held == Some(value)
}

/// The failover lost the lock: a master crashed (or was partitioned away) while its
/// record held the lock key, and a server that did not hold that value, and was not on
/// the master's side of the fault, was promoted after it. With
/// `unreplicated`, the crash must also have come at the moment the nemesis waits for:
/// the lock write acknowledged by no replica and received by none (the crash's own
/// record says so).
pub fn failover_lost_the_lock(h: &History, unreplicated: bool) -> Option<String> {
    let servers = servers(h);
    let key = h.params.key.as_str();
    // Every host each fault hit, to tell the promoted server from the master's side.
    let mut hit: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
    for e in &h.events {
        if let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            ..
        } = e.kind
        {
            hit.entry(fault).or_default().insert(e.host.as_str());
        }
    }
    let mut crashes = Vec::new();
    at_fault_starts(h, |e, fault, held| {
        let EventKind::Fault { detail, .. } = &e.kind else {
            return None::<()>;
        };
        if servers.contains(e.host.as_str())
            && (model::is_crash(h, fault) || model::is_partition(h, fault))
            && (!unreplicated || detail.contains("lock write at offset"))
            && let Some(owner) = held.get(e.host.as_str())
        {
            crashes.push((
                e.host.clone(),
                e.at_us,
                owner.clone(),
                detail.clone(),
                fault,
            ));
        }
        None
    });
    let promoted = promotions(h);
    crashes.into_iter().find_map(|(host, at, owner, detail, fault)| {
        let same_side = hit.get(&fault);
        let (to, when) = promoted.iter().find(|(s, t)| {
            *s != host
                && *t > at
                && !same_side.is_some_and(|side| side.contains(s))
                && !held_at(h, s, &owner, *t)
        })?;
        let what = if model::is_crash(h, fault) {
            "crashed"
        } else {
            "was cut off"
        };
        let why = detail
            .split_once(" (")
            .map(|(_, d)| format!(" ({}", d))
            .unwrap_or_default();
        Some(format!(
            "{host} {what} at {} holding {key} (owner={owner}){why}; {to} was promoted at {} without it",
            fmt_s(at),
            fmt_s(*when)
        ))
    })
}

/// Split brain: a master was partitioned away (its side of a partition) and another
/// server was promoted while the partition lasted. Returns the evidence and, in
/// microseconds, for how long after the promotion the old master still accepted lock
/// writes from clients (0 if it accepted none).
pub fn split_brain(h: &History) -> Option<(String, u64)> {
    let servers = servers(h);
    let key = h.params.key.as_str();
    let ends = fault_ends(h);
    let promoted = promotions(h);
    let mut found = None;
    at_fault_starts(h, |e, fault, _held| {
        // A lock server on the partition's first side (one that never wrote a key has
        // no record yet, so it is known by not being a client, a failover monitor or
        // the storage, the world's reserved names).
        let is_server = servers.contains(e.host.as_str())
            || !(e.host.starts_with("client-") || is_monitor_host(&e.host) || e.host == "storage");
        if found.is_some() || !is_server || !model::is_partition(h, fault) {
            return None::<()>;
        }
        let old = e.host.as_str();
        let end = ends.get(&(fault, old)).copied().unwrap_or(u64::MAX);
        let (to, when) = promoted
            .iter()
            .find(|(s, t)| *s != old && *t > e.at_us && *t < end)?;
        let last_old_write = h
            .events
            .iter()
            .filter(|x| {
                x.host == old
                    && x.at_us >= *when
                    && x.at_us < end
                    && matches!(&x.kind, EventKind::Server(ServerEvent::Written { key: k, by, .. }) if k == key && by.starts_with("client-"))
            })
            .map(|x| x.at_us)
            .max();
        let window = last_old_write.map_or(0, |t| t - when);
        found = Some((
            format!(
                "{old} was partitioned from {MONITORS} at {}; {to} was promoted at {}; {old} accepted lock writes for {} after that",
                fmt_s(e.at_us),
                fmt_s(*when),
                fmt_ms(window)
            ),
            window,
        ));
        None
    });
    found
}
