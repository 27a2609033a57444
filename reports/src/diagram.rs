//! Sequence diagrams of a run: one lane per client, per Redis server and for the
//! storage; requests and replies as arrows at their true times (a reply held by a
//! delay or a pause slopes down from when the server sent it to when the client got
//! it); the server's lease of each lock as a bar on its lane; faults as shaded boxes;
//! each client's belief that it holds the lock as a bar beside its lane; the violation
//! as a red line across every lane.
//!
//! By default only what matters to the first violation is drawn: the hosts its
//! evidence names, the servers and storage they talked to, and the window from the
//! start of the holds and faults involved to the violation's last event. `full` draws
//! every host over the whole run.
//!
//! Time runs down the page. The scale is true time, except that rows closer than a
//! line of text are pushed apart (the order is always the true order); the time of
//! every row is printed in the left margin.
//!
//! Two renderings of one [`Diagram`]: SVG (self-contained, no scripts or fonts to
//! fetch) and Mermaid `sequenceDiagram` text (for a pull request or a wiki, where
//! Mermaid draws it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scenarios::checkers::{self, Evidence, Verdict, fmt_s, model};
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
    /// A connection dialled.
    Connect,
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
            Style::Connect => "connect",
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
    /// Lane names, left to right: clients, Redis servers, storage.
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
            && matches!(&e.kind, EventKind::Storage(s) if involved(match s {
                StorageEvent::Read { reader, .. } => reader,
                StorageEvent::Write { writer, .. } => writer,
            }))
    });
    let mut lanes: Vec<String> = clients.clone();
    lanes.extend(servers.iter().map(|s| s.to_string()));
    if servers.is_empty() {
        lanes.push("redis".to_string());
    }
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
        let (target, served_at) = match p.f {
            OpF::Acquire | OpF::Release => {
                // Where the server acted on it: its record of this client's write or
                // removal between the request and the reply.
                let until = p.completion_us.unwrap_or(history.end_us);
                let served = history.events.iter().find(|e| {
                    e.at_us >= p.invoke_us
                        && e.at_us <= until
                        && matches!(&e.kind, EventKind::Server(
                            ServerEvent::Written { by, key, .. }
                            | ServerEvent::Removed { by, key, .. }) if *by == p.host && *key == p.key)
                });
                (
                    served.and_then(|e| lane(&e.host)).unwrap_or(first_server),
                    served.map(|e| e.at_us),
                )
            }
            OpF::Read | OpF::Write => {
                let Some(s) = storage else { continue };
                let until = p.completion_us.unwrap_or(history.end_us);
                let served = history.events.iter().find(|e| {
                    e.at_us >= p.invoke_us
                        && e.at_us <= until
                        && matches!(&e.kind, EventKind::Storage(
                            StorageEvent::Read { reader: who, .. }
                            | StorageEvent::Write { writer: who, .. }) if *who == p.host)
                });
                (s, served.map(|e| e.at_us))
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
            items.push(Item::Bar {
                lane: l,
                from_us: w.start_us.max(start_us),
                to_us: w.end_us.min(end_us),
                label: detail,
                style: Style::Fault,
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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const LANE_W: u64 = 250;
const LEFT: u64 = 90;
const TOP: u64 = 70;
const ROW: u64 = 16;

/// Maps times to page heights: true time, with rows at least a line apart.
struct Rows {
    points: Vec<(u64, u64)>,
}

impl Rows {
    fn new(d: &Diagram) -> Rows {
        let mut times: BTreeSet<u64> = BTreeSet::new();
        times.insert(d.start_us);
        times.insert(d.end_us);
        for i in &d.items {
            match i {
                Item::Arrow { from_us, to_us, .. } | Item::Bar { from_us, to_us, .. } => {
                    times.insert(*from_us);
                    times.insert(*to_us);
                }
                Item::Note { at_us, .. } => {
                    times.insert(*at_us);
                }
            }
        }
        if let Some((t, _, _)) = &d.violation {
            times.insert(*t);
        }
        let span_ms = ((d.end_us - d.start_us) / 1000).max(1);
        // px per ms: a window of ~600 ms fills ~900 px; never below 0.2 px/ms.
        let scale = (900.0 / span_ms as f64).clamp(0.2, 6.0);
        let mut points = Vec::new();
        let (mut y, mut last) = (TOP as f64, d.start_us);
        for t in times {
            let true_gap = (t - last) as f64 / 1000.0 * scale;
            y += if points.is_empty() {
                0.0
            } else {
                true_gap.max(ROW as f64)
            };
            points.push((t, y as u64));
            last = t;
        }
        Rows { points }
    }

    fn y(&self, t: u64) -> u64 {
        match self.points.binary_search_by_key(&t, |p| p.0) {
            Ok(i) => self.points[i].1,
            Err(0) => self.points.first().map_or(TOP, |p| p.1),
            Err(i) if i >= self.points.len() => self.points.last().map_or(TOP, |p| p.1),
            Err(i) => {
                let (t0, y0) = self.points[i - 1];
                let (t1, y1) = self.points[i];
                y0 + (y1 - y0) * (t - t0) / (t1 - t0).max(1)
            }
        }
    }

    fn bottom(&self) -> u64 {
        self.points.last().map_or(TOP, |p| p.1)
    }
}

fn lane_x(l: usize) -> u64 {
    LEFT + LANE_W / 2 + l as u64 * LANE_W
}

/// The diagram as a self-contained SVG document.
pub fn svg(d: &Diagram) -> String {
    let rows = Rows::new(d);
    // Room on the right for the notes of the last lane.
    let width = LEFT + LANE_W * d.lanes.len() as u64 + 200;
    let height = rows.bottom() + 110;
    let width = width.max(1160);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">"##
    );
    s.push_str(
        r##"<style>
.lane-line{stroke:#999;stroke-dasharray:4 3}
.request{stroke:#333;fill:none}
.reply-ok{stroke:#1a7f37;fill:none}
.reply-fail{stroke:#888;fill:none}
.reply-info{stroke:#b58900;fill:none;stroke-dasharray:5 3}
.lease{fill:#4c8bf5;fill-opacity:0.35;stroke:#4c8bf5}
.belief{fill:#1a7f37;fill-opacity:0.35;stroke:#1a7f37}
.fault{fill:#d73a49;fill-opacity:0.12;stroke:#d73a49;stroke-dasharray:3 2}
.violation{stroke:#d73a49;stroke-width:2}
text.bad,text.violation{fill:#d73a49}
text.time{fill:#666}
</style>
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>
"##,
    );
    let _ = writeln!(
        s,
        r##"<rect width="{width}" height="{height}" fill="white"/><text x="10" y="20" font-size="13" font-weight="bold">{}</text>"##,
        esc(&d.title)
    );
    for (i, name) in d.lanes.iter().enumerate() {
        let x = lane_x(i);
        let _ = writeln!(
            s,
            r##"<g class="lane" data-lane="{n}"><rect x="{}" y="34" width="120" height="22" fill="#eef" stroke="#557"/><text x="{x}" y="49" text-anchor="middle" font-weight="bold">{n}</text><line class="lane-line" x1="{x}" y1="56" x2="{x}" y2="{}"/></g>"##,
            x - 60,
            rows.bottom() + 20,
            n = esc(name)
        );
    }
    // Bars first, so arrows and text draw over them.
    for item in &d.items {
        if let Item::Bar {
            lane,
            from_us,
            to_us,
            label,
            style,
        } = item
        {
            let (y0, y1) = (rows.y(*from_us), rows.y(*to_us).max(rows.y(*from_us) + 2));
            let x = lane_x(*lane);
            let (bx, bw) = match style {
                Style::Fault => (x - LANE_W / 2 + 6, LANE_W - 12),
                Style::Belief => (x - 14, 10),
                _ => (x + 4, 10),
            };
            let _ = writeln!(
                s,
                r##"<rect class="{}" x="{bx}" y="{y0}" width="{bw}" height="{}"><title>{}</title></rect>"##,
                style.class(),
                y1 - y0,
                esc(label)
            );
            if *style == Style::Fault {
                let _ = writeln!(
                    s,
                    r##"<text class="fault" x="{}" y="{}" fill="#d73a49">{}</text>"##,
                    bx + 4,
                    y0 + 11,
                    esc(&clip(label, 34))
                );
            }
        }
    }
    let mut labelled: BTreeSet<u64> = BTreeSet::new();
    // Notes on one lane at (nearly) the same time go one under the other.
    let mut note_floor: BTreeMap<usize, u64> = BTreeMap::new();
    for item in &d.items {
        match item {
            Item::Arrow {
                from,
                to,
                from_us,
                to_us,
                label,
                style,
            } => {
                let (x0, x1) = (lane_x(*from), lane_x(*to));
                let (y0, y1) = (rows.y(*from_us), rows.y(*to_us));
                let _ = writeln!(
                    s,
                    r##"<line class="{}" x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" marker-end="url(#arrow)"><title>{}</title></line>"##,
                    style.class(),
                    esc(label)
                );
                let (tx, anchor) = if x1 >= x0 {
                    (x0 + 16, "start")
                } else {
                    (x0 - 16, "end")
                };
                let _ = writeln!(
                    s,
                    r##"<text class="{}" x="{tx}" y="{}" text-anchor="{anchor}">{}</text>"##,
                    style.class(),
                    y0.saturating_sub(3),
                    esc(&clip(label, 30))
                );
                if labelled.insert(*from_us) {
                    time_label(&mut s, *from_us, y0);
                }
            }
            Item::Note {
                lane,
                at_us,
                text,
                style,
            } => {
                let y = rows.y(*at_us);
                let floor = note_floor.entry(*lane).or_insert(0);
                let ty = (y + 4).max(*floor + ROW - 4);
                *floor = ty;
                let _ = writeln!(
                    s,
                    r##"<text class="{}" x="{}" y="{ty}">{}<title>{}</title></text>"##,
                    style.class(),
                    lane_x(*lane) + 18,
                    esc(&clip(text, 32)),
                    esc(text)
                );
                if labelled.insert(*at_us) {
                    time_label(&mut s, *at_us, y);
                }
            }
            Item::Bar { .. } => {}
        }
    }
    let footer = rows.bottom() + 40;
    if let Some((t, checker, summary)) = &d.violation {
        let y = rows.y(*t);
        let label = format!("✗ {checker} violated (see below)");
        let _ = writeln!(
            s,
            r##"<g class="violation-mark"><line class="violation" x1="{LEFT}" y1="{y}" x2="{}" y2="{y}"/><rect x="{}" y="{}" width="{}" height="14" fill="white" stroke="#d73a49"/><text class="violation" x="{}" y="{}">{}</text><title>{}</title></g>"##,
            width - 10,
            width - 20 - 7 * label.chars().count() as u64,
            y.saturating_sub(7),
            7 * label.chars().count() as u64 + 8,
            width - 16 - 7 * label.chars().count() as u64,
            y + 4,
            esc(&label),
            esc(summary)
        );
        time_label(&mut s, *t, y);
        let per_line = ((width - 20) / 7) as usize;
        let text = format!("✗ {checker}: {summary}");
        let chars: Vec<char> = text.chars().collect();
        for (n, line) in chars.chunks(per_line.max(20)).take(3).enumerate() {
            let _ = writeln!(
                s,
                r##"<text class="violation" x="10" y="{}">{}</text>"##,
                footer + n as u64 * 14,
                esc(&line.iter().collect::<String>())
            );
        }
    }
    let _ = writeln!(
        s,
        r##"<g class="legend" transform="translate(10,{})"><rect class="belief" x="0" y="-9" width="10" height="10"/><text x="14" y="0">a client believes it holds the lock</text><rect class="lease" x="260" y="-9" width="10" height="10"/><text x="274" y="0">the server's lease (until its TTL runs out)</text><rect class="fault" x="600" y="-9" width="10" height="10"/><text x="614" y="0">a fault</text><text x="700" y="0">rows are true time, pushed apart where closer than a line</text></g>"##,
        footer + 50
    );
    s.push_str("</svg>\n");
    s
}

fn time_label(s: &mut String, t: u64, y: u64) {
    let _ = writeln!(
        s,
        r##"<text class="time" x="6" y="{}">{}</text>"##,
        y + 4,
        fmt_s(t)
    );
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Mermaid's text must not contain its own separators.
fn mm(s: &str) -> String {
    s.replace([';', '#'], ",")
}

/// The diagram as Mermaid `sequenceDiagram` text. Mermaid has no true time axis, so
/// every row starts with its time; beliefs are activations.
pub fn mermaid(d: &Diagram) -> String {
    let id = |l: usize| format!("L{l}");
    let mut s = String::from("sequenceDiagram\n");
    let _ = writeln!(s, "    title {}", mm(&d.title));
    for (i, name) in d.lanes.iter().enumerate() {
        let _ = writeln!(s, "    participant {} as {}", id(i), mm(name));
    }
    // Flatten to time-ordered rows: bars become a start and an end row.
    let mut rows: Vec<(u64, usize, String)> = Vec::new();
    for (n, item) in d.items.iter().enumerate() {
        match item {
            Item::Arrow {
                from,
                to,
                from_us,
                label,
                style,
                ..
            } => {
                let arrow = match style {
                    Style::Request => "->>",
                    Style::Info => "--x",
                    _ => "-->>",
                };
                rows.push((
                    *from_us,
                    n,
                    format!(
                        "{}{arrow}{}: {} {}",
                        id(*from),
                        id(*to),
                        fmt_s(*from_us),
                        mm(label)
                    ),
                ));
            }
            Item::Note {
                lane, at_us, text, ..
            } => rows.push((
                *at_us,
                n,
                format!(
                    "Note right of {}: {} {}",
                    id(*lane),
                    fmt_s(*at_us),
                    mm(text)
                ),
            )),
            Item::Bar {
                lane,
                from_us,
                to_us,
                label,
                style,
            } => match style {
                Style::Belief => {
                    rows.push((*from_us, n, format!("activate {}", id(*lane))));
                    rows.push((*to_us, n, format!("deactivate {}", id(*lane))));
                }
                _ => {
                    let what = if *style == Style::Fault {
                        "fault"
                    } else {
                        "lease"
                    };
                    rows.push((
                        *from_us,
                        n,
                        format!(
                            "Note over {}: {} {what} begins: {}",
                            id(*lane),
                            fmt_s(*from_us),
                            mm(label)
                        ),
                    ));
                    rows.push((
                        *to_us,
                        n,
                        format!("Note over {}: {} {what} ends", id(*lane), fmt_s(*to_us)),
                    ));
                }
            },
        }
    }
    if let Some((t, checker, summary)) = &d.violation {
        let all = if d.lanes.len() > 1 {
            format!("{},{}", id(0), id(d.lanes.len() - 1))
        } else {
            id(0)
        };
        rows.push((
            *t,
            usize::MAX,
            format!(
                "Note over {all}: {} ✗ {} {}",
                fmt_s(*t),
                mm(checker),
                mm(summary)
            ),
        ));
    }
    rows.sort_by_key(|r| (r.0, r.1));
    for (_, _, line) in rows {
        let _ = writeln!(s, "    {line}");
    }
    s
}

/// Whether `text` is a diagram this module wrote (so writing over it loses nothing).
pub fn is_ours(text: &str) -> bool {
    text.starts_with("sequenceDiagram\n")
        || (text.starts_with("<svg xmlns") && text.contains(r##"<g class="lane""##))
}
