//! Sequence diagrams: the SVG parses, has a lane per host involved, the fault, the
//! lease, the beliefs and the violation mark; the Mermaid text names every lane; both
//! are deterministic.

use reports::diagram;
use scenarios::shrink::{Budget, shrink};
use scenarios::sweep::DesignSpec;

fn shrunk_gc_pause() -> sim::history::History {
    let d = DesignSpec::builtin("set-nx-px-lua").unwrap();
    let s = scenarios::catalog::find("gc-pause").unwrap();
    let r = shrink(&d, &s, 0, None, Budget::default(), &|_, _| {}).expect("seed 0 fails");
    let mut cfg = scenarios::sweep::config(&d, &s, 0);
    cfg.workload = r.minimal.workload;
    cfg.plan = r.minimal.plan;
    sim::world::run(&cfg).expect("runs")
}

#[test]
fn the_svg_of_a_minimal_gc_pause_failure_shows_every_lane_the_pause_the_lease_and_the_violation() {
    let h = shrunk_gc_pause();
    let d = diagram::of_history(&h, false);
    let svg = diagram::svg(&d);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let lanes: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .filter_map(|n| n.attribute("data-lane"))
        .collect();
    assert_eq!(
        lanes,
        ["client-1", "client-2", "redis", "storage"],
        "{lanes:?}"
    );
    let count = |class: &str| {
        doc.descendants()
            .filter(|n| n.tag_name().name() == "rect" && n.attribute("class") == Some(class))
            .count()
    };
    assert!(count("fault") >= 2, "the pause and the legend's swatch");
    assert!(count("lease") >= 2 && count("belief") >= 2);
    let mark = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("violation-mark"))
        .expect("the violation is marked");
    assert!(
        mark.descendants()
            .any(|n| n.text().is_some_and(|t| t.contains("mutual-exclusion"))),
        "the mark names the checker"
    );
    // The pause crosses the end of the paused client's lease: its lease bar on the
    // server's lane ends inside the pause's box.
    let host = scenarios::checkers::model::fault_windows(&h)
        .first()
        .map(|w| w.host.clone())
        .expect("the pause ran");
    let spans = |class: &str, title_has: &str| -> Vec<(u64, u64)> {
        doc.descendants()
            .filter(|n| n.tag_name().name() == "rect" && n.attribute("class") == Some(class))
            .filter(|n| {
                n.descendants()
                    .any(|t| t.text().is_some_and(|t| t.contains(title_has)))
            })
            .map(|n| {
                let y: u64 = n.attribute("y").unwrap().parse().unwrap();
                let h: u64 = n.attribute("height").unwrap().parse().unwrap();
                (y, y + h)
            })
            .collect()
    };
    let pause = spans("fault", "pause");
    let (p0, p1) = *pause.first().expect("a pause box");
    let leases = spans("lease", &format!("lease of {host}-"));
    assert!(
        leases.iter().any(|(_, end)| p0 < *end && *end < p1),
        "no lease of {host} ends inside its pause {p0}..{p1}: {leases:?}"
    );
    assert!(
        svg.contains("TTL of") && svg.contains("runs out"),
        "the lease's end is drawn where its TTL ran out"
    );
    assert_eq!(
        svg,
        diagram::svg(&diagram::of_history(&h, false)),
        "deterministic"
    );
}

#[test]
fn the_mermaid_text_names_every_lane_and_the_violation() {
    let h = shrunk_gc_pause();
    let d = diagram::of_history(&h, false);
    let text = diagram::mermaid(&d);
    assert!(text.starts_with("sequenceDiagram\n"));
    for lane in &d.lanes {
        assert!(
            text.contains(&format!(" as {lane}\n")),
            "{lane} missing:\n{text}"
        );
    }
    assert!(text.contains("✗ mutual-exclusion"), "{text}");
    assert!(diagram::is_ours(&text));
    // Activations balance, or Mermaid refuses to draw.
    let act = text.matches("    activate ").count();
    let deact = text.matches("    deactivate ").count();
    assert_eq!(act, deact, "{text}");
}

