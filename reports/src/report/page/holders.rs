//! The holder timeline of a failing cell's first violation: believed holds, the
//! server's record of the lock, the faults, and the overlaps.

use plotters::style::RGBColor;
use scenarios::checkers::{self, model};
use sim::history::{EventKind, History, ServerEvent};

use crate::plot::{self, Bar};

/// The holder timeline of a run around its first violation: a row of the faults in the
/// window (named with their host), a row per client the diagram shows (bars: believed
/// holds), a row per server (bars: who the key's value belonged to, by the server's own
/// record), every overlap of two shown clients' holds in red, and the violation as a
/// line.
pub(super) fn holder_timeline(
    h: &History,
    d: &crate::diagram::Diagram,
    evidence: &checkers::Evidence,
    title: &str,
) -> plot::Timeline {
    let ms = |us: u64| us as f64 / 1_000.0;
    let clients: Vec<String> = d
        .lanes
        .iter()
        .filter(|l| l.starts_with("client"))
        .cloned()
        .collect();
    let servers: Vec<String> = d
        .lanes
        .iter()
        .filter(|l| l.starts_with("redis"))
        .cloned()
        .collect();
    // Row 0: the faults in the window; then a row per client; then a row per server.
    let mut rows: Vec<String> = vec!["faults".to_string()];
    rows.extend(clients.iter().map(|c| format!("{c} believes")));
    rows.extend(servers.iter().map(|s| format!("{s} key holder")));
    let color_of = |host: &str| {
        let i = clients
            .iter()
            .position(|c| c == host)
            .unwrap_or(clients.len());
        plot::COLORS[i % plot::COLORS.len()]
    };
    let mut bars = Vec::new();
    let holds = model::holds(h).unwrap_or_default();
    for hold in &holds {
        if let Some(row) = clients.iter().position(|c| *c == hold.host) {
            bars.push(Bar {
                row: row + 1,
                from_ms: ms(hold.start_us),
                to_ms: ms(hold.end_us),
                color: color_of(&hold.host),
                alpha: 0.8,
                label: String::new(),
            });
        }
    }
    // The server's record: from a write of the key to its removal or the next write.
    let key = evidence_key(h);
    for (si, server) in servers.iter().enumerate() {
        let row = 1 + clients.len() + si;
        let mut open: Option<(u64, String)> = None;
        for e in &h.events {
            if &e.host != server {
                continue;
            }
            let EventKind::Server(ev) = &e.kind else {
                continue;
            };
            match ev {
                ServerEvent::Written { by, key: k, .. } if Some(k) == key.as_ref() => {
                    if let Some((from, who)) = open.take() {
                        bars.push(record_bar(row, ms(from), ms(e.at_us), &who, color_of(&who)));
                    }
                    open = Some((e.at_us, by.clone()));
                }
                ServerEvent::Removed { key: k, .. } if Some(k) == key.as_ref() => {
                    if let Some((from, who)) = open.take() {
                        bars.push(record_bar(row, ms(from), ms(e.at_us), &who, color_of(&who)));
                    }
                }
                _ => {}
            }
        }
        if let Some((from, who)) = open {
            bars.push(record_bar(
                row,
                ms(from),
                ms(h.end_us),
                &who,
                color_of(&who),
            ));
        }
    }
    // Faults in the window, on the faults row, named with their host.
    for w in model::fault_windows(h) {
        if w.end_us < d.start_us || w.start_us > d.end_us {
            continue;
        }
        let kind = h
            .plan
            .faults
            .get(w.fault)
            .map_or("fault", |f| fault_name(&f.kind));
        bars.push(Bar {
            row: 0,
            from_ms: ms(w.start_us),
            to_ms: ms(w.end_us.max(w.start_us + 2_000)),
            color: RGBColor(90, 90, 90),
            alpha: 0.35,
            label: format!("{kind} {}", w.host),
        });
    }
    // Overlaps of two shown clients' holds, on both rows.
    let shown: Vec<&model::Hold> = holds.iter().filter(|h| clients.contains(&h.host)).collect();
    for (i, a) in shown.iter().enumerate() {
        for b in &shown[i + 1..] {
            if a.host == b.host {
                continue;
            }
            let (from, to) = (a.start_us.max(b.start_us), a.end_us.min(b.end_us));
            if from >= to {
                continue;
            }
            for host in [&a.host, &b.host] {
                if let Some(row) = clients.iter().position(|c| c == host) {
                    bars.push(Bar {
                        row: row + 1,
                        from_ms: ms(from),
                        to_ms: ms(to),
                        color: RGBColor(220, 0, 0),
                        alpha: 0.55,
                        label: String::new(),
                    });
                }
            }
        }
    }
    plot::Timeline {
        title: format!("{title}: believed holds, the server's record, faults (red: overlap)"),
        rows,
        from_ms: ms(d.start_us),
        to_ms: ms(d.end_us),
        bars,
        marks: vec![(ms(evidence.at_us), RGBColor(200, 0, 0), "violation".into())],
    }
}

/// A fault kind's short name.
fn fault_name(k: &sim::faults::FaultKind) -> &'static str {
    use sim::faults::FaultKind::*;
    match k {
        Pause { .. } => "pause",
        PauseBeforeWrite { .. } => "pause before write",
        Crash { .. } => "crash",
        MachineCrash { .. } => "machine crash",
        Delay { .. } => "delay",
        DropPushes { .. } => "drop pub/sub",
        Partition { .. } => "partition",
        ClockJump { .. } => "clock jump",
        ClockDrift { .. } => "clock drift",
        ClockSlew { .. } => "clock slew",
        _ => "fault",
    }
}

fn record_bar(row: usize, from: f64, to: f64, who: &str, color: RGBColor) -> Bar {
    Bar {
        row,
        from_ms: from,
        to_ms: to,
        color,
        alpha: 0.45,
        label: who.to_string(),
    }
}

/// The lock key of a history (the key of its first acquire).
fn evidence_key(h: &History) -> Option<String> {
    h.ops()
        .filter(|(_, op)| op.f == sim::history::OpF::Acquire)
        .find_map(|(_, op)| op.key.clone())
}
