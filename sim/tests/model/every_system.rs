//! Every host of every lock-server system takes the same faults: a MySQL server and a
//! MongoDB primary stop when paused (no record, no reply, the clients' operations wait
//! out the pause), and their clocks bend the timers that run on them (a MySQL server's
//! `wait_timeout`, the election timers of a MongoDB replica set). Before the systems shared one kit,
//! a pause or a clock fault aimed at these hosts did nothing and recorded nothing.

use sim::clock::ClockSpec;
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, FaultPhase, History, Phase, ServerEvent};
use sim::world::{
    EtcdSpec, MongoSpec, MySqlSpec, RunConfig, SystemSpecs, Workload, builtin_factory, run,
};

fn config(design: &str, workload: Workload, faults: Vec<Fault>) -> RunConfig {
    RunConfig {
        seed: 5,
        design: design.into(),
        factory: builtin_factory(design).expect("built-in"),
        scenario: "test".into(),
        workload,
        client_clocks: vec![],
        server_clock: ClockSpec::default(),
        plan: FaultPlan { faults },
        stepping: Default::default(),
    }
}

/// Two clients on MySQL (no Redis server): 2 s of work, 1 s of drain.
fn mysql_world(spec: MySqlSpec) -> Workload {
    Workload {
        clients: 2,
        duration_ms: 2_000,
        drain_ms: 1_000,
        response_timeout_ms: 5_000,
        servers: Vec::new(),
        systems: SystemSpecs {
            mysql: Some(spec),
            ..Default::default()
        },
        ..Workload::default()
    }
}

/// Two clients on a three-member replica set: 4 s of work, 1 s of drain.
fn mongo_world() -> Workload {
    Workload {
        clients: 2,
        duration_ms: 4_000,
        drain_ms: 1_000,
        response_timeout_ms: 5_000,
        servers: Vec::new(),
        systems: SystemSpecs {
            mongo: Some(MongoSpec::default()),
            ..Default::default()
        },
        ..Workload::default()
    }
}

fn pause(host: &str, at_ms: u64, duration_ms: u64) -> Fault {
    Fault {
        at_ms,
        kind: FaultKind::Pause {
            target: Target::Host(host.into()),
            duration_ms,
        },
    }
}

/// (invoke µs, completion µs) of every completed client operation.
fn ops(h: &History) -> Vec<(u64, u64)> {
    let mut open = std::collections::BTreeMap::new();
    let mut done = Vec::new();
    for e in &h.events {
        if let EventKind::Op(op) = &e.kind {
            if op.phase == Phase::Invoke {
                open.insert(op.op, e.at_us);
            } else if let Some(start) = open.remove(&op.op) {
                done.push((start, e.at_us));
            }
        }
    }
    done
}

/// The fault's start and end are recorded on `host`, nothing of `host`'s record falls
/// inside the pause, and some client operation sent before it ended only after it.
fn assert_paused(h: &History, host: &str, from_us: u64, until_us: u64) {
    let phases: Vec<FaultPhase> = h
        .events
        .iter()
        .filter(|e| e.host == host)
        .filter_map(|e| match &e.kind {
            EventKind::Fault { phase, .. } => Some(*phase),
            _ => None,
        })
        .collect();
    assert_eq!(
        phases,
        [FaultPhase::Start, FaultPhase::End],
        "the pause of {host} is in the history"
    );
    let inside: Vec<u64> = h
        .events
        .iter()
        .filter(|e| e.host == host && matches!(e.kind, EventKind::Server(_)))
        .map(|e| e.at_us)
        .filter(|t| *t > from_us && *t < until_us)
        .collect();
    assert!(
        inside.is_empty(),
        "{host} recorded while paused: {inside:?}"
    );
    let waited = ops(h)
        .into_iter()
        .filter(|(start, end)| *start < until_us - 100_000 && *end >= until_us)
        .count();
    assert!(
        waited > 0,
        "no client operation waited out the pause of {host}: {:?}",
        ops(h)
    );
}

#[test]
fn a_paused_mysql_server_records_and_answers_nothing_until_it_resumes() {
    let h = run(&config(
        "mysql-get-lock",
        mysql_world(MySqlSpec::default()),
        vec![pause("mysql-1", 600, 700)],
    ))
    .expect("run");
    assert_paused(&h, "mysql-1", 600_000, 1_300_000);
}

#[test]
fn a_paused_mongodb_primary_records_and_answers_nothing_until_it_resumes() {
    let h = run(&config(
        "mongo-find-and-modify-majority",
        mongo_world(),
        // Under the election timeout (1 s): the set waits for its primary.
        vec![pause("mongo-1", 1_000, 700)],
    ))
    .expect("run");
    assert_paused(&h, "mongo-1", 1_000_000, 1_700_000);
}

