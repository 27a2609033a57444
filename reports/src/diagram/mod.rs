//! Sequence diagrams of a run: one lane per client, per server (Redis, ZooKeeper,
//! MySQL, MongoDB), per Sentinel that led a failover in the window, and for the
//! storage; requests and replies as arrows at their true times (a reply held by a
//! delay or a pause slopes down from when the server sent it to when the client got
//! it); the server's lease of each lock as a bar on its lane; its role changes (a
//! promotion, a demotion, a leader elected), a ZooKeeper session's expiry, a MongoDB
//! rollback and the Sentinel's failover steps as notes on their lanes; faults as shaded
//! boxes over the lane of the host they hit (a delay as a strip along it);
//! each client's belief that it holds the lock as a bar beside its lane; the violation
//! as a red line across every lane.
//!
//! By default only what matters to the first violation is drawn: the hosts its
//! evidence names, the servers and storage they talked to, and the window from the
//! start of the holds and faults involved to the violation's last event. `full` draws
//! every host over the whole run.
//!
//! Time runs down the page. The scale is true time, except that rows whose text would
//! touch other text or an arrowhead are pushed apart (the order is always the true
//! order; text is measured with the plots' font); the time of every row is printed in
//! the left margin. Labels too long for their room wrap, then are cut, with the whole
//! text in a tooltip.
//!
//! Two renderings of one [`Diagram`]: SVG (self-contained, no scripts or fonts to
//! fetch; `svg.rs`) and Mermaid `sequenceDiagram` text (for a pull request or a wiki,
//! where Mermaid draws it; `mermaid.rs`). This file cuts the run down to what matters.

pub mod measure;
mod mermaid;
mod svg;

pub use mermaid::mermaid;
pub use svg::svg;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scenarios::checkers::{self, Evidence, Verdict, model};
use sim::faults::FaultKind;
use sim::history::{EventKind, History, OpF, Phase, ServerEvent, StorageEvent};

/// What an item looks like; also its SVG class, so a test (or CSS) can find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A request.
    Request,
    /// A reply saying ok.
    Ok,
    /// A reply saying fail.
    Fail,
    /// A reply whose outcome is unknown.
    Info,
    /// A server's record: a write.
    Write,
    /// A server's record: an expiry or removal.
    Remove,
    /// The storage's record.
    Storage,
    /// Something broke here (a lost update, a refused write).
    Bad,
    /// A server's lease of the lock.
    Lease,
    /// A client's belief that it holds the lock.
    Belief,
    /// A fault's interval.
    Fault,
    /// A delay's interval: the host still runs, what reaches it comes late (drawn as a
    /// strip along its lane, not over the lane's width).
    Delay,
    /// A connection dialled.
    Connect,
    /// A server's role changed (a promotion, a demotion, a leader elected), a session
    /// expired, a Sentinel decided: what a failover turns on.
    Role,
}

impl Style {
    fn class(self) -> &'static str {
        match self {
            Style::Request => "request",
            Style::Ok => "reply-ok",
            Style::Fail => "reply-fail",
            Style::Info => "reply-info",
            Style::Write => "server-write",
            Style::Remove => "server-remove",
            Style::Storage => "storage",
            Style::Bad => "bad",
            Style::Lease => "lease",
            Style::Belief => "belief",
            Style::Fault => "fault",
            Style::Delay => "delay",
            Style::Connect => "connect",
            Style::Role => "role",
        }
    }
}

/// One drawn thing.
#[derive(Debug, Clone)]
pub enum Item {
    /// An arrow between two lanes.
    Arrow {
        /// Lane index it leaves.
        from: usize,
        /// Lane index it reaches.
        to: usize,
        /// When it left.
        from_us: u64,
        /// When it arrived.
        to_us: u64,
        /// Its text.
        label: String,
        /// How it looks.
        style: Style,
    },
    /// A note on one lane.
    Note {
        /// Lane index.
        lane: usize,
        /// When.
        at_us: u64,
        /// Its text.
        text: String,
        /// How it looks.
        style: Style,
    },
    /// An interval on one lane (a lease, a belief, a fault).
    Bar {
        /// Lane index.
        lane: usize,
        /// Start.
        from_us: u64,
        /// End.
        to_us: u64,
        /// Its text.
        label: String,
        /// How it looks.
        style: Style,
    },
}

