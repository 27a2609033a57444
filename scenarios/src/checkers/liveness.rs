//! `liveness`: a lock whose holder crashed becomes obtainable again within the bound.
//!
//! Only crashes of a host that held the key on the server matter (a lease, or a
//! watchdog that dies with its process, should free it). After such a crash at `t`,
//! some acquire must succeed by `t + liveness_bound_ms`, unless nobody wanted the
//! lock. "Wanted" is shown by an acquire of another host that was still waiting at
//! the bound (invoked at or before it, completed `ok` or `fail` after it), or one that
//! failed after the bound: either shows the lock refused someone past the bound.
//! `info` outcomes prove nothing either way and are ignored.
//!
//! And without any crash: a lock that is free and wanted must be granted. An acquire
//! that completed `fail` with no fault to explain it (see [`super::excuse`]: its own
//! host stalled, or the masters it needs were out of reach) is a violation when the key was
//! absent on every server from its invocation to its refusal (nobody held it, yet it
//! was refused: an acquire that can never succeed), or absent on every server for at
//! least the bound before its refusal (a waiter that slept through the release or the
//! expiry and gave up). A lock its holder is done with (the server answered its
//! outermost release `still-held`) must be freed within the bound: kept past it while
//! another host was refused, it is a violation (a reentrant count gone astray, then a
//! watchdog or a monopolising re-entry keeping it). A lock a server brought back by
//! itself (a recovery after a crash that lost the release: the server writes a value a
//! client's command had removed from it) is nobody's: kept past the bound while
//! another host was refused, it is a violation. A lock without expiry (its grants
//! reported no validity, no expiry was set on the key, no session or connection it
//! lives with) held by nobody alive (brought back by the server, or its holder crashed)
//! is freed by nothing: if every acquire after that until the run's end was refused, it
//! is a violation even when the run ended before the bound. So is a lock whose holder's outermost
//! release failed (`fail`, or `info`: the server had closed its connection, the reply
//! timed out) while the server still held it under that holder's value, kept past the
//! bound while another acquire was refused: a lock without expiry outlives a failed
//! release. And an orphan: a value a client wrote during an acquire that did not
//! succeed, which no acquisition ever reported (a create sent again after a lost reply
//! without looking for the first one's node; a quorum attempt that gave up without
//! unlocking), kept past the bound after that attempt while another acquire was
//! refused. And a lock that nobody ever acquired (no acquire `ok`, no
//! server ever recorded the key) while clients tried with no fault to explain it is a
//! violation whatever the refusals looked like: an error reply (recorded `info`,
//! since the client cannot tell) refuses as surely as a `fail`. A run in which no
//! holder crashed and no acquire completed has nothing to judge and is `Unknown`.

use sim::history::fact::LockFact;
use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::excuse::Excuses;
use super::model::{self, OpPair};
use super::{Checker, Evidence, Verdict, fmt_ms, fmt_s};

/// The liveness checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Liveness;

