//! `sometimes` probes: proof that a scenario's fault really did what it was meant to.
//!
//! A safety checker that passes because the fault never bit (a pause that hit nobody
//! holding the lock, a delay shorter than the lease) proves nothing. Each probe returns
//! a description of a witness event, or `None`, so scenario tests can assert
//! `probes::crash_while_holding(&h).is_some()` next to the checker's verdict.

use sim::history::fact::{LockFact, Rank, Session, SessionState};
use sim::history::{Event, EventKind, FaultPhase, History, OpF, Phase, ServerEvent};

use super::model::{self, HoldEnd};
use super::{fmt_ms, fmt_s};

/// A pause that began while its host believed it held the lock, or while it was
/// releasing it, and lasted longer than the lease (a pause still running at the run's
/// end lasts until the end).
pub fn pause_outlasted_a_hold(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    let releases: Vec<model::OpPair> = model::op_pairs(h)
        .ok()?
        .into_iter()
        .filter(|p| p.f == OpF::Release)
        .collect();
    let lease_us = h.params.lease_ms * 1_000;
    let ends = model::first_fault_ends(h);
    h.events.iter().find_map(|e| {
        let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            ..
        } = e.kind
        else {
            return None;
        };
        if !model::is_pause(h, fault) {
            return None;
        }
        let end_us = ends.get(&fault).copied().unwrap_or(h.end_us);
        let len_us = end_us.saturating_sub(e.at_us);
        if len_us <= lease_us {
            return None;
        }
        // Holding: inside the believed interval, or in the middle of releasing (a
        // release's GET or DEL in flight is where a pause does the most harm).
        let (key, owner, phase) = if let Some(hold) = holds
            .iter()
            .find(|o| o.host == e.host && o.open_at(e.at_us))
        {
            (&hold.key, hold.owner.as_str(), "holding")
        } else {
            let release = releases.iter().find(|r| {
                r.host == e.host
                    && r.invoke_us <= e.at_us
                    && r.completion_us.is_none_or(|c| c > e.at_us)
            })?;
            (
                &release.key,
                release.owner.as_deref().unwrap_or("?"),
                "releasing",
            )
        };
        Some(format!(
            "{} paused at {} for {} while {phase} {key} (owner={owner}), lease {} ms",
            e.host,
            fmt_s(e.at_us),
            fmt_ms(len_us),
            h.params.lease_ms
        ))
    })
}

/// A crash of a host that held the lock key on the server at the time.
pub fn crash_while_holding(h: &History) -> Option<String> {
    model::crashes_while_holding(h).first().map(|c| {
        format!(
            "{} crashed at {} holding {} (owner={})",
            c.host,
            fmt_s(c.at_us),
            h.params.key,
            c.owner
        )
    })
}

/// A believed hold longer than the lease (slow work inside the critical section).
pub fn hold_outlasted_lease(h: &History) -> Option<String> {
    let lease_us = h.params.lease_ms * 1_000;
    model::holds(h)
        .ok()?
        .into_iter()
        .find(|o| o.len_us() > lease_us)
        .map(|o| {
            let why = match o.end {
                HoldEnd::Release => "until its release",
                HoldEnd::Crash => "until it crashed",
                HoldEnd::EndOfRun => "until the end of the run",
            };
            format!(
                "{} believed it held {} (owner={}) from {} for {} {why}, lease {} ms",
                o.host,
                o.key,
                o.owner,
                fmt_s(o.start_us),
                fmt_ms(o.len_us()),
                h.params.lease_ms
            )
        })
}

/// An acquire whose reply came later than the lease after its invocation.
pub fn acquire_reply_later_than_lease(h: &History) -> Option<String> {
    let lease_us = h.params.lease_ms * 1_000;
    model::op_pairs(h).ok()?.into_iter().find_map(|p| {
        let done_us = p.completion_us?;
        (p.f == OpF::Acquire && p.outcome == Phase::Ok && done_us - p.invoke_us > lease_us).then(
            || {
                format!(
                    "{} acquire invoked at {} returned ok after {}, lease {} ms",
                    p.host,
                    fmt_s(p.invoke_us),
                    fmt_ms(done_us - p.invoke_us),
                    h.params.lease_ms
                )
            },
        )
    })
}

