//! The MongoDB failover's witness: a primary lost holding a lock write no other member
//! had, a member elected without it, and the old primary rolling the write back when
//! it rejoined. Read from the members' own records (`Written`, `Role`,
//! `MongoRollback`, `Removed` with cause `rolled-back`) and the fault records.

use sim::history::{EventKind, FaultPhase, History, ServerEvent};

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
        for x in h.events[..i].iter().filter(|x| x.host == host) {
            match &x.kind {
                EventKind::Server(ServerEvent::Written { key: k, value, .. }) if k == key => {
                    held = Some(value.clone())
                }
                EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => held = None,
                _ => {}
            }
        }
        let Some(owner) = held else { continue };
        let elected = h.events[i..].iter().find_map(|x| match &x.kind {
            EventKind::Server(ServerEvent::Role { role })
                if x.host != host && role.starts_with("primary") =>
            {
                Some((x.host.as_str(), x.at_us, role.as_str()))
            }
            _ => None,
        });
        let Some((to, elected_at, role)) = elected else {
            continue;
        };
        let rollback = h.events[i..].iter().find_map(|x| match &x.kind {
            EventKind::Server(ServerEvent::MongoRollback {
                source,
                common,
                undone,
                ..
            }) if x.host == host && x.at_us > elected_at => {
                Some((x.at_us, source.as_str(), common.as_str(), *undone))
            }
            _ => None,
        });
        let Some((rolled_at, source, common, undone)) = rollback else {
            continue;
        };
        let removed = h.events[i..].iter().any(|x| {
            x.host == host
                && matches!(&x.kind, EventKind::Server(ServerEvent::Removed { key: k, value, cause, .. })
                    if k == key && *value == owner && cause == "rolled-back")
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
