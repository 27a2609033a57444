//! node-redlock 5.0.0-beta.2's `using()` (issue 26): an extension timer keeps the lock
//! through a critical section of ten leases, where plain `node-redlock` loses it; the
//! timer is a task of the holder's process, so a stop-the-world pause freezes it with
//! the holder, and past the expiration it aborts while the holder works on.

mod common;

use scenarios::sweep::{DesignSpec, config};
use sim::history::EventKind;

#[test]
fn the_extension_timer_keeps_a_long_hold_where_node_redlock_loses_it() {
    common::expect_never_invalid(
        "node-redlock-using",
        "long-work",
        &["mutual-exclusion"],
        3,
        0,
    );
    common::expect_invalid("node-redlock", "long-work", "mutual-exclusion");
    // The holds were extended: the history records the timer's extensions.
    let s = common::scenario("long-work");
    let h = sim::world::run(&config(
        &DesignSpec::builtin("node-redlock-using").expect("design"),
        &s,
        0,
    ))
    .expect("run completes");
    let extensions = h
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Renewed { .. }))
        .count();
    assert!(extensions > 10, "only {extensions} extensions recorded");
}

#[test]
fn a_pause_freezes_the_extension_timer_with_its_holder() {
    let run = common::expect_invalid("node-redlock-using", "gc-pause", "mutual-exclusion");
    let fault = run.fault_seen.as_deref().unwrap_or_default();
    assert!(fault.contains("paused"), "{fault}");
}
