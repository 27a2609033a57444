//! `ownership`: a client's command only ever removes, overwrites or re-arms a lock
//! value that it wrote itself, in its current life.
//!
//! The classic bug is an unconditional `DEL` in release: a client whose lease expired
//! deletes the lock the next holder now owns. Its cousins: a `SET` without `NX` that
//! overwrites another's lock, and a blind renewal (`PEXPIRE` on a key whose value is
//! someone else's).
//!
//! Judged from each server's own ordered record, not from owner values: the server
//! records who wrote each key and who removed it, in order, so the value a removal
//! removed was written by whoever wrote that key last on that server. Two clients that
//! store the same value (`SETNX key 1`) are still told apart, and a restarted client
//! (same host name, new incarnation: counted by the crashes recorded on it) does not
//! own what its previous life wrote.
//!
//! A grant its own client never believed in (the acquire that wrote it timed out, or
//! its client died before the `ok`) is nobody's lock: removing or re-arming it takes
//! nothing from anyone, and is not judged foreign.

use std::collections::BTreeMap;

use sim::history::{EventKind, History, OpF, Phase, ServerEvent};

use super::{Checker, Evidence, Verdict, fmt_s, model};

/// The ownership checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ownership;

/// A client in one of its lives.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Writer {
    host: String,
    incarnation: usize,
    /// The event that shows the write.
    event: usize,
}

/// Who holds what on each server: (server, key) → value → writer. A string key has one
/// value; a hash key (a reentrant lock) one entry per field.
type Record = BTreeMap<(String, String), BTreeMap<String, Writer>>;

