//! Replication inside the simulated world: a replica follows its master over turmoil
//! TCP (so delays and partitions reach the link), its record shows the master's writes
//! as the master's, and the run stays deterministic.

use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, History, ServerEvent};
use sim::world::{RunConfig, ServerSpec, Workload, builtin_factory, run};

fn replicated(design: &str, faults: Vec<Fault>) -> RunConfig {
    let mut replica = ServerSpec::named("redis-replica");
    replica.replica_of = Some("redis".into());
    RunConfig {
        seed: 11,
        design: design.into(),
        factory: builtin_factory(design).expect("built-in"),
        scenario: "test".into(),
        workload: Workload {
            clients: 3,
            duration_ms: 3_000,
            drain_ms: 1_000,
            servers: vec![ServerSpec::named("redis"), replica],
            ..Workload::default()
        },
        client_clocks: vec![],
        server_clock: Default::default(),
        plan: FaultPlan { faults },
        stepping: Default::default(),
    }
}

/// (time, value) of every write of the lock key on `host`, and who it names.
fn writes(h: &History, host: &str, key: &str) -> Vec<(u64, String, String)> {
    h.events
        .iter()
        .filter(|e| e.host == host)
        .filter_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::Written { by, key: k, value }) if k == key => {
                Some((e.at_us, value.clone(), by.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_replica_applies_every_lock_write_of_its_master_a_little_later() {
    let cfg = replicated("set-nx-px-lua", vec![]);
    let h = run(&cfg).expect("run completes");
    let key = cfg.workload.key.as_str();
    let on_master = writes(&h, "redis", key);
    let on_replica = writes(&h, "redis-replica", key);
    assert!(
        on_master.len() > 10,
        "the lock was taken: {}",
        on_master.len()
    );
    // The replica syncs within the first cron tick and then sees every grant, in order,
    // written by the master (not by the client).
    let master_values: Vec<&String> = on_master.iter().map(|(_, v, _)| v).collect();
    let replica_values: Vec<&String> = on_replica.iter().map(|(_, v, _)| v).collect();
    assert_eq!(
        &master_values[master_values.len() - replica_values.len()..],
        replica_values.as_slice()
    );
    assert!(on_replica.iter().all(|(_, _, by)| by == "redis"));
    // Each replica write comes after the master's (one-way latency at least).
    let offset = master_values.len() - replica_values.len();
    for (i, (at, _, _)) in on_replica.iter().enumerate() {
        assert!(
            *at > on_master[offset + i].0,
            "write {i} replicated before it happened"
        );
    }
    // Same seed, same history, byte for byte.
    let again = run(&cfg).expect("run completes");
    assert_eq!(
        serde_json::to_string(&h).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}

#[test]
fn a_partitioned_replica_falls_behind_then_resyncs() {
    let cfg = replicated(
        "set-nx-px-lua",
        vec![Fault {
            at_ms: 1_500,
            kind: FaultKind::Partition {
                a: vec![Target::Host("redis-replica".into())],
                b: vec![Target::Host("redis".into())],
                one_way: false,
                duration_ms: 800,
            },
        }],
    );
    let h = run(&cfg).expect("run completes");
    let key = cfg.workload.key.as_str();
    let during: Vec<_> = writes(&h, "redis-replica", key)
        .into_iter()
        .filter(|(at, _, _)| (1_510_000..2_290_000).contains(at))
        .collect();
    assert!(
        during.is_empty(),
        "nothing crosses the partition: {during:?}"
    );
    let after = writes(&h, "redis-replica", key)
        .into_iter()
        .filter(|(at, _, _)| *at > 2_300_000)
        .count();
    assert!(
        after > 0,
        "the replica caught up after the partition healed"
    );
}
