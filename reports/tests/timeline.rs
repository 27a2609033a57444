//! Text timelines.

mod common;

use reports::timeline;
use scenarios::checkers::{Checker, Ownership};

#[test]
fn every_event_kind_renders_as_one_readable_line() {
    let h = common::history();
    let text = timeline::render_all(&h);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), h.events.len());
    assert_eq!(lines[3], "   0.110000s client-1  acquire ok      owner=o1");
    assert_eq!(
        lines[2],
        "   0.110000s redis     wrote lock (owner=o1 by client-1)"
    );
    assert_eq!(
        lines[4],
        "   0.200000s client-1  >>> pause client-1 for 800 ms"
    );
    assert_eq!(lines[5], "   1.000000s client-1  <<< pause client-1 ends");
    assert_eq!(
        lines[7],
        "   1.250000s storage   write by client-1: read 10, wrote 9, found 10, accepted"
    );
    assert_eq!(
        lines[8],
        "   1.300000s redis     removed lock (owner=o4 by client-2, command)"
    );
    assert_eq!(lines[11], "   1.520000s client-5  acquire fail");
}

#[test]
fn the_evidence_window_marks_the_first_violating_event() {
    let h = common::history();
    let ev = Ownership
        .check(&h)
        .evidence()
        .cloned()
        .expect("client-2 removed client-4's lock");
    let text = timeline::render_evidence(&h, &ev, 2);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"   ... 6 earlier events"));
    assert_eq!(lines.last(), Some(&"   ... 1 later events"));
    assert_eq!(lines.len(), 2 + 5);
    assert!(
        lines[3].starts_with("!! 1.300000s redis     removed lock"),
        "{text}"
    );
    assert_eq!(lines.iter().filter(|l| l.starts_with("!!")).count(), 1);
}

#[test]
fn implicated_events_inside_the_window_are_marked_too() {
    let h = common::history();
    let text = timeline::render_window(&h, 6, 3, 0, &[3, 6]);
    assert!(text.contains("!  0.110000s client-1  acquire ok"), "{text}");
    assert!(
        text.contains("!! 1.203000s client-4  acquire ok      owner=o4"),
        "{text}"
    );
}