impl Checker for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn check(&self, h: &History) -> Verdict {
        if let Some(unknown) = model::needs_server_records(h) {
            return unknown;
        }
        let pairs = match model::op_pairs(h) {
            Ok(p) => p,
            Err(reason) => return Verdict::Unknown { reason },
        };
        let acquires: Vec<&OpPair> = pairs
            .iter()
            .filter(|p| p.f == OpF::Acquire && p.key == h.params.key)
            .collect();
        let bound_us = h.params.liveness_bound_ms * 1_000;
        let servers = model::server_hosts(h);
        let mut judged = 0usize;
        let mut skipped: Vec<String> = Vec::new();
        for c in model::crashes_while_holding(h) {
            let deadline_us = c.at_us + bound_us;
            // The first time the lock was taken again after the crash (in event order,
            // so a tie in time recorded after the crash counts): an acquire's ok, or
            // the server's record of another client writing the key (a grant whose
            // grantee crashed before its ok arrived was still a grant; a replica's copy,
            // written "by" its master, is nobody taking the lock).
            let first_ok = acquires
                .iter()
                .filter(|p| p.outcome == Phase::Ok)
                .filter_map(|p| Some((p.completion?, p.completion_us?)))
                .chain(
                    h.events
                        .iter()
                        .enumerate()
                        .filter_map(|(i, e)| match &e.kind {
                            EventKind::Server(ServerEvent::Written { by, key, .. })
                                if *key == h.params.key
                                    && *by != c.host
                                    && !servers.contains(by.as_str()) =>
                            {
                                Some((i, e.at_us))
                            }
                            _ => None,
                        }),
                )
                .filter(|(ev, _)| *ev > c.crash_event)
                .min_by_key(|(ev, _)| *ev);
            if let Some((_, at)) = first_ok
                && at <= deadline_us
            {
                judged += 1;
                continue;
            }
            if h.end_us < deadline_us {
                if let Some(v) = crashed_holder_stuck_to_the_end(h, &acquires, &c) {
                    return v;
                }
                skipped.push(format!("{} at {}", c.host, fmt_s(c.at_us)));
                continue;
            }
            judged += 1;
            // A refusal after the first success afterwards shows the new holder
            // holding it, not the lock being stuck: only look before that success.
            let before_ok = |ev: usize| first_ok.is_none_or(|(ok_ev, _)| ev <= ok_ev);
            let waiter = acquires.iter().find(|p| {
                let (Some(done), Some(done_us)) = (p.completion, p.completion_us) else {
                    return false;
                };
                p.host != c.host
                    && done_us > deadline_us
                    && before_ok(done)
                    && match p.outcome {
                        Phase::Fail => true,
                        Phase::Ok => p.invoke_us <= deadline_us,
                        _ => false,
                    }
            });
            let Some(w) = waiter else {
                if let Some(v) = crashed_holder_stuck_to_the_end(h, &acquires, &c) {
                    return v;
                }
                continue;
            };
            let (stuck, mut events) = match first_ok {
                Some((ev, at)) => (
                    format!("for {} until {}", fmt_ms(at - c.at_us), fmt_s(at)),
                    vec![ev],
                ),
                None => ("until the end of the run".to_string(), vec![]),
            };
            events.extend([c.written_event, c.crash_event, w.invoke]);
            events.extend(w.completion);
            events.sort_unstable();
            events.dedup();
            let outcome = if w.outcome == Phase::Ok { "ok" } else { "fail" };
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "{} crashed at {} holding lock {} (owner={}); nobody acquired it {stuck} although {} wanted it (acquire invoked at {}, {outcome} at {}), bound {} ms",
                    c.host,
                    fmt_s(c.at_us),
                    h.params.key,
                    c.owner,
                    w.host,
                    fmt_s(w.invoke_us),
                    fmt_s(w.completion_us.unwrap_or(h.end_us)),
                    h.params.liveness_bound_ms
                ),
                at_us: c.at_us,
                hosts: vec![c.host.clone(), w.host.clone()],
                owners: vec![c.owner.clone()],
                first_event: c.crash_event,
                events,
            });
        }
        let (completed, refused) = refused_while_free(h, &acquires);
        if let Some(v) = refused {
            return v;
        }
        if let Some(v) = never_granted(h, &acquires) {
            return v;
        }
        let (kept_judged, kept) = kept_after_done(h, &pairs, &acquires);
        if let Some(v) = kept {
            return v;
        }
        judged += kept_judged;
        let (back_judged, back) = came_back(h, &acquires);
        if let Some(v) = back {
            return v;
        }
        judged += back_judged;
        let (failed_judged, failed) = kept_after_failed_release(h, &pairs, &acquires);
        if let Some(v) = failed {
            return v;
        }
        judged += failed_judged;
        let (orphan_judged, orphan) = orphans(h, &pairs, &acquires);
        if let Some(v) = orphan {
            return v;
        }
        judged += orphan_judged;
        if judged + completed == 0 && skipped.is_empty() {
            return Verdict::Unknown {
                reason:
                    "nothing to judge: no holder crashed and every acquire that completed had a fault to explain it"
                        .into(),
            };
        }
        if judged == 0 && !skipped.is_empty() {
            return Verdict::Unknown {
                reason: format!(
                    "no crash while holding could be judged: the run ended less than {} ms after {}",
                    h.params.liveness_bound_ms,
                    skipped.join(", ")
                ),
            };
        }
        Verdict::Valid
    }
}