#[test]
fn a_mysql_server_whose_clock_runs_fast_ends_an_idle_connection_before_its_wait_timeout() {
    // wait_timeout is 1 s; the holder stops the world for 0.8 s while it holds its
    // GET_LOCK. On a true clock its connection survives; on a server clock running 50 %
    // fast, 1 s of the server's time passes in 0.67 s and the server ends it.
    let spec = MySqlSpec {
        wait_timeout_s: 1,
        ..MySqlSpec::default()
    };
    let world = Workload {
        clients: 1,
        work_ms: 100,
        ..mysql_world(spec)
    };
    let faults = |drift: bool| {
        let mut f = vec![Fault {
            at_ms: 500,
            kind: FaultKind::PauseBeforeWrite {
                target: Target::Host("client-1".into()),
                duration_ms: 800,
            },
        }];
        if drift {
            f.insert(
                0,
                Fault {
                    at_ms: 100,
                    kind: FaultKind::ClockDrift {
                        target: Target::Host("mysql-1".into()),
                        drift_ppm: 500_000,
                        duration_ms: None,
                    },
                },
            );
        }
        f
    };
    let closed_by_server = |h: &History| {
        h.events.iter().any(|e| {
            e.host == "mysql-1"
                && matches!(&e.kind, EventKind::Server(ServerEvent::MySqlConnection { event, released, .. })
                    if event == "closed" && !released.is_empty())
        })
    };
    let steady = run(&config("mysql-get-lock", world.clone(), faults(false))).expect("run");
    assert!(
        !closed_by_server(&steady),
        "on a true clock the connection outlives a 0.8 s pause"
    );
    let fast = run(&config("mysql-get-lock", world, faults(true))).expect("run");
    assert!(
        fast.events.iter().any(|e| e.host == "mysql-1"
            && matches!(
                e.kind,
                EventKind::Clock {
                    drift_ppm: 500_000,
                    ..
                }
            )),
        "the drift is recorded on the server"
    );
    assert!(
        closed_by_server(&fast),
        "the fast server clock ended the idle connection and released its lock"
    );
}

#[test]
fn the_election_after_a_mongodb_primary_stops_waits_on_the_secondaries_clocks() {
    // The primary stops for 3 s. The secondaries call an election once their election
    // timeout (1 s) has passed on their own clocks without a heartbeat reply: with
    // clocks running at half speed, that takes twice as long in true time.
    let first_new_primary = |h: &History| -> u64 {
        h.events
            .iter()
            .find(|e| {
                e.host != "mongo-1"
                    && matches!(&e.kind, EventKind::Server(ServerEvent::Role { role })
                        if role.starts_with("primary"))
            })
            .map(|e| e.at_us)
            .expect("a secondary was elected while the primary was stopped")
    };
    let world = Workload {
        duration_ms: 6_000,
        ..mongo_world()
    };
    let stop = pause("mongo-1", 1_000, 3_000);
    let steady = run(&config(
        "mongo-find-and-modify-majority",
        world.clone(),
        vec![stop.clone()],
    ))
    .expect("run");
    let slow_clocks = ["mongo-2", "mongo-3"].map(|m| Fault {
        at_ms: 500,
        kind: FaultKind::ClockDrift {
            target: Target::Host(m.into()),
            drift_ppm: -500_000,
            duration_ms: None,
        },
    });
    let mut faults = slow_clocks.to_vec();
    faults.push(stop);
    let slow = run(&config("mongo-find-and-modify-majority", world, faults)).expect("run");
    let (t_steady, t_slow) = (first_new_primary(&steady), first_new_primary(&slow));
    assert!(t_steady > 1_000_000 && t_slow > 1_000_000);
    let (waited_steady, waited_slow) = (t_steady - 1_000_000, t_slow - 1_000_000);
    assert!(
        waited_slow * 2 >= waited_steady * 3,
        "the election came {waited_slow} µs after the stop on half-speed clocks, \
         {waited_steady} µs on true clocks"
    );
}

/// Two clients on a three-member etcd cluster at the catalog's scale (a 200 ms lease:
/// etcd's heartbeat is 0.67 ms, a member's election timeout 10 to 20 of them): 2 s of
/// work, 1 s of drain.
fn etcd_world() -> Workload {
    Workload {
        clients: 2,
        duration_ms: 2_000,
        drain_ms: 1_000,
        response_timeout_ms: 5_000,
        lease_ms: 200,
        servers: Vec::new(),
        systems: SystemSpecs {
            etcd: Some(EtcdSpec::for_lease(200)),
            ..Default::default()
        },
        ..Workload::default()
    }
}

