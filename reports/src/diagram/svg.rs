//! The SVG rendering of a [`Diagram`].
//!
//! Layout: every thing drawn at a time (an arrow's start with its label, an arrow's
//! head, a note, a fault's label, the violation's mark) is a row. Rows go down the page
//! in true order, at true time where there is room; a row whose text (measured with the
//! plots' font, `measure.rs`) would touch any text or arrowhead already placed is pushed
//! down, with every row after it, until it touches none. Labels longer than the room
//! beside their arrow or lane wrap to two lines, and are cut with `…` past that; a cut
//! label carries its full text in a `<title>` (a browser's tooltip).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use scenarios::checkers::fmt_s;

use super::measure::{FONT_FAMILY, SIZE, TextBox, fit, line_height, width as text_width};
use super::{Diagram, Item, Style};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const LANE_W: f64 = 250.0;
const LEFT: f64 = 90.0;
const TOP: f64 = 70.0;
/// The least room between rows at different times.
const GAP: f64 = 4.0;
/// Lines a label may wrap to before it is cut.
const LINES: usize = 2;
/// Half the size of an arrowhead's box.
const HEAD: f64 = 6.0;

fn lane_x(l: usize) -> f64 {
    LEFT + LANE_W / 2.0 + l as f64 * LANE_W
}

/// One line of text, placed relative to its row.
struct Line {
    x: f64,
    dy: f64,
    anchor: &'static str,
    text: String,
}

/// A label: its lines, its class, and the full text when the lines are not all of it.
struct Label {
    class: &'static str,
    lines: Vec<Line>,
    title: Option<String>,
}

impl Label {
    fn boxes(&self) -> impl Iterator<Item = TextBox> + '_ {
        self.lines
            .iter()
            .map(|l| TextBox::of(l.x, l.dy, l.anchor, &l.text, SIZE, false))
    }
}

/// A row: a time, its place among rows at that time, what is drawn on it.
struct Row {
    t: u64,
    order: (u64, u8, usize),
    labels: Vec<Label>,
    /// Other things text must keep clear of (arrowheads), relative to the row.
    marks: Vec<TextBox>,
}

impl Row {
    fn new(t: u64, phase: u8, seq: usize) -> Row {
        Row {
            t,
            order: (t, phase, seq),
            labels: Vec::new(),
            marks: Vec::new(),
        }
    }

    fn boxes(&self) -> Vec<TextBox> {
        self.labels
            .iter()
            .flat_map(Label::boxes)
            .chain(self.marks.iter().copied())
            .collect()
    }
}

/// `text` fitted into `room` px starting at `x` with `anchor`, its first line's baseline
/// at `dy` and the others under it (`up`: the last line's baseline at `dy`, the others
/// above it).
fn label(
    class: &'static str,
    text: &str,
    room: f64,
    x: f64,
    anchor: &'static str,
    dy: f64,
    up: bool,
) -> Label {
    let (lines, cut) = fit(text, room, LINES, SIZE);
    let lh = line_height(SIZE);
    let n = lines.len();
    let lines = lines
        .into_iter()
        .enumerate()
        .map(|(j, text)| Line {
            x,
            dy: if up {
                dy - lh * (n - 1 - j) as f64
            } else {
                dy + lh * j as f64
            },
            anchor,
            text,
        })
        .collect();
    Label {
        class,
        lines,
        title: cut.then(|| text.to_string()),
    }
}

/// Where each row went, and the page height of any time (rows at that time, or
/// between the rows around it).
struct Rows {
    points: Vec<(u64, f64)>,
}

impl Rows {
    fn y(&self, t: u64) -> f64 {
        let i = self.points.partition_point(|p| p.0 < t);
        match (i.checked_sub(1).map(|j| self.points[j]), self.points.get(i)) {
            (_, Some(&(t1, y1))) if t1 == t => y1,
            (Some((t0, y0)), Some(&(t1, y1))) => {
                y0 + (y1 - y0) * (t - t0) as f64 / (t1 - t0).max(1) as f64
            }
            (Some((_, y0)), None) => y0,
            (None, Some(&(_, y1))) => y1,
            (None, None) => TOP,
        }
    }

    fn bottom(&self) -> f64 {
        self.points.iter().map(|p| p.1).fold(TOP, f64::max)
    }
}