/// Every value an acquire `ok` gave its client, by (key, value): what the clients
/// believed they held. The fallback attribution for a removal of a value the server
/// record never showed, and the test of whether a grant was anyone's lock at all.
fn believed_writers(h: &History) -> BTreeMap<(String, String), (String, usize)> {
    let mut map = BTreeMap::new();
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

/// What one pass over the history found.
struct Judgement {
    /// The first foreign act: (event, actor, writer, key, value, verb).
    foreign: Option<(usize, String, Writer, String, String, &'static str)>,
    attributed: usize,
    unattributed: Vec<usize>,
}

fn judge(h: &History) -> Judgement {
    let believed = believed_writers(h);
    let mut lock_keys: std::collections::BTreeSet<&str> =
        believed.keys().map(|(k, _)| k.as_str()).collect();
    lock_keys.insert(h.params.key.as_str());
    // Hosts releasing a read-mode hold (a read-write lock's reader, by the history's
    // recorded mode): the leaving reader re-arms the shared key for the readers that
    // stay (Redisson's read unlock sets it to their longest timeout), which takes
    // nothing from them.
    let mut releasing_read: std::collections::BTreeSet<&str> = Default::default();
    let servers = model::server_hosts(h);
    let mut record: Record = BTreeMap::new();
    let mut lives = model::Lives::default();
    // A grant its own client never believed in (its acquire ended without an `ok`
    // carrying that value: timed out, or cut short by a crash): nobody held that lock,
    // so removing or re-arming it takes nothing from anyone.
    let orphan = |w: &Writer, key: &str, value: &str| {
        believed
            .get(&(key.to_string(), value.to_string()))
            .is_none_or(|(host, _)| *host != w.host)
    };
    let mut out = Judgement {
        foreign: None,
        attributed: 0,
        unattributed: Vec::new(),
    };
    for (i, e) in h.events.iter().enumerate() {
        lives.observe(h, e);
        match &e.kind {
            EventKind::Op(op) if op.f == OpF::Release => {
                if op.phase == Phase::Invoke && op.mode == Some(sim::history::LockMode::Read) {
                    releasing_read.insert(e.host.as_str());
                } else if op.phase != Phase::Invoke {
                    releasing_read.remove(e.host.as_str());
                }
            }
            EventKind::Server(ServerEvent::Written { by, key, value }) => {
                record
                    .entry((e.host.clone(), key.clone()))
                    .or_default()
                    .insert(
                        value.clone(),
                        Writer {
                            host: by.clone(),
                            incarnation: lives.of(by),
                            event: i,
                        },
                    );
            }
            EventKind::Server(ServerEvent::FieldRemoved { key, field, .. }) => {
                // One holder's field of a shared hash (a reader of a read-write lock)
                // is gone: the key now holds only the others'.
                if let Some(held) = record.get_mut(&(e.host.clone(), key.clone())) {
                    held.remove(field);
                }
            }
            EventKind::Server(ServerEvent::ExpireSet { by, key, .. }) => {
                // Only lock keys are judged: a read-write lock's per-hold timeout keys
                // (which any reader's renewal re-arms for all) and unlock latches are
                // the algorithm's bookkeeping, not locks anyone holds.
                if !lock_keys.contains(key.as_str()) || releasing_read.contains(by.as_str()) {
                    continue;
                }
                // Re-arming a lock: only its owner should (a watchdog renews its own).
                let Some(held) = record.get(&(e.host.clone(), key.clone())) else {
                    continue;
                };
                if servers.contains(by.as_str()) {
                    continue;
                }
                out.attributed += 1;
                let me = (by.as_str(), lives.of(by));
                if let Some((value, w)) = held
                    .iter()
                    .find(|(_, w)| (w.host.as_str(), w.incarnation) != me)
                    && !held
                        .values()
                        .any(|w| (w.host.as_str(), w.incarnation) == me)
                {
                    if orphan(w, key, value) {
                        continue;
                    }
                    out.foreign.get_or_insert((
                        i,
                        by.clone(),
                        w.clone(),
                        key.clone(),
                        value.clone(),
                        "changed the expiry of",
                    ));
                }
            }
            EventKind::Server(ServerEvent::Removed {
                by,
                key,
                value,
                cause,
            }) => {
                let held = record
                    .remove(&(e.host.clone(), key.clone()))
                    .unwrap_or_default();
                let verb = match cause.as_str() {
                    "command" => "removed",
                    "overwritten" => "overwrote",
                    _ => continue,
                };
                let me = (by.as_str(), lives.of(by));
                let writers: Vec<(String, Writer)> = if held.is_empty() {
                    match believed.get(&(key.clone(), value.clone())) {
                        Some((host, event)) => vec![(
                            value.clone(),
                            Writer {
                                host: host.clone(),
                                incarnation: lives.of(host),
                                event: *event,
                            },
                        )],
                        None => {
                            out.unattributed.push(i);
                            continue;
                        }
                    }
                } else {
                    held.into_iter().collect()
                };
                out.attributed += 1;
                if let Some((value, w)) = writers
                    .into_iter()
                    .find(|(_, w)| (w.host.as_str(), w.incarnation) != me)
                    && !orphan(&w, key, &value)
                {
                    out.foreign
                        .get_or_insert((i, by.clone(), w, key.clone(), value, verb));
                }
            }
            _ => {}
        }
    }
    out
}

/// Indices of removals by command whose value no known host wrote (the checker
/// ignores them; reports may list them).
pub fn unattributed_removals(h: &History) -> Vec<usize> {
    judge(h).unattributed
}

impl Checker for Ownership {
    fn name(&self) -> &'static str {
        "ownership"
    }

    fn check(&self, h: &History) -> Verdict {
        if let Some(unknown) = model::needs_server_records(h) {
            return unknown;
        }
        let j = judge(h);
        if let Some((i, actor, writer, key, value, verb)) = j.foreign {
            let e = &h.events[i];
            let whose = if writer.host == actor {
                format!("its previous life's (before crash {})", writer.incarnation)
            } else {
                format!("{}'s", writer.host)
            };
            let note = if j.unattributed.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} removals of values no known host wrote were ignored)",
                    j.unattributed.len()
                )
            };
            let on = if e.host == "redis" {
                String::new()
            } else {
                format!(" on {}", e.host)
            };
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "{actor}'s command {verb} {whose} lock {key} (owner={value}){on} at {}{note}",
                    fmt_s(e.at_us)
                ),
                at_us: e.at_us,
                hosts: vec![actor, writer.host],
                owners: vec![value],
                first_event: i,
                events: vec![writer.event, i],
            });
        }
        // Nothing judged: a vacuous pass would hide, e.g., a design that never releases
        // or whose values the record cannot read.
        if j.attributed == 0 {
            return Verdict::Unknown {
                reason: if j.unattributed.is_empty() {
                    "no client removed, overwrote or re-armed a lock: nothing to judge".into()
                } else {
                    format!(
                        "{} removals by command, none of a value written by a known host",
                        j.unattributed.len()
                    )
                },
            };
        }
        Verdict::Valid
    }
}
