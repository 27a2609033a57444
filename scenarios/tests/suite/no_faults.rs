//! Without faults every design keeps every promise, under real contention.

use crate::common;

use common::{assert_designs_valid, scenario};

/// 100 seeds by default keep CI fast (`LOCKSIM_NO_FAULTS_SEEDS=2000` for the long sweep,
/// which gave no invalid or unknown verdict when last run).
#[test]
fn every_single_master_design_is_valid_on_every_checker_without_faults() {
    let seeds = common::seeds_from_env("LOCKSIM_NO_FAULTS_SEEDS", 100);
    assert_designs_valid(&scenario("no-faults"), 0..seeds, true, |d| d.masters == 1);
}

/// The Redlock designs run five masters each, so fewer seeds by default here
/// (`LOCKSIM_REDLOCK_SEEDS=200` for the full sweep; `redlock.rs` sweeps `redlock` too).
/// `node-redlock` (and `node-redlock-using`, which acquires as it does) overruns
/// without faults, as the published client does (below).
#[test]
fn every_redlock_design_is_valid_on_every_checker_without_faults() {
    let seeds = common::seeds_from_env("LOCKSIM_REDLOCK_SEEDS", 50);
    assert_designs_valid(&scenario("no-faults"), 0..seeds, true, |d| {
        d.masters > 1 && !d.name.starts_with("node-redlock")
    });
}

/// node-redlock 5.0.0-beta.2 reads `start = Date.now()` once, before its first attempt,
/// and returns `expiration = start + duration - drift` from whichever attempt won: a
/// lock won after retrying for longer than the duration comes back already expired by
/// its own account, and a holder that works anyway overruns it. Its retries are
/// `200 ± 100` ms at real scale, 1-2 ms at the catalog's (a 200 ms lease stands for
/// 30 s), so that takes a wait as long as the lease, as it does with real durations of
/// seconds: in eight-client contention some waits are (a waiter loses several holds in
/// a row), and every overrun is by a lock whose acquire took nearly the whole duration
/// (196 ms less the 20 ms of work). Without faults that is the only thing wrong: every
/// other checker is Valid. `using()` acquires the same way, and its extension timer
/// finds such a lock's expiration already passed and aborts at once: the same
/// overruns, and no others.
#[test]
fn node_redlock_overruns_only_the_locks_whose_retrying_outlasted_the_duration() {
    for design in ["node-redlock", "node-redlock-using"] {
        let s = scenario("no-faults");
        let overruns = overruns_after_a_long_wait(design, &s, 176_000);
        assert!(overruns > 0, "{design} never overran without faults");
    }
}

/// The same world with two clients: a waiter waits one hold (20 ms of work), far less
/// than the lease, so no lock comes back expired and nothing overruns. With the real
/// `200 ± 100` ms between retries against the catalog's 200 ms lease (an artefact of
/// scaling the lease and not the client), a lock won after a retry came back with at
/// most 96 ms of validity, or none: `overrun` in most of these runs.
#[test]
fn node_redlock_returns_no_expired_lock_when_its_retries_are_short_against_the_lease() {
    for design in ["node-redlock", "node-redlock-using"] {
        let mut s = scenario("no-faults");
        s.workload.clients = 2;
        assert_eq!(
            overruns_after_a_long_wait(design, &s, 176_000),
            0,
            "{design}"
        );
    }
}

/// Runs `design` under `s` for seeds 0..10: every checker but `overrun` is Valid, and
/// every overrunning hold's acquire took at least `min_wait_us`; the number of runs with
/// an overrun.
fn overruns_after_a_long_wait(
    design: &str,
    s: &scenarios::catalog::Scenario,
    min_wait_us: u64,
) -> usize {
    use scenarios::checkers::{self, model};
    use scenarios::sweep::{DesignSpec, config};
    use sim::history::OpF;
    let node = DesignSpec::builtin(design).expect("design");
    let mut overruns = 0;
    for seed in 0..10 {
        let h = sim::world::run(&config(&node, s, seed)).expect("run completes");
        let pairs = model::op_pairs(&h).expect("a well-formed history");
        for (name, verdict) in checkers::check_all(&h) {
            if name != "overrun" {
                assert!(verdict.is_valid(), "seed {seed}: {name} is {verdict:?}");
                continue;
            }
            let Some(evidence) = verdict.evidence() else {
                continue;
            };
            overruns += 1;
            for owner in &evidence.owners {
                let acquire = pairs
                    .iter()
                    .find(|p| p.f == OpF::Acquire && p.owner.as_deref() == Some(owner.as_str()))
                    .expect("the overrunning hold's acquire");
                let took_us = acquire.completion_us.expect("completed") - acquire.invoke_us;
                assert!(
                    took_us >= min_wait_us,
                    "{design} seed {seed}: {owner} overran a lock it won after {took_us} us, \
                     less than {min_wait_us} us: {}",
                    evidence.summary
                );
            }
        }
    }
    overruns
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
