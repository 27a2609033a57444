//! Replies delayed beyond the lease: the client believes a lock that already expired.

use crate::common;

use common::expect_invalid;

/// Single-master designs only: Redlock's per-master timeout (20-50 ms) turns a reply
/// delayed beyond the lease into "not acquired" on that master, so it never believes a
/// grant that came late (its own suite shows what does break it).
#[test]
fn every_expiring_design_gives_two_holders_when_replies_are_delayed_beyond_the_lease() {
    for d in lock_impl::DESIGNS
        .iter()
        .filter(|d| d.expires && d.masters == 1)
    {
        expect_invalid(d.name, "network-delay", "mutual-exclusion");
    }
}

#[test]
fn delayed_replies_past_the_response_timeout_leave_acquires_unknown() {
    use scenarios::sweep::sweep;
    use sim::history::{EventKind, OpF, Phase};
    let s = common::scenario("network-delay");
    let runs = sweep(
        &common::design("set-nx-px-lua"),
        &s,
        0..10,
        2,
        true,
        &|_, _| {},
    )
    .expect("runs complete");
    let unknown = runs
        .iter()
        .flat_map(|r| r.history.as_ref().expect("kept").events.iter())
        .filter(|e| {
            matches!(&e.kind, EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Info)
        })
        .count();
    assert!(
        unknown > 0,
        "no acquire timed out in 10 seeds of network-delay: the timeout is too long to matter"
    );
}