// ---- No label collides ----

use reports::diagram::measure::{SIZE, TextBox};

fn history(design: &str, scenario: &str, seed: u64) -> sim::history::History {
    let d = DesignSpec::builtin(design).unwrap();
    let s = scenarios::catalog::find(scenario).unwrap();
    sim::world::run(&scenarios::sweep::config(&d, &s, seed)).expect("runs")
}

/// The text of a `<text>` element, its `<title>` aside.
fn own_text(n: roxmltree::Node) -> String {
    n.descendants()
        .filter(|t| t.is_text())
        .filter(|t| !t.ancestors().any(|a| a.tag_name().name() == "title"))
        .filter_map(|t| t.text())
        .collect()
}

fn inherited<'a>(n: roxmltree::Node<'a, 'a>, attr: &str) -> Option<&'a str> {
    n.ancestors().find_map(|a| a.attribute(attr))
}

/// Every text's box on the page, measured the way the layout measures it.
fn text_boxes(doc: &roxmltree::Document) -> Vec<(TextBox, String)> {
    doc.descendants()
        .filter(|n| n.tag_name().name() == "text")
        .map(|n| {
            let num = |a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
            let size = inherited(n, "font-size").map_or(SIZE, |s| s.parse().unwrap());
            let bold = inherited(n, "font-weight") == Some("bold");
            let anchor = n.attribute("text-anchor").unwrap_or("start");
            let text = own_text(n);
            (
                TextBox::of(num("x"), num("y"), anchor, &text, size, bold),
                text,
            )
        })
        .collect()
}

/// Asserts no two texts, and no text and arrowhead, of `d`'s SVG overlap, and that
/// every label's full text is on the page: drawn whole, or in the `<title>` of a label
/// cut short.
fn assert_clean(name: &str, d: &diagram::Diagram) {
    let svg = diagram::svg(d);
    std::fs::write(
        std::env::temp_dir().join(format!("locksim-diagram-{name}.svg")),
        &svg,
    )
    .unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let boxes = text_boxes(&doc);
    assert!(boxes.len() > 20, "{name}: only {} texts", boxes.len());
    for (i, (a, ta)) in boxes.iter().enumerate() {
        for (b, tb) in &boxes[i + 1..] {
            assert!(
                !a.intersects(b),
                "{name}: {ta:?} {a:?} overlaps {tb:?} {b:?}"
            );
        }
    }
    let heads: Vec<TextBox> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "line" && n.attribute("marker-end").is_some())
        .map(|n| {
            let num = |a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
            let (x, y) = (num("x2"), num("y2"));
            TextBox::rect(x - 4.0, y - 4.0, x + 4.0, y + 4.0)
        })
        .collect();
    for (a, ta) in &boxes {
        for h in &heads {
            assert!(
                !a.intersects(h),
                "{name}: {ta:?} {a:?} overlaps an arrowhead {h:?}"
            );
        }
    }
    // Each label: its lines joined, and its tooltip.
    let labels: Vec<(String, Option<String>)> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("label"))
        .map(|g| {
            let lines: Vec<String> = g
                .children()
                .filter(|n| n.tag_name().name() == "text")
                .map(own_text)
                .collect();
            let title = g
                .children()
                .find(|n| n.tag_name().name() == "title")
                .map(|t| t.text().unwrap_or_default().to_string());
            (lines.join(" "), title)
        })
        .collect();
    for (shown, title) in &labels {
        if let Some(cut) = shown.strip_suffix('…') {
            let full = title
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: {shown:?} is cut and has no tooltip"));
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            assert!(
                squash(full).starts_with(&squash(cut)),
                "{name}: the tooltip {full:?} is not the whole of {shown:?}"
            );
        }
    }
    for item in &d.items {
        let text = match item {
            diagram::Item::Arrow { label, .. } => label,
            diagram::Item::Note { text, .. } => text,
            diagram::Item::Bar {
                label,
                style: diagram::Style::Fault | diagram::Style::Delay,
                ..
            } => label,
            diagram::Item::Bar { .. } => continue,
        };
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        assert!(
            labels
                .iter()
                .any(|(shown, title)| squash(shown) == squash(text)
                    || title.as_deref() == Some(text)),
            "{name}: {text:?} is neither drawn whole nor in a tooltip"
        );
    }
}

