//! The etcd designs in locksim's world (a 3-member cluster, `etcd-1` … `etcd-3`, at
//! the world's clock scale): Jepsen's finding, that a lease can expire while its
//! holder still believes in it, under a stop-the-world pause; the fencing token that
//! makes it harmless; the lessor's monotonic clock, which a wall-clock step does not
//! reach; and the cluster's own faults (its leader crashed right after a lock key
//! committed, paused, or cut off from the other members), which Raft and a new
//! leader's lease extension survive. The classes come from the checkers on the
//! histories, never from the design's name.

use crate::common;

use scenarios::checkers::{Safety, Verdict};
use scenarios::sweep::{RunSummary, replay_command};

const SEEDS: std::ops::Range<u64> = 0..4;

fn runs(design: &str, scenario: &str) -> Vec<RunSummary> {
    common::runs(design, scenario, SEEDS)
}

fn designs() -> Vec<&'static str> {
    lock_impl::designs_on(lock_impl::Backend::Etcd)
        .map(|d| d.name)
        .collect()
}

#[test]
fn the_etcd_designs_are_three_and_valid_without_faults() {
    assert_eq!(
        designs(),
        ["etcd-mutex", "etcd-mutex-fenced", "etcd-lock-service"]
    );
    common::assert_designs_valid(&common::scenario("no-faults"), SEEDS, true, |d| {
        d.backend == lock_impl::Backend::Etcd
    });
}

/// Jepsen's etcd finding: the holder pauses past its lease, the member's lessor
/// revokes the lease (deleting the key), the next waiter's watch sees the delete and
/// takes the lock, and the old holder wakes up still believing. The evidence names
/// the expired lease (the key is `<lock>/<lease in hex>`) and the second holder.
#[test]
fn a_pause_past_the_lease_gives_two_holders_and_the_evidence_names_the_expired_lease() {
    for design in ["etcd-mutex", "etcd-lock-service"] {
        for run in runs(design, "gc-pause") {
            let replay = replay_command(design, "gc-pause", run.seed);
            assert!(
                run.fault_seen.is_some(),
                "seed {}: no pause past the lease; {replay}",
                run.seed
            );
            let me = run
                .verdicts
                .iter()
                .find(|(n, _)| n == "mutual-exclusion")
                .map(|(_, v)| v)
                .expect("a mutual-exclusion verdict");
            let Verdict::Invalid(evidence) = me else {
                panic!(
                    "{design} seed {}: mutual exclusion {me:?}; {replay}",
                    run.seed
                );
            };
            let [first, second] = [&evidence.hosts[0], &evidence.hosts[1]];
            assert!(
                evidence
                    .summary
                    .contains(&format!("{first}'s lease of {}", evidence.owners[0]))
                    && evidence.summary.contains("ran out on etcd-1")
                    && evidence.summary.contains(&format!("{second} took it")),
                "{design} seed {}: {}",
                run.seed,
                evidence.summary
            );
            assert_eq!(
                run.safety(),
                Safety::Unsafe,
                "{design} seed {}: {replay}",
                run.seed
            );
        }
    }
}

/// The same pauses with the key's create revision as the fencing token: the storage
/// refuses the stale holder's write.
#[test]
fn the_fenced_mutex_is_fenced_under_the_same_pauses() {
    let design = "etcd-mutex-fenced";
    for run in runs(design, "gc-pause") {
        let replay = replay_command(design, "gc-pause", run.seed);
        assert!(run.fault_seen.is_some(), "seed {}: {replay}", run.seed);
        assert_eq!(run.safety(), Safety::Fenced, "seed {}: {replay}", run.seed);
    }
}

/// etcd's lessor measures leases on the member's monotonic clock: a step of its wall
/// clock (the `clock-jump` scenario's fault, which breaks a Redis lease) expires
/// nothing.
#[test]
fn a_wall_clock_jump_on_the_member_expires_no_lease() {
    let design = "etcd-mutex";
    for run in runs(design, "clock-jump") {
        let replay = replay_command(design, "clock-jump", run.seed);
        assert!(
            run.fault_seen.is_some(),
            "seed {}: no clock jump; {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

/// The leader crashes right after a lock key's create commits: the survivors elect a
/// leader of a later term, which has the key (a majority had it) and gives every lease
/// a whole TTL again (`Promote`), so no holder loses the lock. Every design, every seed:
/// the fault seen, and safe.
#[test]
fn a_leader_crash_after_a_committed_lock_key_is_safe() {
    for design in designs() {
        for run in runs(design, "leader-crash") {
            let replay = replay_command(design, "leader-crash", run.seed);
            let seen = run
                .fault_seen
                .as_deref()
                .unwrap_or_else(|| panic!("{design} seed {}: no leader crash; {replay}", run.seed));
            assert!(
                seen.contains("create committed at revision") && seen.contains("leader (term"),
                "{design} seed {}: {seen}",
                run.seed
            );
            assert_eq!(
                run.safety(),
                Safety::Safe,
                "{design} seed {}: {replay}",
                run.seed
            );
        }
    }
}

/// The leader is cut off from the other members while clients still reach it (twice,
/// 6-12 leases each), or paused past the lease: it steps down (`CheckQuorum`) or is
/// outvoted, the others elect a leader that promotes its lessor, and the lock's lease
/// outlives the change. Safe, with the fault seen.
#[test]
fn a_leader_cut_off_or_paused_hands_the_leases_to_the_next_leader() {
    let design = "etcd-mutex";
    for scenario in ["server-isolated", "server-pause"] {
        for run in runs(design, scenario) {
            let replay = replay_command(design, scenario, run.seed);
            assert!(
                run.fault_seen.is_some(),
                "{scenario} seed {}: no fault; {replay}",
                run.seed
            );
            assert_eq!(
                run.safety(),
                Safety::Safe,
                "{scenario} seed {}: {replay}",
                run.seed
            );
        }
    }
}
