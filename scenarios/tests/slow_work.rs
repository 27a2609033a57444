//! A critical section that runs as long as the lease, or longer.

mod common;

use common::{expect_invalid, expect_never_invalid};

#[test]
fn set_nx_px_del_deletes_another_clients_lock_after_slow_work() {
    expect_invalid("set-nx-px-del", "slow-work", "ownership");
    expect_invalid("set-nx-px-del", "slow-work", "mutual-exclusion");
}

#[test]
fn set_nx_px_check_del_deletes_another_clients_lock_when_slow_work_ends_at_the_lease() {
    expect_invalid("set-nx-px-check-del", "slow-work", "ownership");
}

#[test]
fn set_nx_px_lua_keeps_ownership_but_loses_updates_after_slow_work() {
    expect_never_invalid("set-nx-px-lua", "slow-work", &["ownership"], 30, 10);
    expect_invalid("set-nx-px-lua", "slow-work", "mutual-exclusion");
    expect_invalid("set-nx-px-lua", "slow-work", "lost-update");
}
