//! `validity` and `overrun`: the two stories every lock debate mixes up, told apart.
//!
//! A lease-based lock does not promise that two clients never *believe* they hold it
//! at once (`mutual-exclusion` judges that); it promises that two clients are never
//! both *within their validity* at once: the time each acquisition told its client it
//! may act, converted to true time with that client's own clock when the acquire
//! returned (`Op.valid_until_us`), and extended by every renewal of its watchdog that
//! came while it still ran (`Renewed` events; see [`model::believed_validity`]).
//!
//! - `validity` is Invalid when two clients were within their believed validity at
//!   the same true time: **the algorithm broke its promise** (a server's clock jumped,
//!   a node forgot the lock in a restart, a failover lost it). Its evidence names any
//!   clock step recorded between the two grants, since that is the usual cause.
//! - `overrun` is Invalid when a client's write reached the storage after its own
//!   validity had run out while it still believed it held the lock: **the client
//!   overran** (a GC pause, slow work), which no lock algorithm can prevent; only a
//!   fencing check at the storage can.
//!
//! A lock that never expires (no validity recorded) is valid until its release, as the
//! client believes, unless the server ended it by its own rule first: a session that
//! expired (the ephemeral node deleted with it), a connection the server closed (its
//! user lock released with it). Such a lock promised "while your
//! session (connection) lives", and the server kept that promise: its validity ends
//! there, so a client that went on is an `overrun`, not a broken promise. Neither checker changes a run's safety class: the effect checkers
//! judge harm; these say whose fault it was.

use sim::history::{EventKind, History, ServerEvent, StorageEvent};

use super::model::{self, Hold};
use super::{Checker, Evidence, Verdict, fmt_ms, fmt_s};

/// The validity checker: two clients within their believed validity at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Validity;

/// The overrun checker: a write that reached the storage after its writer's validity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrun;

/// A hold with the end of its validity: the earlier of the release (or crash, or end
/// of run) and the validity the client believed it had.
struct Valid<'a> {
    hold: &'a Hold,
    /// True time until which the client believed the lock was its own (`None`: a lock
    /// that never expires).
    until_us: Option<u64>,
    /// For a lock without expiry that the server ended by its own rule: what ended it
    /// (`zk-1 expired the session`), for the evidence.
    ended_by: Option<String>,
}

impl Valid<'_> {
    /// The end of the interval in which the client was both holding and valid.
    fn end_us(&self) -> u64 {
        self.until_us
            .map_or(self.hold.end_us, |u| u.min(self.hold.end_us))
    }
}

fn with_validity<'a>(h: &History, holds: &'a [Hold]) -> Vec<Valid<'a>> {
    holds
        .iter()
        .map(|hold| match model::believed_validity(h, hold) {
            Some(until) => Valid {
                hold,
                until_us: Some(until),
                ended_by: None,
            },
            None => {
                let ended = server_ended(h, hold);
                Valid {
                    hold,
                    until_us: ended.as_ref().map(|(at, _)| *at),
                    ended_by: ended.map(|(_, why)| why),
                }
            }
        })
        .collect()
}

/// When and how a server ended a lock without expiry by its own rule during `hold`:
/// the first removal of its key and owner value whose cause is the server's (a session
/// expired, a connection closed), not a client's command.
fn server_ended(h: &History, hold: &Hold) -> Option<(u64, String)> {
    let end = hold.end_event.unwrap_or(h.events.len()).min(h.events.len());
    h.events[hold.acquire_event + 1..end]
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::Removed {
                key, value, cause, ..
            }) if *key == hold.key
                && *value == hold.owner
                && (cause == "expired" || cause == "connection-closed") =>
            {
                let what = if cause == "expired" {
                    "expired the session that held it"
                } else {
                    "closed the connection that held it"
                };
                Some((e.at_us, format!("{} {what} at {}", e.host, fmt_s(e.at_us))))
            }
            _ => None,
        })
}

fn holds_or_unknown(h: &History) -> Result<Vec<Hold>, Verdict> {
    let holds = model::holds(h).map_err(|reason| Verdict::Unknown { reason })?;
    if holds.is_empty() {
        return Err(Verdict::Unknown {
            reason: "no acquisition succeeded: no validity to judge".into(),
        });
    }
    // A lock without expiry ends where its server ends it (a session expired, a
    // connection closed): only the server's own record shows where.
    if holds
        .iter()
        .any(|hold| model::believed_validity(h, hold).is_none())
        && let Some(unknown) = model::needs_server_records(h)
    {
        return Err(unknown);
    }
    Ok(holds)
}

fn until_text(until_us: Option<u64>) -> String {
    until_us.map_or("never expiring".to_string(), |u| {
        format!("valid until {}", fmt_s(u))
    })
}

