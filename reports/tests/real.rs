//! The real-process runner (`locksim run --real`) and `locksim parity`: the same lock
//! code, fault plan and checkers against real servers. These tests start real
//! `redis-server`s and a real ZooKeeper (CI requires them; elsewhere a missing package
//! prints one `SKIPPED:` line).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use indicatif::ProgressBar;
use reports::cells::run_real_cell_with;
use reports::input::{design, scenario};

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_locksim"))
}

/// Runs `d × s` against real servers for `seeds`.
fn real(
    d: &str,
    s: &str,
    seeds: std::ops::Range<u64>,
) -> (
    reports::table::CellResult,
    Vec<scenarios::sweep::RunSummary>,
) {
    let (cell, runs, _) = run_real_cell_with(
        &design(d).unwrap(),
        &scenario(s).unwrap(),
        seeds,
        &ProgressBar::hidden(),
        exe(),
    )
    .unwrap_or_else(|e| panic!("{d} × {s}: {e}"));
    (cell, runs)
}

#[test]
fn a_real_holder_paused_past_its_lease_gives_two_holders_as_in_the_simulator() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let (cell, _) = real("set-nx-px-lua", "gc-pause", 0..2);
    assert_eq!(cell.runs, 2);
    assert_eq!(
        cell.fault_seen, 2,
        "the SIGSTOP outlasted the lease in every run"
    );
    assert_eq!(
        cell.per_checker.get("mutual-exclusion").copied(),
        Some(2),
        "two holders in every run: {cell:?}"
    );
    // The simulator classes this cell's runs unsafe or overlap (196 and 4 of seeds
    // 0..200): a pause that lands just after the holder's write, and the pauses after
    // it that pick the same paused holder again, leave no stale write. Real runs draw
    // their own landing points (a loaded machine's more often: one such run in about
    // twenty beside the simulation suite), so a run may be either, and one must be
    // unsafe.
    let class = |c: &str| cell.classes.get(c).copied().unwrap_or(0);
    assert_eq!(class("unsafe") + class("overlap"), 2, "{cell:?}");
    assert!(class("unsafe") >= 1, "{cell:?}");
    assert!(cell.latency.count > 0, "acquire latencies were measured");
}

#[test]
fn a_real_fencing_storage_refuses_the_paused_holders_stale_writes() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    // Three runs, at least two of them with the pause past the lease: on a loaded
    // machine (a clean CI run, its tests in parallel) a real holder can be between
    // locks when its SIGSTOP lands, and that run proves nothing (it is `no-fault`).
    let (cell, runs) = real("fenced", "gc-pause", 0..3);
    assert!(cell.fault_seen >= 2, "{cell:?}");
    assert_eq!(
        cell.per_checker.get("lost-update").copied().unwrap_or(0),
        0,
        "no update lost behind a fencing storage: {cell:?}"
    );
    assert!(
        runs.iter().any(|r| r.storage_refused),
        "the storage turned a stale token away"
    );
    // Without the server's own record a run with its fault is not called safe or
    // fenced: unknown, or `overlap` where the paused holder wrote nothing after the
    // newer grant (on a loaded machine its SIGSTOP can last to the run's end: one CI run
    // had classes {overlap: 1, unknown: 2}); one without its fault is `no-fault`.
    let class = |c: &str| cell.classes.get(c).copied().unwrap_or(0);
    assert_eq!(
        (class("unknown") + class("overlap")) as u64,
        cell.fault_seen,
        "{cell:?}"
    );
    assert_eq!(
        class("unknown") + class("overlap") + class(reports::table::NO_FAULT),
        3,
        "{cell:?}"
    );
}

