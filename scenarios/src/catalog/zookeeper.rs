//! ZooKeeper's own faults: a holder's session expiring under it.

use sim::faults::Fault;
use sim::world::{Workload, ZkSpec};

use super::{Def, Draw};
use crate::checkers::probes;
use crate::params::Param;

/// A world of a ZooKeeper ensemble (`zk-1` to `zk-3`, session timeout 1.5 leases,
/// see [`ZkSpec::for_lease`]) and no Redis server; a critical section lasts five
/// leases, so a holder cut off keeps working past its session's expiry.
fn zk_world(base: &Workload) -> Workload {
    Workload {
        servers: Vec::new(),
        work_ms: base.lease_ms * 5,
        zookeeper: Some(ZkSpec::ensemble_for_lease(base.lease_ms)),
        ..base.clone()
    }
}

pub(super) static ZK_SESSION_EXPIRY: Def = Def {
    name: "zk-session-expiry",
    description: "the holder is cut off from the ZooKeeper server for 3-6 leases (twice its session timeout and more) while it works for 5 leases",
    fault_about: "the server expired the holder's session while it believed it held the lock",
    world: zk_world,
    quantities: &[Param::PartitionMs],
    plan: holder_cut_off,
    probe: |h, _| probes::session_expired_during_a_hold(h),
};

/// Four partitions of the holder from the servers, 3-6 leases each.
fn holder_cut_off(d: &mut Draw) -> Vec<Fault> {
    super::network::holder_partitions(d, 4, 3..=6)
}
