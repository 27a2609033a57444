//! The witness of a failover that rolled a lock write back: a primary lost holding a
//! lock write no other server had, another elected without it, and the old primary
//! rolling the write back when it rejoined. Read from the servers' own records (the
//! facts of writes, removals, roles and rollbacks) and the fault records.

use sim::history::fact::{LockFact, Rank, Removal};
use sim::history::{Event, EventKind, FaultPhase, History};

use super::{fmt_s, model};

/// The rollback of a lock write: a crash (or partition) of a member at the moment its
/// record held the lock by a write on it alone (the fault's own record says so: "on
/// the primary alone"), a later election of another member, and the crashed member's
/// later rollback removing that lock value. `None` if any part is missing.
pub fn rollback_of_a_lock_write(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Fault {
            fault,
            phase: FaultPhase::Start,
            detail,
            ..
        } = &e.kind
        else {
            continue;
        };
        if !detail.contains("on the primary alone")
            || !(model::is_crash(h, *fault) || model::is_partition(h, *fault))
        {
            continue;
        }
        let host = e.host.as_str();
        // The lock value the member's record held at the fault.
        let mut held = None;
        for (_, f) in facts(&h.events[..i]).filter(|(x, _)| x.host == host) {
            match f {
                LockFact::Written { key: k, value, .. } if k == key => held = Some(value),
                LockFact::Removed { key: k, .. } if k == key => held = None,
                _ => {}
            }
        }
        let Some(owner) = held else { continue };
        let elected = facts(&h.events[i..]).find_map(|(x, f)| match f {
            LockFact::Role {
                role,
                rank: Rank::Elected,
                ..
            } if x.host != host => Some((x.host.as_str(), x.at_us, role)),
            _ => None,
        });
        let Some((to, elected_at, role)) = elected else {
            continue;
        };
        let rollback = facts(&h.events[i..]).find_map(|(x, f)| match f {
            LockFact::RolledBack {
                source,
                common,
                undone,
                ..
            } if x.host == host && x.at_us > elected_at => Some((x.at_us, source, common, undone)),
            _ => None,
        });
        let Some((rolled_at, source, common, undone)) = rollback else {
            continue;
        };
        let removed = facts(&h.events[i..]).any(|(x, f)| {
            x.host == host
                && matches!(f, LockFact::Removed { key: k, value, why: Removal::RolledBack, .. }
                    if k == key && value == owner)
        });
        if !removed {
            continue;
        }
        let what = if model::is_crash(h, *fault) {
            "crashed"
        } else {
            "was cut off"
        };
        let why = detail
            .split_once(" (")
            .map(|(_, d)| format!(" ({d}"))
            .unwrap_or_default();
        return Some(format!(
            "{host} {what} at {} holding {key} (owner={owner}){why}; {to} became {role} at {} without it; {host} rejoined and rolled back {undone} oplog entries against {source} at {} (common point {common}), removing owner={owner}",
            fmt_s(e.at_us),
            fmt_s(elected_at),
            fmt_s(rolled_at)
        ));
    }
    None
}

/// The servers' facts among `events`, with their events.
fn facts(events: &[Event]) -> impl Iterator<Item = (&Event, LockFact<'_>)> {
    events.iter().filter_map(|e| match &e.kind {
        EventKind::Server(s) => Some((e, s.fact())),
        _ => None,
    })
}
