//! Without faults every design keeps every promise, under real contention.

mod common;

use common::{design, scenario};
use scenarios::sweep::{replay_command, sweep};

#[test]
fn every_design_is_valid_on_every_checker_over_200_seeds_without_faults() {
    let s = scenario("no-faults");
    for d in lock_impl::DESIGNS {
        let runs = sweep(&design(d.name), &s, 0..200, 2, false, &|_, _| {}).expect("runs complete");
        assert_eq!(runs.len(), 200);
        for run in &runs {
            for (checker, verdict) in &run.verdicts {
                assert!(
                    verdict.is_valid(),
                    "{} seed {}: {checker} is {verdict:?}; replay: {}",
                    d.name,
                    run.seed,
                    replay_command(d.name, s.name, run.seed)
                );
            }
            assert!(
                run.fault_seen.is_some(),
                "{} seed {}: the lock was never contended",
                d.name,
                run.seed
            );
            assert!(
                run.acquisitions > 10,
                "{} seed {}: too few acquisitions",
                d.name,
                run.seed
            );
        }
    }
}