#[test]
fn a_real_zookeeper_session_expires_under_a_paused_holder() {
    if lock_impl::testing::real_zookeeper().is_none() {
        return;
    }
    // Three runs: on a loaded machine the paused holder's late write can miss the next
    // holder's (no update lost, the run unknown without the server's record), so one
    // run of the three must show the harm, and none may be called safe. (With two, both
    // runs were unknown once in a CI run whose machine was busier than usual.)
    let (cell, _) = real("zk-curator", "gc-pause", 0..3);
    assert_eq!(cell.fault_seen, 3);
    assert!(
        cell.classes.get("unsafe").copied().unwrap_or(0) >= 1,
        "{cell:?}"
    );
    assert_eq!(cell.classes.get("safe"), None, "{cell:?}");
}

#[test]
fn a_real_zookeeper_ensemble_expires_the_cut_off_holders_session_by_its_own_log() {
    if lock_impl::testing::real_zookeeper().is_none() {
        return;
    }
    // The holder is cut off from the ensemble for twice its session timeout and more:
    // the leader logs the expiry, the runner reads it off the log and names the client
    // by the lock node the session had (its `dump`), and the scenario's probe sees it.
    let (h, summary) = real_history("zk-curator", "zk-session-expiry", 0);
    let expiries: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            sim::history::EventKind::Server(sim::history::ServerEvent::ZkSession {
                session,
                client,
                event,
                ephemerals,
                ..
            }) if event == "expired" => Some(format!(
                "{} {} {session} of {client} {ephemerals:?}",
                e.at_us, e.host
            )),
            _ => None,
        })
        .collect();
    assert!(!expiries.is_empty(), "faults: {:#?}", fault_starts(&h));
    let seen = summary.fault_seen.unwrap_or_default();
    assert!(
        seen.contains("expired session"),
        "the probe saw no expiry under a hold: {seen:?}; expiries: {expiries:#?}"
    );
}

#[test]
fn a_real_redisson_fenced_lock_grants_its_tokens_in_order() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    // Every hold of a Redisson client writes the same owner value and the runner
    // samples the key every 20 ms: token-order once placed a grant at an earlier
    // hold's sampled write and called the real counter's order broken in every run.
    let (cell, runs) = real("redisson-fenced", "gc-pause", 0..2);
    assert!(cell.fault_seen >= 1, "{cell:?}");
    assert_eq!(
        cell.per_checker.get("token-order").copied().unwrap_or(0),
        0,
        "{cell:?}"
    );
    assert!(
        runs.iter().any(|r| r.storage_refused),
        "the storage turned the paused holder's token away: {cell:?}"
    );
}

