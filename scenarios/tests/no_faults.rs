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

/// Critical sections far longer than the lease, and a run too short for any of them to
/// reach its write: holders overlap, `lost-update` has no write to judge, the storage
/// refuses nobody. The proven overlap decides the class: unsafe, not unknown (issue 23,
/// item 6).
#[test]
fn overlapping_holders_are_unsafe_even_when_no_write_was_judged() {
    let mut s = scenario("no-faults");
    s.workload.work_ms = 5_000;
    let r =
        scenarios::sweep::run_seed(&common::design("set-nx-px-lua"), &s, 0, false).expect("run");
    let verdict = |name: &str| {
        &r.verdicts
            .iter()
            .find(|(n, _)| n == name)
            .expect("checker ran")
            .1
    };
    assert!(verdict("mutual-exclusion").is_invalid(), "{:?}", r.verdicts);
    assert!(verdict("lost-update").is_unknown(), "{:?}", r.verdicts);
    assert!(!r.storage_refused);
    assert_eq!(
        scenarios::checkers::safety(&r.verdicts, r.storage_refused),
        scenarios::checkers::Safety::Unsafe
    );
}
