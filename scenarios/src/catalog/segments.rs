//! The segmented stock of Dewu Technology's article on distributed locks (docs/designs.md,
//! "Where the designs come from"): a hot product's stock split into segments, each under
//! a lock of its own ("use a modulo or hash algorithm to expand the inventory to
//! different nodes ... the request can only fetch data from one Redis"), with the
//! holders of those locks stopping the world.

use sim::world::Workload;

use super::{Def, FaultClass, pauses};
use crate::checkers::probes;
use crate::params::Param;
use sim::system::Capability;

pub(super) static SEGMENTED_STOCK: Def = Def {
    name: "segmented-stock",
    description: "Dewu's article's segmented stock: 500 units in 5 segments, each under its own lock key; a buyer picks a segment and sells one unit if it has any; holders stop the world for 2-4 leases",
    fault_about: "a pause began during a hold of a segment's lock and outlasted the lease",
    class: FaultClass::ClientPause,
    needs: &[Capability::ManyKeys],
    // The article spreads an inventory of 2,000 over five segments; ten buyers sell about
    // 600 units in the run's five seconds, so the stock here is 500 (100 a segment):
    // segments sell out during the run, and a lost update in a sold-out segment is
    // an oversold stock (the buyer checks the segment's stock before selling, as the
    // article's does). Every segment's lock
    // lives on the world's lock server(s): the article spreads them over five Redis nodes
    // for throughput, which changes nothing a checker judges per segment.
    world: |base| Workload {
        clients: 10,
        segments: Some(5),
        initial_stock: 500,
        ..base.clone()
    },
    quantities: &[Param::PauseMs],
    plan: pauses::holder_pauses,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};