/// The kept-after-done rule (see the module docs): a holder's outermost release (hold
/// count 1) to which the server answered that the lock is still held (`still-held`):
/// the holder is done, yet the lock stays under its name. If no server removed or
/// expired the key within the bound after that release, while another host's acquire
/// was refused past the bound, the lock was kept from those who wanted it. Returns how
/// many such releases it judged (the run reached their bound) and the first violation.
fn kept_after_done(
    h: &History,
    pairs: &[OpPair],
    acquires: &[&OpPair],
) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    let bound_us = h.params.liveness_bound_ms * 1_000;
    let mut judged = 0;
    for r in pairs.iter().filter(|p| p.f == OpF::Release && p.key == key) {
        let (Some(done), Some(done_us)) = (r.completion, r.completion_us) else {
            continue;
        };
        let kept = model::op_at(h, r.invoke).is_some_and(|op| model::depth(op) == 1)
            && r.outcome == Phase::Ok
            && model::op_at(h, done)
                .and_then(|op| op.detail.as_deref())
                .is_some_and(|d| d.starts_with("still-held"));
        if !kept {
            continue;
        }
        let deadline_us = done_us + bound_us;
        if h.end_us < deadline_us {
            continue;
        }
        judged += 1;
        // Kept until the lock was freed (removed, or expired) on any server.
        let Some((w, until)) = refused_while_kept(
            h,
            acquires,
            (done, done_us, deadline_us),
            |_| true,
            Some(&r.host),
        ) else {
            continue;
        };
        let mut events = vec![r.invoke, done, w.invoke];
        events.extend(w.completion);
        events.sort_unstable();
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary: format!(
                    "{} was done with lock {key} at {} (its outermost release), but the server still held it under its name (owner={}) {until}, although {} wanted it (acquire refused at {}), bound {} ms",
                    r.host,
                    fmt_s(done_us),
                    r.owner.as_deref().unwrap_or("?"),
                    w.host,
                    fmt_s(w.completion_us.unwrap_or(h.end_us)),
                    h.params.liveness_bound_ms
                ),
                at_us: done_us,
                hosts: vec![r.host.clone(), w.host.clone()],
                owners: r.owner.iter().cloned().collect(),
                first_event: done,
                events,
            })),
        );
    }
    (judged, None)
}

/// The failed-release rule (see the module docs): a holder's outermost release that
/// did not succeed (`fail`, or `info`: a connection the server had closed, a timed-out
/// reply) while the server still held the lock under that holder's value. The holder
/// is done and gone from the lock; if no server removed or expired the key within the
/// bound after that release, while another acquire (the holder's own next one too) was
/// refused past the bound, the lock was kept from those who wanted it: a lock without
/// expiry whose release failed is stuck, which a lease would have bounded. Returns how
/// many such releases it judged and the first violation.
fn kept_after_failed_release(
    h: &History,
    pairs: &[OpPair],
    acquires: &[&OpPair],
) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    let mut judged = 0;
    for r in pairs.iter().filter(|p| p.f == OpF::Release && p.key == key) {
        let (Some(done), Some(done_us), Some(owner)) = (r.completion, r.completion_us, &r.owner)
        else {
            continue;
        };
        let outermost = model::op_at(h, r.invoke).is_some_and(|op| model::depth(op) == 1);
        if !outermost || !matches!(r.outcome, Phase::Fail | Phase::Info) {
            continue;
        }
        // The server still held it under this holder's value when the release ended.
        if !held_as(h, done, owner) {
            continue;
        }
        let Some(stuck) = stuck_after(h, acquires, (done, done_us), vec![r.invoke, done]) else {
            continue;
        };
        judged += 1;
        let Some((w, until, events)) = stuck else {
            continue;
        };
        let how = match model::op_at(h, done).and_then(|op| op.detail.as_deref()) {
            Some(d) => format!(" ({d})"),
            None => String::new(),
        };
        let outcome = unsuccessful(r.outcome);
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary: format!(
                    "{}'s release of lock {key} {outcome} at {}{how}, and the server kept the lock under its name (owner={owner}) {until}, although {} wanted it (acquire refused at {}), bound {} ms: a release that failed left the lock stuck",
                    r.host,
                    fmt_s(done_us),
                    w.host,
                    fmt_s(w.completion_us.unwrap_or(h.end_us)),
                    h.params.liveness_bound_ms
                ),
                at_us: done_us,
                hosts: vec![r.host.clone(), w.host.clone()],
                owners: vec![owner.clone()],
                first_event: done,
                events,
            })),
        );
    }
    (judged, None)
}

