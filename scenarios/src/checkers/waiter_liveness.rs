//! `waiter-liveness`: a released lock that someone is waiting for is taken again
//! within the bound.
//!
//! When the server records the lock key (`params.key`) removed by a command (a
//! release) at `t` while another host has an acquire in flight (invoked before the
//! removal, not yet completed: a waiter), the lock must be taken again by
//! `t + liveness_bound_ms`: some acquire of the key completes `ok` (any host), or the
//! server records the key written again, whichever comes first. The classic failure
//! is a waiter that sleeps until an unlock message that was lost and nobody polls.
//!
//! It is a violation only if a waiter was still waiting past the bound: its acquire
//! completed (with any outcome) after `t + bound`, or never completed and the run went
//! on past `t + bound`. A waiter with a fault to explain its wait at some point in
//! `[t, t + bound]` does not count (see [`super::excuse`]: its host was crashed,
//! paused or had its replies delayed, or the masters it needs were out of reach). Removals less than the bound before the run's end whose lock was not taken
//! again cannot be judged; if every removal with a waiter was like that, the verdict
//! is `Unknown`.

use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::excuse::Excuses;
use super::model::{self, OpPair};
use super::{Checker, Evidence, Verdict, fmt_ms, fmt_s};

/// The waiter-liveness checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct WaiterLiveness;

/// Acquires of `key` in flight across event `i` on hosts other than `by`. An acquire
/// that never completed because its host crashed is over at the crash: a dead client
/// is not waiting (`crashes` are crash-start events as `(index, host)`).
fn waiters_at<'a>(
    acquires: &'a [&'a OpPair],
    crashes: &[(usize, &str)],
    i: usize,
    by: &str,
) -> Vec<&'a OpPair> {
    acquires
        .iter()
        .filter(|p| p.invoke < i && p.completion.is_none_or(|c| c > i) && p.host != by)
        .filter(|p| {
            p.completion.is_some()
                || !crashes
                    .iter()
                    .any(|(c, host)| *host == p.host && p.invoke < *c && *c < i)
        })
        .copied()
        .collect()
}

impl Checker for WaiterLiveness {
    fn name(&self) -> &'static str {
        "waiter-liveness"
    }

    fn check(&self, h: &History) -> Verdict {
        if let Some(unknown) = model::needs_server_records(h) {
            return unknown;
        }
        let pairs = match model::op_pairs(h) {
            Ok(p) => p,
            Err(reason) => return Verdict::Unknown { reason },
        };
        let key = &h.params.key;
        let acquires: Vec<&OpPair> = pairs
            .iter()
            .filter(|p| p.f == OpF::Acquire && p.key == *key)
            .collect();
        // Events at which the lock was taken: acquire oks and server writes of the key.
        let mut taken: Vec<(usize, u64, String)> = acquires
            .iter()
            .filter(|p| p.outcome == Phase::Ok)
            .filter_map(|p| Some((p.completion?, p.completion_us?, p.host.clone())))
            .collect();
        // A replica's copy (written "by" its master) is nobody taking the lock.
        let servers = model::server_hosts(h);
        taken.extend(
            h.events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match &e.kind {
                    EventKind::Server(ServerEvent::Written { by, key: k, .. })
                        if k == key && !servers.contains(by.as_str()) =>
                    {
                        Some((i, e.at_us, by.clone()))
                    }
                    _ => None,
                }),
        );
        taken.sort_unstable();
        let excuses = Excuses::new(h);
        let crashes: Vec<(usize, &str)> = model::crash_starts(h)
            .into_iter()
            .map(|c| (c, h.events[c].host.as_str()))
            .collect();
        let bound_us = h.params.liveness_bound_ms * 1_000;
        let mut judged = 0usize;
        let mut skipped: Vec<String> = Vec::new();
        for (i, e) in h.events.iter().enumerate() {
            let EventKind::Server(ServerEvent::Removed {
                by,
                key: k,
                value,
                cause,
            }) = &e.kind
            else {
                continue;
            };
            if k != key || cause != "command" {
                continue;
            }
            let waiters = waiters_at(&acquires, &crashes, i, by);
            if waiters.is_empty() {
                continue;
            }
            let t = e.at_us;
            let deadline = t + bound_us;
            // `taken` is sorted by event: the first after `i`.
            let retaken = taken.get(taken.partition_point(|(ev, _, _)| *ev <= i));
            if let Some((_, at, _)) = retaken
                && *at <= deadline
            {
                judged += 1;
                continue;
            }
            if h.end_us <= deadline {
                skipped.push(format!("{by}'s release at {}", fmt_s(t)));
                continue;
            }
            judged += 1;
            let stuck: Vec<&OpPair> = waiters
                .into_iter()
                .filter(|w| w.completion_us.unwrap_or(h.end_us) > deadline)
                .filter(|w| excuses.explains(&w.host, t, deadline).is_none())
                .collect();
            if stuck.is_empty() {
                continue;
            }
            let (free, retake_event) = match retaken {
                Some((ev, at, host)) => (
                    format!(
                        "the lock stayed free for {} until {host} took it at {}",
                        fmt_ms(at - t),
                        fmt_s(*at)
                    ),
                    Some(*ev),
                ),
                None => (
                    format!(
                        "the lock stayed free for {} until the end of the run",
                        fmt_ms(h.end_us - t)
                    ),
                    None,
                ),
            };
            let waiting: Vec<String> = stuck
                .iter()
                .map(|w| {
                    let until = match w.completion_us {
                        Some(c) => format!("{:?} at {}", w.outcome, fmt_s(c)).to_lowercase(),
                        None => "never completed".to_string(),
                    };
                    format!(
                        "{} (acquire invoked at {}, {until})",
                        w.host,
                        fmt_s(w.invoke_us)
                    )
                })
                .collect();
            let mut hosts = vec![by.clone()];
            let mut events = vec![i];
            for w in &stuck {
                if !hosts.contains(&w.host) {
                    hosts.push(w.host.clone());
                }
                events.push(w.invoke);
                events.extend(w.completion);
            }
            events.extend(retake_event);
            events.sort_unstable();
            events.dedup();
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "{by} released lock {key} (owner={value}) at {} while {} waited; {free}, bound {} ms",
                    fmt_s(t),
                    waiting.join(", "),
                    h.params.liveness_bound_ms
                ),
                at_us: t,
                hosts,
                owners: vec![value.clone()],
                first_event: i,
                events,
            });
        }
        if judged == 0 && !skipped.is_empty() {
            return Verdict::Unknown {
                reason: format!(
                    "no release with a waiter could be judged: the run ended less than {} ms after {}",
                    h.params.liveness_bound_ms,
                    skipped.join(", ")
                ),
            };
        }
        Verdict::Valid
    }
}
