//! The MongoDB designs in locksim's world (a three-member replica set, `mongo-1` …
//! `mongo-3`): a `w: 1` lock is lost in a failover (the primary crashed, or cut off)
//! and the old primary rolls it back,
//! a `w: "majority"` lock survives it; the client faults reach them as they reach the
//! other lease locks. The classes come from the checkers on the histories, never from
//! the design's name. (That jumping to the next event gives the tick-by-tick history
//! in every mongo cell is the stepping suite's, `stepping.rs`, which runs every cell.)

use crate::common;

use scenarios::checkers::{Safety, rollback_probes};
use scenarios::sweep::{RunSummary, replay_command, sweep};
use sim::history::{EventKind, ServerEvent};

const SEEDS: std::ops::Range<u64> = 0..4;

fn runs(design: &str, scenario: &str) -> Vec<RunSummary> {
    common::runs(design, scenario, SEEDS)
}

fn verdict<'a>(run: &'a RunSummary, checker: &str) -> &'a scenarios::checkers::Verdict {
    &run.verdicts
        .iter()
        .find(|(n, _)| n == checker)
        .unwrap_or_else(|| panic!("no {checker} verdict"))
        .1
}

/// The MongoDB designs, from the registry.
fn designs() -> impl Iterator<Item = &'static str> {
    lock_impl::designs_on(lock_impl::Backend::MongoDb).map(|d| d.name)
}

#[test]
fn mongo_designs_are_valid_without_faults() {
    for design in designs() {
        for run in runs(design, "no-faults") {
            let replay = replay_command(design, "no-faults", run.seed);
            assert_eq!(
                run.safety(),
                Safety::Safe,
                "{design} seed {}: {replay}",
                run.seed
            );
            assert!(
                run.acquisitions > 10,
                "{design} seed {}: only {} acquisitions; {replay}",
                run.seed,
                run.acquisitions
            );
            for (name, v) in &run.verdicts {
                assert!(
                    !v.is_invalid(),
                    "{design} seed {}: {name} {v:?}; {replay}",
                    run.seed
                );
            }
        }
    }
}

/// The failover happened in every run (the probe found the crash at the moment, the
/// election and the rollback), and every run's old primary rolled back at least one
/// entry.
fn assert_failover_happened(design: &str, scenario: &str, run: &RunSummary) {
    let replay = replay_command(design, scenario, run.seed);
    let history = run.history.as_ref().expect("kept");
    let witness = rollback_probes::rollback_of_a_lock_write(history);
    assert!(
        witness.is_some(),
        "seed {}: no rollback of a lock write; {replay}",
        run.seed
    );
    assert_eq!(run.fault_seen, witness, "seed {}", run.seed);
    let rolled_back = history.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Server(ServerEvent::MongoRollback { undone, .. }) if *undone >= 1)
    });
    assert!(rolled_back, "seed {}: {replay}", run.seed);
}

const FAILOVERS: [&str; 2] = ["mongo-failover", "mongo-partition"];

#[test]
fn a_w1_lock_is_lost_in_a_failover_and_rolled_back() {
    let design = "mongo-find-and-modify";
    for scenario in FAILOVERS {
        for run in runs(design, scenario) {
            let replay = replay_command(design, scenario, run.seed);
            assert_failover_happened(design, scenario, &run);
            let me = verdict(&run, "mutual-exclusion");
            let scenarios::checkers::Verdict::Invalid(evidence) = me else {
                panic!("seed {}: mutual exclusion {me:?}; {replay}", run.seed);
            };
            // The evidence names the mechanism: acknowledged by one member, another
            // elected without it, the write rolled back.
            assert!(
                evidence.summary.contains("acknowledged by mongo-")
                    && evidence.summary.contains("became primary")
                    && evidence.summary.contains("rolled the write back"),
                "seed {}: {}",
                run.seed,
                evidence.summary
            );
            assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
        }
    }
}

