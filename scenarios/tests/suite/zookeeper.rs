//! The ZooKeeper designs in locksim's world (an ensemble of three model servers, `zk-1`
//! to `zk-3`): a holder paused past its session timeout loses its node to the next
//! client while it keeps working; a leader crashing right after it committed a lock
//! node's create loses nothing (a quorum logged it); a client on a lagging follower
//! reads a stale tree and stays safe. The classes come from the checkers on the
//! histories, never from the design's name.

use crate::common;

use scenarios::checkers::{Safety, probes};
use scenarios::sweep::{RunSummary, replay_command, sweep};
use sim::history::{EventKind, FaultPhase, ServerEvent};

const SEEDS: std::ops::Range<u64> = 0..4;

fn runs(design: &str, scenario: &str) -> Vec<RunSummary> {
    common::runs(design, scenario, SEEDS)
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
fn redis_only_scenarios_do_not_apply_to_the_zookeeper_designs_and_say_why() {
    let catalog = scenarios::catalog::catalog();
    let not_fitting: Vec<(&str, String)> = catalog
        .iter()
        .filter_map(|s| {
            s.fit(lock_impl::Backend::ZooKeeper, 0)
                .err()
                .map(|why| (s.name, why))
        })
        .collect();
    let names: Vec<&str> = not_fitting.iter().map(|(n, _)| *n).collect();
    // What needs Redis's own machinery (Sentinel, its AOF, independent masters,
    // pub/sub), MySQL's or MongoDB's, or observers of several keys.
    for name in [
        "failover",
        "split-brain",
        "server-restart-aof",
        "redlock-restart",
        "unlock-message-lost",
        "mysql-connection-drop",
        "mongo-failover",
        "segmented-stock",
    ] {
        assert!(names.contains(&name), "{name} should not fit: {names:?}");
    }
    for (name, why) in &not_fitting {
        assert!(
            why.starts_with("needs ") && why.contains("ZooKeeper"),
            "{name}: {why}"
        );
    }
    // Every fault on a lock server reaches the ensemble.
    for name in [
        "server-pause",
        "server-restart",
        "server-restart-delayed",
        "partition",
        "clock-jump",
        "clock-drift",
        "client-clock-step",
        "zk-session-expiry",
    ] {
        assert!(!names.contains(&name), "{name} should fit");
    }
    let zk = common::scenario("zk-session-expiry");
    assert!(
        !zk.applies_to(lock_impl::Backend::Redis, 1)
            && !zk.applies_to(lock_impl::Backend::Redis, lock_impl::REDLOCK_MASTERS)
    );
}

#[test]
fn zk_curator_is_safe_when_the_leader_crashes_right_after_committing_a_lock_create() {
    for run in runs("zk-curator", "leader-crash") {
        let replay = replay_command("zk-curator", "leader-crash", run.seed);
        let h = run.history.as_ref().expect("kept");
        let witness = probes::leader_crashed_after_a_lock_create(h);
        assert!(
            witness.is_some(),
            "seed {}: the leader never crashed after a lock create; {replay}",
            run.seed
        );
        // The create the crash followed was committed by a quorum: no server's record
        // ever loses a node it did not see deleted (every node deletion is a client's
        // delete or its session's end, never a failover).
        assert!(
            h.events.iter().all(|e| !matches!(
                &e.kind,
                EventKind::Server(ServerEvent::Removed { cause, .. })
                    if cause != "command" && cause != "expired" && cause != "command-before-crash"
            )),
            "seed {}: a lock node vanished otherwise; {replay}",
            run.seed
        );
        // The crashed leader restarts from its log and rejoins the ensemble.
        let restart = h
            .events
            .iter()
            .find(|e| {
                matches!(&e.kind, EventKind::Fault { phase: FaultPhase::End, detail, .. }
                    if detail.ends_with("restarts"))
            })
            .expect("the crashed leader restarts");
        assert!(
            h.events.iter().any(|e| e.host == restart.host
                && e.at_us >= restart.at_us
                && matches!(&e.kind, EventKind::Server(ServerEvent::Role { role })
                    if role.starts_with("follower") || role.starts_with("leader"))),
            "seed {}: {} never rejoined after its restart; {replay}",
            run.seed,
            restart.host
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn zk_curator_on_a_lagging_follower_reads_stale_children_and_stays_safe() {
    for run in runs("zk-curator", "zk-follower-stale") {
        let replay = replay_command("zk-curator", "zk-follower-stale", run.seed);
        let h = run.history.as_ref().expect("kept");
        assert!(
            probes::replica_served_stale(h, 100).is_some(),
            "seed {}: no follower served clients while lagging; {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn zk_curator_under_network_delay_strands_no_waiter() {
    // The client's reconnect pauses and Curator's retry sleeps run at the world's
    // scale: a waiter whose session expired under a delay reconnects and takes the
    // freed lock within the liveness bound (on main, 7-9 of 10 runs stranded one).
    for design in ["zk-curator", "zk-curator-fenced"] {
        for run in sweep(
            &common::design(design),
            &common::scenario("network-delay"),
            0..10,
            2,
            true,
            &|_, _| {},
        )
        .expect("runs complete")
        {
            let replay = replay_command(design, "network-delay", run.seed);
            assert!(
                run.verdicts
                    .iter()
                    .all(|(name, v)| !(name.contains("liveness") && v.is_invalid())),
                "{design} seed {}: a waiter was stranded; {replay}",
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
