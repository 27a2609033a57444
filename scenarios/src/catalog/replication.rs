//! A master with replicas and three Sentinels: the master's machine is lost holding a
//! lock its replicas lack and one of them is promoted (failover), or the master is cut off with
//! the holder while the majority promotes a replica (split brain).

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::{SentinelSpec, ServerSpec, Workload};

use super::{Def, Draw, FaultClass};
use crate::params::Param;
use sim::system::Capability;

pub(super) static FAILOVER: Def = Def {
    name: "failover",
    description: "one master, one replica lagging 5-20 ms, three Sentinels: the master's machine dies right after granting a lock its replica has not received, taking the unsent write with it; Sentinel promotes the replica",
    fault_about: "the master's machine died holding a lock write no replica had, and a replica without it was promoted",
    class: FaultClass::Failover,
    needs: &[Capability::SentinelFailover],
    world: |base| replicated(base, 1, 0),
    quantities: &[Param::LagMs],
    plan: failover,
    probe: |h, _| crate::checkers::failover_lost_the_lock(h, true),
};

pub(super) static FAILOVER_WAIT: Def = Def {
    name: "failover-wait",
    description: "two replicas, one cut off from the master from the start (so WAIT counts one); just after a grant the master and the replica that acknowledged it are cut off from everyone else, and the one that never synced is promoted",
    fault_about: "the master was lost holding the lock and a replica without it was promoted",
    class: FaultClass::Failover,
    needs: &[Capability::SentinelFailover],
    world: |base| replicated(base, 2, 0),
    quantities: &[],
    plan: failover_wait,
    probe: |h, _| crate::checkers::failover_lost_the_lock(h, false),
};

pub(super) static SPLIT_BRAIN: Def = Def {
    name: "split-brain",
    description: "the master and the holder are cut off from the Sentinels, the replica and the other clients; the majority promotes the replica and both sides grant the lock",
    fault_about: "the master was partitioned away and another server was promoted while the old one still accepted lock writes",
    class: FaultClass::Failover,
    needs: &[Capability::SentinelFailover],
    world: |base| Workload {
        duration_ms: 9_000,
        ..replicated(base, 1, 0)
    },
    quantities: &[],
    plan: |d| split_brain(d, 1_000..=3_000),
    probe: |h, _| crate::checkers::split_brain(h).and_then(|(d, w)| (w > 0).then_some(d)),
};

pub(super) static SPLIT_BRAIN_MIN_REPLICAS: Def = Def {
    name: "split-brain-min-replicas",
    description: "split-brain with min-replicas-to-write 1 (max lag 3 s) on every server, as one config file sets it: the old master refuses writes once its replica's acknowledgement is older than the lag bound, and the promoted replica, with no replica of its own, refuses them too",
    fault_about: "the master was partitioned away and another server was promoted",
    class: FaultClass::Failover,
    needs: &[Capability::SentinelFailover],
    world: |base| Workload {
        duration_ms: 9_000,
        ..replicated(base, 1, 1)
    },
    quantities: &[],
    // With min-replicas on every server, no server accepts a write before its
    // replica's first sync (a replica connects from its once-a-second cron, as Redis's
    // does): the partition comes after the first grant.
    plan: |d| split_brain(d, 1_500..=3_500),
    probe: |h, _| crate::checkers::split_brain(h).map(|(d, _)| d),
};

