//! The ZooKeeper designs in locksim's world (one model server, `zk-1`): a holder paused
//! past its session timeout loses its node to the next client while it keeps working.
//! The classes come from the checkers on the histories, never from the design's name.

mod common;

use scenarios::checkers::{Safety, probes};
use scenarios::sweep::{RunSummary, replay_command, sweep};
use sim::history::{EventKind, ServerEvent};

const SEEDS: std::ops::Range<u64> = 0..4;

fn runs(design: &str, scenario: &str) -> Vec<RunSummary> {
    sweep(
        &common::design(design),
        &common::scenario(scenario),
        SEEDS,
        2,
        true,
        &|_, _| {},
    )
    .expect("runs complete")
}

fn expired_sessions(run: &RunSummary) -> Vec<String> {
    run.history
        .as_ref()
        .expect("kept")
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::ZkSession { session, event, .. })
                if event == "expired" =>
            {
                Some(session.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn zk_curator_under_gc_pause_is_unsafe_after_a_session_expiry() {
    for run in runs("zk-curator", "gc-pause") {
        let replay = replay_command("zk-curator", "gc-pause", run.seed);
        let expired = expired_sessions(&run);
        assert!(
            !expired.is_empty(),
            "seed {}: no session expired (the pause never outlasted a session); {replay}",
            run.seed
        );
        assert!(
            probes::session_expired_during_a_hold(run.history.as_ref().unwrap()).is_some(),
            "seed {}: no session expired under a holder; {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
        let evidence = run
            .verdicts
            .iter()
            .filter(|(_, v)| v.is_invalid())
            .filter_map(|(_, v)| v.evidence())
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            expired.iter().any(|s| evidence.contains(s.as_str())),
            "seed {}: the evidence names none of the expired sessions {expired:?}:\n{evidence}\n{replay}",
            run.seed
        );
    }
}

#[test]
fn zk_curator_fenced_under_gc_pause_is_fenced() {
    for run in runs("zk-curator-fenced", "gc-pause") {
        let replay = replay_command("zk-curator-fenced", "gc-pause", run.seed);
        assert!(
            !expired_sessions(&run).is_empty(),
            "seed {}: no session expired; {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Fenced, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn zk_session_expiry_probe_sees_the_session_expire_under_its_holder() {
    for design in ["zk-curator", "zk-curator-fenced"] {
        let runs = runs(design, "zk-session-expiry");
        let seen: Vec<&RunSummary> = runs
            .iter()
            .filter(|r| {
                r.fault_seen
                    .as_deref()
                    .is_some_and(|w| w.contains("expired session"))
            })
            .collect();
        // A partition can fall between two holds (the holder target then names the
        // next holder, whose hold may end before the expiry): most runs, not all.
        assert!(
            seen.len() * 4 >= runs.len() * 3,
            "{design}: the session expired under its holder in only {} of {} runs",
            seen.len(),
            runs.len()
        );
        for run in seen {
            assert_ne!(run.safety(), Safety::Safe, "{design} seed {}", run.seed);
        }
    }
}

#[test]
fn redis_only_scenarios_do_not_apply_to_the_zookeeper_designs() {
    let catalog = scenarios::catalog::catalog();
    let fitting: Vec<&str> = catalog
        .iter()
        .filter(|s| s.applies_to(lock_impl::Backend::ZooKeeper, 0))
        .map(|s| s.name)
        .collect();
    assert_eq!(
        fitting,
        [
            "no-faults",
            "client-crash",
            "gc-pause",
            "slow-work",
            "network-delay",
            "long-work",
            "zk-session-expiry"
        ]
    );
    let zk = common::scenario("zk-session-expiry");
    assert!(
        !zk.applies_to(lock_impl::Backend::Redis, 1)
            && !zk.applies_to(lock_impl::Backend::Redis, lock_impl::REDLOCK_MASTERS)
    );
}