/// The Raft roles `host` took, with when.
fn roles_of(h: &History, host: &str) -> Vec<(u64, String)> {
    h.events
        .iter()
        .filter(|e| e.host == host)
        .filter_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::Role { role }) => Some((e.at_us, role.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_paused_etcd_follower_counts_one_tick_for_its_pause_and_a_cut_off_one_campaigns() {
    // etcd-1 leads from the start, etcd-2 follows. Stopped for 100 ms (150 heartbeats
    // at this scale, several election timeouts), it counts one tick for the pause, as
    // Go's ticker gives a process that stopped, then the leader's heartbeats: no
    // election. Cut off from the others as long while running, it counts its ticks and
    // campaigns (no pre-vote in etcd 3.4), again after each election timeout. What a
    // change to how a member counts ticks (one sleeping through them, say) must keep.
    // Roles taken from the fault on (the start has its own election).
    let candidacies = |h: &History| -> Vec<(u64, String)> {
        roles_of(h, "etcd-2")
            .into_iter()
            .filter(|(t, r)| *t >= 500_000 && r.starts_with("candidate"))
            .collect()
    };
    let paused = run(&config(
        "etcd-mutex",
        etcd_world(),
        vec![pause("etcd-2", 500, 100)],
    ))
    .expect("run");
    let phases = paused
        .events
        .iter()
        .filter(|e| e.host == "etcd-2" && matches!(e.kind, EventKind::Fault { .. }))
        .count();
    assert_eq!(phases, 2, "the pause of etcd-2 is in the history");
    assert!(
        roles_of(&paused, "etcd-2")
            .iter()
            .any(|(_, r)| r == "follower of etcd-1"),
        "etcd-2 followed etcd-1: {:?}",
        roles_of(&paused, "etcd-2")
    );
    assert_eq!(
        candidacies(&paused),
        [],
        "the paused follower campaigned: {:?}",
        roles_of(&paused, "etcd-2")
    );
    let cut_off = run(&config(
        "etcd-mutex",
        etcd_world(),
        vec![Fault {
            at_ms: 500,
            kind: FaultKind::Partition {
                a: vec![Target::Host("etcd-2".into())],
                b: vec![Target::Host("etcd-1".into()), Target::Host("etcd-3".into())],
                one_way: false,
                duration_ms: 100,
            },
        }],
    ))
    .expect("run");
    // A candidate that times out campaigns again at the next term (its role does not
    // change, so only the first candidacy is recorded): the term it reached shows in
    // the leader elected after the partition heals (it disrupts the leader: no
    // pre-vote).
    let leader_terms = |h: &History, after: bool| -> Vec<u64> {
        ["etcd-1", "etcd-2", "etcd-3"]
            .iter()
            .flat_map(|m| roles_of(h, m))
            .filter(|(t, _)| (*t >= 500_000) == after)
            .filter_map(|(_, r)| {
                r.strip_prefix("leader (term ")?
                    .strip_suffix(')')?
                    .parse()
                    .ok()
            })
            .collect()
    };
    let (before, since) = (leader_terms(&paused, false), leader_terms(&paused, true));
    assert!(
        !before.is_empty() && since.is_empty(),
        "a leader elected at the start, and no other while a follower paused: \
         {before:?}, then {since:?}"
    );
    assert!(
        !candidacies(&cut_off).is_empty(),
        "the cut-off follower campaigned"
    );
    let first = before.iter().max().copied().unwrap_or_default();
    let after = leader_terms(&cut_off, true);
    // At this scale a heartbeat is 0.67 ms and an election timeout 6.7 to 13.3 ms
    // (etcd's 1 to 2 s): about ten campaigns in 100 ms. A member counting one tick per
    // 1 ms step (two tick instants in a step counted as one) would time out after 10 to
    // 20 ms, 1.5 times etcd's, and reach about seven (eight at this seed).
    assert!(
        after.iter().any(|t| *t >= first + 10),
        "a follower cut off for 100 ms campaigns after each of its election timeouts \
         (10 to 20 heartbeats of 0.67 ms), its term past the leader's by as many: leaders \
         at terms {after:?}, {first} before"
    );
}

/// Every system `lock_impl` lists has its record in the simulator: capabilities, and a
/// world of its own that `Workload::on_system` builds from the catalog's Redis world
/// (that system alone, valid as it is). A system added to `lock_impl`'s table without
/// its line in the simulator's registry fails here.
#[test]
fn every_system_lock_impl_lists_has_a_simulator_record_and_a_world_of_its_own() {
    use lock_impl::Backend;
    for &backend in Backend::ALL {
        assert!(
            !sim::world::capabilities(backend).is_empty(),
            "{} has no record in sim's registry",
            backend.name()
        );
        let w = Workload::default().on_system(backend);
        assert_eq!(w.systems(), vec![backend], "{}", backend.name());
        w.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
    }
    // A workload that names several systems builds them in the table's order.
    let w = Workload {
        systems: SystemSpecs {
            mongo: Some(MongoSpec::default()),
            mysql: Some(MySqlSpec::default()),
            ..Default::default()
        },
        ..Workload::default()
    };
    let order: Vec<Backend> = Backend::ALL
        .iter()
        .copied()
        .filter(|b| [Backend::Redis, Backend::MySql, Backend::MongoDb].contains(b))
        .collect();
    assert_eq!(w.systems(), order);
}

/// A world keeps one system: a segmented stock needs Redis, and the error names the
/// system that is there instead.
#[test]
fn a_segmented_stock_on_another_system_is_refused_naming_that_system() {
    for &backend in lock_impl::Backend::ALL {
        if backend == lock_impl::Backend::Redis {
            continue;
        }
        let w = Workload {
            segments: Some(4),
            ..Workload::default().on_system(backend)
        };
        let err = w.validate().expect_err("segments need Redis").to_string();
        assert!(
            err.contains("workload.segments") && err.contains(backend.name()),
            "{err}"
        );
    }
}

/// The other systems' specs are one flattened field of `Workload` (`SystemSpecs`), so a
/// system's spec is a top-level key of the workload's JSON, where it always was (after
/// `trace_commands`, before `read_share`), and a history written before reads the same.
#[test]
fn each_systems_spec_is_a_top_level_key_of_the_workload_json_in_its_old_place() {
    for backend in lock_impl::Backend::ALL.iter().copied() {
        let w = Workload {
            read_share: Some(10),
            trace_commands: true,
            ..Workload::default().on_system(backend)
        };
        let text = serde_json::to_string(&w).expect("serializable");
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let count = value.as_object().expect("an object").len();
        // The top-level keys in the order they are written (the first occurrence of
        // each: every nested key here comes after its top-level namesake).
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).expect("written"));
        let expected: Vec<&str> = [
            "clients",
            "key",
            "lease_ms",
            "wait_ms",
            "work_ms",
            "think_ms_max",
            "duration_ms",
            "drain_ms",
            "response_timeout_ms",
            "initial_stock",
            "fencing",
            "reentrant_depth",
            "liveness_slack_ms",
            "latency_ms_min",
            "latency_ms_max",
            "servers",
            "connect_timeout_ms",
            "trace_commands",
        ]
        .into_iter()
        .chain(w.systems().iter().filter_map(|b| match b.name() {
            "Redis" => None,
            "ZooKeeper" => Some("zookeeper"),
            "MySQL" => Some("mysql"),
            "MongoDB" => Some("mongo"),
            "etcd" => Some("etcd"),
            other => panic!("a system this test does not know: {other}"),
        }))
        .chain(["read_share"])
        .collect();
        assert_eq!(keys, expected, "{}", backend.name());
        assert_eq!(count, expected.len(), "{}", backend.name());
        let back: Workload = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, w, "{}", backend.name());
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }
}

/// A misspelt field inside a system's spec is still refused, naming it, through the
/// flattened `SystemSpecs`; and a system's spec of the wrong shape names its field.
#[test]
fn a_misspelt_field_in_a_systems_spec_is_refused_naming_it() {
    let mut value = serde_json::to_value(Workload::default().on_system(
        lock_impl::Backend::ALL[1], // the first system after Redis
    ))
    .unwrap();
    let obj = value.as_object_mut().unwrap();
    let (name, spec) = obj
        .iter_mut()
        .find(|(_, v)| v.is_object())
        .map(|(k, v)| (k.clone(), v))
        .expect("the system's spec");
    spec.as_object_mut()
        .unwrap()
        .insert("nmae".into(), serde_json::json!("x"));
    let err = serde_json::from_value::<Workload>(value.clone())
        .expect_err("a misspelt field")
        .to_string();
    assert!(err.contains("nmae"), "{name}: {err}");
    let obj = value.as_object_mut().unwrap();
    obj.insert(name.clone(), serde_json::json!(3));
    let err = serde_json::from_value::<Workload>(value)
        .expect_err("a number is no spec")
        .to_string();
    assert!(err.contains("invalid type"), "{name}: {err}");
}
