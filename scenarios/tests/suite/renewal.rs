//! Redisson's retry layers under `renewal-blip` (issue 35): Redisson's executor resends
//! a renewal whose reply timed out (3.20: three resends 1.5 s apart; 3.52.0: four,
//! 1-2 s apart, jittered), and 3.52.0's watchdog schedules the next renewal after one
//! that failed. A holder cut off for 4-8 s, far less than the 20 s its lease still
//! has, keeps its lock at either version; a cut that outlasts the resends and the
//! lease left does not.

use crate::common;

use scenarios::params::Param;
use scenarios::sweep::{replay_command, sweep};

/// The three Redisson ports with a watchdog, and the version each follows.
const REDISSON: [&str; 3] = ["reentrant-watchdog", "redisson-fenced", "redisson-rw"];

#[test]
fn a_four_to_eight_second_cut_is_bridged_by_redissons_resends_at_both_pinned_versions() {
    let s = common::scenario("renewal-blip");
    for design in REDISSON {
        let runs =
            sweep(&common::design(design), &s, 0..10, 2, false, &|_, _| {}).expect("runs complete");
        for run in &runs {
            for (checker, verdict) in &run.verdicts {
                assert!(
                    verdict.is_valid(),
                    "{design} seed {}: {checker} is {verdict:?}; replay: {}",
                    run.seed,
                    replay_command(design, s.name, run.seed)
                );
            }
        }
        // The probe: the holder was cut off, and the cut healed while it still held
        // the lock with validity left (the runs where the fault could matter).
        let faulted = runs.iter().filter(|r| r.fault_seen.is_some()).count();
        assert!(
            faulted >= 8,
            "{design}: the cut landed in a hold in only {faulted} of 10 runs"
        );
    }
}

#[test]
fn a_cut_longer_than_the_resends_and_the_lease_left_still_gives_two_holders() {
    // 40 s: longer than any renewal's resends (16.5 s at 3.20, at most about 20 s at
    // 3.52.0) plus the 20 s of lease left after the last renewal before the cut.
    let s = common::scenario("renewal-blip")
        .with_param(Param::PartitionMs, 40_000)
        .expect("renewal-blip draws partitions");
    for design in REDISSON {
        let runs =
            sweep(&common::design(design), &s, 0..6, 2, false, &|_, _| {}).expect("runs complete");
        let broken = runs
            .iter()
            .filter(|r| {
                r.verdict("mutual-exclusion")
                    .is_some_and(|v| v.is_invalid())
            })
            .count();
        assert!(
            broken > 0,
            "{design}: a 40 s cut never gave two holders in seeds 0..6"
        );
    }
}
