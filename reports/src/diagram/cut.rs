//! The run cut down to what a diagram draws: the window and lanes chosen around the
//! first violation (or the whole run), and each kind of drawn thing (requests and
//! replies, beliefs, the servers' record, the storage, faults) built from the
//! history's events and the servers' neutral facts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scenarios::checkers::{Evidence, model};
use sim::faults::FaultKind;
use sim::history::fact::{LockFact, Rank, Removal};
use sim::history::{EventKind, History, OpF, Phase, StorageEvent};

use super::{Item, Style, short_owner};

/// The window, the lanes and what the history already says about them.
pub(super) struct Cut<'a> {
    pub(super) history: &'a History,
    /// Whether every host is drawn (else only the ones the violation involves).
    pub(super) full: bool,
    /// The clients drawn.
    pub(super) clients: Vec<String>,
    /// Lane names, left to right.
    pub(super) lanes: Vec<String>,
    /// First time shown.
    pub(super) start_us: u64,
    /// Last time shown.
    pub(super) end_us: u64,
    holds: Vec<model::Hold>,
    windows: Vec<model::FaultWindow>,
    pairs: Vec<model::OpPair>,
}

/// The hosts that act as servers: every host with a server record, every server dialled.
fn servers(history: &History) -> BTreeSet<&str> {
    history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(_) => Some(e.host.as_str()),
            EventKind::Connect { server, .. } => Some(server.as_str()),
            _ => None,
        })
        .collect()
}