#[test]
fn faults_the_runner_cannot_make_real_are_refused_naming_why() {
    let refused = |d: &str, s: &str| {
        reports::parity::real_refusals(&design(d).unwrap(), &scenario(s).unwrap(), 0..3).join("; ")
    };
    // A Redis server's clock moves (the clock shim), a client's too (its process's
    // `Deps` clock); a ZooKeeper server's does not yet.
    assert!(refused("redlock", "redlock-clock-jump").is_empty());
    assert!(refused("node-redlock", "client-clock-step").is_empty());
    let why = refused("zk-curator", "clock-jump");
    assert!(why.contains("ZooKeeper servers"), "{why}");
    let why = refused("zk-curator", "zk-follower-stale");
    assert!(why.contains("ZooKeeper servers"), "{why}");
    let why = refused("mongo-find-and-modify", "gc-pause");
    assert!(why.contains("MongoDB has no Debian package"), "{why}");
    assert!(refused("set-nx-px-lua", "gc-pause").is_empty());
    // And the command says so before starting anything.
    let out = Command::new(exe())
        .args([
            "run",
            "--real",
            "--design",
            "zk-curator",
            "--scenario",
            "clock-jump",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--real cannot run") && err.contains("ZooKeeper servers"),
        "{err}"
    );
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: the fields after the last `)`.
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s[s.rfind(')').map_or(0, |i| i + 1)..]
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn no_server_or_client_process_outlives_a_killed_parent() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let mut parent = Command::new(exe())
        .args([
            "run",
            "--real",
            "--design",
            "set-nx-px-lua",
            "--scenario",
            "gc-pause",
            "--seeds",
            "0..5",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Mid-run: the server and eight client processes are up.
    let mut kids = Vec::new();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        kids = children_of(parent.id());
        if kids.len() >= 9 {
            break;
        }
    }
    assert!(kids.len() >= 9, "a server and 8 clients: {kids:?}");
    parent.kill().unwrap();
    parent.wait().unwrap();
    let mut left = kids.clone();
    for _ in 0..100 {
        left.retain(|&p| alive(p));
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn parity_flags_a_class_seen_on_one_side_only_and_intervals_apart() {
    use reports::table::CellResult;
    let cell = |unsafe_runs: usize, safe: usize| {
        let mut c = CellResult::new("d", "s");
        c.runs = (unsafe_runs + safe) as u64;
        if unsafe_runs > 0 {
            c.classes.insert("unsafe".into(), unsafe_runs);
            c.per_checker.insert("mutual-exclusion".into(), unsafe_runs);
        }
        if safe > 0 {
            c.classes.insert("safe".into(), safe);
        }
        c
    };
    assert!(reports::parity::flags(&cell(20, 0), &cell(20, 0)).is_empty());
    let f = reports::parity::flags(&cell(20, 0), &cell(0, 20));
    assert!(
        f.iter().any(|x| x == "unsafe only in the model (20/20)"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|x| x == "safe only against real servers (20/20)"),
        "{f:?}"
    );
    assert!(
        f.iter().any(|x| x.contains("intervals do not overlap")),
        "{f:?}"
    );
    // A real side whose runs are unknown (no server record) hides a safe class.
    let mut unknown = cell(0, 0);
    unknown.runs = 20;
    unknown.classes.insert("unknown".into(), 20);
    assert!(reports::parity::flags(&cell(0, 20), &unknown).is_empty());
    // A class in 1 of 100 model runs and none of 20 real ones is a note, not a flag.
    let (mut model, real) = (cell(99, 0), cell(20, 0));
    model.runs = 100;
    model.classes.insert("overlap".into(), 1);
    assert!(reports::parity::flags(&model, &real).is_empty());
    assert_eq!(
        reports::parity::notes(&model, &real),
        ["overlap only in the model (1/100)"]
    );
}

#[test]
fn parity_runs_both_sides_of_a_real_cell_and_names_why_a_cell_stays_model_only() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let cells = vec![
        ("set-nx-px-lua".to_string(), "gc-pause".to_string()),
        ("zk-curator".to_string(), "clock-jump".to_string()),
    ];
    let rows = reports::parity::run(&cells, 2, 0..4, 2, exe(), false).unwrap();
    assert_eq!(rows.len(), 2);
    let real = rows[0]
        .real
        .as_ref()
        .expect("gc-pause runs against real servers");
    assert_eq!(real.cell.runs, 2);
    assert_eq!(rows[0].model.cell.runs, 4);
    assert!(
        rows[0].flags.is_empty(),
        "both sides unsafe in every run: {:?}",
        rows[0].flags
    );
    let why = rows[1]
        .real
        .as_ref()
        .expect_err("a ZooKeeper server's clock jump stays model-only");
    assert!(why.contains("ZooKeeper servers"), "{why}");
    let table = reports::parity::markdown(&rows);
    assert!(table.contains("model only: "), "{table}");
}

#[test]
fn a_real_restart_without_persistence_loses_the_lock_by_the_servers_own_answers() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    // The runner asks the server for the lock key just before SIGKILL and again after
    // the restart: held, then absent, is the server's own record of the loss, which
    // the scenario's probe reads.
    // A real run is not a replay: in about one run in twenty the key is free at the
    // very moment of the kill (released, not yet taken again), and there is no loss to
    // record. Three seeds, so the check does not hang on that chance (1 in 8,000).
    let (cell, _) = real("set-nx-px-lua", "server-restart", 0..3);
    assert!(cell.fault_seen >= 1, "{cell:?}");
    assert!(
        cell.classes.get("unsafe").copied().unwrap_or(0) >= 1,
        "{cell:?}"
    );
}

/// The real run of `d × s` for `seed`: its history and the checkers' verdicts.
fn real_history(
    d: &str,
    s: &str,
    seed: u64,
) -> (sim::history::History, scenarios::sweep::RunSummary) {
    let sc = scenario(s).unwrap();
    let cfg = scenarios::sweep::config(&design(d).unwrap(), &sc, seed);
    let h = reports::real::run_real(&cfg, exe(), None).unwrap_or_else(|e| panic!("{e}"));
    let summary = scenarios::sweep::summarize(&sc, &h);
    (h, summary)
}

/// Each fault start in `h`: (host, detail, peers).
fn fault_starts(h: &sim::history::History) -> Vec<(String, String, Vec<String>)> {
    h.events
        .iter()
        .filter_map(|e| match &e.kind {
            sim::history::EventKind::Fault {
                phase: sim::history::FaultPhase::Start,
                detail,
                peers,
                ..
            } => Some((e.host.clone(), detail.clone(), peers.clone())),
            _ => None,
        })
        .collect()
}

fn invalid(r: &scenarios::sweep::RunSummary, checker: &str) -> bool {
    r.verdicts
        .iter()
        .any(|(name, v)| name.as_str() == checker && v.is_invalid())
}

#[test]
fn a_real_partition_cuts_the_master_and_holder_off_so_sentinel_promotes_and_two_clients_hold() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let mut two_holders = 0;
    for seed in 0..3 {
        let (h, r) = real_history("set-nx-px-lua", "split-brain", seed);
        let starts = fault_starts(&h);
        let cut = starts
            .iter()
            .find(|(host, d, _)| host == "redis" && d.starts_with("partition"))
            .unwrap_or_else(|| panic!("seed {seed}: no partition of redis: {starts:?}"));
        assert!(
            cut.2.iter().any(|p| p == "sentinel-1") && cut.2.iter().any(|p| p == "redis-2"),
            "the Sentinels and the replica are on the other side: {cut:?}"
        );
        let cut_at = h
            .events
            .iter()
            .find(|e| e.host == "redis" && matches!(e.kind, sim::history::EventKind::Fault { .. }))
            .map(|e| e.at_us)
            .unwrap();
        // The Sentinels lost the master through the proxy and promoted the replica,
        // by the replica's own answer to the runner.
        assert!(
            h.events.iter().any(|e| e.host == "redis-2"
                && e.at_us > cut_at
                && matches!(&e.kind, sim::history::EventKind::Server(sim::history::ServerEvent::Role { role }) if role == "master")),
            "seed {seed}: redis-2 was never promoted"
        );
        if invalid(&r, "mutual-exclusion") {
            two_holders += 1;
        }
    }
    assert!(two_holders >= 1, "both sides granted the lock in a run");
}

#[test]
fn a_real_connection_reset_ends_the_for_update_holders_transaction_and_the_probe_sees_it() {
    if lock_impl::testing::real_mysql().is_none() {
        return;
    }
    // MariaDB rolls the reset holder's transaction back and frees its row lock; the
    // runner names the session by `INNODB_TRX` before the reset and sees it leave the
    // process list, and the scenario's probe reads that record.
    let (h, r) = real_history("mysql-for-update", "mysql-connection-drop", 0);
    let closed: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            sim::history::EventKind::Server(sim::history::ServerEvent::MySqlConnection {
                client,
                event,
                row_locks,
                ..
            }) => Some(format!("{} {client} {event} {row_locks:?}", e.at_us)),
            _ => None,
        })
        .collect();
    let seen = r.fault_seen.clone().unwrap_or_default();
    assert!(
        !seen.is_empty(),
        "the probe saw no holder's session end: closed {closed:#?}; faults {:#?}",
        fault_starts(&h)
    );
}

