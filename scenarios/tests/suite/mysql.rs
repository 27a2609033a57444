//! The MySQL designs in locksim's world (one MariaDB model server, `mysql-1`):
//! `mysql-unique-index` deadlocks when its holder dies (no expiry); `mysql-get-lock`
//! and `mysql-for-update` lose their lock with their connection while the holder keeps
//! working; `mysql-unique-index-expiry` lets client clocks decide, and its fenced
//! variant's storage refuses the stale holder. The classes come from the checkers on
//! the histories, never from the design's name.

use crate::common;

use scenarios::checkers::{Safety, probes};
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

#[test]
fn mysql_designs_are_valid_without_faults() {
    for design in lock_impl::designs_on(lock_impl::Backend::MySql).map(|d| d.name) {
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

#[test]
fn mysql_unique_index_under_client_crash_is_stuck_but_safe() {
    for run in runs("mysql-unique-index", "client-crash") {
        let replay = replay_command("mysql-unique-index", "client-crash", run.seed);
        assert!(
            run.fault_seen.is_some(),
            "seed {}: no crash of a holder; {replay}",
            run.seed
        );
        assert!(
            verdict(&run, "liveness").is_invalid(),
            "seed {}: liveness {:?}; {replay}",
            run.seed,
            verdict(&run, "liveness")
        );
        assert!(
            !verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn mysql_get_lock_under_a_connection_drop_is_unsafe() {
    for run in runs("mysql-get-lock", "mysql-connection-drop") {
        let replay = replay_command("mysql-get-lock", "mysql-connection-drop", run.seed);
        let history = run.history.as_ref().expect("kept");
        let witness = probes::connection_closed_during_a_hold(history);
        assert!(
            witness.is_some(),
            "seed {}: no connection of a holder closed with its lock; {replay}",
            run.seed
        );
        assert_eq!(run.fault_seen, witness, "seed {}", run.seed);
        assert!(
            witness
                .as_deref()
                .is_some_and(|w| w.contains("releasing GET_LOCK")),
            "seed {}: {witness:?}",
            run.seed
        );
        let resets = history
            .events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::Fault { .. }))
            .count();
        assert!(resets > 0, "seed {}: no fault recorded; {replay}", run.seed);
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: mutual exclusion {:?}; {replay}",
            run.seed,
            verdict(&run, "mutual-exclusion")
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
        let closed = history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Server(ServerEvent::MySqlConnection { event, released, .. })
                if event == "closed" && !released.is_empty())
        });
        assert!(closed, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn mysql_unique_index_keeps_its_row_through_a_connection_drop() {
    for run in runs("mysql-unique-index", "mysql-connection-drop") {
        let replay = replay_command("mysql-unique-index", "mysql-connection-drop", run.seed);
        if let Some(w) = &run.fault_seen {
            assert!(
                w.contains("keeping the lock"),
                "seed {}: {w}; {replay}",
                run.seed
            );
        }
        assert!(
            !verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
    }
}

#[test]
fn the_mysql_scenario_applies_to_the_mysql_designs_only() {
    let catalog = scenarios::catalog::catalog();
    let drop = catalog
        .iter()
        .find(|s| s.name == "mysql-connection-drop")
        .expect("in the catalog");
    assert!(drop.applies_to(lock_impl::Backend::MySql, 0));
    assert!(!drop.applies_to(lock_impl::Backend::Redis, 1));
    assert!(!drop.applies_to(lock_impl::Backend::ZooKeeper, 0));
    // The server faults reach a MySQL server as they reach a Redis one.
    for name in ["server-pause", "server-restart", "partition", "clock-jump"] {
        let s = catalog
            .iter()
            .find(|s| s.name == name)
            .expect("in the catalog");
        assert!(s.applies_to(lock_impl::Backend::MySql, 0), "{name}");
    }
    // Sentinel's failover does not; MySQL's own does.
    let failover = catalog
        .iter()
        .find(|s| s.name == "failover")
        .expect("in the catalog");
    let why = failover
        .fit(lock_impl::Backend::MySql, 0)
        .expect_err("Sentinel failover is Redis's");
    assert!(why.contains("Sentinel") && why.contains("MySQL"), "{why}");
}

#[test]
fn mysql_get_lock_is_unsafe_when_wait_timeout_reaps_a_paused_holder() {
    for run in runs("mysql-get-lock", "mysql-wait-timeout") {
        let replay = replay_command("mysql-get-lock", "mysql-wait-timeout", run.seed);
        let witness = probes::connection_closed_during_a_hold(run.history.as_ref().expect("kept"));
        assert!(
            witness
                .as_deref()
                .is_some_and(|w| w.contains("releasing GET_LOCK")),
            "seed {}: {witness:?}; {replay}",
            run.seed
        );
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
    }
    for run in runs("mysql-unique-index", "mysql-wait-timeout") {
        let replay = replay_command("mysql-unique-index", "mysql-wait-timeout", run.seed);
        assert!(
            !verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
    }
}

#[test]
fn mysql_for_update_loses_its_row_lock_with_a_dropped_connection() {
    for run in runs("mysql-for-update", "mysql-connection-drop") {
        let replay = replay_command("mysql-for-update", "mysql-connection-drop", run.seed);
        let history = run.history.as_ref().expect("kept");
        let witness = probes::connection_closed_during_a_hold(history);
        assert!(
            witness
                .as_deref()
                .is_some_and(|w| w.contains("rolling back the transaction that held row")),
            "seed {}: {witness:?}; {replay}",
            run.seed
        );
        let rolled_back = history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Server(ServerEvent::MySqlConnection { event, row_locks, .. })
                if event == "closed" && row_locks.contains(&history.params.key))
        });
        assert!(rolled_back, "seed {}: {replay}", run.seed);
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: mutual exclusion {:?}; {replay}",
            run.seed,
            verdict(&run, "mutual-exclusion")
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
    }
}

/// Unlike the unique index, a crashed holder's row lock goes with its connection (the
/// server rolls the transaction back): nobody waits forever, and nobody overlaps.
#[test]
fn mysql_for_update_under_client_crash_is_safe_and_live() {
    for run in runs("mysql-for-update", "client-crash") {
        let replay = replay_command("mysql-for-update", "client-crash", run.seed);
        assert!(
            run.fault_seen.is_some(),
            "seed {}: no crash of a holder; {replay}",
            run.seed
        );
        assert!(
            !verdict(&run, "liveness").is_invalid(),
            "seed {}: liveness {:?}; {replay}",
            run.seed,
            verdict(&run, "liveness")
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

#[test]
fn mysql_unique_index_expiry_is_unsafe_when_client_clocks_disagree() {
    for run in runs("mysql-unique-index-expiry", "client-clocks-apart") {
        let replay = replay_command("mysql-unique-index-expiry", "client-clocks-apart", run.seed);
        assert!(
            run.fault_seen.is_some(),
            "seed {}: the clocks never disagreed past a lease; {replay}",
            run.seed
        );
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert!(
            verdict(&run, "lost-update").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
        // The server took the row over by a client's clock, not by its own.
        let history = run.history.as_ref().expect("kept");
        let taken_over = history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Server(ServerEvent::Removed { cause, by, .. })
                if cause == "expired" && by == "expiry")
        });
        assert!(taken_over, "seed {}: no takeover; {replay}", run.seed);
    }
}

#[test]
fn mysql_unique_index_fenced_fences_off_the_holder_client_clocks_betray() {
    for run in runs("mysql-unique-index-fenced", "client-clocks-apart") {
        let replay = replay_command("mysql-unique-index-fenced", "client-clocks-apart", run.seed);
        assert!(run.fault_seen.is_some(), "seed {}: {replay}", run.seed);
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert!(
            !verdict(&run, "lost-update").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Fenced, "seed {}: {replay}", run.seed);
    }
}

/// A primary crashes right after committing a lock row its asynchronous replica has
/// not received; the orchestrator promotes the replica and re-points the clients, and
/// the next client's INSERT succeeds there: two holders.
#[test]
fn mysql_unique_index_is_unsafe_when_a_failover_loses_the_last_binlog_events() {
    for run in runs("mysql-unique-index", "mysql-failover") {
        let replay = replay_command("mysql-unique-index", "mysql-failover", run.seed);
        let history = run.history.as_ref().expect("kept");
        let witness = probes::failover_lost_the_lock(history);
        assert!(
            witness
                .as_deref()
                .is_some_and(|w| w.contains("mysql-2 was promoted without")),
            "seed {}: {witness:?}; {replay}",
            run.seed
        );
        assert_eq!(run.fault_seen, witness, "seed {}", run.seed);
        let promoted = history.events.iter().any(|e| {
            e.host == "mysql-2"
                && matches!(&e.kind, EventKind::Server(ServerEvent::Role { role }) if role == "master")
        });
        assert!(promoted, "seed {}: no promotion; {replay}", run.seed);
        // The promoted replica granted the lock again, to another client.
        let regranted = history.events.iter().any(|e| {
            e.host == "mysql-2"
                && matches!(&e.kind, EventKind::Server(ServerEvent::Written { by, .. }) if by.starts_with("client-"))
        });
        assert!(regranted, "seed {}: {replay}", run.seed);
        assert!(
            verdict(&run, "mutual-exclusion").is_invalid(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Unsafe, "seed {}: {replay}", run.seed);
    }
}

/// The restart scenarios' runs over seeds `0..10`, each asserted to have seen its fault:
/// the server's machine crashed while a client held a lock it granted, and it
/// recovered (the probe reads the restart's own record).
fn restart_runs(design: &str, scenario: &str) -> Vec<RunSummary> {
    let runs = sweep(
        &common::design(design),
        &common::scenario(scenario),
        0..10,
        2,
        true,
        &|_, _| {},
    )
    .expect("runs complete");
    for run in &runs {
        let replay = replay_command(design, scenario, run.seed);
        let history = run.history.as_ref().expect("kept");
        assert!(
            probes::restart_struck_a_hold(history).is_some(),
            "seed {}: the crash struck no hold; {replay}",
            run.seed
        );
    }
    runs
}

/// The restart's record on `history`: (held, kept, detail).
fn restart_record(history: &sim::history::History) -> Option<(Option<String>, bool, String)> {
    history.events.iter().find_map(|e| match &e.kind {
        EventKind::Server(ServerEvent::MySqlRestart {
            held, kept, detail, ..
        }) => Some((held.clone(), *kept, detail.clone())),
        _ => None,
    })
}

#[test]
fn mysql_unique_index_keeps_its_row_through_a_restart_with_flush_at_every_commit() {
    let design = "mysql-unique-index";
    for run in restart_runs(design, "mysql-restart") {
        let replay = replay_command(design, "mysql-restart", run.seed);
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
        let (held, kept, detail) =
            restart_record(run.history.as_ref().expect("kept")).expect("a restart");
        assert!(
            held.is_some() && kept,
            "seed {}: innodb_flush_log_at_trx_commit=1 lost the row: {detail}; {replay}",
            run.seed
        );
    }
}

#[test]
fn mysql_unique_index_is_unsafe_when_a_restart_loses_an_unflushed_row() {
    let design = "mysql-unique-index";
    let scenario = "mysql-restart-flush-2";
    let runs = restart_runs(design, scenario);
    // Every restart lost the row granted just before the crash: the flush comes once
    // a second, the crash a few ms after the commit.
    for run in &runs {
        let (held, kept, detail) =
            restart_record(run.history.as_ref().expect("kept")).expect("a restart");
        assert!(
            held.is_some() && !kept && detail.contains("had not flushed it"),
            "seed {}: {detail}; {}",
            run.seed,
            replay_command(design, scenario, run.seed)
        );
    }
    // In some runs a second client inserted the lost row while the first still
    // worked.
    let unsafe_runs: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.safety() == Safety::Unsafe)
        .collect();
    assert!(!unsafe_runs.is_empty(), "no unsafe run in seeds 0..10");
    // (A release lost with the grant, the previous holder's row brought back by the
    // server's recovery: see the test below.)
    for run in unsafe_runs {
        let v = verdict(run, "mutual-exclusion");
        let summary = v.evidence().map(|e| e.summary.clone()).unwrap_or_default();
        assert!(
            summary.contains("innodb_flush_log_at_trx_commit=2 had not flushed it"),
            "seed {}: {v:?}; {}",
            run.seed,
            replay_command(design, scenario, run.seed)
        );
    }
}

#[test]
fn mysql_get_lock_is_unsafe_when_the_server_restarts_under_its_holder() {
    let design = "mysql-get-lock";
    for scenario in ["mysql-restart", "mysql-restart-flush-2"] {
        let runs = restart_runs(design, scenario);
        let unsafe_runs: Vec<&RunSummary> = runs
            .iter()
            .filter(|r| r.safety() == Safety::Unsafe)
            .collect();
        assert!(
            unsafe_runs.len() * 2 > runs.len(),
            "{scenario}: only {} of {} runs unsafe",
            unsafe_runs.len(),
            runs.len()
        );
        for run in unsafe_runs {
            let v = verdict(run, "mutual-exclusion");
            let summary = v.evidence().map(|e| e.summary.clone()).unwrap_or_default();
            assert!(
                summary.contains("a restart has no connection"),
                "{scenario} seed {}: {v:?}; {}",
                run.seed,
                replay_command(design, scenario, run.seed)
            );
        }
    }
}

#[test]
fn an_innodb_flush_log_at_trx_commit_outside_mariadbs_values_is_refused_naming_them() {
    let mut w = common::scenario("mysql-restart-flush-2").workload.clone();
    let set = |w: &mut sim::world::Workload, v: u8| {
        if let Some(m) = &mut w.systems.mysql {
            m.innodb_flush_log_at_trx_commit = v;
        }
    };
    for good in [0, 1, 2, 3] {
        set(&mut w, good);
        assert!(w.validate().is_ok(), "{good} refused");
    }
    for bad in [4, 7, 255] {
        set(&mut w, bad);
        let err = w.validate().expect_err("refused").to_string();
        assert!(
            err.contains(&format!(
                "workload.mysql.innodb_flush_log_at_trx_commit={bad}"
            )) && err.contains("0 (write and flush once a second)")
                && err.contains("1 (the default")
                && err.contains("2 (write at commit")
                && err.contains("3 (flush at prepare"),
            "{err}"
        );
    }
}

/// Jumping to the next event gives the tick-by-tick history in the restart cells, and
/// no timer (the once-per-second flush, the restarted server's) fires unhinted.
/// (`tests/stepping.rs` checks every cell; this is the restart part of it, quick to
/// run on its own.)
#[test]
fn jumping_gives_the_tick_by_tick_history_in_the_restart_cells() {
    use sim::world::Stepping;
    for scenario in ["mysql-restart", "mysql-restart-flush-2"] {
        let s = common::scenario(scenario);
        for d in lock_impl::designs_on(lock_impl::Backend::MySql) {
            let mut cfg = scenarios::sweep::config(&common::design(d.name), &s, 0);
            cfg.stepping = Stepping::Tick;
            let tick = sim::world::run(&cfg).expect("run");
            cfg.stepping = Stepping::Jump;
            let jump = sim::world::run(&cfg).expect("run");
            let at = format!("design={} scenario={scenario}", d.name);
            assert_eq!(jump.stats.unhinted_wakes, 0, "{at}: a timer was not hinted");
            assert_eq!(tick.digest(), jump.digest(), "{at}: the histories differ");
            assert!(jump.stats.steps < tick.stats.steps, "{at}: no step saved");
        }
    }
}

/// The `mysql-*` worlds whose fault is a dropped connection or a restart: critical
/// sections inside the lease, so a design with an expiry keeps its row through the
/// fault (before, 5-lease work overran the lease from the first hold, before any
/// fault: every run unsafe or fenced whatever the fault did).
#[test]
fn mysql_unique_index_expiry_keeps_its_lock_through_drops_wait_timeouts_and_restarts() {
    for design in ["mysql-unique-index-expiry", "mysql-unique-index-fenced"] {
        for scenario in [
            "mysql-connection-drop",
            "mysql-wait-timeout",
            "mysql-restart",
        ] {
            let s = common::scenario(scenario);
            let w = &s.workload;
            assert!(w.work_ms < w.lease_ms, "{scenario}: work {} ms", w.work_ms);
            for run in runs(design, scenario) {
                assert_eq!(
                    run.safety(),
                    Safety::Safe,
                    "{design} × {scenario} seed {}: {}",
                    run.seed,
                    replay_command(design, scenario, run.seed)
                );
                assert!(run.fault_seen.is_some(), "{scenario} seed {}", run.seed);
            }
        }
    }
}

/// The connection-scoped designs are unsafe in the same worlds with their fault and
/// safe without it, seed by seed: the fault decides.
#[test]
fn mysql_get_lock_breaks_in_the_mysql_worlds_only_when_the_fault_strikes() {
    use scenarios::sweep::{DesignSpec, config};
    let design = DesignSpec::builtin("mysql-get-lock").expect("design");
    for scenario in [
        "mysql-connection-drop",
        "mysql-wait-timeout",
        "mysql-restart",
    ] {
        let s = common::scenario(scenario);
        for seed in 0..3 {
            let mut cfg = config(&design, &s, seed);
            cfg.plan = sim::faults::FaultPlan { faults: vec![] };
            let h = sim::world::run(&cfg).expect("run completes");
            assert_eq!(
                s.probe(&h),
                None,
                "{scenario} seed {seed}: no fault, none seen"
            );
            let checked = scenarios::checkers::check_all(&h);
            assert!(
                checked.iter().all(|(_, v)| !v.is_invalid()),
                "{scenario} seed {seed} without its fault: {checked:?}"
            );
        }
        let unsafe_runs = runs("mysql-get-lock", scenario)
            .iter()
            .filter(|r| r.safety() == Safety::Unsafe)
            .count();
        assert!(unsafe_runs >= 3, "{scenario}: {unsafe_runs} unsafe of 4");
    }
}

/// A MariaDB restart takes what `mariadbd` takes to start after a crash (measured:
/// 172 ms), from half to twice that, at the world's scale (8 s lease: 4/15 of real
/// time); before, 0.25-1 lease (50-200 ms at a 200 ms lease, i.e. 7.5-30 s of real
/// time). `--param restart-ms` pins it.
#[test]
fn a_mysql_restart_takes_mariadbs_measured_start_at_the_worlds_scale_unless_pinned() {
    use lock_impl::scale::{MARIADB_START, TimeScale};
    use scenarios::params::Param;
    for scenario in ["mysql-restart", "mysql-restart-flush-2"] {
        let s = common::scenario(scenario);
        assert!(s.has_param(Param::RestartMs), "{scenario}");
        let scale = TimeScale::for_lease(s.workload.lease_ms);
        let range = scale.ms(MARIADB_START.real_ms / 2)..=scale.ms(MARIADB_START.real_ms * 2);
        let restart_of = |s: &scenarios::catalog::Scenario, seed| {
            s.plan(seed)
                .faults
                .iter()
                .find_map(|f| match f.kind {
                    sim::faults::FaultKind::MachineCrash {
                        restart_after_ms, ..
                    } => restart_after_ms,
                    _ => None,
                })
                .expect("a machine crash that restarts")
        };
        for seed in 0..20 {
            let ms = restart_of(&s, seed);
            assert!(range.contains(&ms), "{scenario} seed {seed}: {ms} ms");
        }
        let pinned = s.clone().with_param(Param::RestartMs, 5_000).expect("pin");
        assert_eq!(restart_of(&pinned, 3), 5_000);
        assert_eq!(pinned.plan(3).faults[0].at_ms, s.plan(3).faults[0].at_ms);
    }
}

/// `GET_LOCK` locks and `FOR UPDATE` row locks live in the server's memory, scoped to
/// a connection, and are never written to the binlog: a promoted replica never has
/// them, whatever its lag. The failover's evidence says so, not "before replicating"
/// (which stays for the row design, whose lock is a replicated row).
#[test]
fn a_failover_that_loses_a_connections_lock_says_it_was_never_replicated() {
    for design in ["mysql-get-lock", "mysql-for-update"] {
        let run = runs(design, "mysql-failover")
            .into_iter()
            .find(|r| r.fault_seen.is_some())
            .expect("a failover seen");
        let fault = run.fault_seen.unwrap_or_default();
        assert!(
            fault.contains("never written to the binlog")
                && fault.contains("whatever its replication lag")
                && !fault.contains("before replicating"),
            "{design}: {fault}"
        );
    }
    let run = runs("mysql-unique-index", "mysql-failover")
        .into_iter()
        .find(|r| r.fault_seen.is_some())
        .expect("a failover seen");
    let fault = run.fault_seen.unwrap_or_default();
    assert!(fault.contains("before replicating"), "{fault}");
}

/// MariaDB counts a connection's nested `GET_LOCK`s and frees the lock at the last
/// `RELEASE_LOCK` (its `1` answers every release): the design reports the holds left,
/// the server's record keeps the lock until the outer release, and the cell is safe.
#[test]
fn mysql_get_lock_counts_nested_holds_down_and_frees_the_lock_at_the_last_release() {
    for run in runs("mysql-get-lock", "reentrancy") {
        let replay = replay_command("mysql-get-lock", "reentrancy", run.seed);
        let history = run.history.as_ref().expect("kept");
        let nested = probes::nested_acquisition(history);
        assert!(
            nested.is_some(),
            "seed {}: no nested hold; {replay}",
            run.seed
        );
        assert_eq!(run.fault_seen, nested, "seed {}", run.seed);
        // Each round's releases, by their hold count before them, and what they said.
        let pairs = scenarios::checkers::model::op_pairs(history).expect("paired");
        let mut seen = std::collections::BTreeSet::new();
        for p in pairs
            .iter()
            .filter(|p| p.f == sim::history::OpF::Release && p.outcome == sim::history::Phase::Ok)
        {
            let EventKind::Op(invoke) = &history.events[p.invoke].kind else {
                unreachable!()
            };
            let EventKind::Op(done) = &history.events[p.completion.expect("ok")].kind else {
                unreachable!()
            };
            seen.insert((invoke.value, done.detail.clone()));
        }
        assert_eq!(
            seen,
            [
                (Some(1), Some("removed".to_string())),
                (Some(2), Some("still-held count=1".to_string())),
                (Some(3), Some("still-held count=2".to_string())),
            ]
            .into_iter()
            .collect(),
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(
            verdict(&run, "reentrancy"),
            &scenarios::checkers::Verdict::Valid,
            "seed {}: {replay}",
            run.seed
        );
        assert_eq!(run.safety(), Safety::Safe, "seed {}: {replay}", run.seed);
    }
}

/// A release lost with the restart brings the previous holder's row back, held by
/// nobody and without expiry: every later acquire is refused until the run's end,
/// which comes before the liveness bound. Stuck whatever the bound.
#[test]
fn mysql_unique_index_row_brought_back_by_recovery_is_stuck_to_the_runs_end() {
    let design = "mysql-unique-index";
    let scenario = "mysql-restart-flush-2";
    let mut back = 0;
    for run in restart_runs(design, scenario) {
        let replay = replay_command(design, scenario, run.seed);
        let history = run.history.as_ref().expect("kept");
        let came_back = history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Server(ServerEvent::Written { by, .. }) if *by == e.host)
        });
        if !came_back {
            continue;
        }
        back += 1;
        let v = verdict(&run, "liveness");
        let summary = v.evidence().map(|e| e.summary.clone()).unwrap_or_default();
        assert!(
            summary.contains("brought lock lock:stock back by itself")
                && summary.contains("stuck whatever the bound"),
            "seed {}: {v:?}; {replay}",
            run.seed
        );
    }
    assert!(back > 0, "no row came back in seeds 0..10");
}
