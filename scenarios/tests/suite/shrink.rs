//! Shrinking: a failing run becomes the smallest run that still fails the same checker
//! and still shows the scenario's fault; the search is deterministic and does not
//! depend on the number of threads.

use crate::common;

use scenarios::shrink::{Budget, ShrinkError, shrink};
use sim::faults::FaultKind;

fn budget(threads: usize) -> Budget {
    Budget {
        threads,
        ..Budget::default()
    }
}

#[test]
fn a_gc_pause_violation_shrinks_to_two_clients_and_one_pause_past_the_lease() {
    let d = common::design("set-nx-px-lua");
    let s = common::scenario("gc-pause");
    let a = shrink(&d, &s, 0, None, budget(2), &|_, _| {}).expect("seed 0 fails");
    assert_eq!(a.checker, "mutual-exclusion");
    assert!(a.stopped.is_none(), "the search ran out: {:?}", a.stopped);
    assert!(a.original.plan.faults.len() > 1, "nothing to shrink");
    assert_eq!(a.minimal.plan.faults.len(), 1, "{:?}", a.minimal.plan);
    let FaultKind::Pause { duration_ms, .. } = a.minimal.plan.faults[0].kind else {
        panic!("the one fault left is not a pause: {:?}", a.minimal.plan)
    };
    assert!(
        duration_ms >= s.workload.lease_ms,
        "the pause ({duration_ms} ms) must still outlast the lease"
    );
    assert_eq!(a.minimal.workload.clients, 2);
    assert!(a.minimal.workload.duration_ms < s.workload.duration_ms);
    assert!(
        a.fault_seen.is_some(),
        "the minimal run must still show the scenario's fault"
    );
    assert!(a.evidence.contains("both believed"), "{}", a.evidence);

    // Deterministic, and independent of the worker threads.
    let b = shrink(&d, &s, 0, None, budget(1), &|_, _| {}).expect("seed 0 fails");
    assert_eq!(a.minimal, b.minimal);
    assert_eq!(a.runs, b.runs);
    assert_eq!(a.steps, b.steps);
    assert_eq!(a.evidence, b.evidence);
}

#[test]
fn shrinking_a_run_that_does_not_fail_or_an_unknown_checker_is_refused() {
    let d = common::design("fenced");
    let s = common::scenario("no-faults");
    let e = shrink(&d, &s, 0, None, budget(1), &|_, _| {}).unwrap_err();
    assert!(matches!(e, ShrinkError::NotFailing(_)), "{e}");
    let e = shrink(&d, &s, 0, Some("mutex"), budget(1), &|_, _| {}).unwrap_err();
    assert!(
        matches!(e, ShrinkError::UnknownChecker(..)) && e.to_string().contains("mutual-exclusion"),
        "{e}"
    );
}

#[test]
fn the_run_budget_bounds_the_search_and_the_result_still_fails() {
    let d = common::design("set-nx-px-lua");
    let s = common::scenario("gc-pause");
    let small = Budget {
        max_runs: 5,
        ..budget(2)
    };
    let r = shrink(&d, &s, 0, Some("mutual-exclusion"), small, &|_, _| {}).expect("fails");
    assert!(r.stopped.is_some());
    assert!(r.runs <= 5 + 2, "{} runs", r.runs);
    // Whatever the search got to, it was re-run and fails.
    assert!(r.evidence.contains("both believed"), "{}", r.evidence);
}
