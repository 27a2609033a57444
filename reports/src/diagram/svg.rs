//! The SVG rendering of a [`Diagram`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scenarios::checkers::fmt_s;

use super::{Diagram, Item, Style};

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