/// What the failed-release and orphan rules ask once a lock stayed on from event
/// `from` (at `from_us`) with nobody believing they hold it: `None` if the run ended
/// before the bound after it (not judged); else `Some(None)` if it was freed in time or
/// nobody was refused, or `Some(Some(..))`: the waiter refused past the bound, how long
/// the lock stayed, and the events to show (`shown`, then the waiter's).
fn stuck_after<'a>(
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
fn unsuccessful(outcome: Phase) -> &'static str {
    if outcome == Phase::Fail {
        "failed"
    } else {
        "ended with an unknown outcome"
    }
}

/// Whether, just before event `at`, some server held the run's key with `value` as its
/// current value (its last write of the key was `value` and nothing removed it since).
fn held_as(h: &History, at: usize, value: &str) -> bool {
    let key = h.params.key.as_str();
    let mut current: std::collections::BTreeMap<&str, Option<&str>> = Default::default();
    for e in &h.events[..at] {
        match &e.kind {
            EventKind::Server(ServerEvent::Written {
                key: k, value: v, ..
            }) if k == key => {
                current.insert(e.host.as_str(), Some(v.as_str()));
            }
            EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => {
                current.insert(e.host.as_str(), None);
            }
            _ => {}
        }
    }
    current.values().any(|v| *v == Some(value))
}

/// The orphan rule (see the module docs): a client wrote the lock key on a server
/// (the server's record names it) during an acquire that did not succeed (`fail` or
/// `info`, or never completed), with a value no acquire of any client ever reported
/// `ok`: an attempt left the lock behind (a create whose reply was lost and was sent
/// again without looking for the node the first one made; a quorum attempt that gave
/// up without unlocking the servers it had taken). Nobody believes they hold it; if
/// the server still has it past the bound after the attempt ended while another host
/// was refused past the bound, the lock is stuck. Returns how many such values it
/// judged and the first violation.
fn orphans(h: &History, pairs: &[OpPair], acquires: &[&OpPair]) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    let servers = model::server_hosts(h);
    let reported: std::collections::BTreeSet<&str> = acquires
        .iter()
        .filter(|p| p.outcome == Phase::Ok)
        .filter_map(|p| p.owner.as_deref())
        .collect();
    let mut seen: std::collections::BTreeSet<&str> = Default::default();
    let mut judged = 0;
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Server(ServerEvent::Written { by, key: k, value }) = &e.kind else {
            continue;
        };
        // A client's own write (not a replica's copy, not a server's restore), of a
        // value no acquisition ever reported, judged once per value.
        if k != key
            || servers.contains(by.as_str())
            || reported.contains(value.as_str())
            || !seen.insert(value.as_str())
        {
            continue;
        }
        // The attempt that wrote it: the writer's acquire open at the write.
        let Some(attempt) = pairs.iter().find(|p| {
            p.f == OpF::Acquire
                && p.host == *by
                && p.key == key
                && p.invoke <= i
                && p.completion.is_none_or(|c| c >= i)
        }) else {
            continue;
        };
        if attempt.outcome == Phase::Ok {
            continue;
        }
        let (from, from_us) = match (attempt.completion, attempt.completion_us) {
            (Some(c), Some(at)) => (c, at),
            _ => continue,
        };
        // Still there when the attempt ended.
        if !held_as(h, from + 1, value) {
            continue;
        }
        let Some(stuck) = stuck_after(h, acquires, (from, from_us), vec![attempt.invoke, i, from])
        else {
            continue;
        };
        judged += 1;
        let Some((w, until, events)) = stuck else {
            continue;
        };
        let outcome = unsuccessful(attempt.outcome);
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary: format!(
                    "{by}'s acquire of lock {key} {outcome} at {}, but it had written the lock on {} at {} (value={value}), which no acquisition ever reported: nobody believed they held it, yet it stayed {until} although {} wanted it (acquire refused at {}), bound {} ms",
                    fmt_s(from_us),
                    e.host,
                    fmt_s(e.at_us),
                    w.host,
                    fmt_s(w.completion_us.unwrap_or(h.end_us)),
                    h.params.liveness_bound_ms
                ),
                at_us: from_us,
                hosts: vec![by.clone(), w.host.clone()],
                owners: vec![value.clone()],
                first_event: i,
                events,
            })),
        );
    }
    (judged, None)
}

