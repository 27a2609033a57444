//! A critical section that runs as long as the lease, or longer.
//!
//! Written against the `locksim` facade, as a user's own suite is.

use crate::common;

use common::SEARCH_BOUND;
use locksim::{builtin, check};

#[test]
fn set_nx_px_del_deletes_another_clients_lock_after_slow_work() {
    let del = check(builtin("set-nx-px-del"))
        .scenario("slow-work")
        .seeds(0..SEARCH_BOUND);
    del.expect_invalid("ownership");
    del.expect_invalid("mutual-exclusion");
}

#[test]
fn set_nx_px_check_del_deletes_another_clients_lock_when_slow_work_ends_at_the_lease() {
    check(builtin("set-nx-px-check-del"))
        .scenario("slow-work")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("ownership");
}

#[test]
fn set_nx_px_lua_keeps_ownership_but_loses_updates_after_slow_work() {
    let lua = check(builtin("set-nx-px-lua")).scenario("slow-work");
    lua.clone()
        .seeds(0..30)
        .min_fault_runs(10)
        .assert_checker_valid("ownership");
    let lua = lua.seeds(0..SEARCH_BOUND);
    lua.expect_invalid("mutual-exclusion");
    lua.expect_invalid("lost-update");
}
