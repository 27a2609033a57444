//! The network between clients and servers: replies delayed beyond the lease, or the
//! holder cut off from every server.

use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::params::Param;
use sim::system::Capability;

pub(super) static NETWORK_DELAY: Def = Def {
    name: "network-delay",
    description: "replies to an acquiring client are delayed beyond the lease",
    fault_about: "the server granted the lock while replies to the acquirer were delayed, and the reply came late or never",
    class: FaultClass::NetworkDelay,
    needs: &[],
    // A response timeout a real service would use, between the lease and the longest
    // delay (1.1-1.5 leases): some replies arrive late, others time out and leave the
    // acquire's outcome unknown (`info`).
    world: |base| Workload {
        response_timeout_ms: base.lease_ms * 3 / 2 - 20,
        ..base.clone()
    },
    quantities: &[Param::DelayMs],
    plan: delays,
    probe: |h, _| crate::checkers::delayed_reply_to_a_granted_acquire(h),
};

pub(super) static PARTITION: Def = Def {
    name: "partition",
    description: "the holder is cut off from Redis for 2-8 leases, then the network heals",
    fault_about: "a holder was partitioned from the servers for longer than the lease",
    class: FaultClass::Partition,
    needs: &[Capability::LockServer],
    // The base's response timeout (2.5 leases) lies between the shortest and the
    // longest partition: some commands come back late when the network heals, others
    // time out.
    world: |base| base.clone(),
    quantities: &[Param::PartitionMs],
    plan: partitions,
    probe: |h, _| crate::checkers::holder_partitioned_past_the_lease(h),
};

pub(super) static SERVER_ISOLATED: Def = Def {
    name: "server-isolated",
    description: "the server that holds the lock (a ZooKeeper leader, a MongoDB primary) is cut off from the rest of its system for 6-12 leases while clients still reach it, twice: the others elect a new one",
    fault_about: "the lock's server was cut off from the rest of its system for longer than the lease while it held the lock, and a holder's lease came due during the isolation",
    class: FaultClass::Partition,
    needs: &[Capability::Quorum],
    // Critical sections of two leases: a hold outlives its grant's lease, so a renewal
    // (an etcd keep-alive, a ZooKeeper session's ping) is due while the server is cut
    // off. With sections shorter than the lease the isolation could not reach a lock.
    world: |base| Workload {
        work_ms: base.lease_ms * 2,
        ..base.clone()
    },
    quantities: &[Param::PartitionMs],
    plan: isolations,
    probe: |h, _| {
        let isolated = crate::checkers::lock_server_isolated_past_the_lease(h)?;
        let due = crate::checkers::renewal_due_while_the_lock_server_was_isolated(h)?;
        Some(format!("{isolated}; {due}"))
    },
};

/// Two partitions of the lock's server from every other server, 6-12 leases each.
fn isolations(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..2 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Partition {
                a: vec![Target::LockServer],
                b: vec![Target::AllServers],
                one_way: false,
                duration_ms: d.quantity(Param::PartitionMs, lease * 6..=lease * 12),
            },
        });
    }
    faults
}

/// Four delays of an acquirer's replies, 1.1-1.5 leases each, lasting three times that.
fn delays(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..4 {
        let latency_ms = d.quantity(Param::DelayMs, lease + lease / 10..=lease + lease / 2);
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Delay {
                target: Target::Acquirer,
                latency_ms,
                duration_ms: latency_ms * 3,
            },
        });
    }
    faults
}

/// Three partitions of the holder from every server, 2-8 leases each.
fn partitions(d: &mut Draw) -> Vec<Fault> {
    holder_partitions(d, 3, 2..=8)
}

/// `count` partitions of the holder from every server, each lasting a number of
/// leases drawn from `leases` (the `partition-ms` quantity).
pub(super) fn holder_partitions(
    d: &mut Draw,
    count: usize,
    leases: std::ops::RangeInclusive<u64>,
) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..count {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Partition {
                a: vec![Target::Holder],
                b: vec![Target::AllServers],
                one_way: false,
                duration_ms: d.quantity(
                    Param::PartitionMs,
                    lease * leases.start()..=lease * leases.end(),
                ),
            },
        });
    }
    faults
}