impl Checker for Validity {
    fn name(&self) -> &'static str {
        "validity"
    }

    fn check(&self, h: &History) -> Verdict {
        let holds = match holds_or_unknown(h) {
            Ok(x) => x,
            Err(v) => return v,
        };
        let valid = with_validity(h, &holds);
        let mut found: Option<(&Valid, &Valid)> = None;
        let mut pairs = 0usize;
        for (i, a) in valid.iter().enumerate() {
            for b in &valid[i + 1..] {
                // Ordered by acquire event: `b` started no earlier than `a`.
                // Two readers of a read-write lock may hold together.
                if a.hold.key != b.hold.key
                    || a.hold.host == b.hold.host
                    || (a.hold.is_read() && b.hold.is_read())
                {
                    continue;
                }
                let (a_end, b_end) = (a.end_us(), b.end_us());
                // A hold whose validity ended before it began (a lock returned already
                // expired by its own account) was never within it: no overlap.
                if a_end <= a.hold.start_us || b_end <= b.hold.start_us {
                    continue;
                }
                if b.hold.start_us < a_end && a.hold.start_us < b_end {
                    pairs += 1;
                    if found.is_none() {
                        found = Some((a, b));
                    }
                }
            }
        }
        let Some((a, b)) = found else {
            return Verdict::Valid;
        };
        let (from, to) = (b.hold.start_us, a.end_us().min(b.end_us()));
        // Clock steps between the first grant and the overlap's start: the usual
        // reason a promise breaks.
        let steps: Vec<(usize, String)> = h
            .events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e.kind {
                EventKind::Clock { step_ms, .. }
                    if step_ms != 0
                        && e.at_us >= a.hold.start_us.saturating_sub(h.params.lease_ms * 1000)
                        && e.at_us <= from =>
                {
                    Some((
                        i,
                        format!(
                            "{}'s clock stepped {step_ms:+} ms at {}",
                            e.host,
                            fmt_s(e.at_us)
                        ),
                    ))
                }
                _ => None,
            })
            .collect();
        let because = if steps.is_empty() {
            String::new()
        } else {
            let texts: Vec<&str> = steps.iter().map(|(_, t)| t.as_str()).collect();
            format!("; meanwhile {}", texts.join(", "))
        };
        let more = if pairs > 1 {
            format!(" ({pairs} such pairs in all)")
        } else {
            String::new()
        };
        let mut events = vec![a.hold.acquire_event, b.hold.acquire_event];
        events.extend(steps.iter().map(|(i, _)| *i));
        events.sort_unstable();
        events.dedup();
        Verdict::Invalid(Evidence {
            summary: format!(
                "{} ({}, owner={}) and {} ({}, owner={}) were both within their believed \
                 validity of lock {} from {} to {}: the lock broke its promise{because}{more}",
                a.hold.host,
                until_text(a.until_us),
                a.hold.owner,
                b.hold.host,
                until_text(b.until_us),
                b.hold.owner,
                a.hold.key,
                fmt_s(from),
                fmt_s(to),
            ),
            at_us: from,
            hosts: vec![a.hold.host.clone(), b.hold.host.clone()],
            owners: vec![a.hold.owner.clone(), b.hold.owner.clone()],
            first_event: b.hold.acquire_event,
            events,
        })
    }
}

impl Checker for Overrun {
    fn name(&self) -> &'static str {
        "overrun"
    }

    fn check(&self, h: &History) -> Verdict {
        let holds = match holds_or_unknown(h) {
            Ok(x) => x,
            Err(v) => return v,
        };
        let valid = with_validity(h, &holds);
        let mut found: Option<(usize, u64, &Valid)> = None;
        let mut count = 0usize;
        for (i, e) in h.events.iter().enumerate() {
            let EventKind::Storage(StorageEvent::Write { writer, .. }) = &e.kind else {
                continue;
            };
            // The writer's hold in force when the write arrived.
            let Some(v) = valid
                .iter()
                .rev()
                .find(|v| v.hold.host == *writer && v.hold.open_at(e.at_us))
            else {
                continue;
            };
            if let Some(until) = v.until_us
                && e.at_us > until
            {
                count += 1;
                if found.is_none() {
                    found = Some((i, e.at_us, v));
                }
            }
        }
        let Some((i, at, v)) = found else {
            return Verdict::Valid;
        };
        let until = v.until_us.unwrap_or_default();
        let story = match &v.ended_by {
            Some(how) => format!(
                "its lock had no expiry, but {how} (the lock's promise, kept) while the client went on: it overran its session"
            ),
            None => "the client overran its lease".to_string(),
        };
        let more = if count > 1 {
            format!(" ({count} such writes in all)")
        } else {
            String::new()
        };
        Verdict::Invalid(Evidence {
            summary: format!(
                "{}'s write reached the storage at {}, {} after its validity of lock {} ran out \
                 at {} (owner={}): {story}{more}",
                v.hold.host,
                fmt_s(at),
                fmt_ms(at - until),
                v.hold.key,
                fmt_s(until),
                v.hold.owner
            ),
            at_us: at,
            hosts: vec![v.hold.host.clone()],
            owners: vec![v.hold.owner.clone()],
            first_event: i,
            events: vec![v.hold.acquire_event, i],
        })
    }
}
