//! `liveness`: a lock whose holder crashed becomes obtainable again within the bound,
//! and a lock that is free and wanted is granted.
//!
//! "Wanted" is shown by another host's acquire still waiting at the bound, or refused
//! after it; `info` outcomes prove nothing either way. The rules, each on its function:
//!
//! - a crash of a host that held the key on a server: some acquire must succeed by
//!   the crash plus the bound ([`crash_rule`]), and a lock without expiry held by
//!   nobody alive is stuck if every acquire to the run's end was refused
//!   ([`crashed_holder_stuck_to_the_end`]);
//! - an acquire refused while the key was absent on every server, with no fault to
//!   excuse it ([`super::excuse`]): [`refused_while_free`]; a lock nobody ever got:
//!   [`never_granted`];
//! - a lock kept past the bound after its holder's outermost release said
//!   `still-held`, or after that release failed while the server held it
//!   ([`kept_after_release`]);
//! - a lock a server brought back by itself after a crash ([`came_back`]), and an
//!   orphan an unsuccessful acquire left behind ([`orphans`]).
//!
//! A run in which no holder crashed and no acquire completed is `Unknown`.

use sim::history::fact::LockFact;
use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

mod kept;

use kept::{
    held_as, refused_to_the_end, refused_while_kept, stuck_after, unsuccessful, without_expiry,
};

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
        let mut judged = 0usize;
        let mut skipped: Vec<String> = Vec::new();
        for c in model::crashes_while_holding(h) {
            match crash_rule(h, &acquires, &c) {
                Crash::Judged => judged += 1,
                Crash::Skipped => skipped.push(format!("{} at {}", c.host, fmt_s(c.at_us))),
                Crash::Stuck(v) => return v,
            }
        }
        let (completed, refused) = refused_while_free(h, &acquires);
        if let Some(v) = refused {
            return v;
        }
        if let Some(v) = never_granted(h, &acquires) {
            return v;
        }
        let (kept_judged, kept) = kept_after_release(h, &pairs, &acquires, Release::StillHeld);
        if let Some(v) = kept {
            return v;
        }
        judged += kept_judged;
        let (back_judged, back) = came_back(h, &acquires);
        if let Some(v) = back {
            return v;
        }
        judged += back_judged;
        let (failed_judged, failed) = kept_after_release(h, &pairs, &acquires, Release::Failed);
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

/// What the crash rule made of one crash while holding.
enum Crash {
    /// Judged and found live: taken again in time, or nobody refused past the bound.
    Judged,
    /// The run ended before the bound.
    Skipped,
    /// The violation.
    Stuck(Verdict),
}

/// The crash rule: after a crash of a host holding the key on a server, some acquire
/// must succeed (or a server record another client writing the key) by the crash plus
/// the bound, unless nobody wanted the lock. A refusal after the first success
/// afterwards shows the new holder holding it, not the lock being stuck.
fn crash_rule(h: &History, acquires: &[&OpPair], c: &model::CrashWhileHolding) -> Crash {
    let deadline_us = c.at_us + h.params.liveness_bound_ms * 1_000;
    let servers = model::server_hosts(h);
    // The first time the lock was taken again after the crash (in event order, so a
    // tie in time recorded after the crash counts): an acquire's ok, or the server's
    // record of another client writing the key (a grant whose grantee crashed before
    // its ok arrived was still a grant; a replica's copy, written "by" its master, is
    // nobody taking the lock).
    let first_ok = acquires
        .iter()
        .filter(|p| p.outcome == Phase::Ok)
        .filter_map(|p| Some((p.completion?, p.completion_us?)))
        .chain(
            h.events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match &e.kind {
                    EventKind::Server(s) => match s.fact() {
                        LockFact::Written { by, key, .. }
                            if key == h.params.key && by != c.host && !servers.contains(by) =>
                        {
                            Some((i, e.at_us))
                        }
                        _ => None,
                    },
                    _ => None,
                }),
        )
        .filter(|(ev, _)| *ev > c.crash_event)
        .min_by_key(|(ev, _)| *ev);
    if let Some((_, at)) = first_ok
        && at <= deadline_us
    {
        return Crash::Judged;
    }
    if h.end_us < deadline_us {
        return match crashed_holder_stuck_to_the_end(h, acquires, c) {
            Some(v) => Crash::Stuck(v),
            None => Crash::Skipped,
        };
    }
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
        return match crashed_holder_stuck_to_the_end(h, acquires, c) {
            Some(v) => Crash::Stuck(v),
            None => Crash::Judged,
        };
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
    Crash::Stuck(Verdict::Invalid(Evidence {
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
    }))
}

