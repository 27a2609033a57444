//! `belief`: a client believes it acquired the lock only when the server's own record
//! backs it.
//!
//! Every acquisition a client reports `ok` names the owner value it believes the lock
//! holds. The servers record who wrote each value of the lock key and when it went.
//! An `ok` is backed when, while the acquire was in flight (or already before it, for
//! a reentrant re-grant in the same life), the owner value was held *for that client*
//! (written by its host, in its current incarnation) on a majority of the independent
//! masters (`params.masters`: one for a single master, three of five for Redlock).
//!
//! Two ways to break it, both a lock's promise broken at its source:
//!
//! - **never backed**: the server never held that value for that client during the
//!   acquisition (an unknown outcome or an error taken for success, a reply misread,
//!   an owner value another client wrote);
//! - **lost before the ok, believed past the loss**: the value was held, but fewer than
//!   a majority still held it when the `ok` arrived, and the validity the client
//!   believes (`valid_until_us`, true time; no validity means "until released") runs
//!   past the moment the record lost it. A client whose validity had already run out
//!   when the lock was lost (a late reply to a correct lease computation) is not
//!   flagged: it does not claim the lock is still valid.
//!
//! A run without any successful acquisition has nothing to judge and is `Unknown`.
//! The verdict never changes the run's safety class (see [`super::safety`]): it says
//! why believed holds went wrong, as `validity` does.

use std::collections::BTreeMap;

use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::{Checker, Evidence, Verdict, fmt_s, model};

/// The belief checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Belief;

/// One value of the lock key held on one server, for one writer life.
#[derive(Debug, Clone)]
struct Held {
    server: String,
    value: String,
    host: String,
    incarnation: usize,
    written_event: usize,
    /// The removal: (event, time, cause); `None` while still held.
    removed: Option<(usize, u64, String)>,
}

impl Held {
    /// Held at some instant of events `[from, to]`.
    fn overlaps(&self, from: usize, to: usize) -> bool {
        self.written_event <= to && self.removed.as_ref().is_none_or(|(r, _, _)| *r >= from)
    }

    /// Still held just before event `at`.
    fn held_at(&self, at: usize) -> bool {
        self.written_event < at && self.removed.as_ref().is_none_or(|(r, _, _)| *r > at)
    }
}

/// Every value the lock key held on any server, with its writer's life and removal,
/// and the life of each host at each of its acquire `ok`s (by event index).
fn record(h: &History) -> (Vec<Held>, BTreeMap<usize, usize>) {
    let key = h.params.key.as_str();
    let mut lives = model::Lives::default();
    let mut life_at_ok = BTreeMap::new();
    let mut out: Vec<Held> = Vec::new();
    // (server) → indices into `out` still held there.
    let mut current: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        lives.observe(h, e);
        match &e.kind {
            EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Ok => {
                life_at_ok.insert(i, lives.of(&e.host));
            }
            EventKind::Server(ServerEvent::Written { by, key: k, value }) if k == key => {
                let held = current.entry(e.host.as_str()).or_default();
                // A rewrite of the same value (a reentrant re-grant) ends the old entry.
                if let Some(pos) = held.iter().position(|&x| out[x].value == *value) {
                    let x = held.remove(pos);
                    out[x].removed = Some((i, e.at_us, "rewritten".into()));
                }
                held.push(out.len());
                out.push(Held {
                    server: e.host.clone(),
                    value: value.clone(),
                    host: by.clone(),
                    incarnation: lives.of(by),
                    written_event: i,
                    removed: None,
                });
            }
            EventKind::Server(ServerEvent::Removed { key: k, cause, .. }) if k == key => {
                for x in current.remove(e.host.as_str()).unwrap_or_default() {
                    out[x].removed = Some((i, e.at_us, cause.clone()));
                }
            }
            _ => {}
        }
    }
    (out, life_at_ok)
}

