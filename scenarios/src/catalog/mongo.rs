//! MongoDB's own fault: the primary lost right after acknowledging a lock write that
//! no secondary has yet, a secondary elected, and the old primary rolling the write
//! back when it rejoins.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::{MongoSpec, SystemSpecs, Workload};

use super::{Def, Draw, FaultClass};
use crate::checkers::rollback_probes;
use crate::params::Param;
use sim::system::Capability;

pub(super) static MONGO_FAILOVER: Def = Def {
    name: "mongo-failover",
    description: "a three-member replica set whose secondaries (mongo-2, mongo-3) receive everything 5-20 ms late; the primary's (mongo-1's) machine dies right after it applied a lock write no secondary has yet, taking the unsent oplog entries with it; a secondary is elected (election timeout 1 s; 10 s under --profile mongodb), and the old primary, restarted 3-4 election timeouts later, rejoins and rolls the write back",
    fault_about: "the primary's machine died holding a lock write no other member had, another member was elected without it, and the old primary rolled it back when it rejoined",
    class: FaultClass::Failover,
    needs: &[Capability::ElectionRollback],
    world: mongo_world,
    quantities: &[Param::LagMs],
    plan: failover,
    probe: |h, _| rollback_probes::rollback_of_a_lock_write(h),
};

pub(super) static MONGO_PARTITION: Def = Def {
    name: "mongo-partition",
    description: "mongo-failover's world, but the primary is cut off from every other host (members and clients) right after applying a lock write no secondary has, for 3-4 election timeouts (3-4 s): it steps down when it hears from no majority, a secondary is elected, and at the heal the old primary rolls the write back",
    fault_about: "the primary was cut off holding a lock write no other member had, another member was elected without it, and the old primary rolled it back when the partition healed",
    class: FaultClass::Failover,
    needs: &[Capability::ElectionRollback],
    world: mongo_world,
    quantities: &[Param::LagMs],
    plan: partition,
    probe: |h, _| rollback_probes::rollback_of_a_lock_write(h),
};

/// Three members `mongo-1` … `mongo-3` and no Redis server; leases and critical
/// sections as long as the Redis failover world's (8 s and 3 s), so the holder is
/// still working when the election completes; four clients that think up to a second
/// between attempts. That is the catalog's scale, with the members' heartbeat and
/// election timeout of [`MongoSpec::default`] (200 ms and 1 s). A profile whose base
/// names a replica set (`--profile mongodb`: MongoDB's own 2 s heartbeat and 10 s
/// election timeout, a 30 s lease) runs the same world at its lease, every time of the
/// world stretched by its lease over 8 s.
fn mongo_world(base: &Workload) -> Workload {
    let (lease_ms, spec) = match &base.systems.mongo {
        Some(spec) => (base.lease_ms, spec.clone()),
        None => (CATALOG_LEASE_MS, MongoSpec::default()),
    };
    let at = |ms: u64| stretch(lease_ms, ms);
    // The old primary returns 3-4 election timeouts after its crash (see `failover`):
    // at MongoDB's own 10 s that is past the stretched run, so a profile's drain
    // covers it too.
    let drain_ms = match &base.systems.mongo {
        Some(_) => at(2_000) + spec.election_timeout_ms * 4,
        None => 2_000,
    };
    Workload {
        servers: Vec::new(),
        clients: 4,
        think_ms_max: at(1_000),
        lease_ms,
        wait_ms: at(base.wait_ms),
        work_ms: at(3_000),
        duration_ms: at(9_000),
        drain_ms,
        response_timeout_ms: at(2_000),
        liveness_slack_ms: at(base.liveness_slack_ms),
        systems: SystemSpecs {
            mongo: Some(spec),
            ..base.systems.clone()
        },
        ..base.clone()
    }
}

/// The Mongo worlds' lease at the catalog's scale.
const CATALOG_LEASE_MS: u64 = 8_000;

/// `ms` of the catalog's Mongo world in a world whose lease is `lease_ms`.
fn stretch(lease_ms: u64, ms: u64) -> u64 {
    ms * lease_ms / CATALOG_LEASE_MS
}

/// The secondaries lag 5-20 ms (what reaches them is delayed: the primary's oplog
/// batches and heartbeats, and clients' commands), as busy or distant replicas do
/// (the Redis `failover` delays its replica the same way); the crash is armed early
/// and hits the first lock write the primary has applied and answered but no
/// secondary has; the old primary restarts after the election: 3-4 election timeouts
/// after the crash (3-4 s in the catalog's world).
///
/// A machine crash, not a process crash: a `kill -9`ed `mongod`'s kernel still sends
/// the oplog batch it had written to a secondary's socket, so the write would reach
/// the secondaries 5-20 ms late and nothing would roll back (as Redis's `failover`
/// explains).
fn failover(d: &mut Draw) -> Vec<Fault> {
    let w = d.workload;
    let at = |ms: u64| stretch(w.lease_ms, ms);
    let election_ms = w
        .systems
        .mongo
        .as_ref()
        .map_or(1_000, |m| m.election_timeout_ms);
    let lag = d.quantity(Param::LagMs, 5..=20);
    let mut faults: Vec<Fault> = w
        .systems
        .mongo
        .iter()
        .flat_map(|m| m.members.iter().skip(1).cloned().collect::<Vec<_>>())
        .map(|member| Fault {
            at_ms: 0,
            kind: FaultKind::Delay {
                target: Target::Host(member),
                latency_ms: lag,
                duration_ms: w.duration_ms + w.drain_ms,
            },
        })
        .collect();
    faults.push(Fault {
        at_ms: {
            let drawn = d.rng.random_range(at(1_500)..=at(2_500));
            d.timed(drawn)
        },
        kind: FaultKind::MachineCrash {
            target: Target::UnreplicatedLockMaster {
                within_ms: at(5_000),
            },
            restart_after_ms: Some(d.rng.random_range(election_ms * 3..=election_ms * 4)),
        },
    });
    faults
}

/// As [`failover`], with a partition of the primary from everyone else instead of a
/// crash: the old primary stays up, steps down on its own, and rejoins at the heal,
/// 3-4 election timeouts later.
fn partition(d: &mut Draw) -> Vec<Fault> {
    let (lease_ms, election_ms) = (
        d.workload.lease_ms,
        d.workload
            .systems
            .mongo
            .as_ref()
            .map_or(1_000, |m| m.election_timeout_ms),
    );
    let mut faults = failover(d);
    let crash = faults.pop();
    if let Some(Fault { at_ms, .. }) = crash {
        faults.push(Fault {
            at_ms,
            kind: FaultKind::Partition {
                a: vec![Target::UnreplicatedLockMaster {
                    within_ms: stretch(lease_ms, 5_000),
                }],
                b: vec![Target::Rest],
                one_way: false,
                duration_ms: d.rng.random_range(election_ms * 3..=election_ms * 4),
            },
        });
    }
    faults
}