/// Which outermost releases [`kept_after_release`] judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The server answered `still-held`: the holder is done, yet the lock stays under
    /// its name (a reentrant count gone astray, then a watchdog or a re-entry keeping
    /// it). The releaser's own later acquires do not count as refused.
    StillHeld,
    /// The release did not succeed (`fail`, or `info`: a connection the server had
    /// closed, a timed-out reply) while the server still held the lock under the
    /// holder's value: a lock without expiry whose release failed is stuck, which a
    /// lease would have bounded.
    Failed,
}

/// The kept-after-release rules: after a holder's outermost release (hold count 1)
/// of the kind `rule` names, if no server removed or expired the key within the bound
/// while another acquire was refused past the bound, the lock was kept from those who
/// wanted it. Returns how many such releases it judged (the run reached their bound)
/// and the first violation.
fn kept_after_release(
    h: &History,
    pairs: &[OpPair],
    acquires: &[&OpPair],
    rule: Release,
) -> (usize, Option<Verdict>) {
    let key = h.params.key.as_str();
    let mut judged = 0;
    for r in pairs.iter().filter(|p| p.f == OpF::Release && p.key == key) {
        let (Some(done), Some(done_us)) = (r.completion, r.completion_us) else {
            continue;
        };
        let outermost = model::op_at(h, r.invoke).is_some_and(|op| model::depth(op) == 1);
        let detail = model::op_at(h, done).and_then(|op| op.detail.as_deref());
        let applies = outermost
            && match rule {
                Release::StillHeld => {
                    r.outcome == Phase::Ok && detail.is_some_and(|d| d.starts_with("still-held"))
                }
                Release::Failed => {
                    matches!(r.outcome, Phase::Fail | Phase::Info)
                        && r.owner.as_deref().is_some_and(|o| held_as(h, done, o))
                }
            };
        if !applies {
            continue;
        }
        let deadline_us = done_us + h.params.liveness_bound_ms * 1_000;
        if h.end_us < deadline_us {
            continue;
        }
        judged += 1;
        // Kept until the lock was freed (removed, or expired) on any server.
        let not_by = (rule == Release::StillHeld).then_some(r.host.as_str());
        let Some((w, until)) =
            refused_while_kept(h, acquires, (done, done_us, deadline_us), |_| true, not_by)
        else {
            continue;
        };
        let mut events = vec![r.invoke, done, w.invoke];
        events.extend(w.completion);
        events.sort_unstable();
        events.dedup();
        let owner = r.owner.as_deref().unwrap_or("?");
        let summary = match rule {
            Release::StillHeld => format!(
                "{} was done with lock {key} at {} (its outermost release), but the server still held it under its name (owner={owner}) {until}, although {} wanted it (acquire refused at {}), bound {} ms",
                r.host,
                fmt_s(done_us),
                w.host,
                fmt_s(w.completion_us.unwrap_or(h.end_us)),
                h.params.liveness_bound_ms
            ),
            Release::Failed => format!(
                "{}'s release of lock {key} {} at {}{}, and the server kept the lock under its name (owner={owner}) {until}, although {} wanted it (acquire refused at {}), bound {} ms: a release that failed left the lock stuck",
                r.host,
                unsuccessful(r.outcome),
                fmt_s(done_us),
                detail.map(|d| format!(" ({d})")).unwrap_or_default(),
                w.host,
                fmt_s(w.completion_us.unwrap_or(h.end_us)),
                h.params.liveness_bound_ms
            ),
        };
        return (
            judged,
            Some(Verdict::Invalid(Evidence {
                summary,
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