#[test]
fn a_majority_lock_survives_the_same_failover() {
    for design in [
        "mongo-find-and-modify-majority",
        "mongo-find-and-modify-fenced",
    ] {
        for scenario in FAILOVERS {
            for run in runs(design, scenario) {
                let replay = replay_command(design, scenario, run.seed);
                assert_failover_happened(design, scenario, &run);
                assert!(
                    !verdict(&run, "mutual-exclusion").is_invalid(),
                    "{design} seed {}: {:?}; {replay}",
                    run.seed,
                    verdict(&run, "mutual-exclusion")
                );
                assert_eq!(
                    run.safety(),
                    Safety::Safe,
                    "{design} seed {}: {replay}",
                    run.seed
                );
                assert!(run.acquisitions > 2, "{design} seed {}: {replay}", run.seed);
            }
        }
    }
}

#[test]
fn a_pause_past_the_lease_breaks_every_mongo_lock_and_fencing_catches_it() {
    for design in designs() {
        for run in runs(design, "gc-pause") {
            let replay = replay_command(design, "gc-pause", run.seed);
            assert!(
                run.fault_seen.is_some(),
                "{design} seed {}: {replay}",
                run.seed
            );
            assert!(
                verdict(&run, "mutual-exclusion").is_invalid(),
                "{design} seed {}: {replay}",
                run.seed
            );
            // Two holders in belief; what reached the storage decides the class: the
            // stale holder's write accepted after the newer grant (unsafe), refused by
            // the fence (fenced), or none at all (overlap: it never wrote again).
            let expected = if !run.stale_write && !run.storage_refused {
                Safety::Overlap
            } else if design.ends_with("fenced") {
                Safety::Fenced
            } else {
                Safety::Unsafe
            };
            assert_eq!(
                run.safety(),
                expected,
                "{design} seed {}: {replay}",
                run.seed
            );
        }
    }
}

#[test]
fn the_mongo_scenarios_apply_to_the_mongo_designs_only() {
    let catalog = scenarios::catalog::catalog();
    for name in FAILOVERS {
        let failover = catalog
            .iter()
            .find(|s| s.name == name)
            .expect("in the catalog");
        assert!(failover.applies_to(lock_impl::Backend::MongoDb, 0));
        assert!(!failover.applies_to(lock_impl::Backend::Redis, 1));
        assert!(!failover.applies_to(lock_impl::Backend::MySql, 0));
    }
    // The server faults reach a replica set's primary as they reach a Redis master.
    for name in ["server-pause", "server-restart", "partition", "clock-drift"] {
        let s = catalog
            .iter()
            .find(|s| s.name == name)
            .expect("in the catalog");
        assert!(s.applies_to(lock_impl::Backend::MongoDb, 0), "{name}");
    }
}

/// `client-crash` seed 27: client-5 releases its lock on the primary at 1.035 s and
/// crashes at 1.036 s, in the tick in which the secondaries apply that release from
/// the oplog. Their copies are no command of client-5's new life: the history records
/// them as `replicated`, and `ownership` does not judge them a removal of its previous
/// life's lock.
#[test]
fn a_release_replicated_after_its_client_crashed_is_not_a_command_of_its_next_life() {
    let design = "mongo-find-and-modify";
    let run = sweep(
        &common::design(design),
        &common::scenario("client-crash"),
        27..28,
        1,
        true,
        &|_, _| {},
    )
    .expect("runs complete")
    .remove(0);
    let replay = replay_command(design, "client-crash", run.seed);
    let history = run.history.as_ref().expect("kept");
    // The moment of the regression happened: a secondary applied a release of
    // client-5's after client-5 crashed.
    let crash = history
        .events
        .iter()
        .position(|e| {
            e.host == "client-5"
                && matches!(&e.kind, EventKind::Fault { detail, .. } if detail.starts_with("crash"))
        })
        .unwrap_or_else(|| panic!("client-5 never crashed; {replay}"));
    let replicated = history.events[crash..].iter().find(|e| {
        matches!(&e.kind, EventKind::Server(ServerEvent::Removed { by, cause, .. })
            if by == "client-5" && cause == "replicated")
    });
    assert!(
        replicated.is_some(),
        "no replicated release of client-5's after its crash; {replay}"
    );
    // The primary's record has the command itself, before the crash.
    assert!(
        history.events[..crash].iter().any(|e| e.host == "mongo-1"
            && matches!(&e.kind, EventKind::Server(ServerEvent::Removed { by, cause, .. })
                if by == "client-5" && cause == "command")),
        "no release by client-5's command on mongo-1 before its crash; {replay}"
    );
    let v = verdict(&run, "ownership");
    assert!(!v.is_invalid(), "ownership {v:?}; {replay}");
}

