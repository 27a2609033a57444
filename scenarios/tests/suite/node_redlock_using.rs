//! node-redlock 5.0.0-beta.2's `using()` (issue 26): an extension timer keeps the lock
//! through a critical section of ten leases, where plain `node-redlock` loses it; the
//! timer is a task of the holder's process, so a stop-the-world pause freezes it with
//! the holder, and past the expiration it aborts while the holder works on.

use crate::common;

use scenarios::sweep::{DesignSpec, config};
use sim::history::EventKind;

/// Two clients: a waiter rarely retries past the 200 ms duration, so its lock comes
/// back valid and the timer keeps it through ten leases. (With eight clients and
/// 300 ms waits, a lock won after retrying past its duration comes back expired by its
/// own account, node-redlock's `start` read once, and `using()` aborts its extension at
/// once: `long-work` is unsafe in most runs there, as docs/designs.md's row says.)
#[test]
fn the_extension_timer_keeps_a_long_hold_where_node_redlock_loses_it() {
    use scenarios::params::Param;
    let s = common::scenario("long-work")
        .with_param(Param::Clients, 2)
        .expect("clients is a knob of every scenario");
    let run = |design: &str, seed| {
        scenarios::sweep::run_seed(&common::design(design), &s, seed, false).expect("run")
    };
    for seed in 0..3 {
        let r = run("node-redlock-using", seed);
        assert!(
            r.verdict("mutual-exclusion").is_some_and(|v| v.is_valid()),
            "node-redlock-using seed {seed}: {:?}",
            r.verdicts
        );
    }
    assert!(
        (0..3).any(|seed| run("node-redlock", seed)
            .verdict("mutual-exclusion")
            .is_some_and(|v| v.is_invalid())),
        "plain node-redlock loses a ten-lease hold"
    );
    // The holds were extended: the history records the timer's extensions.
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