#[test]
fn the_redis_failover_diagram_has_no_two_labels_overlapping_and_a_tooltip_on_every_cut_label() {
    // The first failing seed (seed 1 since the Sentinels' rhythm has its own phase).
    let (h, d) = (0..10)
        .map(|seed| {
            let h = history("set-nx-px-lua", "failover", seed);
            let d = diagram::of_history(&h, false);
            (h, d)
        })
        .find(|(_, d)| d.violation.is_some())
        .expect("a failover among seeds 0..10 fails");
    assert_clean("failover", &d);
    assert_clean("failover-full", &diagram::of_history(&h, true));
}

/// The `role` notes' texts (promotions, elections, expiries, Sentinel decisions).
fn role_notes(d: &diagram::Diagram) -> Vec<(String, String)> {
    d.items
        .iter()
        .filter_map(|i| match i {
            diagram::Item::Note {
                lane,
                text,
                style: diagram::Style::Role,
                ..
            } => Some((d.lanes[*lane].clone(), text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_redis_failover_diagram_draws_the_promotion_on_the_replica_and_the_sentinel_that_decided_it()
{
    let h = history("set-nx-px-lua", "failover", 0);
    let d = diagram::of_history(&h, false);
    let roles = role_notes(&d);
    assert!(
        roles
            .iter()
            .any(|(lane, text)| lane == "redis-2" && text == "becomes master"),
        "{roles:?}"
    );
    assert!(
        roles
            .iter()
            .any(|(lane, text)| lane.starts_with("sentinel") && text.starts_with("+switch-master")),
        "{roles:?}"
    );
    // The replica's lag (a delay of what reaches it) is a strip along its lane, not a
    // band over its width.
    let svg = diagram::svg(&d);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let strips: Vec<f64> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "rect" && n.attribute("class") == Some("delay"))
        .filter(|n| n.children().any(|t| t.tag_name().name() == "title"))
        .map(|n| n.attribute("width").unwrap().parse().unwrap())
        .collect();
    assert!(
        !strips.is_empty() && strips.iter().all(|w| *w <= 20.0),
        "{strips:?}"
    );
}

#[test]
fn the_zookeeper_session_expiry_diagram_has_no_two_labels_overlapping_and_draws_the_expiry() {
    let h = history("zk-curator", "gc-pause", 0);
    let d = diagram::of_history(&h, false);
    let roles = role_notes(&d);
    assert!(
        roles
            .iter()
            .any(|(lane, text)| lane.starts_with("zk") && text.contains(" expired")),
        "{roles:?}"
    );
    assert_clean("zk-gc-pause", &d);
}

#[test]
fn the_mongodb_rollback_diagram_has_no_two_labels_overlapping_and_draws_the_election() {
    let h = history("mongo-find-and-modify", "mongo-failover", 0);
    let d = diagram::of_history(&h, false);
    assert!(d.violation.is_some(), "mongo-failover seed 0 fails");
    let roles = role_notes(&d);
    assert!(
        roles
            .iter()
            .any(|(lane, text)| lane.starts_with("mongo") && text.starts_with("becomes primary")),
        "{roles:?}"
    );
    assert_clean("mongo-failover", &d);
    let full = diagram::of_history(&h, true);
    assert!(
        full.items.iter().any(
            |i| matches!(i, diagram::Item::Note { text, .. } if text.starts_with("rolls back"))
        ),
        "the old primary's rollback is drawn"
    );
    assert_clean("mongo-failover-full", &full);
}