#[test]
fn a_real_connection_reset_ends_the_holders_get_lock_and_another_client_takes_it() {
    if lock_impl::testing::real_mysql().is_none() {
        return;
    }
    let mut unsafe_runs = 0;
    for seed in 0..2 {
        let (h, r) = real_history("mysql-get-lock", "mysql-connection-drop", seed);
        let resets: Vec<_> = fault_starts(&h)
            .into_iter()
            .filter(|(_, d, _)| d.contains("reset ("))
            .collect();
        assert!(
            resets.iter().any(|(_, d, _)| !d.contains("reset (0 ")),
            "seed {seed}: a reset closed a live connection: {resets:?}"
        );
        if invalid(&r, "mutual-exclusion") {
            unsafe_runs += 1;
        }
        // MariaDB's own answers, sampled by the runner (the `GET_LOCK` holder's
        // connection id before the reset, gone from the process list after): the
        // scenario's probe sees the server end the holder's session.
        let seen = r.fault_seen.clone().unwrap_or_default();
        assert!(seen.contains("GET_LOCK"), "seed {seed}: {seen:?}");
    }
    assert!(
        unsafe_runs >= 1,
        "MariaDB released the reset holder's GET_LOCK"
    );
}

#[test]
fn a_real_delayed_replica_lets_the_runner_crash_the_masters_machine_on_a_write_the_replica_lacks() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let (h, summary) = real_history("set-nx-px-lua", "failover", 0);
    let starts = fault_starts(&h);
    assert!(
        starts
            .iter()
            .any(|(host, d, _)| host == "redis-2" && d.starts_with("delay messages")),
        "{starts:?}"
    );
    // The replica lags by the proxy's delay, so the master is caught holding a lock
    // write its replica has not applied, and its machine dies then (the proxy holds
    // what it had not delivered, and Sentinel promotes the replica).
    assert!(
        starts.iter().any(|(host, d, _)| host == "redis"
            && d.starts_with("machine crash")
            && d.contains("lock write at offset")),
        "{starts:?}"
    );
    assert!(
        h.events.iter().any(|e| e.host == "redis-2"
            && matches!(&e.kind, sim::history::EventKind::Server(sim::history::ServerEvent::Role { role }) if role == "master")),
        "redis-2 was never promoted"
    );
    // The servers' own record, sampled by the runner (each server's lock value every
    // 20 ms and at the crash), lets the scenario's probe see its fault on a real run:
    // the master held the lock write when its machine died, the replica promoted
    // without it.
    let seen = summary.fault_seen.unwrap_or_default();
    assert!(
        seen.contains("redis crashed") && seen.contains("redis-2 was promoted"),
        "{seen:?}"
    );
}

