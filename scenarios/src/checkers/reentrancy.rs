//! `reentrancy`: a nested release only counts the hold down; it never frees the lock.
//!
//! A reentrant lock lets its holder acquire it again; each nested acquisition raises
//! the holder's count (the acquire `ok`'s `value`) and each release lowers it (the
//! release invocation's `value` is the count before it). Only the release at count 1
//! may free the lock. Three ways a design gets this wrong, each an effect on the
//! server, not a belief:
//!
//! - the server records a removal of the key by the releasing host's command while a
//!   release at count 2 or more is in flight (whatever the client was told);
//! - in a history without the server's own record (a real run), a release invoked at
//!   count 2 or more completes `ok` with detail `removed`. Where the server's record
//!   is there, it alone says what the release did: a reply may say `removed` where the
//!   server only counted a hold down (MariaDB's `RELEASE_LOCK` answers `1` to every
//!   release of a nested hold), and the record shows whether the lock was kept;
//! - a nested release (count 2 or more) reports `still-held count=N` with `N` not one
//!   less than its count.
//!
//! A lock the server keeps after its holder's outermost release (a `still-held` reply
//! at count one) harms nobody's data: it is held too long, which `liveness` judges (a
//! lock kept after its owner was done).
//!
//! A run without nested acquisitions has nothing to judge and is `Valid`; the
//! [`super::probes::nested_acquisition`] probe tells whether the check had teeth.

use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::model::{self, OpPair};
use super::{Checker, Evidence, Verdict, fmt_s};

/// The reentrancy checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reentrancy;

/// The count a `still-held count=N` detail reports, if the detail is one.
pub fn still_held_count(detail: &str) -> Option<i64> {
    detail
        .strip_prefix("still-held count=")?
        .trim()
        .parse()
        .ok()
}

impl Checker for Reentrancy {
    fn name(&self) -> &'static str {
        "reentrancy"
    }

    fn check(&self, h: &History) -> Verdict {
        let pairs = match model::op_pairs(h) {
            Ok(p) => p,
            Err(reason) => return Verdict::Unknown { reason },
        };
        // The violation that becomes visible first (lowest event index) wins.
        let mut found: Option<Evidence> = None;
        let mut keep = |e: Evidence| {
            if found.as_ref().is_none_or(|f| e.first_event < f.first_event) {
                found = Some(e);
            }
        };
        for p in pairs.iter().filter(|p| p.f == OpF::Release) {
            let Some(invoke) = model::op_at(h, p.invoke) else {
                continue;
            };
            let depth = model::depth(invoke);
            let owner = p.owner.clone().unwrap_or_else(|| "?".to_string());
            let done = p.completion.and_then(|c| model::op_at(h, c));
            let detail = done.and_then(|d| d.detail.as_deref());
            if depth >= 2 {
                if let Some(e) = removal_during(h, p, depth, &owner) {
                    keep(e);
                }
                if !h.params.server_records
                    && p.outcome == Phase::Ok
                    && detail == Some("removed")
                    && let Some(c) = p.completion
                {
                    keep(Evidence {
                        summary: format!(
                            "{}'s release of {} (owner={owner}) invoked at {} with hold count {depth} completed ok at {} with the lock removed: the count was {} after it, not 0",
                            p.host,
                            p.key,
                            fmt_s(p.invoke_us),
                            fmt_s(h.events[c].at_us),
                            depth - 1
                        ),
                        at_us: h.events[c].at_us,
                        hosts: vec![p.host.clone()],
                        owners: vec![owner.clone()],
                        first_event: c,
                        events: vec![p.invoke, c],
                    });
                }
            }
            if depth >= 2
                && p.outcome == Phase::Ok
                && let Some(n) = detail.and_then(still_held_count)
                && n != depth - 1
                && let Some(c) = p.completion
            {
                keep(Evidence {
                    summary: format!(
                        "{}'s release of {} (owner={owner}) invoked at {} with hold count {depth} reported still-held count={n} at {}, expected count={}",
                        p.host,
                        p.key,
                        fmt_s(p.invoke_us),
                        fmt_s(h.events[c].at_us),
                        depth - 1
                    ),
                    at_us: h.events[c].at_us,
                    hosts: vec![p.host.clone()],
                    owners: vec![owner.clone()],
                    first_event: c,
                    events: vec![p.invoke, c],
                });
            }
        }
        match found {
            Some(e) => Verdict::Invalid(e),
            None => Verdict::Valid,
        }
    }
}

/// A removal of the release's key by the releasing host's command between a nested
/// release's invocation and its completion. A release that never completed ends where
/// its host did something else: its next operation, or a crash of the host (a client
/// runs one operation at a time), else the run's end; a later removal by the same host
/// belongs to that later operation or life, not to this release.
fn removal_during(h: &History, p: &OpPair, depth: i64, owner: &str) -> Option<Evidence> {
    let until = p.completion.unwrap_or_else(|| {
        (p.invoke + 1..h.events.len())
            .find(|&i| {
                let e = &h.events[i];
                e.host == p.host
                    && match &e.kind {
                        EventKind::Op(op) => op.phase == Phase::Invoke,
                        EventKind::Fault {
                            fault,
                            phase: sim::history::FaultPhase::Start,
                            ..
                        } => model::is_crash(h, *fault),
                        _ => false,
                    }
            })
            .unwrap_or(h.events.len())
    });
    (p.invoke + 1..until).find_map(|i| {
        let e = &h.events[i];
        let EventKind::Server(ServerEvent::Removed {
            by,
            key,
            value,
            cause,
        }) = &e.kind
        else {
            return None;
        };
        if *by != p.host || *key != p.key || cause != "command" {
            return None;
        }
        let mut events = vec![p.invoke, i];
        events.extend(p.completion);
        Some(Evidence {
            summary: format!(
                "{}'s release of {key} (owner={owner}) invoked at {} with hold count {depth} removed the lock (value {value}) at {}: the count should have gone down to {}",
                p.host,
                fmt_s(p.invoke_us),
                fmt_s(e.at_us),
                depth - 1
            ),
            at_us: e.at_us,
            hosts: vec![p.host.clone()],
            owners: vec![owner.to_string()],
            first_event: i,
            events,
        })
    })
}
