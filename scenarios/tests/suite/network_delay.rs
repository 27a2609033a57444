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

/// The fault is a grant the client hears of late or never, whatever the client then
/// does: an etcd waiter whose wait runs out before the delayed watch event reaches it
/// gives up (its acquire fails and it deletes its key), and that run met the fault and
/// stayed safe. The probe once asked for an acquire that ended ok or unknown, so the etcd
/// designs never met this scenario's fault (`n` in every run).
#[test]
fn a_waiter_that_gives_up_before_its_delayed_grant_arrives_met_the_fault() {
    use scenarios::checkers::Safety;
    use scenarios::sweep::sweep;
    let s = common::scenario("network-delay");
    let runs = sweep(
        &common::design("etcd-mutex"),
        &s,
        0..4,
        2,
        false,
        &|_, _| {},
    )
    .expect("runs complete");
    let mut gave_up = 0;
    for r in &runs {
        let seen = r
            .fault_seen
            .as_deref()
            .unwrap_or_else(|| panic!("seed {}: the delayed grant not seen", r.seed));
        if seen.contains("gave up") || seen.contains("failed") {
            gave_up += 1;
        }
        assert_eq!(
            r.safety(),
            Safety::Safe,
            "seed {}: {:?}",
            r.seed,
            r.verdicts
        );
    }
    assert!(
        gave_up > 0,
        "no run's delayed grant went to a waiter that gave up"
    );
}