/// `mongo-failover` at MongoDB's own timing (`--profile mongodb`): 10 s election
/// timeout, 2 s heartbeat, a 30 s lease, critical sections of 11.25 s.
fn real_scale() -> scenarios::catalog::Scenario {
    common::scenario("mongo-failover")
        .with_profile(scenarios::catalog::Profile::MongoDb)
        .expect("the mongodb profile")
}

fn real_scale_runs(design: &str, seeds: std::ops::Range<u64>) -> Vec<RunSummary> {
    sweep(
        &common::design(design),
        &real_scale(),
        seeds,
        2,
        true,
        &|_, _| {},
    )
    .expect("runs complete")
}

/// With one member's machine dead, the election is decided by the two live members'
/// votes: the new primary takes over one election timeout (plus its random offset of
/// up to 15 %) after it last heard from the old one, as the real `VoteRequester` stops
/// at a majority; the dead member's unanswered vote request holds nothing up. Read from
/// the history: the crash, then the next `primary` role record.
#[test]
fn an_election_with_a_dead_member_takes_one_election_timeout() {
    let spec = real_scale()
        .workload
        .systems
        .mongo
        .clone()
        .expect("a replica set");
    let (election_ms, heartbeat_ms) = (spec.election_timeout_ms, spec.heartbeat_ms);
    assert_eq!(election_ms, 10_000);
    for run in real_scale_runs("mongo-find-and-modify-majority", 0..4) {
        let history = run.history.as_ref().expect("kept");
        let crash_us = history
            .events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Fault {
                    phase: sim::history::FaultPhase::Start,
                    detail,
                    ..
                } if detail.contains("crash") => Some(e.at_us),
                _ => None,
            })
            .unwrap_or_else(|| panic!("seed {}: no crash", run.seed));
        let elected_us = history
            .events
            .iter()
            .filter(|e| e.at_us > crash_us)
            .find_map(|e| match &e.kind {
                EventKind::Server(ServerEvent::Role { role }) if role.starts_with("primary") => {
                    Some(e.at_us)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("seed {}: nobody elected after the crash", run.seed));
        let took_ms = (elected_us - crash_us) / 1_000;
        // The last contact was at most a heartbeat before the crash; the offset is at
        // most 15 % of the timeout; a vote's round trip is a few lagged milliseconds.
        assert!(
            took_ms >= election_ms - heartbeat_ms && took_ms <= election_ms * 115 / 100 + 200,
            "seed {}: elected {took_ms} ms after the crash (election timeout {election_ms} ms)",
            run.seed
        );
    }
}

/// At that timing the new primary is writable 10-11.5 s after the crash, inside the
/// holder's 11.25 s critical section, and the clients find it within
/// `minHeartbeatFrequencyMS` (their server selection checks the members again, not
/// waiting out a dial to the dead one): a `w: 1` lock, lost with the old primary, is
/// granted again while its holder still works.
#[test]
fn a_w1_lock_is_lost_in_a_failover_at_mongodbs_own_timing() {
    let runs = real_scale_runs("mongo-find-and-modify", 0..4);
    for run in &runs {
        assert_failover_happened("mongo-find-and-modify", "mongo-failover", run);
    }
    let unsafe_seeds: Vec<u64> = runs
        .iter()
        .filter(|r| verdict(r, "mutual-exclusion").is_invalid())
        .map(|r| r.seed)
        .collect();
    assert!(
        !unsafe_seeds.is_empty(),
        "no two holders in seeds 0..4 at --profile mongodb"
    );
}
