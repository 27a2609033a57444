//! Without faults every design keeps every promise, under real contention.

mod common;

use common::{assert_designs_valid, scenario};

/// 100 seeds by default keep CI fast (`LOCKSIM_NO_FAULTS_SEEDS=2000` for the long sweep,
/// which stop 19 ran with no invalid or unknown verdict).
#[test]
fn every_single_master_design_is_valid_on_every_checker_without_faults() {
    let seeds = common::seeds_from_env("LOCKSIM_NO_FAULTS_SEEDS", 100);
    assert_designs_valid(&scenario("no-faults"), 0..seeds, true, |d| d.masters == 1);
}

/// The Redlock designs run five masters each, so fewer seeds by default here
/// (`LOCKSIM_REDLOCK_SEEDS=200` for the full sweep; `redlock.rs` sweeps `redlock` too).
#[test]
fn every_redlock_design_is_valid_on_every_checker_without_faults() {
    let seeds = common::seeds_from_env("LOCKSIM_REDLOCK_SEEDS", 50);
    assert_designs_valid(&scenario("no-faults"), 0..seeds, true, |d| d.masters > 1);
}