/// Contention: an acquire failed, or an acquire was in flight while another host
/// believed it held the same key or was acquiring it too (two clients wanted the lock
/// at once, whether or not anyone got it).
pub fn contended(h: &History) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
    let acquires = || pairs.iter().filter(|p| p.f == OpF::Acquire);
    if let Some(p) = acquires().find(|p| p.outcome == Phase::Fail) {
        return Some(format!(
            "{} acquire of {} invoked at {} failed",
            p.host,
            p.key,
            fmt_s(p.invoke_us)
        ));
    }
    let holds = model::holds(h).ok()?;
    let held = acquires().find_map(|p| {
        let done_us = p.completion_us.unwrap_or(h.end_us);
        let o = holds.iter().find(|o| {
            o.host != p.host && o.key == p.key && o.start_us < done_us && p.invoke_us < o.end_us
        })?;
        Some(format!(
            "{} waited on {} from {} while {} held it (owner={})",
            p.host,
            p.key,
            fmt_s(p.invoke_us),
            o.host,
            o.owner
        ))
    });
    held.or_else(|| {
        // Acquires in invocation order: each overlaps an earlier one of another host
        // that was still in flight when it began.
        let mut in_flight: Vec<&model::OpPair> = Vec::new();
        acquires().find_map(|p| {
            in_flight.retain(|q| q.completion_us.unwrap_or(h.end_us) > p.invoke_us);
            let other = in_flight
                .iter()
                .find(|q| q.host != p.host && q.key == p.key)
                .map(|q| {
                    format!(
                        "{} and {} both acquiring {} at {}",
                        q.host,
                        p.host,
                        p.key,
                        fmt_s(p.invoke_us)
                    )
                });
            in_flight.push(p);
            other
        })
    })
}

/// Read/write contention worth judging: two readers on different hosts held the lock
/// at once (the read mode really shared), and a write acquisition was asked for while
/// another host held a read lock (a writer met a reader). A correct read-write lock
/// makes that writer wait until the readers are gone; a broken one may let it in, so
/// the witness says which happened but requires neither.
pub fn readers_shared_and_a_writer_met_a_reader(h: &History) -> Option<String> {
    use sim::history::LockMode;
    let holds = model::holds(h).ok()?;
    let reads = || holds.iter().filter(|x| x.is_read());
    let shared = reads().enumerate().find_map(|(i, a)| {
        let b = reads().skip(i + 1).find(|b| {
            b.host != a.host && b.key == a.key && b.start_us < a.end_us && a.start_us < b.end_us
        })?;
        Some(format!(
            "{} and {} read {} together from {}",
            a.host,
            b.host,
            a.key,
            fmt_s(a.start_us.max(b.start_us))
        ))
    })?;
    let pairs = model::op_pairs(h).ok()?;
    // A writer that got the lock is the better witness; one still refused will do.
    let granted = |p: &&model::OpPair| p.outcome == Phase::Ok;
    let met = pairs
        .iter()
        .filter(granted)
        .chain(pairs.iter().filter(|p| !granted(p)))
        .find_map(|p| {
            let writing = p.f == OpF::Acquire
                && model::op_at(h, p.invoke).and_then(|op| op.mode) == Some(LockMode::Write);
            if !writing {
                return None;
            }
            let r = reads().find(|r| {
                r.host != p.host
                    && r.key == p.key
                    && r.start_us <= p.invoke_us
                    && p.invoke_us < r.end_us
            })?;
            let then = match (p.outcome, p.completion_us) {
                (Phase::Ok, Some(done)) if done >= r.end_us => {
                    format!("granted at {}, after that read ended", fmt_s(done))
                }
                (Phase::Ok, Some(done)) => format!("granted at {}, during that read", fmt_s(done)),
                _ => "not granted".to_string(),
            };
            Some(format!(
                "{} asked for the write lock at {} while {} read it ({then})",
                p.host,
                fmt_s(p.invoke_us),
                r.host
            ))
        })?;
    Some(format!("{shared}; {met}"))
}

/// [`readers_shared_and_a_writer_met_a_reader`], in a run where a read hold outlasted
/// the lease (so the read lock's renewal, not its first lease, kept it).
pub fn long_reads_shared_and_a_writer_met_a_reader(h: &History) -> Option<String> {
    let lease_us = h.params.lease_ms * 1_000;
    let long = model::holds(h)
        .ok()?
        .into_iter()
        .find(|x| x.is_read() && x.len_us() > lease_us)?;
    let met = readers_shared_and_a_writer_met_a_reader(h)?;
    Some(format!(
        "{} read {} for {} from {} (lease {} ms); {met}",
        long.host,
        long.key,
        fmt_ms(long.len_us()),
        fmt_s(long.start_us),
        h.params.lease_ms
    ))
}

