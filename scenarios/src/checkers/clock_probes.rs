//! Probes for clock faults and for pauses that land inside an acquisition: proof,
//! from the history alone, that the fault did what the scenario is about.

use std::collections::BTreeMap;

use sim::history::{EventKind, FaultPhase, History, OpF, ServerEvent};

use super::model;
use super::{fmt_ms, fmt_s};

/// A server's wall clock stepped forward by more than the lease while its record held
/// the lock key, and the jump struck: the key expired early
/// ([`clock_jump_freed_the_lock`]), or the server held the key with no expiry of its
/// own to advance (no expiry set on it while held: a key without a TTL, a node that
/// lives with its session, a row, a key whose lease the lessor times on the member's
/// monotonic clock): its wall clock was all a jump could reach, and
/// the lock outlived it.
pub fn clock_jump_struck_the_lock(h: &History) -> Option<String> {
    clock_jump_freed_the_lock(h).or_else(|| clock_jump_over_a_lock_without_expiry(h))
}

/// A server's wall clock stepped forward by more than the lease while its record held
/// the lock key with no expiry set on it (see [`clock_jump_struck_the_lock`]).
pub fn clock_jump_over_a_lock_without_expiry(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    let records = super::server_probes::record_hosts(h);
    // Per record host: the lock key's value, and whether an expiry was set on it.
    let mut held: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for e in &h.events {
        let host = e.host.as_str();
        match &e.kind {
            EventKind::Server(ServerEvent::Written { key: k, value, .. }) if k == key => {
                held.insert(host, (value.as_str(), false));
            }
            EventKind::Server(ServerEvent::ExpireSet { key: k, .. }) if k == key => {
                if let Some(entry) = held.get_mut(host) {
                    entry.1 = true;
                }
            }
            EventKind::Server(ServerEvent::Removed { key: k, .. }) if k == key => {
                held.remove(host);
            }
            EventKind::Clock { step_ms, .. } if *step_ms > h.params.lease_ms as i64 => {
                let Some(record) = records.get(host) else {
                    continue;
                };
                if let Some((owner, false)) = held.get(record) {
                    return Some(format!(
                        "{host}'s wall clock jumped {step_ms:+} ms at {} while {record} held \
                         {key} (owner={owner}) with no expiry on that clock",
                        fmt_s(e.at_us)
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// A Redis server's wall clock stepped forward by more than the lease while its record
/// held the lock key, and the key then expired on it before its lease was up in true
/// time: the jump freed the lock early.
pub fn clock_jump_freed_the_lock(h: &History) -> Option<String> {
    let key = h.params.key.as_str();
    let lease_us = h.params.lease_ms * 1_000;
    // Per server: the lock key's value and when it was written.
    let mut held: BTreeMap<&str, (&str, u64)> = BTreeMap::new();
    // Jumps waiting for their expiry: server → (value, written, jump time, step).
    let mut jumped: BTreeMap<&str, (&str, u64, u64, i64)> = BTreeMap::new();
    for e in &h.events {
        let host = e.host.as_str();
        match &e.kind {
            EventKind::Server(ServerEvent::Written { key: k, value, .. }) if k == key => {
                held.insert(host, (value.as_str(), e.at_us));
                jumped.remove(host);
            }
            EventKind::Server(ServerEvent::Removed {
                key: k,
                value,
                cause,
                ..
            }) if k == key => {
                held.remove(host);
                if let Some((v, written, at, step)) = jumped.remove(host)
                    && v == value
                    && cause == "expired"
                    && e.at_us < written + lease_us
                {
                    return Some(format!(
                        "{host}'s wall clock jumped {step:+} ms at {} while it held {key} \
                         (owner={v}, written at {}); the key expired at {}, {} before its \
                         lease was up",
                        fmt_s(at),
                        fmt_s(written),
                        fmt_s(e.at_us),
                        fmt_ms(written + lease_us - e.at_us)
                    ));
                }
            }
            EventKind::Clock { step_ms, .. } if *step_ms > h.params.lease_ms as i64 => {
                if let Some((v, written)) = held.get(host) {
                    jumped.insert(host, (v, *written, e.at_us, *step_ms));
                }
            }
            _ => {}
        }
    }
    None
}

/// A client's wall clock stepped back while it was acquiring the lock, and that acquire
/// then succeeded: a grant whose wait a wall-clock reading would misjudge (an NTP step
/// during a blocking wait). The step, the client and the acquire.
pub fn client_clock_stepped_back_while_acquiring(h: &History) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
    h.events.iter().find_map(|e| {
        let EventKind::Clock { step_ms, .. } = e.kind else {
            return None;
        };
        if step_ms >= 0 {
            return None;
        }
        let acquire = pairs.iter().find(|p| {
            p.f == OpF::Acquire
                && p.host == e.host
                && p.invoke_us <= e.at_us
                && p.outcome == sim::history::Phase::Ok
                && p.completion_us.is_some_and(|c| c > e.at_us)
        })?;
        Some(format!(
            "{}'s wall clock stepped back {} ms at {} while it was acquiring {} (invoked at \
             {}, granted at {})",
            e.host,
            step_ms.unsigned_abs(),
            fmt_s(e.at_us),
            acquire.key,
            fmt_s(acquire.invoke_us),
            fmt_s(acquire.completion_us.unwrap_or_default())
        ))
    })
}

/// A client's clock ran slow (an NTP slew back, or any negative rate) while it held
/// the lock, by enough to matter: within one hold its clock fell behind true time by
/// at least `margin_us` (the share of the lease a careful holder keeps in hand, see
/// the scenario), so its lease timers measured that much less time than passed. A
/// slew too slow or too short to lose that much (ntpd's 500 ppm over a short hold, a
/// rate of 1 ppm) is no witness. The client, its rate, the stretch, the hold and what
/// its clock lost.
pub fn holder_clock_ran_slow(h: &History, margin_us: u64) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
    // Per client: its rate changes, in time order (true time, ppm from then on).
    let mut rates: BTreeMap<&str, Vec<(u64, i64)>> = BTreeMap::new();
    for e in &h.events {
        if let EventKind::Clock { drift_ppm, .. } = e.kind {
            rates
                .entry(e.host.as_str())
                .or_default()
                .push((e.at_us, drift_ppm));
        }
    }
    for (i, p) in pairs.iter().enumerate() {
        if p.f != OpF::Acquire || p.outcome != sim::history::Phase::Ok {
            continue;
        }
        let Some(start) = p.completion_us else {
            continue;
        };
        // The hold ends when the client next sets out to release (or at the run's end).
        let end = pairs[i + 1..]
            .iter()
            .find(|r| r.host == p.host && r.f == OpF::Release)
            .map_or(h.end_us, |r| r.invoke_us);
        let Some(changes) = rates.get(p.host.as_str()) else {
            continue;
        };
        // What the clock lost over the hold (µs), and the first slow stretch in it.
        let mut lost = 0u128;
        let mut first: Option<(u64, u64, i64)> = None;
        for (k, &(from, ppm)) in changes.iter().enumerate() {
            let to = changes.get(k + 1).map_or(h.end_us, |c| c.0);
            let (a, b) = (from.max(start), to.min(end));
            if ppm >= 0 || a >= b {
                continue;
            }
            lost += u128::from(b - a) * u128::from(ppm.unsigned_abs()) / 1_000_000;
            if first.is_none() {
                first = Some((from, to, ppm));
            }
        }
        let Some((from, to, ppm)) = first else {
            continue;
        };
        if lost < u128::from(margin_us.max(1)) {
            continue;
        }
        let until = if to >= h.end_us {
            "the end of the run".to_string()
        } else {
            fmt_s(to)
        };
        let slow_by = ppm.unsigned_abs();
        return Some(format!(
            "{}'s clock ran {}.{:02} % slow ({ppm} ppm) from {} to {until} while it held {} \
             (granted at {}): over the hold its lease timers measured {} less than passed \
             (the margin that matters: {})",
            p.host,
            slow_by / 10_000,
            (slow_by % 10_000) / 100,
            fmt_s(from),
            p.key,
            fmt_s(start),
            fmt_ms(lost as u64),
            fmt_ms(margin_us)
        ));
    }
    None
}

/// Two clients' wall clocks disagreed by more than the lease while a lock was granted
/// (an acquire `ok` after both clocks were set): the two clients, their offsets from
/// true time and the grant.
pub fn client_wall_clocks_apart(h: &History) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
    let clients: std::collections::BTreeSet<&str> = pairs
        .iter()
        .filter(|p| p.f == OpF::Acquire)
        .map(|p| p.host.as_str())
        .collect();
    let lease_us = i64::try_from(h.params.lease_ms * 1_000).unwrap_or(i64::MAX);
    let mut offsets: BTreeMap<&str, i64> = BTreeMap::new();
    for e in &h.events {
        let EventKind::Clock { wall_offset_us, .. } = e.kind else {
            continue;
        };
        if !clients.contains(e.host.as_str()) {
            continue;
        }
        offsets.insert(e.host.as_str(), wall_offset_us);
        let (ahead, behind) = (
            offsets.iter().max_by_key(|(_, o)| **o)?,
            offsets.iter().min_by_key(|(_, o)| **o)?,
        );
        if ahead.1 - behind.1 <= lease_us {
            continue;
        }
        let at = e.at_us;
        let grant = pairs.iter().find(|p| {
            p.f == OpF::Acquire
                && p.outcome == sim::history::Phase::Ok
                && p.completion_us.is_some_and(|c| c >= at)
        })?;
        return Some(format!(
            "{}'s wall clock read {} ms ahead of {}'s ({:+} ms and {:+} ms from true time) \
             from {} on; {} was granted {} at {}",
            ahead.0,
            (ahead.1 - behind.1) / 1_000,
            behind.0,
            ahead.1 / 1_000,
            behind.1 / 1_000,
            fmt_s(at),
            grant.host,
            grant.key,
            fmt_s(grant.completion_us.unwrap_or_default())
        ));
    }
    None
}

/// A server's clock ran fast (a positive rate error) while clients took the lock on it
/// (on its record: a quorum's, for a quorum member): the highest such rate, with
/// the server.
pub fn server_clock_ran_fast(h: &History) -> Option<String> {
    let records = super::server_probes::record_hosts(h);
    let granted_after = |record: &str, from: u64| {
        h.events.iter().any(|e| {
            e.host == record
                && e.at_us >= from
                && matches!(&e.kind, EventKind::Server(ServerEvent::Written { key, .. }) if *key == h.params.key)
        })
    };
    let fastest = h
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Clock { drift_ppm, .. } if drift_ppm > 0 => {
                let record = records.get(e.host.as_str())?;
                granted_after(record, e.at_us).then_some((drift_ppm, e.host.as_str(), e.at_us))
            }
            _ => None,
        })
        .max_by_key(|(ppm, _, _)| *ppm);
    fastest.map(|fastest| {
        format!(
            "{}'s clock ran {:+} ppm ({}.{:02} % fast) from {} while it granted the lock",
            fastest.1,
            fastest.0,
            fastest.0 / 10_000,
            (fastest.0 % 10_000) / 100,
            fmt_s(fastest.2)
        )
    })
}

/// The highest rate error (ppm) any Redis server's clock ran at: the drift a run was
/// about, for sweeps over drift.
pub fn fastest_server_drift_ppm(h: &History) -> i64 {
    let servers = super::server_probes::servers(h);
    h.events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Clock { drift_ppm, .. } if servers.contains(e.host.as_str()) => {
                Some(drift_ppm)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// A pause longer than the lease began while its host had an acquire in flight, and
/// the acquire completed after the pause: the acquisition took longer than the lease.
pub fn pause_during_acquire(h: &History) -> Option<String> {
    let pairs = model::op_pairs(h).ok()?;
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
        let end = *ends.get(&fault)?;
        if end - e.at_us <= lease_us {
            return None;
        }
        let acquire = pairs.iter().find(|p| {
            p.f == OpF::Acquire
                && p.host == e.host
                && p.invoke_us <= e.at_us
                && p.completion_us.is_some_and(|c| c >= end)
        })?;
        Some(format!(
            "{} paused at {} for {} in the middle of an acquire (invoked at {}, completed {} \
             at {}), lease {} ms",
            e.host,
            fmt_s(e.at_us),
            fmt_ms(end - e.at_us),
            fmt_s(acquire.invoke_us),
            format!("{:?}", acquire.outcome).to_lowercase(),
            fmt_s(acquire.completion_us.unwrap_or_default()),
            h.params.lease_ms
        ))
    })
}
