//! A stop-the-world pause longer than the lease, while holding: Kleppmann's example.

mod common;

use common::{expect_invalid, expect_never_invalid};

#[test]
fn set_nx_px_del_deletes_another_clients_lock_after_a_pause() {
    expect_invalid("set-nx-px-del", "gc-pause", "ownership");
}

#[test]
fn set_nx_px_del_lets_two_clients_hold_the_lock_after_a_pause() {
    expect_invalid("set-nx-px-del", "gc-pause", "mutual-exclusion");
}

#[test]
fn set_nx_px_check_del_deletes_another_clients_lock_when_the_lease_expires_between_get_and_del() {
    expect_invalid("set-nx-px-check-del", "gc-pause", "ownership");
}

#[test]
fn set_nx_px_lua_never_deletes_another_clients_lock_after_a_pause() {
    expect_never_invalid("set-nx-px-lua", "gc-pause", &["ownership"], 30, 10);
}

#[test]
fn set_nx_px_lua_still_gives_two_holders_and_a_lost_update_after_a_pause() {
    expect_invalid("set-nx-px-lua", "gc-pause", "mutual-exclusion");
    expect_invalid("set-nx-px-lua", "gc-pause", "lost-update");
}