/// What the stuck-lock rules ask once a lock stayed on from event `from` (at
/// `from_us`) past `deadline_us`: the first removal of the key after `from` on a server
/// `on` accepts (the lock freed), and an acquire refused after the deadline and before
/// that removal (by any host but `not_by`): that waiter, and how long the lock stayed
/// ("for … until …" or "until the end of the run"). `None` if the lock was freed by
/// the deadline or nobody was refused in between.
fn refused_while_kept<'a>(
    h: &History,
    acquires: &[&'a OpPair],
    (from, from_us, deadline_us): (usize, u64, u64),
    on: impl Fn(&str) -> bool,
    not_by: Option<&str>,
) -> Option<(&'a OpPair, String)> {
    let key = h.params.key.as_str();
    let freed = h.events[from + 1..].iter().position(|e| {
        on(&e.host)
            && matches!(&e.kind, EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key)
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

/// The crash rule without the bound: a lock without expiry ([`without_expiry`]) whose
/// holder crashed, refused to everyone else from the crash to the run's end
/// ([`refused_to_the_end`]), is freed by nothing: stuck whatever the bound.
fn crashed_holder_stuck_to_the_end(
    h: &History,
    acquires: &[&OpPair],
    c: &model::CrashWhileHolding,
) -> Option<Verdict> {
    let server = h.events[c.written_event].host.as_str();
    if !without_expiry(h, server, &c.owner, c.written_event) {
        return None;
    }
    let (w, refused) = refused_to_the_end(h, acquires, c.crash_event, server, Some(&c.host))?;
    let mut events = vec![c.written_event, c.crash_event, w.invoke];
    events.extend(w.completion);
    events.sort_unstable();
    events.dedup();
    Some(Verdict::Invalid(Evidence {
        summary: format!(
            "{} crashed at {} holding lock {} (owner={}), which has no expiry: nobody acquired it until the end of the run at {} ({refused} acquires refused, the first {}'s at {}): stuck whatever the bound ({} ms)",
            c.host,
            fmt_s(c.at_us),
            h.params.key,
            c.owner,
            fmt_s(h.end_us),
            w.host,
            fmt_s(w.completion_us.unwrap_or(h.end_us)),
            h.params.liveness_bound_ms
        ),
        at_us: c.at_us,
        hosts: vec![c.host.clone(), w.host.clone()],
        owners: vec![c.owner.clone()],
        first_event: c.crash_event,
        events,
    }))
}

/// Whether lock value `value`, written on server `server` at event `from`, has no
/// expiry by the history: every acquisition that reported it was told of no validity
/// (`valid_until_us` absent), no command set an expiry on the key on that server after
/// `from`, its holders had no session that all their locks live with (an ephemeral
/// node) and the value names no session the server recorded (a lock scoped to a
/// connection ends with it). Such a lock held by nobody alive is freed by nothing.
fn without_expiry(h: &History, server: &str, value: &str, from: usize) -> bool {
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
        e.host == server
            && matches!(&e.kind, EventKind::Server(ServerEvent::ExpireSet { key: k, .. }) if k == key)
    });
    let tied = h.events.iter().any(|e| match &e.kind {
        EventKind::Server(ev) => match ev.fact() {
            LockFact::Session(s) => {
                (s.holds_all && holders.contains(s.client)) || s.owner.as_deref() == Some(value)
            }
            _ => false,
        },
        _ => false,
    });
    !expiring && !tied
}

/// A lock kept on `server` from event `from` to the run's end: no removal of the key
/// on that server after `from`, no acquire `ok` after it, and acquires (by hosts other
/// than `not_by`) refused after it. The first refused waiter and how many were refused;
/// `None` if the lock was freed or granted, or nobody was refused.
fn refused_to_the_end<'a>(
    h: &History,
    acquires: &[&'a OpPair],
    from: usize,
    server: &str,
    not_by: Option<&str>,
) -> Option<(&'a OpPair, usize)> {
    let key = h.params.key.as_str();
    let freed = h.events[from + 1..].iter().any(|e| {
        e.host == server
            && matches!(&e.kind, EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key)
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

/// The came-back rule (see the module docs): a server that wrote the lock key itself
/// (its recovery after a crash brought the value back) with a value that a client's
/// command had removed from that server before (the release was lost with the
/// crash): nobody holds that lock, so if the server still has it past the bound while
/// another host's acquire was refused past the bound, the lock is stuck. Returns how
/// many such returns it judged (the run reached their bound) and the first violation.
fn came_back(h: &History, acquires: &[&OpPair]) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    let bound_us = h.params.liveness_bound_ms * 1_000;
    let mut judged = 0;
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Server(ServerEvent::Written { by, key: k, value }) = &e.kind else {
            continue;
        };
        if k != key || *by != e.host {
            continue;
        }
        // The release it undid: that value removed by a client's command on this server.
        let Some((released, releaser, released_us)) = h.events[..i]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(j, r)| match &r.kind {
                EventKind::Server(ServerEvent::Removed {
                    by,
                    key: rk,
                    value: rv,
                    cause,
                }) if r.host == e.host && rk == key && rv == value && cause == "command" => {
                    Some((j, by.clone(), r.at_us))
                }
                _ => None,
            })
        else {
            continue;
        };
        let deadline_us = e.at_us + bound_us;
        let stuck_to_the_end = || {
            without_expiry(h, &e.host, value, i)
                .then(|| refused_to_the_end(h, acquires, i, &e.host, None))
                .flatten()
                .map(|(w, refused)| {
                    let mut events = vec![released, i, w.invoke];
                    events.extend(w.completion);
                    events.sort_unstable();
                    Verdict::Invalid(Evidence {
                        summary: format!(
                            "{} brought lock {key} back by itself at {} (owner={value}), which {releaser} had released at {}: nobody held it and it has no expiry, yet it stayed until the end of the run at {} ({refused} acquires refused, the first {}'s at {}): stuck whatever the bound ({} ms)",
                            e.host,
                            fmt_s(e.at_us),
                            fmt_s(released_us),
                            fmt_s(h.end_us),
                            w.host,
                            fmt_s(w.completion_us.unwrap_or(h.end_us)),
                            h.params.liveness_bound_ms
                        ),
                        at_us: e.at_us,
                        hosts: vec![e.host.clone(), w.host.clone()],
                        owners: vec![value.clone()],
                        first_event: i,
                        events,
                    })
                })
        };
        if h.end_us < deadline_us {
            // Nobody holds it; without an expiry nothing will ever free it: refused to
            // everyone until the run's end, it is stuck whatever the bound.
            if let Some(v) = stuck_to_the_end() {
                return (judged + 1, Some(v));
            }
            continue;
        }
        judged += 1;
        // Kept until that server removed it again.
        let Some((w, until)) = refused_while_kept(
            h,
            acquires,
            (i, e.at_us, deadline_us),
            |host| host == e.host,
            None,
        ) else {
            if let Some(v) = stuck_to_the_end() {
                return (judged, Some(v));
            }
            continue;
        };
        let mut events = vec![released, i, w.invoke];
        events.extend(w.completion);
        events.sort_unstable();
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary: format!(
                    "{} brought lock {key} back by itself at {} (owner={value}), which {releaser} had released at {}: nobody held it, yet it stayed {until} although {} wanted it (acquire refused at {}), bound {} ms",
                    e.host,
                    fmt_s(e.at_us),
                    fmt_s(released_us),
                    w.host,
                    fmt_s(w.completion_us.unwrap_or(h.end_us)),
                    h.params.liveness_bound_ms
                ),
                at_us: e.at_us,
                hosts: vec![e.host.clone(), w.host.clone()],
                owners: vec![value.clone()],
                first_event: i,
                events,
            })),
        );
    }
    (judged, None)
}

