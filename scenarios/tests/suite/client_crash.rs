//! A client that dies holding the lock: designs without expiry stay stuck; designs
//! whose lease is set atomically recover after the lease.
//!
//! Written against the `locksim` facade, as a user's own suite is.

use crate::common;

use common::SEARCH_BOUND;
use locksim::{builtin, check};

#[test]
fn setnx_del_is_stuck_forever_when_its_holder_crashes() {
    check(builtin("setnx-del"))
        .scenario("client-crash")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("liveness");
}

#[test]
fn setnx_expire_is_stuck_when_a_crash_falls_between_setnx_and_expire() {
    let run = check(builtin("setnx-expire"))
        .scenario("client-crash")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("liveness");
    let evidence = run.verdict("liveness").unwrap().evidence().unwrap().clone();
    assert!(!evidence.hosts.is_empty());
}

#[test]
fn set_nx_px_designs_recover_from_a_crashed_holder_after_the_lease() {
    for d in ["set-nx-px-del", "set-nx-px-check-del", "set-nx-px-lua"] {
        check(builtin(d))
            .scenario("client-crash")
            .seeds(0..30)
            .min_fault_runs(5)
            .assert_checker_valid("liveness");
    }
}

#[test]
fn a_crashed_clients_unfinished_acquire_is_not_a_waiter_stranded_by_a_release() {
    for d in ["set-nx-px-lua", "fenced", "reentrant-watchdog"] {
        check(builtin(d))
            .scenario("client-crash")
            .seeds(0..20)
            .min_fault_runs(5)
            .assert_checker_valid("waiter-liveness");
    }
}