#[test]
fn a_real_zookeeper_leader_is_crashed_right_after_it_commits_a_lock_create() {
    if lock_impl::testing::real_zookeeper().is_none() {
        return;
    }
    let (h, summary) = real_history("zk-curator", "leader-crash", 0);
    let starts = fault_starts(&h);
    assert!(
        starts
            .iter()
            .any(|(_, d, _)| d.starts_with("crash zk-") && d.contains("create committed at zxid")),
        "{starts:?}"
    );
    // The members' roles by their own `srvr` answers (sampled every 100 ms): a new
    // epoch's leader after the crash, which the scenario's probe reads. On a failure,
    // the roles and faults as recorded, with the run's end (a slow election, or one
    // the watcher missed, shows there).
    let seen = summary.fault_seen.unwrap_or_default();
    let timeline: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            sim::history::EventKind::Server(sim::history::ServerEvent::Role { role }) => {
                Some(format!("{} {} {role}", e.at_us, e.host))
            }
            sim::history::EventKind::Fault { phase, detail, .. } => {
                Some(format!("{} {} {phase:?} {detail}", e.at_us, e.host))
            }
            _ => None,
        })
        .collect();
    assert!(
        seen.contains("is leader (epoch"),
        "no leader after the crash: {seen:?}; roles and faults: {timeline:#?}; end {} µs",
        h.end_us
    );
}

