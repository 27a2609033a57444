//! `ownership`: a client's command only ever removes a lock value that client wrote.
//!
//! The classic bug is an unconditional `DEL` in release: a client whose lease expired
//! deletes the lock the next holder now owns. The Redis server records every removal
//! with the host whose command (or script) did it, so we compare that host with the
//! host that wrote the removed value.

use std::collections::BTreeMap;

use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::{Checker, Evidence, Verdict, fmt_s};

/// The ownership checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ownership;

/// Who wrote each (key, value): the server's `Written` record first, then acquire
/// `ok`s (a client's belief) for values the server record lacks. Returns the host and
/// the event that shows it.
fn writers(h: &History) -> BTreeMap<(String, String), (String, usize)> {
    let mut map = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        if let EventKind::Server(ServerEvent::Written { by, key, value }) = &e.kind {
            map.entry((key.clone(), value.clone()))
                .or_insert_with(|| (by.clone(), i));
        }
    }
    let mut invoke_key: BTreeMap<u64, Option<String>> = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Op(op) = &e.kind else { continue };
        if op.f != OpF::Acquire {
            continue;
        }
        match op.phase {
            Phase::Invoke => {
                invoke_key.insert(op.op, op.key.clone());
            }
            Phase::Ok => {
                let Some(owner) = &op.owner else { continue };
                let key = op
                    .key
                    .clone()
                    .or_else(|| invoke_key.get(&op.op).cloned().flatten())
                    .unwrap_or_else(|| h.params.key.clone());
                map.entry((key, owner.clone()))
                    .or_insert_with(|| (e.host.clone(), i));
            }
            _ => {}
        }
    }
    map
}

/// Indices of removals by command whose value no known host wrote (the checker
/// ignores them; reports may list them).
pub fn unattributed_removals(h: &History) -> Vec<usize> {
    let map = writers(h);
    h.events
        .iter()
        .enumerate()
        .filter(|(_, e)| match &e.kind {
            EventKind::Server(ServerEvent::Removed {
                key, value, cause, ..
            }) => cause == "command" && !map.contains_key(&(key.clone(), value.clone())),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

impl Checker for Ownership {
    fn name(&self) -> &'static str {
        "ownership"
    }

    fn check(&self, h: &History) -> Verdict {
        let map = writers(h);
        let mut attributed = 0usize;
        let mut unattributed = 0usize;
        for (i, e) in h.events.iter().enumerate() {
            let EventKind::Server(ServerEvent::Removed {
                by,
                key,
                value,
                cause,
            }) = &e.kind
            else {
                continue;
            };
            if cause != "command" {
                continue;
            }
            let Some((writer, w)) = map.get(&(key.clone(), value.clone())) else {
                unattributed += 1;
                continue;
            };
            attributed += 1;
            if writer != by {
                let note = if unattributed > 0 {
                    format!(
                        " ({unattributed} earlier removals of values no known host wrote were ignored)"
                    )
                } else {
                    String::new()
                };
                return Verdict::Invalid(Evidence {
                    summary: format!(
                        "{by}'s command removed {writer}'s lock {key} (owner={value}) at {}{note}",
                        fmt_s(e.at_us)
                    ),
                    at_us: e.at_us,
                    hosts: vec![by.clone(), writer.clone()],
                    owners: vec![value.clone()],
                    first_event: i,
                    events: vec![*w, i],
                });
            }
        }
        // Only unattributable removals: the checker saw nothing it could judge, and a
        // vacuous pass would hide, e.g., a design whose values the map cannot read.
        if attributed == 0 && unattributed > 0 {
            return Verdict::Unknown {
                reason: format!(
                    "{unattributed} removals by command, none of a value written by a known host"
                ),
            };
        }
        Verdict::Valid
    }
}