/// The diagram as a self-contained SVG document.
pub fn svg(d: &Diagram) -> String {
    let n_lanes = d.lanes.len();
    let width = (LEFT + LANE_W * n_lanes as f64 + 200.0).max(1160.0);
    let lh = line_height(SIZE);
    let (rows, at, mark) = rows_of(d, width);
    let (order, ys, placed) = place(d, &rows, width);
    let points = Rows {
        points: order.iter().map(|&r| (rows[r].t, ys[r])).collect(),
    };
    let bottom = placed.iter().map(|b| b.y1).fold(points.bottom(), f64::max);
    let footer = bottom + 40.0;
    let footer_lines: Vec<String> = d
        .violation
        .as_ref()
        .map(|(_, checker, summary)| {
            fit(&format!("✗ {checker}: {summary}"), width - 20.0, 3, SIZE).0
        })
        .unwrap_or_default();
    let legend_y = footer + footer_lines.len() as f64 * lh + 20.0;
    let height = legend_y + 20.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}" font-size="{SIZE}">"##
    );
    s.push_str(STYLE);
    lanes(&mut s, d, width, height, bottom);
    bars(&mut s, d, &points);
    arrows(&mut s, d, &at, &ys);
    labels(&mut s, &rows, &order, &ys);
    if let (Some((_, _, summary)), Some(mark)) = (&d.violation, mark) {
        let y = ys[mark.0];
        violation(&mut s, summary, mark, y, width);
        for (n, line) in footer_lines.iter().enumerate() {
            let _ = writeln!(
                s,
                r##"<text class="violation" x="10" y="{}">{}</text>"##,
                footer + n as f64 * lh,
                esc(line)
            );
        }
    }
    legend(&mut s, legend_y);
    s.push_str("</g>\n</svg>\n");
    s
}

/// The violation's mark: its row, its text and the text's width.
type Mark = (usize, String, f64);

/// The rows of the diagram's items (per item: its row, and its arrowhead's row) and
/// of the violation's mark.
fn rows_of(d: &Diagram, width: f64) -> (Vec<Row>, Vec<(usize, usize)>, Option<Mark>) {
    let n_lanes = d.lanes.len();
    let mut rows: Vec<Row> = vec![
        Row::new(d.start_us, 0, 0),
        Row::new(d.end_us.max(d.start_us), 3, 0),
    ];
    // Per item: its row, and its arrowhead's row.
    let mut at: Vec<(usize, usize)> = vec![(usize::MAX, usize::MAX); d.items.len()];
    let mut timed: BTreeSet<u64> = BTreeSet::new();
    let time_label = |row: &mut Row, timed: &mut BTreeSet<u64>| {
        if timed.insert(row.t) {
            row.labels.push(Label {
                class: "time",
                lines: vec![Line {
                    x: 6.0,
                    dy: 4.0,
                    anchor: "start",
                    text: fmt_s(row.t),
                }],
                title: None,
            });
        }
    };
    for (i, item) in d.items.iter().enumerate() {
        match item {
            Item::Arrow {
                from,
                to,
                from_us,
                to_us,
                label: text,
                style,
            } => {
                let (x0, x1) = (lane_x(*from), lane_x(*to));
                let room = ((x1 - x0).abs() - 16.0 - 2.0 * HEAD - 4.0).max(80.0);
                let (tx, anchor) = if x1 >= x0 {
                    (x0 + 16.0, "start")
                } else {
                    (x0 - 16.0, "end")
                };
                let mut start = Row::new(*from_us, 1, i);
                start
                    .labels
                    .push(label(style.class(), text, room, tx, anchor, -3.0, true));
                time_label(&mut start, &mut timed);
                let mut end = Row::new((*to_us).max(*from_us), 2, i);
                end.marks
                    .push(TextBox::rect(x1 - HEAD, -HEAD, x1 + HEAD, HEAD));
                at[i] = (rows.len(), rows.len() + 1);
                rows.push(start);
                rows.push(end);
            }
            Item::Note {
                lane,
                at_us,
                text,
                style,
            } => {
                let x = lane_x(*lane) + 18.0;
                let room = if *lane + 1 == n_lanes {
                    width - x - 10.0
                } else {
                    LANE_W - 30.0
                };
                let mut row = Row::new(*at_us, 1, i);
                row.labels
                    .push(label(style.class(), text, room, x, "start", 4.0, false));
                time_label(&mut row, &mut timed);
                at[i] = (rows.len(), usize::MAX);
                rows.push(row);
            }
            Item::Bar {
                from_us,
                label: text,
                style: style @ (Style::Fault | Style::Delay),
                lane,
                ..
            } => {
                // A fault's label inside its band's top; a delay's beside its strip.
                let (x, room) = if *style == Style::Delay {
                    (lane_x(*lane) + 12.0, LANE_W - 30.0)
                } else {
                    (lane_x(*lane) - LANE_W / 2.0 + 10.0, LANE_W - 20.0)
                };
                let mut row = Row::new(*from_us, 1, i);
                row.labels
                    .push(label("fault", text, room, x, "start", 11.0, false));
                at[i] = (rows.len(), usize::MAX);
                rows.push(row);
            }
            Item::Bar { .. } => {}
        }
    }
    let mark = d.violation.as_ref().map(|(t, checker, _)| {
        let text = format!("✗ {checker} violated (see below)");
        let w = text_width(&text, SIZE, false);
        // Its text (drawn at `width - 16`, baseline + 4) lies inside this box.
        let mut row = Row::new(*t, 1, d.items.len());
        row.marks
            .push(TextBox::rect(width - 20.0 - w, -7.0, width - 10.0, 7.0));
        // Its line runs across every lane: no text on it.
        row.marks.push(TextBox::rect(LEFT, -1.5, width - 10.0, 1.5));
        time_label(&mut row, &mut timed);
        rows.push(row);
        (rows.len() - 1, text, w)
    });

    (rows, at, mark)
}

