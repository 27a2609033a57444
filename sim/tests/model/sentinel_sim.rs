//! Sentinel inside the simulated world: three Sentinels watch a master and its
//! replica over turmoil TCP; when the master dies they agree, elect a leader, promote
//! the replica, and clients follow.

use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, History, ServerEvent};
use sim::world::{RunConfig, SentinelSpec, ServerSpec, Workload, builtin_factory, run};

fn watched(design: &str, seed: u64, faults: Vec<Fault>) -> RunConfig {
    let mut replica = ServerSpec::named("redis-2");
    replica.replica_of = Some("redis".into());
    RunConfig {
        seed,
        design: design.into(),
        factory: builtin_factory(design).expect("built-in"),
        scenario: "test".into(),
        workload: Workload {
            clients: 3,
            duration_ms: 8_000,
            drain_ms: 1_000,
            servers: vec![ServerSpec::named("redis"), replica],
            sentinel: Some(SentinelSpec {
                down_after_ms: 1_000,
                failover_timeout_ms: 5_000,
                ..SentinelSpec::default()
            }),
            ..Workload::default()
        },
        client_clocks: vec![],
        server_clock: Default::default(),
        plan: FaultPlan { faults },
        stepping: Default::default(),
    }
}

fn sentinel_events(h: &History) -> Vec<(u64, String, String, String)> {
    h.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Sentinel { event, detail } => Some((
                e.at_us / 1000,
                e.host.clone(),
                event.clone(),
                detail.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn sentinels_promote_the_replica_when_the_master_dies_and_clients_follow() {
    let cfg = watched(
        "set-nx-px-lua",
        3,
        vec![Fault {
            at_ms: 2_000,
            kind: FaultKind::Crash {
                target: Target::Host("redis".into()),
                restart_after_ms: None,
            },
        }],
    );
    let h = run(&cfg).expect("run completes");
    let events = sentinel_events(&h);
    for e in &events {
        eprintln!("{e:?}");
    }
    let switches: Vec<_> = events.iter().filter(|e| e.2 == "+switch-master").collect();
    assert_eq!(switches.len(), 3, "every Sentinel switched: {events:#?}");
    assert!(
        switches
            .iter()
            .all(|e| e.3 == "mymaster redis 6379 redis-2 6379")
    );
    let promoted = h.events.iter().any(|e| {
        e.host == "redis-2"
            && matches!(&e.kind, EventKind::Server(ServerEvent::Role { role }) if role == "master")
    });
    assert!(promoted, "redis-2 became master");
    // Clients took the lock on the new master after the switch.
    let first_switch = switches.iter().map(|e| e.0).min().unwrap();
    let after = h.events.iter().filter(|e| {
        e.host == "redis-2"
            && e.at_us / 1000 > first_switch
            && matches!(&e.kind, EventKind::Server(ServerEvent::Written { by, .. }) if by.starts_with("client-"))
    });
    assert!(after.count() > 5, "clients write to the promoted master");
}

#[test]
fn a_sentinel_that_restarted_after_the_failover_keeps_the_new_master() {
    // sentinel-1 dies before the failover and comes back after it: it starts from its
    // configuration file, learns the new configuration from the others' hellos, and
    // names the new master.
    let cfg = watched(
        "set-nx-px-lua",
        5,
        vec![
            Fault {
                at_ms: 1_000,
                kind: FaultKind::Crash {
                    target: Target::Host("sentinel-1".into()),
                    restart_after_ms: Some(5_000),
                },
            },
            Fault {
                at_ms: 2_000,
                kind: FaultKind::Crash {
                    target: Target::Host("redis".into()),
                    restart_after_ms: None,
                },
            },
        ],
    );
    let h = run(&cfg).expect("run completes");
    let events = sentinel_events(&h);
    let switched: Vec<&str> = events
        .iter()
        .filter(|e| e.2 == "+switch-master")
        .map(|e| e.1.as_str())
        .collect();
    assert!(switched.contains(&"sentinel-2") && switched.contains(&"sentinel-3"));
    assert!(
        events
            .iter()
            .any(|e| e.1 == "sentinel-1" && e.2 == "+switch-master" && e.0 > 6_000),
        "the restarted Sentinel caught up: {events:#?}"
    );
}

/// A promoted replica that restarts comes back a master: Sentinel promoted it with
/// `SLAVEOF NO ONE` and `CONFIG REWRITE`, and a server starts with the role its config
/// file holds (it came back following the dead old master, its configured role at
/// deployment; issue 23, item 8).
#[test]
fn a_promoted_replica_restarts_as_the_master_its_config_file_says() {
    let cfg = watched(
        "set-nx-px-lua",
        3,
        vec![
            Fault {
                at_ms: 2_000,
                kind: FaultKind::Crash {
                    target: Target::Host("redis".into()),
                    restart_after_ms: None,
                },
            },
            Fault {
                at_ms: 6_000,
                kind: FaultKind::Crash {
                    target: Target::Host("redis-2".into()),
                    restart_after_ms: Some(100),
                },
            },
        ],
    );
    let h = run(&cfg).expect("run completes");
    let roles: Vec<(u64, String)> = h
        .events
        .iter()
        .filter(|e| e.host == "redis-2")
        .filter_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::Role { role }) => Some((e.at_us / 1000, role.clone())),
            _ => None,
        })
        .collect();
    assert!(
        roles.iter().any(|(t, r)| *t < 6_000 && r == "master"),
        "redis-2 was promoted before its crash: {roles:?}"
    );
    assert!(
        roles.iter().all(|(t, r)| *t < 6_000 || r == "master"),
        "redis-2 came back as something else than a master: {roles:?}"
    );
    let written_after = h.events.iter().any(|e| {
        e.host == "redis-2"
            && e.at_us > 6_200_000
            && matches!(&e.kind, EventKind::Server(ServerEvent::Written { by, .. }) if by.starts_with("client-"))
    });
    assert!(
        written_after,
        "clients write to redis-2 again after its restart"
    );
}
