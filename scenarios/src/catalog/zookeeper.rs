//! ZooKeeper's own faults, in an ensemble of three (`zk-1` to `zk-3`): a holder's
//! session expiring under it, the leader crashing right after it committed a lock
//! node's create, and a client served by a follower that lags behind its leader.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::{SystemSpecs, Workload, ZkSpec};

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use crate::params::Param;
use sim::system::Capability;

/// A world of a ZooKeeper ensemble (`zk-1` to `zk-3`, session timeout 1.5 leases,
/// see [`ZkSpec::for_lease`]) and no Redis server; a critical section lasts five
/// leases, so a holder cut off keeps working past its session's expiry.
fn zk_world(base: &Workload) -> Workload {
    Workload {
        servers: Vec::new(),
        work_ms: base.lease_ms * 5,
        systems: SystemSpecs {
            zookeeper: Some(ZkSpec::ensemble_for_lease(base.lease_ms)),
            ..base.systems.clone()
        },
        ..base.clone()
    }
}

pub(super) static ZK_SESSION_EXPIRY: Def = Def {
    name: "zk-session-expiry",
    description: "the holder is cut off from the ZooKeeper ensemble for 3-6 leases (twice its session timeout and more) while it works for 5 leases",
    fault_about: "the leader expired the holder's session while it believed it held the lock",
    class: FaultClass::Partition,
    needs: &[Capability::SessionExpiry],
    world: zk_world,
    quantities: &[Param::PartitionMs],
    plan: holder_cut_off,
    probe: |h, _| probes::session_expired_during_a_hold(h),
};

/// Four partitions of the holder from the servers, 3-6 leases each.
fn holder_cut_off(d: &mut Draw) -> Vec<Fault> {
    super::network::holder_partitions(d, 4, 3..=6)
}

/// The ensemble with a `tickTime` of half a lease (100 ms for the catalog's lease, at
/// most ZooKeeper's default 2 s) and sessions of 10 leases (2 s; at most 20 ticks): a
/// leader's crash is noticed after `syncLimit` (5 ticks, 500 ms), and a session
/// outlives the election and its client's reconnection, as production sessions
/// (Curator's default: 60 s, 40 s against a default server) outlive a failover.
fn failover_world(base: &Workload) -> Workload {
    let tick = (base.lease_ms / 2).clamp(100, 2_000);
    Workload {
        servers: Vec::new(),
        systems: SystemSpecs {
            zookeeper: Some(ZkSpec {
                tick_time_ms: tick as u32,
                session_timeout_ms: (base.lease_ms * 10).min(tick * 20) as u32,
                ..ZkSpec::ensemble_for_lease(base.lease_ms)
            }),
            ..base.systems.clone()
        },
        ..base.clone()
    }
}

pub(super) static LEADER_CRASH: Def = Def {
    name: "leader-crash",
    description: "the quorum's leader (ZooKeeper's, etcd's) crashes right after it commits a lock's create, and restarts 5-8 leases later from its log",
    fault_about: "the leader crashed right after a quorum committed a lock create, and a leader of a later epoch or term took over",
    class: FaultClass::ServerCrash,
    needs: &[Capability::QuorumLeader],
    world: failover_world,
    quantities: &[],
    plan: leader_crash,
    probe: |h, _| probes::leader_crashed_after_a_lock_create(h),
};

/// One crash of the leader, at the first lock create it commits after the fault's
/// start; it restarts 5-8 leases later (1-1.6 s: after the survivors elected a leader).
fn leader_crash(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let at_ms = d.at();
    let restart = d.rng.random_range(lease * 5..=lease * 8);
    vec![Fault {
        at_ms,
        kind: FaultKind::Crash {
            target: Target::LeaderAfterLockCreate { within_ms: 2_000 },
            restart_after_ms: Some(restart),
        },
    }]
}

pub(super) static ZK_FOLLOWER_STALE: Def = Def {
    name: "zk-follower-stale",
    description: "the follower serving the most clients stops hearing its leader for 3-4 ticks (under syncLimit), four times: its clients read a stale tree",
    fault_about: "a follower served clients while it lagged behind its leader's commits",
    class: FaultClass::Partition,
    needs: &[Capability::FollowerReads],
    world: |base| Workload {
        servers: Vec::new(),
        systems: SystemSpecs {
            zookeeper: Some(ZkSpec::ensemble_for_lease(base.lease_ms)),
            ..base.systems.clone()
        },
        ..base.clone()
    },
    quantities: &[],
    plan: follower_lags,
    probe: |h, _| probes::replica_served_stale(h, 100),
};

/// Four one-way holds of the leader's messages to the busiest follower, 150-200 ms
/// each (3-4 ticks of 50 ms: under `syncLimit`, 5 ticks, so it keeps serving), one in
/// each quarter of the fault window, so that two never add up past `syncLimit`.
fn follower_lags(d: &mut Draw) -> Vec<Fault> {
    // 3-4 ticks of the world's ensemble (150-200 ms at the catalog's 50 ms tick).
    let tick = d
        .workload
        .systems
        .zookeeper
        .as_ref()
        .map_or(50, |z| u64::from(z.tick_time_ms));
    let mut faults = Vec::new();
    let (start, end) = (d.window.start, d.window.end);
    let quarter = (end.saturating_sub(start) / 4).max(8 * tick + 1);
    for i in 0..4 {
        let drawn = start + i * quarter + d.rng.random_range(0..quarter - 8 * tick);
        let at_ms = d.timed(drawn);
        let duration_ms = d.rng.random_range(3 * tick..=4 * tick);
        faults.push(Fault {
            at_ms,
            kind: FaultKind::Partition {
                a: vec![Target::Leader],
                b: vec![Target::BusiestFollower],
                one_way: true,
                duration_ms,
            },
        });
    }
    faults
}