/// Places the rows: in order, each at its true distance below the last (at least
/// `GAP` apart when their times differ), then pushed down past whatever it touches.
/// Returns the rows in order, each row's y, and the boxes placed.
fn place(d: &Diagram, rows: &[Row], width: f64) -> (Vec<usize>, Vec<f64>, Vec<TextBox>) {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&r| rows[r].order);
    let span_ms = ((d.end_us.saturating_sub(d.start_us)) / 1000).max(1);
    // px per ms: a window of ~600 ms fills ~900 px; never below 0.2 px/ms.
    let scale = (900.0 / span_ms as f64).clamp(0.2, 6.0);
    let mut placed: Vec<TextBox> = vec![TextBox::rect(0.0, 0.0, width, 56.0)];
    let mut ys = vec![TOP; rows.len()];
    let mut prev: Option<(u64, f64)> = None;
    for &r in &order {
        let row = &rows[r];
        let mut y = match prev {
            None => TOP,
            Some((t, py)) if t == row.t => py,
            Some((t, py)) => py + ((row.t - t) as f64 / 1000.0 * scale).max(GAP),
        }
        .ceil();
        let boxes = row.boxes();
        loop {
            let push = boxes
                .iter()
                .flat_map(|b| {
                    let b = b.down(y);
                    placed
                        .iter()
                        .filter(move |p| b.intersects(p))
                        .map(move |p| p.y1 - b.y0)
                })
                .fold(0.0, f64::max);
            if push <= 0.0 {
                break;
            }
            y = (y + push + 0.5).ceil();
        }
        placed.extend(boxes.iter().map(|b| b.down(y)));
        ys[r] = y;
        prev = Some((row.t, y));
    }
    (order, ys, placed)
}

