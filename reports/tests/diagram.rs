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
