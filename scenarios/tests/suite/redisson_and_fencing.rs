//! The Redisson-style reentrant lock with its watchdog, and the fenced lock against the
//! fencing storage.

use crate::common;

use common::{design, expect_invalid, expect_never_invalid, scenario};
use scenarios::checkers::Safety;
use scenarios::sweep::{replay_command, sweep};

#[test]
fn the_watchdog_keeps_the_lock_through_critical_sections_ten_leases_long() {
    expect_never_invalid(
        "reentrant-watchdog",
        "long-work",
        &["mutual-exclusion", "lost-update", "ownership"],
        8,
        8,
    );
}

#[test]
fn without_a_watchdog_critical_sections_ten_leases_long_give_two_holders() {
    expect_invalid("set-nx-px-lua", "long-work", "mutual-exclusion");
}

#[test]
fn the_watchdog_freezes_with_a_paused_client_and_two_clients_hold_the_lock() {
    expect_invalid("reentrant-watchdog", "gc-pause", "mutual-exclusion");
}

#[test]
fn the_reentrant_lock_recovers_after_the_lease_when_its_holder_crashes() {
    expect_never_invalid("reentrant-watchdog", "client-crash", &["liveness"], 20, 5);
}

#[test]
fn nested_acquisitions_keep_the_lock_until_the_last_release() {
    expect_never_invalid(
        "reentrant-watchdog",
        "reentrancy",
        &["mutual-exclusion", "lost-update", "ownership", "reentrancy"],
        20,
        20,
    );
}

#[test]
fn waiters_still_acquire_within_the_ttl_when_unlock_messages_are_lost() {
    expect_never_invalid(
        "reentrant-watchdog",
        "unlock-message-lost",
        &["waiter-liveness"],
        20,
        10,
    );
}

#[test]
fn a_fenced_lock_overlaps_in_belief_but_the_fencing_storage_keeps_it_safe_in_effect() {
    let s = scenario("gc-pause");
    let runs = sweep(&design("fenced"), &s, 0..20, 2, false, &|_, _| {}).expect("runs complete");
    let mut fenced = 0;
    for run in &runs {
        // No harm in effect, ever: the storage refuses the stale token.
        for effect in scenarios::checkers::EFFECT_CHECKERS {
            assert!(
                !run.verdict(effect).is_some_and(|v| v.is_invalid()),
                "fenced seed {}: {effect} is invalid: {:?}; replay: {}",
                run.seed,
                run.verdicts,
                replay_command("fenced", "gc-pause", run.seed)
            );
        }
        // "fenced" only where the storage did refuse someone; an overlap the stale
        // holder never acted on is not credited to the fence.
        let class = run.safety();
        assert_eq!(
            class == Safety::Fenced,
            run.storage_refused
                && run
                    .verdict("mutual-exclusion")
                    .is_some_and(|v| v.is_invalid())
        );
        if class == Safety::Fenced {
            assert!(
                run.fault_seen.is_some(),
                "an overlap without the pause at seed {}",
                run.seed
            );
            fenced += 1;
        }
    }
    assert!(
        fenced >= 10,
        "believed holds overlapped in only {fenced} of 20 runs"
    );
}

#[test]
fn without_a_fencing_storage_the_fenced_lock_loses_updates_and_token_order_says_so() {
    // The same pause, a storage that does not check tokens: the tokens the lock hands
    // out protect nothing by themselves, and token-order (which a fencing storage
    // enforces for it everywhere else) catches the stale token getting through.
    let lost = expect_invalid("fenced", "gc-pause-plain-storage", "lost-update");
    assert_eq!(lost.safety(), Safety::Unsafe);
    assert!(!lost.storage_refused, "a plain storage refuses nobody");
    let stale = expect_invalid("fenced", "gc-pause-plain-storage", "token-order");
    let evidence = stale
        .verdict("token-order")
        .and_then(|v| v.evidence())
        .expect("evidence");
    assert!(
        evidence.summary.contains("a stale holder got through"),
        "{}",
        evidence.summary
    );
}

/// A watchdog's renewals extend the validity its holder believes in, and the history
/// says so: in `long-work` (every critical section ten leases long, no fault) the
/// Redisson lock renews, and neither `overrun` nor `validity` flags the long holds.
/// They did, judging every hold by its first lease (issue 23, item 4).
#[test]
fn a_watchdogs_renewals_extend_the_validity_the_checkers_judge() {
    let s = common::scenario("long-work");
    for seed in 0..3 {
        let r = scenarios::sweep::run_seed(&common::design("reentrant-watchdog"), &s, seed, true)
            .expect("run");
        let h = r.history.as_ref().expect("kept");
        let renewals = h
            .events
            .iter()
            .filter(|e| matches!(e.kind, sim::history::EventKind::Renewed { .. }))
            .count();
        assert!(
            renewals > 5,
            "seed {seed}: the watchdog renewed ({renewals})"
        );
        let holds = scenarios::checkers::model::holds(h).expect("holds");
        let extended = holds.iter().any(|hold| {
            let first = scenarios::checkers::model::op_at(h, hold.acquire_event)
                .and_then(|op| op.valid_until_us);
            scenarios::checkers::model::believed_validity(h, hold) > first
        });
        assert!(extended, "seed {seed}: a hold's validity was extended");
        for checker in ["overrun", "validity"] {
            let v = &r.verdicts.iter().find(|(n, _)| n == checker).unwrap().1;
            assert!(v.is_valid(), "seed {seed}: {checker}: {v:?}");
        }
    }
}

/// A fencing token issued twice to holds that never overlapped, with nothing lost: the
/// token promise is broken and reported, but the class says what happened, `promise`,
/// not `unsafe` (issue 23, item 3). A reused token that let a stale write through
/// would show as lost-update harm, and be unsafe.
#[test]
fn a_reissued_token_without_harm_is_a_broken_promise_not_unsafe() {
    let s = scenario("server-restart-delayed");
    let mut promise = 0;
    for seed in 0..5 {
        let r = scenarios::sweep::run_seed(&design("fenced"), &s, seed, false).expect("run");
        let verdict = |name: &str| &r.verdicts.iter().find(|(n, _)| n == name).unwrap().1;
        let class = scenarios::checkers::safety(&r.verdicts, r.storage_refused);
        if verdict("token-order").is_invalid()
            && !verdict("mutual-exclusion").is_invalid()
            && !verdict("lost-update").is_invalid()
        {
            assert_eq!(class, Safety::Promise, "seed {seed}: {:?}", r.verdicts);
            promise += 1;
        }
    }
    assert!(promise > 0, "no run reissued a token without harm");
    // The rule itself.
    let invalid = common::invalid_verdict;
    let valid = scenarios::checkers::Verdict::Valid;
    let v = [("token-order", invalid()), ("lost-update", valid.clone())];
    assert_eq!(scenarios::checkers::safety(&v, false), Safety::Promise);
    let v = [("token-order", invalid()), ("lost-update", invalid())];
    assert_eq!(scenarios::checkers::safety(&v, false), Safety::Unsafe);
    let v = [("token-order", invalid()), ("mutual-exclusion", invalid())];
    assert_eq!(scenarios::checkers::safety(&v, false), Safety::Unsafe);
}
