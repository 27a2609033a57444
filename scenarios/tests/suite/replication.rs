//! With a replica following the master and no faults, every design keeps every
//! promise: the replica's own record (writes by its master, on another host) must not
//! confuse any checker.

use crate::common;

use common::{assert_every_design_valid, scenario};
use sim::world::ServerSpec;

#[test]
fn a_replica_in_the_world_changes_no_verdict_without_faults() {
    let mut s = scenario("no-faults");
    let mut replica = ServerSpec::named("redis-replica");
    replica.replica_of = Some("redis".into());
    s.workload.servers = vec![ServerSpec::named("redis"), replica];
    assert_every_design_valid(&s, 0..20, false);
}