impl<'a> Cut<'a> {
    /// The cut of `history` around `first` (the first violation), unless `full`.
    pub(super) fn new(history: &'a History, first: Option<&Evidence>, full: bool) -> Cut<'a> {
        let mut cut = Cut {
            history,
            full,
            clients: Vec::new(),
            lanes: Vec::new(),
            start_us: 0,
            end_us: history.end_us,
            holds: model::holds(history).unwrap_or_default(),
            windows: model::fault_windows(history),
            pairs: model::op_pairs(history).unwrap_or_default(),
        };
        match first {
            Some(ev) if !full => cut.around(ev),
            _ => {
                let clients: BTreeSet<(u32, String)> = history
                    .events
                    .iter()
                    .filter_map(|e| {
                        let n = e.host.strip_prefix("client-")?.parse::<u32>().ok()?;
                        Some((n, e.host.clone()))
                    })
                    .collect();
                cut.clients = clients.into_iter().map(|(_, h)| h).collect();
            }
        }
        cut.lanes = cut.choose_lanes();
        cut
    }

    /// The clients and window of a violation's evidence: its events, widened to the
    /// holds of its clients that overlap it (from their acquire's invocation) and the
    /// faults on their hosts or on a server meanwhile.
    fn around(&mut self, ev: &Evidence) {
        let history = self.history;
        let servers = servers(history);
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
        for hold in self.holds.iter().filter(|h| clients.contains(&h.host)) {
            if hold.start_us <= t1 && t0 <= hold.end_us {
                let invoked = self
                    .pairs
                    .iter()
                    .find(|p| p.completion == Some(hold.acquire_event))
                    .map_or(hold.start_us, |p| p.invoke_us);
                t0 = t0.min(invoked);
                t1 = t1.max(hold.end_us.min(history.end_us));
            }
        }
        for w in &self.windows {
            let relevant = clients.contains(&w.host) || servers.contains(w.host.as_str());
            if relevant && w.overlaps(t0, t1) {
                t0 = t0.min(w.start_us);
            }
        }
        self.clients = clients;
        self.start_us = t0.saturating_sub(10_000);
        self.end_us = (t1 + 10_000).min(history.end_us);
    }

    /// Whether `t` is in the window.
    pub(super) fn in_window(&self, t: u64) -> bool {
        self.start_us <= t && t <= self.end_us
    }

    /// Whether `host` is a client drawn.
    fn involved(&self, host: &str) -> bool {
        self.clients.iter().any(|c| c == host)
    }

    /// The lane of `host`, if it has one.
    pub(super) fn lane(&self, host: &str) -> Option<usize> {
        self.lanes.iter().position(|l| l == host)
    }

    /// The lanes: the clients, the servers, the failover monitors whose decisions
    /// fall in the window (the ones that led a failover, else the first to announce
    /// the new topology), and the storage if a client drawn used it in the window.
    fn choose_lanes(&self) -> Vec<String> {
        let history = self.history;
        let servers = servers(history);
        let uses_storage = history.events.iter().any(|e| {
            self.in_window(e.at_us)
                && matches!(&e.kind, EventKind::Storage(s) if match s {
                    StorageEvent::Read { reader, .. } => self.involved(reader),
                    StorageEvent::Write { writer, .. } => self.involved(writer),
                    StorageEvent::Final { .. } => false,
                })
        });
        let decisions: Vec<(&str, bool, bool)> = history
            .events
            .iter()
            .filter(|e| self.in_window(e.at_us))
            .filter_map(|e| {
                let step = e.kind.monitor()?;
                Some((e.host.as_str(), step.leads, step.announces))
            })
            .collect();
        let mut monitors: BTreeSet<&str> = decisions
            .iter()
            .filter(|(_, leads, _)| *leads)
            .map(|(h, _, _)| *h)
            .collect();
        if monitors.is_empty()
            && let Some((h, _, _)) = decisions.iter().find(|(_, _, announces)| *announces)
        {
            monitors.insert(h);
        }
        let mut lanes: Vec<String> = self.clients.clone();
        lanes.extend(servers.iter().map(|s| s.to_string()));
        if servers.is_empty() {
            lanes.push("redis".to_string());
        }
        lanes.extend(monitors.iter().map(|s| s.to_string()));
        if uses_storage {
            lanes.push("storage".to_string());
        }
        lanes
    }

    /// Requests and replies, as arrows between a client's lane and where the request
    /// was served: the server's record of this client's write or removal of the key,
    /// or the storage's record of its read or write, between the request and the reply.
    pub(super) fn requests(&self, items: &mut Vec<Item>) {
        let history = self.history;
        let servers = servers(history);
        let first_server = self
            .lane(servers.iter().next().copied().unwrap_or("redis"))
            .unwrap_or(0);
        let storage = self.lane("storage");
        for p in self.pairs.iter().filter(|p| self.involved(&p.host)) {
            let Some(c) = self.lane(&p.host) else {
                continue;
            };
            let until = p.completion_us.unwrap_or(history.end_us);
            let served = history.events.iter().find(|e| {
                (p.invoke_us..=until).contains(&e.at_us)
                    && match &e.kind {
                        EventKind::Server(s) => match s.fact() {
                            LockFact::Written { by, key, .. }
                            | LockFact::Removed { by, key, .. } => {
                                matches!(p.f, OpF::Acquire | OpF::Release)
                                    && by == p.host
                                    && key == p.key
                            }
                            _ => false,
                        },
                        EventKind::Storage(
                            StorageEvent::Read { reader: who, .. }
                            | StorageEvent::Write { writer: who, .. },
                        ) => matches!(p.f, OpF::Read | OpF::Write) && *who == p.host,
                        _ => false,
                    }
            });
            let served_at = served.map(|e| e.at_us);
            let target = match p.f {
                OpF::Acquire | OpF::Release => served
                    .and_then(|e| self.lane(&e.host))
                    .unwrap_or(first_server),
                OpF::Read | OpF::Write => {
                    let Some(s) = storage else { continue };
                    s
                }
            };
            let EventKind::Op(op) = &history.events[p.invoke].kind else {
                continue;
            };
            if self.in_window(p.invoke_us) {
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
            self.reply(items, p, c, target, served_at);
        }
    }

    /// A request's reply, from where it was served (when it was sent, if the server's
    /// record says) to the client.
    fn reply(
        &self,
        items: &mut Vec<Item>,
        p: &model::OpPair,
        c: usize,
        target: usize,
        served_at: Option<u64>,
    ) {
        let (Some(ci), Some(done)) = (p.completion, p.completion_us) else {
            return;
        };
        if !self.in_window(done) {
            return;
        }
        let EventKind::Op(op) = &self.history.events[ci].kind else {
            return;
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
            from_us: sent.max(self.start_us),
            to_us: done,
            label,
            style,
        });
    }

    /// Each drawn client's belief that it holds the lock, as a bar beside its lane.
    pub(super) fn beliefs(&self, items: &mut Vec<Item>) {
        for h in self.holds.iter().filter(|h| self.involved(&h.host)) {
            if h.start_us <= self.end_us
                && self.start_us <= h.end_us
                && let Some(c) = self.lane(&h.host)
            {
                items.push(Item::Bar {
                    lane: c,
                    from_us: h.start_us.max(self.start_us),
                    to_us: h.end_us.min(self.end_us),
                    label: format!("{} believes it holds ({})", h.host, short_owner(&h.owner)),
                    style: Style::Belief,
                });
            }
        }
    }

    /// The storage's record, the monitors' decisions and the clients' dials on the
    /// lanes shown.
    pub(super) fn storage_and_dials(&self, items: &mut Vec<Item>) {
        let storage = self.lane("storage");
        for e in self
            .history
            .events
            .iter()
            .filter(|e| self.in_window(e.at_us))
        {
            match &e.kind {
                EventKind::Storage(s) => {
                    let Some(l) = storage else { continue };
                    let Some((text, style)) = self.storage_note(s) else {
                        continue;
                    };
                    items.push(Item::Note {
                        lane: l,
                        at_us: e.at_us,
                        text,
                        style,
                    });
                }
                EventKind::Connect { server, ok, .. } if self.involved(&e.host) => {
                    if let Some(c) = self.lane(&e.host) {
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
                kind => {
                    if let Some(step) = kind.monitor().filter(|s| s.shown)
                        && let Some(l) = self.lane(&e.host)
                    {
                        items.push(Item::Note {
                            lane: l,
                            at_us: e.at_us,
                            text: format!("{} {}", step.event, step.detail),
                            style: Style::Role,
                        });
                    }
                }
            }
        }
    }

    /// A drawn client's read or write as the storage recorded it.
    fn storage_note(&self, s: &StorageEvent) -> Option<(String, Style)> {
        Some(match s {
            StorageEvent::Read {
                reader,
                value,
                accepted,
                ..
            } if self.involved(reader) => {
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
            } if self.involved(writer) => {
                if !accepted {
                    (
                        format!("{writer}'s write REFUSED (stale token)"),
                        Style::Bad,
                    )
                } else if current != read {
                    (
                        format!("{writer} wrote {wrote} over {current} (read {read}): LOST UPDATE"),
                        Style::Bad,
                    )
                } else {
                    (format!("{writer} wrote {wrote}"), Style::Storage)
                }
            }
            _ => return None,
        })
    }

    /// Faults as boxes over the lane of the host they hit (a delay as a strip).
    pub(super) fn faults(&self, items: &mut Vec<Item>) {
        for w in &self.windows {
            if w.overlaps(self.start_us, self.end_us)
                && let Some(l) = self.lane(&w.host)
            {
                let detail = match &self.history.events[w.start_event].kind {
                    EventKind::Fault { detail, .. } => detail.clone(),
                    _ => String::new(),
                };
                let style = match self.history.plan.faults.get(w.fault).map(|f| &f.kind) {
                    Some(FaultKind::Delay { .. }) => Style::Delay,
                    _ => Style::Fault,
                };
                items.push(Item::Bar {
                    lane: l,
                    from_us: w.start_us.max(self.start_us),
                    to_us: w.end_us.min(self.end_us),
                    label: detail,
                    style,
                });
            }
        }
    }
}

/// A server's lease of the lock, open on its lane.
struct Lease {
    from: u64,
    owner: String,
    deadline: Option<u64>,
}

impl Cut<'_> {
    /// The servers' record: leases and their ends, writes and removals of the lock,
    /// role changes, and the notes a system adds (a session's end, a rollback). A lease
    /// ends when its TTL runs out (the time the server armed plus the TTL), even if the
    /// server notices only later (an expiry found lazily, on access).
    pub(super) fn server_record(&self, items: &mut Vec<Item>) {
        let mut open_lease: BTreeMap<usize, Lease> = BTreeMap::new();
        let key = self.history.params.key.as_str();
        let mut roled: BTreeSet<usize> = BTreeSet::new();
        for e in &self.history.events {
            let EventKind::Server(s) = &e.kind else {
                continue;
            };
            let Some(l) = self.lane(&e.host) else {
                continue;
            };
            match s.fact() {
                LockFact::Written { by, key: k, value } if k == key => {
                    if let Some(lease) = open_lease.remove(&l) {
                        self.close(items, l, lease, e.at_us);
                    }
                    open_lease.insert(
                        l,
                        Lease {
                            from: e.at_us,
                            owner: short_owner(value),
                            deadline: None,
                        },
                    );
                    if self.in_window(e.at_us) && (self.involved(by) || self.full) {
                        items.push(Item::Note {
                            lane: l,
                            at_us: e.at_us,
                            text: format!("SET {k} = {} (by {by})", short_owner(value)),
                            style: Style::Write,
                        });
                    }
                }
                LockFact::ExpirySet { key: k, ttl_ms, .. } if k == key => {
                    if let Some(lease) = open_lease.get_mut(&l) {
                        lease.deadline =
                            u64::try_from(ttl_ms).ok().map(|ttl| e.at_us + ttl * 1_000);
                    }
                }
                LockFact::Removed {
                    by,
                    key: k,
                    value,
                    why,
                    cause,
                } if k == key => {
                    if let Some(lease) = open_lease.remove(&l) {
                        self.close(items, l, lease, e.at_us);
                    }
                    let mine = value.split('-').take(2).collect::<Vec<_>>().join("-");
                    if self.in_window(e.at_us)
                        && (self.full || self.involved(by) || self.involved(&mine))
                    {
                        let text = if why == Removal::Expired {
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
                LockFact::Role { role, rank, .. } => {
                    // A server's first role is the one it starts in; each later one, a change.
                    let first = roled.insert(l);
                    if self.in_window(e.at_us) {
                        let text = if rank == Rank::Looking {
                            role.to_string()
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
                _ => {
                    if let Some(note) = s.note()
                        && self.in_window(e.at_us)
                        && note.client.is_none_or(|c| self.full || self.involved(c))
                    {
                        items.push(Item::Note {
                            lane: l,
                            at_us: e.at_us,
                            text: note.text,
                            style: if note.bad { Style::Bad } else { Style::Role },
                        });
                    }
                }
            }
        }
        for (l, lease) in open_lease {
            self.close(items, l, lease, self.end_us);
        }
    }

    /// A lease's bar, ended at `at` or when its TTL ran out, whichever came first (the
    /// TTL's end noted when it came first).
    fn close(&self, items: &mut Vec<Item>, l: usize, lease: Lease, at: u64) {
        let end = lease.deadline.map_or(at, |d| d.min(at));
        if lease.from <= self.end_us && end >= self.start_us {
            items.push(Item::Bar {
                lane: l,
                from_us: lease.from.max(self.start_us),
                to_us: end.min(self.end_us),
                label: format!("lease of {}", lease.owner),
                style: Style::Lease,
            });
        }
        if end < at && self.in_window(end) {
            items.push(Item::Note {
                lane: l,
                at_us: end,
                text: format!("TTL of {} runs out", lease.owner),
                style: Style::Remove,
            });
        }
    }
}
