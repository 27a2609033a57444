//! The Mermaid `sequenceDiagram` rendering of a [`Diagram`].

use std::fmt::Write as _;

use scenarios::checkers::fmt_s;

use super::{Diagram, Item, Style};

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
                    let what = if matches!(style, Style::Fault | Style::Delay) {
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
