//! A stop-the-world pause longer than the lease, while holding: Kleppmann's example.
//!
//! Written against the `locksim` facade, as a user's own suite is: what a user gets is
//! what the project relies on.

use crate::common;

use common::SEARCH_BOUND;
use locksim::{builtin, check};

#[test]
fn set_nx_px_del_deletes_another_clients_lock_after_a_pause() {
    check(builtin("set-nx-px-del"))
        .scenario("gc-pause")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("ownership");
}

#[test]
fn set_nx_px_del_lets_two_clients_hold_the_lock_after_a_pause() {
    check(builtin("set-nx-px-del"))
        .scenario("gc-pause")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("mutual-exclusion");
}

#[test]
fn set_nx_px_check_del_deletes_another_clients_lock_when_the_lease_expires_between_get_and_del() {
    check(builtin("set-nx-px-check-del"))
        .scenario("gc-pause")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("ownership");
}

#[test]
fn set_nx_px_lua_never_deletes_another_clients_lock_after_a_pause() {
    check(builtin("set-nx-px-lua"))
        .scenario("gc-pause")
        .seeds(0..30)
        .min_fault_runs(10)
        .assert_checker_valid("ownership");
}

#[test]
fn set_nx_px_lua_still_gives_two_holders_and_a_lost_update_after_a_pause() {
    let lua = check(builtin("set-nx-px-lua"))
        .scenario("gc-pause")
        .seeds(0..SEARCH_BOUND);
    lua.expect_invalid("mutual-exclusion");
    lua.expect_invalid("lost-update");
}