/// The never-granted rule (see the module docs): no acquire ever succeeded and no
/// server ever recorded the key, so the lock was free throughout, yet clients tried
/// with no fault to explain their refusals. Whatever form the refusals took (a `fail`, or an error reply
/// the client could only record as `info`), a lock nobody can get has failed.
fn never_granted(h: &History, acquires: &[&OpPair]) -> Option<Verdict> {
    let key = h.params.key.as_str();
    if acquires.iter().any(|p| p.outcome == Phase::Ok)
        || h.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Server(ServerEvent::Written { key: k, .. }) if k == key)
        })
    {
        return None;
    }
    let excuses = Excuses::new(h);
    let tries: Vec<&&OpPair> = acquires
        .iter()
        .filter(|p| {
            p.completion_us
                .is_some_and(|done| excuses.explains(&p.host, p.invoke_us, done).is_none())
        })
        .collect();
    let first = tries.first()?;
    let done = first.completion?;
    let refused = tries.iter().filter(|p| p.outcome == Phase::Fail).count();
    let clients: std::collections::BTreeSet<&str> = tries.iter().map(|p| p.host.as_str()).collect();
    let detail = match &h.events[done].kind {
        EventKind::Op(op) => op.detail.clone(),
        _ => None,
    }
    .map(|d| format!(": {d}"))
    .unwrap_or_default();
    Some(Verdict::Invalid(Evidence {
        summary: format!(
            "nobody ever acquired lock {key}, free throughout the run: {} acquires by {} clients completed with no fault to explain them ({refused} refused, {} with an unknown outcome); the first, {}'s at {}, ended {}{detail}",
            tries.len(),
            clients.len(),
            tries.len() - refused,
            first.host,
            fmt_s(first.invoke_us),
            if first.outcome == Phase::Fail {
                "refused"
            } else {
                "unknown"
            },
        ),
        at_us: first.invoke_us,
        hosts: clients.iter().map(|c| c.to_string()).collect(),
        owners: Vec::new(),
        first_event: first.invoke,
        events: vec![first.invoke, done],
    }))
}

