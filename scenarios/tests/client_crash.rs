//! A client that dies holding the lock: designs without expiry stay stuck; designs
//! whose lease is set atomically recover after the lease.

mod common;

use common::{expect_invalid, expect_never_invalid};

#[test]
fn setnx_del_is_stuck_forever_when_its_holder_crashes() {
    expect_invalid("setnx-del", "client-crash", "liveness");
}

#[test]
fn setnx_expire_is_stuck_when_a_crash_falls_between_setnx_and_expire() {
    let run = expect_invalid("setnx-expire", "client-crash", "liveness");
    let evidence = run.verdict("liveness").unwrap().evidence().unwrap().clone();
    assert!(!evidence.hosts.is_empty());
}

#[test]
fn set_nx_px_designs_recover_from_a_crashed_holder_after_the_lease() {
    for d in ["set-nx-px-del", "set-nx-px-check-del", "set-nx-px-lua"] {
        expect_never_invalid(d, "client-crash", &["liveness"], 30, 5);
    }
}

#[test]
fn a_crashed_clients_unfinished_acquire_is_not_a_waiter_stranded_by_a_release() {
    for d in ["set-nx-px-lua", "fenced", "reentrant-watchdog"] {
        expect_never_invalid(d, "client-crash", &["waiter-liveness"], 20, 5);
    }
}