/// A run, cut to what matters, ready to render.
#[derive(Debug, Clone)]
pub struct Diagram {
    /// One line naming the run.
    pub title: String,
    /// Lane names, left to right: clients, servers, Sentinels, storage.
    pub lanes: Vec<String>,
    /// The drawn things, in time order of their start.
    pub items: Vec<Item>,
    /// First time shown.
    pub start_us: u64,
    /// Last time shown.
    pub end_us: u64,
    /// The violation drawn: when, the checker, its one sentence.
    pub violation: Option<(u64, String, String)>,
}

/// A Sentinel's log events that mean it is leading a failover.
const LEADER_EVENTS: [&str; 3] = ["+elected-leader", "+selected-slave", "+promoted-slave"];

/// A Sentinel's log events drawn on its lane: the steps of the failover it decides.
const SENTINEL_EVENTS: [&str; 6] = [
    "+odown",
    "+elected-leader",
    "+selected-slave",
    "+promoted-slave",
    "+switch-master",
    "+failover-end",
];

fn short_owner(owner: &str) -> String {
    // `client-4-9-2f22e870` → `client-4-9`: enough to tell owners apart on a lane.
    let parts: Vec<&str> = owner.split('-').collect();
    if parts.len() >= 4 {
        parts[..3].join("-")
    } else {
        owner.to_string()
    }
}