#[test]
fn a_real_mariadb_lock_row_names_its_owner_for_a_client_crash() {
    if lock_impl::testing::real_mysql().is_none() {
        return;
    }
    // A crash aimed at the row's owner hits a client only while that client is up:
    // once a crashed client's row is stuck (the unique-index lock never expires), its
    // owner is down for the second before it restarts, and whether a crash planned
    // near that restart finds it up is a matter of a millisecond of real time (seed 1:
    // a restart at 1,559.7 ms, a crash aimed at the owner at 1,558 ms). So up to three
    // seeds run, until one has a crash aimed at the owner that hit it; a runner that
    // never resolves the owner fails on all three.
    let mut misses = Vec::new();
    for seed in 1..=3 {
        let (h, summary) = real_history("mysql-unique-index", "client-crash", seed);
        let aimed_at_owner = |i: usize| {
            matches!(
                h.plan.faults.get(i).map(|f| &f.kind),
                Some(sim::faults::FaultKind::Crash {
                    target: sim::faults::Target::LockOwner,
                    ..
                })
            )
        };
        if seed == 1 {
            assert!((0..h.plan.faults.len()).any(aimed_at_owner));
        }
        // The crashes that hit a client, each with the plan fault it came from.
        let owner_hits = h
            .events
            .iter()
            .filter(|e| {
                matches!(&e.kind, sim::history::EventKind::Fault {
                    phase: sim::history::FaultPhase::Start,
                    fault,
                    detail,
                    ..
                } if aimed_at_owner(*fault) && detail.starts_with("crash client-"))
            })
            .count();
        if owner_hits > 0 {
            // The row's owner read at the crash is recorded as MariaDB's record of the
            // lock, so the scenario's probe sees a client crash holding it.
            let seen = summary.fault_seen.unwrap_or_default();
            assert!(seen.contains("crashed at"), "seed {seed}: {seen:?}");
            return;
        }
        let timeline: Vec<String> = h
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                sim::history::EventKind::Fault {
                    phase,
                    fault,
                    detail,
                    ..
                } => Some(format!(
                    "{} {} {phase:?} #{fault} {detail}",
                    e.at_us, e.host
                )),
                sim::history::EventKind::Server(sim::history::ServerEvent::Written {
                    by,
                    value,
                    ..
                }) => Some(format!("{} {} written by {by}: {value}", e.at_us, e.host)),
                _ => None,
            })
            .collect();
        misses.push(format!(
            "seed {seed}: plan {:?}; faults and row reads: {timeline:#?}",
            h.plan.faults
        ));
    }
    panic!(
        "no crash aimed at the row's owner hit a client in three seeds:\n{}",
        misses.join("\n")
    );
}

#[test]
fn a_real_one_sided_partition_leaves_client_1_a_bare_majority_and_a_node_of_it_restarts() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let (h, _) = real_history("redlock", "redlock-restart", 0);
    let starts = fault_starts(&h);
    assert!(
        starts.iter().any(|(host, d, peers)| host == "client-1"
            && d.starts_with("partition")
            && peers == &["redis-4".to_string(), "redis-5".to_string()]),
        "{starts:?}"
    );
    // The crash waited for client-1 to hold the lock and hit a node holding its value.
    assert!(
        starts.iter().any(|(host, d, _)| host.starts_with("redis-")
            && d.starts_with("crash")
            && d.contains("client-1 holds the lock")),
        "{starts:?}"
    );
}

#[test]
fn a_real_replica_cut_off_from_the_start_never_syncs_and_is_promoted_after_the_grant() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    // redis-3 is cut off from its master before the servers start (the plan's
    // partition at 0 ms), so the master's `ROLE` never lists it and `WAIT 1` grants;
    // the Sentinels know it from their config and promote it once the master and
    // redis-2 are cut off after a fresh grant.
    let (h, _) = real_history("wait-synced", "failover-wait", 0);
    let starts = fault_starts(&h);
    let fresh = h
        .events
        .iter()
        .find(|e| matches!(&e.kind, sim::history::EventKind::Fault { detail, .. } if detail.contains("a fresh grant to")))
        .unwrap_or_else(|| panic!("no fresh grant was cut off: {starts:?}"));
    assert!(
        h.events.iter().any(|e| e.host == "redis-3"
            && e.at_us > fresh.at_us
            && matches!(&e.kind, sim::history::EventKind::Server(sim::history::ServerEvent::Role { role }) if role == "master")),
        "redis-3 was promoted"
    );
}