/// A nested acquisition: an acquire `ok` with a hold count of 2 or more (a reentrant
/// lock taken again by its holder), so the `reentrancy` checker had something to
/// judge.
pub fn nested_acquisition(h: &History) -> Option<String> {
    h.ops().find_map(|(e, op)| {
        let depth = model::depth(op);
        (op.f == OpF::Acquire && op.phase == Phase::Ok && depth >= 2).then(|| {
            format!(
                "{} acquired {} again at {} (owner={}, hold count {depth})",
                e.host,
                op.key.as_deref().unwrap_or(&h.params.key),
                fmt_s(e.at_us),
                op.owner.as_deref().unwrap_or("?")
            )
        })
    })
}

/// A release removed the lock key by command while Redis was dropping pub/sub
/// messages (a `DropPushes` fault's window, whose events name host `redis`), another
/// host's acquire was waiting, and the server's record shows a message dropped on its
/// way to a subscriber after the release: the unlock message that would wake that
/// waiter was lost.
pub fn unlock_message_dropped_with_a_waiter(h: &History) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
    let acquires: Vec<&model::OpPair> = pairs
        .iter()
        .filter(|p| p.f == OpF::Acquire && p.key == h.params.key)
        .collect();
    let windows: Vec<model::FaultWindow> = model::fault_windows(h)
        .into_iter()
        .filter(|w| {
            w.host == "redis"
                && (model::is_drop_pushes(h, w.fault) || h.plan.faults.get(w.fault).is_none())
        })
        .collect();
    h.events.iter().enumerate().find_map(|(i, e)| {
        let EventKind::Server(ServerEvent::Removed {
            by,
            key,
            value,
            cause,
        }) = &e.kind
        else {
            return None;
        };
        if *key != h.params.key || cause != "command" {
            return None;
        }
        let w = windows
            .iter()
            .find(|w| w.start_event < i && e.at_us <= w.end_us)?;
        let waiter = acquires.iter().find(|p| {
            p.host != *by && p.invoke < i && p.completion.is_none_or(|c| c > i)
        })?;
        // And a message really was lost on its way to a subscriber after the release
        // (a design that publishes nothing, or has nobody subscribed, lost nothing).
        let dropped = h.events[i + 1..].iter().find_map(|d| match &d.kind {
            EventKind::Server(ServerEvent::MessageDropped { channel }) if d.at_us <= w.end_us => {
                Some((channel, d.at_us))
            }
            _ => None,
        })?;
        Some(format!(
            "{by} released {key} (owner={value}) at {} while redis dropped pub/sub messages (since {}) and {} waited (acquire invoked at {}); the message on {} was dropped at {}",
            fmt_s(e.at_us),
            fmt_s(w.start_us),
            waiter.host,
            fmt_s(waiter.invoke_us),
            dropped.0,
            fmt_s(dropped.1)
        ))
    })
}

/// A lock server expired a session (deleting what lived with it) while its client
/// believed it held the lock: the session's client has a believed hold open at the
/// expiry. The witness names the session and what its end freed.
pub fn session_expired_during_a_hold(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    h.events.iter().find_map(|e| {
        let EventKind::Server(ev) = &e.kind else {
            return None;
        };
        let LockFact::Session(s) = ev.fact() else {
            return None;
        };
        if s.state != SessionState::Expired {
            return None;
        }
        let client = s.client;
        let hold = holds
            .iter()
            .find(|o| o.host == client && o.open_at(e.at_us))?;
        let freed: Vec<&str> = s.freed.iter().map(|f| f.words.as_str()).collect();
        Some(format!(
            "{}: {} expired {} of {client} (timeout {} ms), deleting \
             [{}], while {client} believed it held {} as {}",
            fmt_s(e.at_us),
            e.host,
            s.name,
            s.timeout_ms.unwrap_or_default(),
            freed.join(", "),
            hold.key,
            hold.owner,
        ))
    })
}