/// Builds the diagram of `history` judged by `verdicts`: around the first violation
/// unless `full` (or there is no violation, in which case the whole run is drawn).
pub fn build(history: &History, verdicts: &[(String, Verdict)], full: bool) -> Diagram {
    let first: Option<(&str, &Evidence)> = verdicts
        .iter()
        .filter_map(|(n, v)| v.evidence().map(|e| (n.as_str(), e)))
        .min_by_key(|(_, e)| e.at_us);
    let servers: BTreeSet<&str> = history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(_) => Some(e.host.as_str()),
            EventKind::Connect { server, .. } => Some(server.as_str()),
            _ => None,
        })
        .collect();
    let holds = model::holds(history).unwrap_or_default();
    let windows = model::fault_windows(history);
    let pairs = model::op_pairs(history).unwrap_or_default();

    // Which clients, and when.
    let (clients, start_us, end_us): (Vec<String>, u64, u64) = match first {
        Some((_, ev)) if !full => {
            let mut clients: Vec<String> = ev
                .hosts
                .iter()
                .filter(|h| h.starts_with("client-"))
                .cloned()
                .collect();
            clients.dedup();
            let times: Vec<u64> = ev
                .events
                .iter()
                .chain(std::iter::once(&ev.first_event))
                .filter_map(|i| history.events.get(*i))
                .map(|e| e.at_us)
                .collect();
            let (mut t0, mut t1) = (
                times.iter().copied().min().unwrap_or(ev.at_us),
                times.iter().copied().max().unwrap_or(ev.at_us),
            );
            // The holds of the clients involved that overlap it, from their acquire's
            // invocation, and the faults on their hosts or on a server meanwhile.
            for hold in holds.iter().filter(|h| clients.contains(&h.host)) {
                if hold.start_us <= t1 && t0 <= hold.end_us {
                    let invoked = pairs
                        .iter()
                        .find(|p| p.completion == Some(hold.acquire_event))
                        .map_or(hold.start_us, |p| p.invoke_us);
                    t0 = t0.min(invoked);
                    t1 = t1.max(hold.end_us.min(history.end_us));
                }
            }
            for w in &windows {
                let relevant = clients.contains(&w.host) || servers.contains(w.host.as_str());
                if relevant && w.overlaps(t0, t1) {
                    t0 = t0.min(w.start_us);
                }
            }
            (
                clients,
                t0.saturating_sub(10_000),
                (t1 + 10_000).min(history.end_us),
            )
        }
        _ => {
            let clients: BTreeSet<(u32, String)> = history
                .events
                .iter()
                .filter_map(|e| {
                    let n = e.host.strip_prefix("client-")?.parse::<u32>().ok()?;
                    Some((n, e.host.clone()))
                })
                .collect();
            (
                clients.into_iter().map(|(_, h)| h).collect(),
                0,
                history.end_us,
            )
        }
    };
    let in_window = |t: u64| start_us <= t && t <= end_us;
    let involved = |h: &str| clients.iter().any(|c| c == h);
    let uses_storage = history.events.iter().any(|e| {
        in_window(e.at_us)
            && matches!(&e.kind, EventKind::Storage(s) if match s {
                StorageEvent::Read { reader, .. } => involved(reader),
                StorageEvent::Write { writer, .. } => involved(writer),
                StorageEvent::Final { .. } => false,
            })
    });
    // The Sentinels whose decisions fall in the window: the ones that led a failover
    // (elected leader, promoted a replica), else the first to announce the new master.
    let decisions: Vec<(&str, &str)> = history
        .events
        .iter()
        .filter(|e| in_window(e.at_us))
        .filter_map(|e| match &e.kind {
            EventKind::Sentinel { event, .. } => Some((e.host.as_str(), event.as_str())),
            _ => None,
        })
        .collect();
    let mut sentinels: BTreeSet<&str> = decisions
        .iter()
        .filter(|(_, ev)| LEADER_EVENTS.contains(ev))
        .map(|(h, _)| *h)
        .collect();
    if sentinels.is_empty()
        && let Some((h, _)) = decisions.iter().find(|(_, ev)| *ev == "+switch-master")
    {
        sentinels.insert(h);
    }
    let mut lanes: Vec<String> = clients.clone();
    lanes.extend(servers.iter().map(|s| s.to_string()));
    if servers.is_empty() {
        lanes.push("redis".to_string());
    }
    lanes.extend(sentinels.iter().map(|s| s.to_string()));
    if uses_storage {
        lanes.push("storage".to_string());
    }
    let lane = |h: &str| lanes.iter().position(|l| l == h);
    let first_server = lane(servers.iter().next().copied().unwrap_or("redis")).unwrap_or(0);
    let storage = lane("storage");
    let mut items: Vec<Item> = Vec::new();

    // Requests and replies.
    for p in pairs.iter().filter(|p| involved(&p.host)) {
        let Some(c) = lane(&p.host) else { continue };
        // Where and when the request was served: the server's record of this
        // client's write or removal of the key, or the storage's record of its read or
        // write, between the request and the reply.
        let until = p.completion_us.unwrap_or(history.end_us);
        let served = history.events.iter().find(|e| {
            (p.invoke_us..=until).contains(&e.at_us)
                && match &e.kind {
                    EventKind::Server(
                        ServerEvent::Written { by, key, .. } | ServerEvent::Removed { by, key, .. },
                    ) => {
                        matches!(p.f, OpF::Acquire | OpF::Release) && *by == p.host && *key == p.key
                    }
                    EventKind::Storage(
                        StorageEvent::Read { reader: who, .. }
                        | StorageEvent::Write { writer: who, .. },
                    ) => matches!(p.f, OpF::Read | OpF::Write) && *who == p.host,
                    _ => false,
                }
        });
        let served_at = served.map(|e| e.at_us);
        let target = match p.f {
            OpF::Acquire | OpF::Release => {
                served.and_then(|e| lane(&e.host)).unwrap_or(first_server)
            }
            OpF::Read | OpF::Write => {
                let Some(s) = storage else { continue };
                s
            }
        };
        let invoke = &history.events[p.invoke];
        let EventKind::Op(op) = &invoke.kind else {
            continue;
        };
        if in_window(p.invoke_us) {
            let what = match p.f {
                OpF::Acquire => format!("acquire {}", p.key),
                OpF::Release => format!(
                    "release {}",
                    op.owner.as_deref().map(short_owner).unwrap_or_default()
                ),
                OpF::Read => "read".to_string(),
                OpF::Write => format!("write {}", op.value.unwrap_or_default()),
            };
            let arrive = served_at.unwrap_or(p.invoke_us).max(p.invoke_us);
            items.push(Item::Arrow {
                from: c,
                to: target,
                from_us: p.invoke_us,
                to_us: arrive.min(p.invoke_us + 2_000),
                label: what,
                style: Style::Request,
            });
        }
        if let (Some(ci), Some(done)) = (p.completion, p.completion_us)
            && in_window(done)
        {
            let EventKind::Op(op) = &history.events[ci].kind else {
                continue;
            };
            let (word, style) = match p.outcome {
                Phase::Ok => ("ok", Style::Ok),
                Phase::Fail => ("fail", Style::Fail),
                _ => ("info", Style::Info),
            };
            let mut label = word.to_string();
            if let Some(d) = &op.detail {
                let _ = write!(label, " ({d})");
            }
            if p.f == OpF::Read
                && let Some(v) = op.value
            {
                let _ = write!(label, " {v}");
            }
            let sent = served_at.filter(|t| *t <= done).unwrap_or(done);
            items.push(Item::Arrow {
                from: target,
                to: c,
                from_us: sent.max(start_us),
                to_us: done,
                label,
                style,
            });
        }
    }

    // Beliefs.
    for h in holds.iter().filter(|h| involved(&h.host)) {
        if h.start_us <= end_us
            && start_us <= h.end_us
            && let Some(c) = lane(&h.host)
        {
            items.push(Item::Bar {
                lane: c,
                from_us: h.start_us.max(start_us),
                to_us: h.end_us.min(end_us),
                label: format!("{} believes it holds ({})", h.host, short_owner(&h.owner)),
                style: Style::Belief,
            });
        }
    }

    // The servers' record: leases and their ends. A lease ends when its TTL runs out
    // (the time the server armed plus the TTL), even if the server notices only later
    // (Redis expires lazily, on access, or in its expiry cycle).
    struct Lease {
        from: u64,
        owner: String,
        deadline: Option<u64>,
    }
    let mut open_lease: BTreeMap<usize, Lease> = BTreeMap::new();
    let key = history.params.key.as_str();
    let close = |items: &mut Vec<Item>, l: usize, lease: Lease, at: u64| {
        let end = lease.deadline.map_or(at, |d| d.min(at));
        if lease.from <= end_us && end >= start_us {
            items.push(Item::Bar {
                lane: l,
                from_us: lease.from.max(start_us),
                to_us: end.min(end_us),
                label: format!("lease of {}", lease.owner),
                style: Style::Lease,
            });
        }
        if end < at && in_window(end) {
            items.push(Item::Note {
                lane: l,
                at_us: end,
                text: format!("TTL of {} runs out", lease.owner),
                style: Style::Remove,
            });
        }
    };
    let mut roled: BTreeSet<usize> = BTreeSet::new();
    for e in &history.events {
        let EventKind::Server(s) = &e.kind else {
            continue;
        };
        let Some(l) = lane(&e.host) else { continue };
        match s {
            ServerEvent::Written { by, key: k, value } if k == key => {
                if let Some(lease) = open_lease.remove(&l) {
                    close(&mut items, l, lease, e.at_us);
                }
                open_lease.insert(
                    l,
                    Lease {
                        from: e.at_us,
                        owner: short_owner(value),
                        deadline: None,
                    },
                );
                if in_window(e.at_us) && (involved(by) || full) {
                    items.push(Item::Note {
                        lane: l,
                        at_us: e.at_us,
                        text: format!("SET {k} = {} (by {by})", short_owner(value)),
                        style: Style::Write,
                    });
                }
            }
            ServerEvent::ExpireSet { key: k, ttl_ms, .. } if k == key => {
                if let Some(lease) = open_lease.get_mut(&l) {
                    lease.deadline = u64::try_from(*ttl_ms).ok().map(|ttl| e.at_us + ttl * 1_000);
                }
            }
            ServerEvent::Removed {
                by,
                key: k,
                value,
                cause,
            } if k == key => {
                if let Some(lease) = open_lease.remove(&l) {
                    close(&mut items, l, lease, e.at_us);
                }
                let mine = value.split('-').take(2).collect::<Vec<_>>().join("-");
                if in_window(e.at_us) && (full || involved(by) || involved(&mine)) {
                    let text = if cause == "expired" {
                        format!("{} expired (noticed)", short_owner(value))
                    } else {
                        format!("{} removed ({cause}, by {by})", short_owner(value))
                    };
                    items.push(Item::Note {
                        lane: l,
                        at_us: e.at_us,
                        text,
                        style: Style::Remove,
                    });
                }
            }
            ServerEvent::Role { role } => {
                // A server's first role is the one it starts in; each later one, a change.
                let first = roled.insert(l);
                if in_window(e.at_us) {
                    let text = if role.starts_with("looking") {
                        role.clone()
                    } else if first {
                        format!("starts as {role}")
                    } else {
                        format!("becomes {role}")
                    };
                    items.push(Item::Note {
                        lane: l,
                        at_us: e.at_us,
                        text,
                        style: Style::Role,
                    });
                }
            }
            ServerEvent::ZkSession {
                session,
                client,
                event,
                ephemerals,
                ..
            } if in_window(e.at_us) && event != "created" && (full || involved(client)) => {
                let mut text = format!("session {session} of {client} {event}");
                if !ephemerals.is_empty() {
                    let _ = write!(text, ": deletes {}", ephemerals.join(", "));
                }
                items.push(Item::Note {
                    lane: l,
                    at_us: e.at_us,
                    text,
                    style: Style::Role,
                });
            }
            ServerEvent::MongoRollback {
                source,
                common,
                undone,
                ..
            } if in_window(e.at_us) => {
                items.push(Item::Note {
                    lane: l,
                    at_us: e.at_us,
                    text: format!(
                        "rolls back {undone} write(s) to {common} (syncing from {source})"
                    ),
                    style: Style::Bad,
                });
            }
            _ => {}
        }
    }
    for (l, lease) in std::mem::take(&mut open_lease) {
        close(&mut items, l, lease, end_us);
    }

    // The storage's record, and faults and dials on the lanes shown.
    for e in history.events.iter().filter(|e| in_window(e.at_us)) {
        match &e.kind {
            EventKind::Storage(s) => {
                let Some(l) = storage else { continue };
                let (text, style) = match s {
                    StorageEvent::Read {
                        reader,
                        value,
                        accepted,
                        ..
                    } if involved(reader) => {
                        if *accepted {
                            (format!("{reader} read {value}"), Style::Storage)
                        } else {
                            (format!("{reader}'s read REFUSED (stale token)"), Style::Bad)
                        }
                    }
                    StorageEvent::Write {
                        writer,
                        read,
                        wrote,
                        current,
                        accepted,
                        ..
                    } if involved(writer) => {
                        if !accepted {
                            (
                                format!("{writer}'s write REFUSED (stale token)"),
                                Style::Bad,
                            )
                        } else if current != read {
                            (
                                format!(
                                    "{writer} wrote {wrote} over {current} (read {read}): LOST UPDATE"
                                ),
                                Style::Bad,
                            )
                        } else {
                            (format!("{writer} wrote {wrote}"), Style::Storage)
                        }
                    }
                    _ => continue,
                };
                items.push(Item::Note {
                    lane: l,
                    at_us: e.at_us,
                    text,
                    style,
                });
            }
            EventKind::Sentinel { event, detail } if SENTINEL_EVENTS.contains(&event.as_str()) => {
                if let Some(l) = lane(&e.host) {
                    items.push(Item::Note {
                        lane: l,
                        at_us: e.at_us,
                        text: format!("{event} {detail}"),
                        style: Style::Role,
                    });
                }
            }
            EventKind::Connect { server, ok, .. } if involved(&e.host) => {
                if let Some(c) = lane(&e.host) {
                    items.push(Item::Note {
                        lane: c,
                        at_us: e.at_us,
                        text: format!(
                            "dials {server}: {}",
                            if *ok { "connected" } else { "failed" }
                        ),
                        style: Style::Connect,
                    });
                }
            }
            _ => {}
        }
    }
    for w in &windows {
        if w.overlaps(start_us, end_us)
            && let Some(l) = lane(&w.host)
        {
            let detail = match &history.events[w.start_event].kind {
                EventKind::Fault { detail, .. } => detail.clone(),
                _ => String::new(),
            };
            let style = match history.plan.faults.get(w.fault).map(|f| &f.kind) {
                Some(FaultKind::Delay { .. }) => Style::Delay,
                _ => Style::Fault,
            };
            items.push(Item::Bar {
                lane: l,
                from_us: w.start_us.max(start_us),
                to_us: w.end_us.min(end_us),
                label: detail,
                style,
            });
        }
    }
    // Fault ends of faults that started before the window are covered by the bars;
    // nothing else to add. Sort by start time, stable.
    items.sort_by_key(|i| match i {
        Item::Arrow { from_us, .. } | Item::Bar { from_us, .. } => *from_us,
        Item::Note { at_us, .. } => *at_us,
    });
    Diagram {
        title: format!(
            "{} under {}, seed {}",
            history.design, history.scenario, history.seed
        ),
        lanes,
        items,
        start_us,
        end_us,
        violation: first.map(|(n, e)| (e.at_us, n.to_string(), e.summary.clone())),
    }
}

/// The diagram of a fresh run's history, judged by every checker.
pub fn of_history(history: &History, full: bool) -> Diagram {
    let verdicts: Vec<(String, Verdict)> = checkers::check_all(history)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    build(history, &verdicts, full)
}

/// Whether `text` is a diagram this module wrote (so writing over it loses nothing).
pub fn is_ours(text: &str) -> bool {
    text.starts_with("sequenceDiagram\n")
        || (text.starts_with("<svg xmlns") && text.contains(r##"<g class="lane""##))
}