/// A master `redis`, its replicas `redis-2` …, and three Sentinels (quorum 2) that
/// notice a dead master within a second and a half (`down-after-milliseconds` 1000;
/// Redis's default of 30 s would make every run half a minute longer and change
/// nothing but the wait) and fail over within a few seconds. Leases are long and
/// critical sections last seconds (8 s and 3 s), as in the jobs the three-Redis-locks
/// article and Dewu's article describe, so a holder is still working when the failover completes.
fn replicated(base: &Workload, replicas: usize, min_replicas: u64) -> Workload {
    let mut servers = vec![ServerSpec {
        min_replicas_to_write: min_replicas,
        // A lag bound shorter than Redis's example of 10 s, so the bound passes within
        // a short partition; what matters is its size against the failover time.
        min_replicas_max_lag_s: 3,
        ..ServerSpec::named("redis")
    }];
    // Every server gets the same `min-replicas-*` lines, as one config file deployed
    // to all of them would: a replica ignores them until it is promoted, and then
    // refuses writes while it has no replica of its own (real Redis does the same).
    let master = servers[0].clone();
    for i in 0..replicas {
        servers.push(ServerSpec {
            name: format!("redis-{}", i + 2),
            replica_of: Some("redis".into()),
            ..master.clone()
        });
    }
    Workload {
        // Four clients that think up to a second between attempts: the lock is
        // sometimes free long enough for its release to reach the replica before the
        // next grant (a grant on a lock the replica still holds would not be lost).
        clients: 4,
        think_ms_max: 1_000,
        lease_ms: 8_000,
        work_ms: 3_000,
        duration_ms: 8_000,
        drain_ms: 2_000,
        response_timeout_ms: 2_000,
        servers,
        sentinel: Some(SentinelSpec {
            down_after_ms: 1_000,
            failover_timeout_ms: 5_000,
            ..SentinelSpec::default()
        }),
        ..base.clone()
    }
}

/// The replica lags 5-20 ms (everything reaching it is delayed), as a busy or distant
/// replica does; the crash is armed early and hits the first grant the master has
/// acknowledged and the replica not yet got.
///
/// A machine crash (power, kernel panic), not a process crash: a `kill -9`ed Redis's
/// kernel still sends what its sockets hold, so its replica gets the write 5-20 ms
/// late and nothing is lost (so real Redis does: the parity runs of this cell with a
/// process crash were safe 20 of 20, `docs/parity.md`). A dead machine delivers nothing
/// more: the acknowledged write is lost, which is the failure Redis's documentation
/// warns of for asynchronous replication.
fn failover(d: &mut Draw) -> Vec<Fault> {
    let w = d.workload;
    vec![
        Fault {
            at_ms: 0,
            kind: FaultKind::Delay {
                target: Target::Host("redis-2".into()),
                latency_ms: d.quantity(Param::LagMs, 5..=20),
                duration_ms: w.duration_ms + w.drain_ms,
            },
        },
        Fault {
            at_ms: {
                let drawn = d.rng.random_range(300..=2_000);
                d.timed(drawn)
            },
            kind: FaultKind::MachineCrash {
                target: Target::UnreplicatedLockMaster { within_ms: 6_000 },
                // Back (empty, no persistence) after the failover; Sentinel turns it
                // into a replica of the new master.
                restart_after_ms: Some(d.rng.random_range(5_000..=7_000)),
            },
        },
    ]
}

/// redis-3 never reaches its master; just after a grant (which `WAIT 1` saw redis-2
/// acknowledge), the master and redis-2 are cut off from everyone else, and the
/// Sentinels promote redis-3.
fn failover_wait(d: &mut Draw) -> Vec<Fault> {
    let w = d.workload;
    vec![
        Fault {
            at_ms: 0,
            kind: FaultKind::Partition {
                a: vec![Target::Host("redis-3".into())],
                b: vec![Target::Host("redis".into())],
                one_way: false,
                duration_ms: w.duration_ms + w.drain_ms,
            },
        },
        Fault {
            at_ms: {
                let drawn = d.rng.random_range(300..=2_000);
                d.timed(drawn)
            },
            kind: FaultKind::Partition {
                a: vec![
                    Target::FreshLockMaster { within_ms: 4_000 },
                    Target::Host("redis-2".into()),
                ],
                b: vec![Target::Rest],
                one_way: false,
                duration_ms: w.duration_ms + w.drain_ms,
            },
        },
    ]
}

/// The master and the holder cut off from everyone else for 5-6 s, from a time in
/// `start`.
fn split_brain(d: &mut Draw, start: std::ops::RangeInclusive<u64>) -> Vec<Fault> {
    vec![Fault {
        at_ms: {
            let drawn = d.rng.random_range(start);
            d.timed(drawn)
        },
        kind: FaultKind::Partition {
            a: vec![Target::Holder, Target::Host("redis".into())],
            b: vec![Target::Rest],
            one_way: false,
            duration_ms: d.rng.random_range(5_000..=6_000),
        },
    }]
}