/// The free-and-wanted rule (see the module docs): returns how many acquires it judged
/// (completed `ok` or `fail` with no fault to explain them) and the first violation.
fn refused_while_free(h: &History, acquires: &[&OpPair]) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    // After each event: on how many servers the key is present, and the event at which
    // it last became absent everywhere (`None`: present somewhere, or never written).
    let mut present: std::collections::BTreeMap<&str, bool> = Default::default();
    let mut free_since: Vec<Option<usize>> = Vec::with_capacity(h.events.len());
    let mut since: Option<usize> = Some(0);
    for (i, e) in h.events.iter().enumerate() {
        match &e.kind {
            EventKind::Server(ServerEvent::Written { key: k, .. }) if k == key => {
                present.insert(e.host.as_str(), true);
                since = None;
            }
            EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => {
                present.insert(e.host.as_str(), false);
                if since.is_none() && !present.values().any(|p| *p) {
                    since = Some(i);
                }
            }
            _ => {}
        }
        free_since.push(since);
    }
    let excuses = Excuses::new(h);
    let bound_us = h.params.liveness_bound_ms * 1_000;
    let mut judged = 0;
    for p in acquires {
        let (Some(done), Some(done_us)) = (p.completion, p.completion_us) else {
            continue;
        };
        if !matches!(p.outcome, Phase::Ok | Phase::Fail)
            || excuses.explains(&p.host, p.invoke_us, done_us).is_some()
        {
            continue;
        }
        judged += 1;
        if p.outcome != Phase::Fail {
            continue;
        }
        let Some(f) = free_since[done] else { continue };
        let free_us = h.events[f].at_us;
        let throughout = f <= p.invoke;
        if !throughout && done_us - free_us < bound_us {
            continue;
        }
        let free_from = if throughout {
            p.invoke_us.max(free_us)
        } else {
            free_us
        };
        let why = if throughout {
            format!(
                "the key was absent on every server from its invocation at {}",
                fmt_s(p.invoke_us)
            )
        } else {
            format!(
                "the key had been absent on every server since {} ({} before, bound {} ms)",
                fmt_s(free_us),
                fmt_ms(done_us - free_us),
                h.params.liveness_bound_ms
            )
        };
        let mut events = vec![p.invoke, done];
        if f > 0 {
            events.push(f);
        }
        events.sort_unstable();
        events.dedup();
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary: format!(
                    "{}'s acquire of {key} was refused at {} although nobody held the lock: {why}, and no fault explains it",
                    p.host,
                    fmt_s(done_us),
                ),
                at_us: free_from,
                hosts: vec![p.host.clone()],
                owners: Vec::new(),
                first_event: done,
                events,
            })),
        );
    }
    (judged, None)
}