/// A client clock fault made real: the parent steps the client's clock in its process
/// (its `Deps` clock) and records it as the simulator does; when the step strikes an
/// acquire in progress, node-redlock (`Date.now()`) believes a validity longer than
/// the lease, as in the simulator.
#[test]
fn a_real_clients_clock_steps_back_in_its_process_and_stretches_a_wall_clock_validity() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let lease_us = scenarios::sweep::config(
        &design("node-redlock").unwrap(),
        &scenario("client-clock-step").unwrap(),
        0,
    )
    .workload
    .lease_ms
        * 1000;
    for seed in 0..3 {
        let (h, summary) = real_history("node-redlock", "client-clock-step", seed);
        let steps: Vec<(String, u64)> = h
            .events
            .iter()
            .filter_map(|e| match e.kind {
                sim::history::EventKind::Clock { step_ms, .. } if step_ms < 0 => {
                    Some((e.host.clone(), e.at_us))
                }
                _ => None,
            })
            .collect();
        assert!(
            !steps.is_empty() && steps.iter().all(|(host, _)| host.starts_with("client-")),
            "seed {seed}: the clients' clocks stepped back: {steps:?}"
        );
        if summary.fault_seen.is_none() {
            continue;
        }
        // The acquire the step struck: its believed validity outlasts the lease.
        let mut invoked: std::collections::BTreeMap<(String, u64), u64> = Default::default();
        let mut stretched = None;
        for e in &h.events {
            let sim::history::EventKind::Op(op) = &e.kind else {
                continue;
            };
            if op.f != sim::history::OpF::Acquire {
                continue;
            }
            let id = (e.host.clone(), op.op);
            if op.phase == sim::history::Phase::Invoke {
                invoked.insert(id, e.at_us);
            } else if op.phase == sim::history::Phase::Ok
                && let Some(&start) = invoked.get(&id)
                && steps
                    .iter()
                    .any(|(host, at)| *host == e.host && start <= *at && *at < e.at_us)
            {
                stretched = op.valid_until_us.map(|v| v.saturating_sub(e.at_us));
            }
        }
        let left = stretched.expect("the struck acquire was granted with a validity");
        assert!(
            left > lease_us,
            "seed {seed}: granted with {left} µs of believed validity, lease {lease_us} µs"
        );
        eprintln!("seed {seed}: granted with {left} µs of believed validity (lease {lease_us} µs)");
        return;
    }
}

/// A real Redis server's clock jump (the clock shim) expires the lock key early, and
/// the runner knows it by the server's own answers (the key gone right after the step,
/// and `INFO stats`'s `expired_keys` up), so the scenario's probe sees its fault.
#[test]
fn a_real_servers_clock_jump_expires_the_lock_by_its_own_count() {
    if !lock_impl::testing::redis_server_available() {
        return;
    }
    let mut seen = Vec::new();
    for seed in 0..2 {
        let (h, summary) = real_history("set-nx-px-lua", "clock-jump", seed);
        assert!(
            h.events.iter().any(|e| e.host == "redis"
                && matches!(e.kind, sim::history::EventKind::Clock { step_ms, .. } if step_ms > 0)),
            "seed {seed}: the server's clock jumped"
        );
        seen.extend(summary.fault_seen);
    }
    // The jump is aimed at a moment the server holds the lock; a release landing
    // between the aim and the step can leave nothing to expire, so one of two suffices.
    assert!(
        seen.iter().any(|s| s.contains("the key expired at")),
        "{seen:?}"
    );
}