/// The page's style sheet and arrowhead.
const STYLE: &str = r##"<style>
.lane-line{stroke:#999;stroke-dasharray:4 3}
line.request{stroke:#333}
line.reply-ok{stroke:#1a7f37}
line.reply-fail{stroke:#888}
line.reply-info{stroke:#b58900;stroke-dasharray:5 3}
text.reply-ok{fill:#1a7f37}
text.reply-fail{fill:#777}
text.reply-info{fill:#8a6a00}
.lease{fill:#4c8bf5;fill-opacity:0.35;stroke:#4c8bf5}
.belief{fill:#1a7f37;fill-opacity:0.35;stroke:#1a7f37}
rect.fault{fill:#d73a49;fill-opacity:0.12;stroke:#d73a49;stroke-dasharray:3 2}
rect.delay{fill:#f66a0a;fill-opacity:0.15;stroke:#f66a0a;stroke-dasharray:3 2}
text.bad,text.violation,text.fault{fill:#d73a49}
line.violation{stroke:#d73a49;stroke-width:2}
text.time{fill:#666}
text.role{fill:#6f42c1}
</style>
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>
"##;

/// The title and the lanes.
fn lanes(s: &mut String, d: &Diagram, width: f64, height: f64, bottom: f64) {
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
            x - 60.0,
            bottom + 20.0,
            n = esc(name)
        );
    }
}

/// The bars, drawn first, so arrows and text draw over them.
fn bars(s: &mut String, d: &Diagram, points: &Rows) {
    for item in &d.items {
        if let Item::Bar {
            lane,
            from_us,
            to_us,
            label,
            style,
        } = item
        {
            let y0 = points.y(*from_us);
            let y1 = points.y(*to_us).max(y0 + 2.0);
            let x = lane_x(*lane);
            let (bx, bw) = match style {
                Style::Fault => (x - LANE_W / 2.0 + 6.0, LANE_W - 12.0),
                Style::Delay => (x - 8.0, 16.0),
                Style::Belief => (x - 14.0, 10.0),
                _ => (x + 4.0, 10.0),
            };
            let _ = writeln!(
                s,
                r##"<rect class="{}" x="{bx}" y="{y0}" width="{bw}" height="{}"><title>{}</title></rect>"##,
                style.class(),
                y1 - y0,
                esc(label)
            );
        }
    }
}

/// The arrows, from their start's row to their head's.
fn arrows(s: &mut String, d: &Diagram, at: &[(usize, usize)], ys: &[f64]) {
    for (i, item) in d.items.iter().enumerate() {
        if let Item::Arrow {
            from,
            to,
            label,
            style,
            ..
        } = item
        {
            let (x0, x1) = (lane_x(*from), lane_x(*to));
            let (y0, y1) = (ys[at[i].0], ys[at[i].1]);
            let _ = writeln!(
                s,
                r##"<line class="{}" x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" marker-end="url(#arrow)"><title>{}</title></line>"##,
                style.class(),
                esc(label)
            );
        }
    }
}

/// Every row's labels at its y.
fn labels(s: &mut String, rows: &[Row], order: &[usize], ys: &[f64]) {
    for &r in order {
        let y = ys[r];
        for l in &rows[r].labels {
            s.push_str(r##"<g class="label">"##);
            if let Some(t) = &l.title {
                let _ = write!(s, "<title>{}</title>", esc(t));
            }
            for line in &l.lines {
                let _ = write!(
                    s,
                    r##"<text class="{}" x="{}" y="{}" text-anchor="{}">{}</text>"##,
                    l.class,
                    line.x,
                    y + line.dy,
                    line.anchor,
                    esc(&line.text)
                );
            }
            s.push_str("</g>\n");
        }
    }
}

/// The violation's mark: a red line across every lane, its text at the right.
fn violation(s: &mut String, summary: &str, (_, text, w): Mark, y: f64, width: f64) {
    let _ = writeln!(
        s,
        r##"<g class="violation-mark"><line class="violation" x1="{LEFT}" y1="{y}" x2="{}" y2="{y}"/><rect x="{}" y="{}" width="{}" height="14" fill="white" stroke="#d73a49"/><text class="violation" x="{}" y="{}" text-anchor="end">{}</text><title>{}</title></g>"##,
        width - 10.0,
        width - 20.0 - w,
        y - 7.0,
        w + 10.0,
        width - 16.0,
        y + 4.0,
        esc(&text),
        esc(summary)
    );
}

/// The legend, each entry after the last.
fn legend(s: &mut String, legend_y: f64) {
    let mut x = 10.0;
    s.push_str(r##"<g class="legend">"##);
    for (class, text) in [
        (Some("belief"), "a client believes it holds the lock"),
        (Some("lease"), "the server's lease (until its TTL runs out)"),
        (Some("fault"), "a fault"),
        (Some("delay"), "messages to it delayed"),
        (
            None,
            "rows are true time, pushed apart where text would collide",
        ),
    ] {
        if let Some(c) = class {
            let _ = write!(
                s,
                r##"<rect class="{c}" x="{x}" y="{}" width="10" height="10"/>"##,
                legend_y - 9.0
            );
            x += 14.0;
        }
        let _ = write!(s, r##"<text x="{x}" y="{legend_y}">{}</text>"##, esc(text));
        x += text_width(text, SIZE, false) + 24.0;
    }
}