/// A holder was cut off from the servers (a partition with it on one side) and the
/// partition healed while the validity it believed it had at the cut still ran, and
/// it still held the lock then: a transient failure shorter than the lease left (one
/// renewal of a watchdog fails, and the next could succeed).
pub fn holder_cut_off_with_lease_left(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    h.events.iter().enumerate().find_map(|(i, e)| {
        let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            peers,
            ..
        } = &e.kind
        else {
            return None;
        };
        if peers.is_empty() {
            return None;
        }
        let hold = holds.iter().find(|o| o.host == e.host && o.open_at(e.at_us))?;
        let healed = h.events[i + 1..].iter().find(|x| {
            x.host == e.host
                && matches!(&x.kind, EventKind::Fault { fault: f, phase: FaultPhase::End, .. } if f == fault)
        })?;
        // The validity believed at the cut: the acquisition's, extended by renewals
        // that came before the cut.
        let mut until = model::op_at(h, hold.acquire_event)?.valid_until_us?;
        for r in &h.events[hold.acquire_event + 1..i] {
            if let EventKind::Renewed { key, owner, valid_until_us } = &r.kind
                && r.host == hold.host
                && *key == hold.key
                && *owner == hold.owner
            {
                until = until.max(*valid_until_us);
            }
        }
        (healed.at_us < until && hold.open_at(healed.at_us)).then(|| {
            format!(
                "{} was cut off from [{}] from {} to {} while it held {} (owner={}), \
                 with its validity running to {}: the cut healed {} before the lease ran out",
                e.host,
                peers.join(", "),
                fmt_s(e.at_us),
                fmt_s(healed.at_us),
                hold.key,
                hold.owner,
                fmt_s(until),
                fmt_ms(until - healed.at_us)
            )
        })
    })
}

