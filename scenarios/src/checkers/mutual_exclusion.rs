//! `mutual-exclusion`: no two clients believe they hold the same lock at once.
//!
//! Judged on belief, not on the server: the harm a broken lock does comes from a
//! client acting as holder, whatever the server thinks. Belief starts at the acquire's
//! `ok` and ends at the release's invocation (see [`model::holds`]), so a client that
//! was paused past its lease still counts as holding until it says otherwise.
//!
//! Two *read* holds of a read-write lock (a read/write workload records each
//! acquisition's mode) may overlap: that is the lock's promise, not a breach of it. Any
//! other overlap is judged here; `rw-exclusion` judges the same holds and names the
//! modes. A history without modes is judged as it always was.

use sim::history::fact::{LockFact, Rank, Removal, SessionState};
use sim::history::{EventKind, History};

use super::model;
use super::{Checker, Evidence, Verdict, fmt_s};

/// The mutual-exclusion checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct MutualExclusion;

impl Checker for MutualExclusion {
    fn name(&self) -> &'static str {
        "mutual-exclusion"
    }

    fn check(&self, h: &History) -> Verdict {
        let holds = match model::holds(h) {
            Ok(x) => x,
            Err(reason) => return Verdict::Unknown { reason },
        };
        if holds.is_empty() {
            // No client ever held the lock: nothing was excluded, so nothing is proved.
            return Verdict::Unknown {
                reason: "no acquisition succeeded: no hold to judge".into(),
            };
        }
        // Every overlapping pair of different hosts on one key; report the one whose
        // overlap starts first (ties: lowest event index), and count the rest.
        let model::Overlaps { first, pairs, .. } = model::overlaps(&holds);
        let Some((a, b)) = first else {
            return Verdict::Valid;
        };
        let until = model::overlap_until(h, a, b);
        let more = if pairs > 1 {
            format!(" ({} overlapping pairs in all)", pairs)
        } else {
            String::new()
        };
        let mut events = vec![a.acquire_event, b.acquire_event];
        events.extend(a.end_event);
        let facts = || {
            h.events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match &e.kind {
                    EventKind::Server(s) => Some((i, e, s.fact())),
                    _ => None,
                })
        };
        let between = |t: u64| (a.start_us..=b.start_us).contains(&t);
        // A lock server that expired the first holder's session between the two grants
        // (deleting the lock held through it) is why the second got the lock: named, as
        // the evidence's cause.
        let expiry = facts().find_map(|(i, e, f)| match f {
            LockFact::Session(s)
                if s.state == SessionState::Expired && s.client == a.host && between(e.at_us) =>
            {
                Some((i, format!(
                    "; {} expired {}'s {} (timeout {} ms) at {}, deleting its node, while {} still believed it held the lock",
                    e.host, a.host, s.name, s.timeout_ms.unwrap_or_default(), fmt_s(e.at_us), a.host
                )))
            }
            _ => None,
        });
        // A server that rolled the first holder's lock write back (it was on that
        // server alone when it failed) and another server elected between the two
        // grants: the second got the lock from one that never had the first one's write.
        let rollback = || {
            let (ri, re, _) = facts().find(|(_, e, f)| {
                e.at_us >= a.start_us
                    && matches!(f, LockFact::Removed { key, value, why: Removal::RolledBack, .. }
                        if *key == a.key && *value == a.owner)
            })?;
            let (pi, pe, role) = facts().find_map(|(i, e, f)| match f {
                LockFact::Role {
                    role,
                    rank: Rank::Elected,
                    ..
                } if e.host != re.host && between(e.at_us) => Some((i, e, role)),
                _ => None,
            })?;
            Some((
                vec![pi, ri],
                format!(
                    "; {}'s lock write was acknowledged by {} alone: {} became {role} at {} without it and granted the lock again, and {} rolled the write back at {}",
                    a.host,
                    re.host,
                    pe.host,
                    fmt_s(pe.at_us),
                    re.host,
                    fmt_s(re.at_us)
                ),
            ))
        };
        // A server that lost the first holder's lock in a crash and restart between the
        // two grants (a commit not yet flushed, a lock scoped to a connection): its
        // restart's record says why.
        let restart = || {
            facts().find_map(|(i, e, f)| match f {
                LockFact::Recovered {
                    held: Some(v),
                    kept: false,
                    detail,
                } if v == a.owner && between(e.at_us) => {
                    Some((i, format!("; {} {detail}", e.host)))
                }
                _ => None,
            })
        };
        // Any other server whose record shows the first holder's lock expiring between
        // the two grants (a key's TTL, a lease the lessor revoked): the lease ran out on
        // the server while its holder still believed in it.
        let lapsed = || {
            facts().find_map(|(i, e, f)| match f {
                LockFact::Removed {
                    key,
                    value,
                    why: Removal::Expired,
                    ..
                } if key == a.key && value == a.owner && between(e.at_us) => {
                    Some((i, format!(
                        "; {}'s lease of {} ran out on {} at {}, which deleted the lock, while {} still believed it held the lock; {} took it at {}",
                        a.host, a.owner, e.host, fmt_s(e.at_us), a.host, b.host, fmt_s(b.start_us)
                    )))
                }
                _ => None,
            })
        };
        let cause = match (expiry, rollback()) {
            (Some((i, note)), _) => {
                events.push(i);
                note
            }
            (None, Some((is, note))) => {
                events.extend(is);
                note
            }
            (None, None) => match restart() {
                Some((i, note)) => {
                    events.push(i);
                    note
                }
                None => match lapsed() {
                    Some((i, note)) => {
                        events.push(i);
                        note
                    }
                    None => String::new(),
                },
            },
        };
        events.extend(b.end_event);
        events.sort_unstable();
        events.dedup();
        Verdict::Invalid(Evidence {
            summary: format!(
                "{} and {} both believed they held lock {} from {} to {} (owner={} and owner={}){cause}{more}",
                a.host,
                b.host,
                a.key,
                fmt_s(b.start_us),
                until,
                a.owner,
                b.owner
            ),
            at_us: b.start_us,
            hosts: vec![a.host.clone(), b.host.clone()],
            owners: vec![a.owner.clone(), b.owner.clone()],
            first_event: b.acquire_event,
            events,
        })
    }
}