impl Checker for Belief {
    fn name(&self) -> &'static str {
        "belief"
    }

    fn check(&self, h: &History) -> Verdict {
        if let Some(unknown) = model::needs_server_records(h) {
            return unknown;
        }
        let pairs = match model::op_pairs(h) {
            Ok(p) => p,
            Err(reason) => return Verdict::Unknown { reason },
        };
        let (record, life_at_ok) = record(h);
        let majority = (h.params.masters.max(1) / 2 + 1) as usize;
        let mut judged = 0usize;
        for p in &pairs {
            let (OpF::Acquire, Phase::Ok, Some(owner), Some(ok)) =
                (p.f, p.outcome, p.owner.as_deref(), p.completion)
            else {
                continue;
            };
            if p.key != h.params.key {
                continue;
            }
            judged += 1;
            let me = life_at_ok.get(&ok).copied().unwrap_or(0);
            let mine: Vec<&Held> = record
                .iter()
                .filter(|x| x.value == owner && x.host == p.host && x.incarnation == me)
                .collect();
            let servers_during = |f: &dyn Fn(&Held) -> bool| {
                let mut s: Vec<&str> = mine
                    .iter()
                    .filter(|x| f(x))
                    .map(|x| x.server.as_str())
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            };
            if servers_during(&|x| x.held_at(ok)).len() >= majority {
                continue;
            }
            let ok_us = p.completion_us.unwrap_or(h.end_us);
            let ever = servers_during(&|x| x.overlaps(p.invoke, ok));
            let valid_until = model::op_at(h, ok).and_then(|op| op.valid_until_us);
            let believed = valid_until.map_or("until it releases".to_string(), |v| {
                format!("valid until {}", fmt_s(v))
            });
            if ever.len() < majority {
                let mut events = vec![p.invoke, ok];
                // Whoever held the key when the ok arrived.
                let holders: Vec<&Held> = record.iter().filter(|x| x.held_at(ok)).collect();
                events.extend(holders.iter().map(|x| x.written_event));
                events.sort_unstable();
                events.dedup();
                let mut hosts = vec![p.host.clone()];
                hosts.extend(holders.iter().map(|x| x.host.clone()));
                hosts.dedup();
                let held_text = if holders.is_empty() {
                    "the key was absent".to_string()
                } else {
                    holders
                        .iter()
                        .map(|x| {
                            format!("{} held owner={} written by {}", x.server, x.value, x.host)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Verdict::Invalid(Evidence {
                    summary: format!(
                        "{} believes it acquired {} (owner={owner}, {believed}) at {}, but no server's record ever held that value for it during the acquire (invoked at {}; needed {majority} of {} masters, had {}); at the ok {held_text}",
                        p.host,
                        p.key,
                        fmt_s(ok_us),
                        fmt_s(p.invoke_us),
                        h.params.masters.max(1),
                        ever.len(),
                    ),
                    at_us: ok_us,
                    hosts,
                    owners: vec![owner.to_string()],
                    first_event: ok,
                    events,
                });
            }
            // Backed at some point, lost before the ok: when did the record drop below
            // a majority? Each server that held the value during the acquire but not
            // at the ok lost it at its last removal before the ok; with `ever` servers
            // once holding it, the (ever - majority + 1)-th such loss, in time order,
            // is the one that left fewer than a majority.
            let mut losses: Vec<(usize, u64, &str, &str)> = ever
                .iter()
                .filter(|server| !mine.iter().any(|x| x.server == **server && x.held_at(ok)))
                .filter_map(|server| {
                    mine.iter()
                        .filter(|x| x.server == *server && x.overlaps(p.invoke, ok))
                        .filter_map(|x| {
                            let (r, at, cause) = x.removed.as_ref()?;
                            (*r <= ok).then_some((*r, *at, x.server.as_str(), cause.as_str()))
                        })
                        .max()
                })
                .collect();
            losses.sort_unstable();
            let nth = ever.len() + 1 - majority;
            let Some(&(lost_event, lost_us, server, cause)) = losses.get(nth - 1) else {
                continue;
            };
            if valid_until.is_some_and(|v| v <= lost_us) {
                continue;
            }
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "{}'s acquire of {} returned ok at {} (owner={owner}, {believed}), but {server} had already removed that value at {} ({cause}): the client believes a lock the server no longer held",
                    p.host,
                    p.key,
                    fmt_s(ok_us),
                    fmt_s(lost_us),
                ),
                at_us: ok_us,
                hosts: vec![p.host.clone()],
                owners: vec![owner.to_string()],
                first_event: ok,
                events: vec![p.invoke, lost_event, ok],
            });
        }
        if judged == 0 {
            return Verdict::Unknown {
                reason: "no acquisition succeeded: no belief to judge".into(),
            };
        }
        Verdict::Valid
    }
}
