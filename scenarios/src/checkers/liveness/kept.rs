//! The questions the liveness rules ask of a lock that stayed on a server: whether it
//! has no expiry, whether it was still held under a value, and whether someone was
//! refused while it stayed (past the bound, or to the run's end).

use sim::history::fact::LockFact;
use sim::history::{Event, EventKind, History, OpF, Phase};

use crate::checkers::model::OpPair;
use crate::checkers::{fmt_ms, fmt_s};

/// What the orphan rule asks once a lock stayed on from event
/// `from` (at `from_us`) with nobody believing they hold it: `None` if the run ended
/// before the bound after it (not judged); else `Some(None)` if it was freed in time or
/// nobody was refused, or `Some(Some(..))`: the waiter refused past the bound, how long
/// the lock stayed, and the events to show (`shown`, then the waiter's).
pub(super) fn stuck_after<'a>(
    h: &History,
    acquires: &[&'a OpPair],
    (from, from_us): (usize, u64),
    mut shown: Vec<usize>,
) -> Option<Option<(&'a OpPair, String, Vec<usize>)>> {
    let deadline_us = from_us + h.params.liveness_bound_ms * 1_000;
    if h.end_us < deadline_us {
        return None;
    }
    Some(
        refused_while_kept(h, acquires, (from, from_us, deadline_us), |_| true, None).map(
            |(w, until)| {
                shown.push(w.invoke);
                shown.extend(w.completion);
                shown.sort_unstable();
                shown.dedup();
                (w, until, shown)
            },
        ),
    )
}

/// How an operation that did not succeed ended, for evidence.
pub(super) fn unsuccessful(outcome: Phase) -> &'static str {
    if outcome == Phase::Fail {
        "failed"
    } else {
        "ended with an unknown outcome"
    }
}

/// Whether, just before event `at`, some server held the run's key with `value` as its
/// current value (its last write of the key was `value` and nothing removed it since).
pub(super) fn held_as(h: &History, at: usize, value: &str) -> bool {
    let key = h.params.key.as_str();
    let mut current: std::collections::BTreeMap<&str, Option<&str>> = Default::default();
    for e in &h.events[..at] {
        match fact(e) {
            Some(LockFact::Written {
                key: k, value: v, ..
            }) if k == key => {
                current.insert(e.host.as_str(), Some(v));
            }
            Some(LockFact::Removed { key: k, .. }) if k == key => {
                current.insert(e.host.as_str(), None);
            }
            _ => {}
        }
    }
    current.values().any(|v| *v == Some(value))
}

/// What the stuck-lock rules ask once a lock stayed on from event `from` (at
/// `from_us`) past `deadline_us`: the first removal of the key after `from` on a server
/// `on` accepts (the lock freed), and an acquire refused after the deadline and before
/// that removal (by any host but `not_by`): that waiter, and how long the lock stayed
/// ("for … until …" or "until the end of the run"). `None` if the lock was freed by
/// the deadline or nobody was refused in between.
pub(super) fn refused_while_kept<'a>(
    h: &History,
    acquires: &[&'a OpPair],
    (from, from_us, deadline_us): (usize, u64, u64),
    on: impl Fn(&str) -> bool,
    not_by: Option<&str>,
) -> Option<(&'a OpPair, String)> {
    let key = h.params.key.as_str();
    let freed = h.events[from + 1..].iter().position(|e| {
        on(&e.host) && matches!(fact(e), Some(LockFact::Removed { key: k, .. }) if k == key)
    });
    let freed_at = freed.map(|f| (from + 1 + f, h.events[from + 1 + f].at_us));
    if freed_at.is_some_and(|(_, at)| at <= deadline_us) {
        return None;
    }
    let before_free = |ev: usize| freed_at.is_none_or(|(f, _)| ev < f);
    let w = acquires.iter().copied().find(|p| {
        not_by.is_none_or(|host| p.host != host)
            && p.outcome == Phase::Fail
            && p.completion_us.is_some_and(|c| c > deadline_us)
            && p.completion.is_some_and(before_free)
    })?;
    let until = freed_at.map_or("until the end of the run".to_string(), |(_, at)| {
        format!("for {} until {}", fmt_ms(at - from_us), fmt_s(at))
    });
    Some((w, until))
}

/// Whether lock value `value`, written on server `server` at event `from`, has no
/// expiry by the history: every acquisition that reported it was told of no validity
/// (`valid_until_us` absent), no command set an expiry on the key on that server after
/// `from`, its holders had no session that all their locks live with (an ephemeral
/// node) and the value names no session the server recorded (a lock scoped to a
/// connection ends with it). Such a lock held by nobody alive is freed by nothing.
pub(super) fn without_expiry(h: &History, server: &str, value: &str, from: usize) -> bool {
    let key = h.params.key.as_str();
    let grants: Vec<(&sim::history::Event, &sim::history::Op)> = h
        .ops()
        .filter(|(_, op)| {
            op.f == OpF::Acquire && op.phase == Phase::Ok && op.owner.as_deref() == Some(value)
        })
        .collect();
    if grants.is_empty() || grants.iter().any(|(_, op)| op.valid_until_us.is_some()) {
        return false;
    }
    let holders: std::collections::BTreeSet<&str> =
        grants.iter().map(|(e, _)| e.host.as_str()).collect();
    let expiring = h.events[from..].iter().any(|e| {
        e.host == server && matches!(fact(e), Some(LockFact::ExpirySet { key: k, .. }) if k == key)
    });
    let tied = h.events.iter().any(|e| match fact(e) {
        Some(LockFact::Session(s)) => {
            (s.holds_all && holders.contains(s.client)) || s.owner.as_deref() == Some(value)
        }
        _ => false,
    });
    !expiring && !tied
}

/// A lock kept on `server` from event `from` to the run's end: no removal of the key
/// on that server after `from`, no acquire `ok` after it, and acquires (by hosts other
/// than `not_by`) refused after it. The first refused waiter and how many were refused;
/// `None` if the lock was freed or granted, or nobody was refused.
pub(super) fn refused_to_the_end<'a>(
    h: &History,
    acquires: &[&'a OpPair],
    from: usize,
    server: &str,
    not_by: Option<&str>,
) -> Option<(&'a OpPair, usize)> {
    let key = h.params.key.as_str();
    let freed = h.events[from + 1..].iter().any(|e| {
        e.host == server && matches!(fact(e), Some(LockFact::Removed { key: k, .. }) if k == key)
    });
    let after = |p: &&&OpPair| p.completion.is_some_and(|c| c > from);
    if freed
        || acquires
            .iter()
            .filter(after)
            .any(|p| p.outcome == Phase::Ok)
    {
        return None;
    }
    let refused: Vec<&'a OpPair> = acquires
        .iter()
        .filter(after)
        .filter(|p| p.outcome == Phase::Fail && not_by.is_none_or(|host| p.host != host))
        .copied()
        .collect();
    Some((*refused.first()?, refused.len()))
}

/// The server's fact an event records, if it is a server's.
fn fact(e: &Event) -> Option<LockFact<'_>> {
    match &e.kind {
        EventKind::Server(s) => Some(s.fact()),
        _ => None,
    }
}