/// A lock server ended a client's session (a connection) while that client believed
/// it held the lock. The witness names the session, the hold, and whether the key's
/// lock went with the session (a lock scoped to it is gone) or not (a record that
/// outlives its session).
pub fn connection_closed_during_a_hold(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    let key = h.params.key.as_str();
    let closes: Vec<(&Event, Session<'_>)> = h
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(ev) => match ev.fact() {
                LockFact::Session(s) => Some((e, s)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    // A close that took the lock with it is the better witness; else the first close.
    let took_the_lock = |s: &Session<'_>| s.freed.iter().any(|f| f.key == key);
    let first = |pick: &dyn Fn(&Session<'_>) -> bool| {
        closes
            .iter()
            .filter(|(_, s)| pick(s))
            .find_map(|(e, s)| witness(h, &holds, e, s))
    };
    first(&took_the_lock).or_else(|| first(&|_| true))
}

fn witness(h: &History, holds: &[model::Hold], e: &Event, s: &Session<'_>) -> Option<String> {
    if s.state != SessionState::Closed {
        return None;
    }
    let client = s.client;
    let hold = holds
        .iter()
        .find(|o| o.host == client && o.open_at(e.at_us))?;
    let key = &h.params.key;
    let lock = match s.freed.iter().find(|f| f.key == key) {
        Some(f) => f.words.clone(),
        None => format!("keeping the lock {key}"),
    };
    Some(format!(
        "{}: {} closed {} of {client}, {lock}, while {client} \
         believed it held {} as {}",
        fmt_s(e.at_us),
        e.host,
        s.name,
        hold.key,
        hold.owner,
    ))
}

/// A lock server crashed while a client held a lock it had granted, and recovered:
/// its restart's record names the lock its record held at the crash, and a client's
/// hold was open at the crash. The witness is the restart's own account (the crash,
/// the settings, the last flush, what was lost or kept) and the holder.
pub fn restart_struck_a_hold(h: &History) -> Option<String> {
    let holds = model::holds(h).ok()?;
    let mut crashed: std::collections::BTreeMap<&str, u64> = Default::default();
    for e in &h.events {
        match &e.kind {
            EventKind::Fault {
                phase: FaultPhase::Start,
                detail,
                ..
            } if detail.starts_with("crash") || detail.starts_with("machine crash") => {
                crashed.insert(e.host.as_str(), e.at_us);
            }
            EventKind::Server(ev) => {
                let LockFact::Recovered {
                    held: Some(_),
                    detail,
                    ..
                } = ev.fact()
                else {
                    continue;
                };
                let Some(&at) = crashed.get(e.host.as_str()) else {
                    continue;
                };
                let Some(hold) = holds.iter().find(|o| o.open_at(at)) else {
                    continue;
                };
                return Some(format!(
                    "{}: {} {detail}, while {} held the lock",
                    fmt_s(e.at_us),
                    e.host,
                    hold.host
                ));
            }
            _ => {}
        }
    }
    None
}

/// A failover lost the lock: a master was promoted whose record lacked the lock the
/// crashed primary had granted: a lock record whose replication event the replica had
/// not received, or a lock scoped to a connection, which no replica ever has. The
/// witness names the grant, the crash and the promotion, and which of the two the
/// lock was.
pub fn failover_lost_the_lock(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    // Each server's record of the key: its value, when it was written, and by whom.
    let mut held: std::collections::BTreeMap<&str, (&str, u64, &str)> = Default::default();
    let mut crashed: std::collections::BTreeMap<&str, u64> = Default::default();
    for e in &h.events {
        let promoted = match &e.kind {
            // A crash of the process or of its machine, by the plan's own kind.
            EventKind::Fault {
                fault,
                phase: FaultPhase::Start,
                ..
            } if super::model::is_crash(h, *fault) => {
                crashed.insert(e.host.as_str(), e.at_us);
                continue;
            }
            EventKind::Server(ev) => match ev.fact() {
                LockFact::Written { key: k, value, by } if k == key => {
                    held.insert(e.host.as_str(), (value, e.at_us, by));
                    continue;
                }
                LockFact::Removed { key: k, .. } if k == key => {
                    held.remove(e.host.as_str());
                    continue;
                }
                LockFact::Role {
                    rank: Rank::Master, ..
                } => e.host.as_str(),
                _ => continue,
            },
            _ => continue,
        };
        let mine = held.get(promoted).map(|(v, _, _)| *v);
        let lost = held.iter().find(|(server, (value, _, _))| {
            **server != promoted && crashed.contains_key(**server) && mine != Some(*value)
        })?;
        let (primary, (value, granted, by)) = lost;
        if let Some(conn) = session_of_lock(h, primary, by, value) {
            return Some(format!(
                "{}: {promoted} was promoted without {key} (owner={value}), which \
                 {primary} had granted to {by} at {} as a lock of its {conn} \
                 (a GET_LOCK or a transaction's row lock: it lives in that \
                 server's memory, scoped to the connection, and is never written \
                 to the binlog); {primary} crashed at {}, and the new primary \
                 never had the lock, whatever its replication lag",
                fmt_s(e.at_us),
                fmt_s(*granted),
                fmt_s(crashed[primary]),
            ));
        }
        return Some(format!(
            "{}: {promoted} was promoted without {key} (owner={value}), which \
             {primary} had granted to {by} at {} and crashed at {} before \
             replicating",
            fmt_s(e.at_us),
            fmt_s(*granted),
            fmt_s(crashed[primary]),
        ));
    }
    None
}

/// The session whose lock `value` is, if it names one of `client`'s sessions on
/// `server` (a lock scoped to a connection: its owner value names the holding
/// connection, and the server logged that connection in): a lock that exists only in
/// that server's memory, never in its replication log.
fn session_of_lock(h: &History, server: &str, client: &str, value: &str) -> Option<String> {
    h.events.iter().find_map(|e| {
        let EventKind::Server(ev) = &e.kind else {
            return None;
        };
        match ev.fact() {
            LockFact::Session(s)
                if e.host == server
                    && s.client == client
                    && s.state == SessionState::Opened
                    && s.owner.as_deref() == Some(value) =>
            {
                Some(s.name)
            }
            _ => None,
        }
    })
}

/// A consensus quorum's leader crashed right after committing a lock's create (its
/// crash record names the commit: a zxid, a revision), and a leader of a later epoch or term was elected after it (a survivor, or the
/// crashed server itself once restarted): the witness names both.
pub fn leader_crashed_after_a_lock_create(h: &History) -> Option<String> {
    h.events.iter().enumerate().find_map(|(i, e)| {
        let EventKind::Fault {
            phase: FaultPhase::Start,
            detail,
            ..
        } = &e.kind
        else {
            return None;
        };
        if !detail.contains("create committed at") {
            return None;
        }
        let (at, leader, role) = h.events[i..].iter().find_map(|x| match &x.kind {
            EventKind::Server(ev) => match ev.fact() {
                LockFact::Role {
                    role,
                    rank: Rank::Elected,
                    ..
                } => Some((x.at_us, x.host.as_str(), role)),
                _ => None,
            },
            _ => None,
        })?;
        Some(format!(
            "{}: {detail}; {}: {leader} is {role}",
            fmt_s(e.at_us),
            fmt_s(at)
        ))
    })
}

/// A replica served client sessions while it lagged behind its leader's commits for
/// at least `min_ms` (its clients read stale data meanwhile).
pub fn replica_served_stale(h: &History, min_ms: u64) -> Option<String> {
    h.events.iter().find_map(|e| {
        let EventKind::Server(ev) = &e.kind else {
            return None;
        };
        match ev.fact() {
            LockFact::Lagged {
                leader,
                since_us,
                behind,
                clients,
            } if clients > 0
                && behind > 0
                && e.at_us.saturating_sub(since_us) >= min_ms * 1000 =>
            {
                Some(format!(
                    "{}: {} served {clients} client sessions while up to {behind} txns behind {leader} for {}",
                    fmt_s(since_us),
                    e.host,
                    fmt_ms(e.at_us - since_us)
                ))
            }
            _ => None,
        }
    })
}
