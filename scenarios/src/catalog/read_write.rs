//! A read-write lock's world: a read/write mix (seed 004's cache/DB consistency, most
//! requests read), and a writer that stops the world past its lease.

use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw};
use crate::checkers::probes;
use crate::params::Param;

/// The share of rounds that read, percent.
pub const READ_SHARE: u8 = 70;

pub(super) static READ_WRITE: Def = Def {
    name: "read-write",
    description: "a read/write mix (70 % of rounds take the read lock and only read); a writer stops the world for 2-4 leases just before its write",
    fault_about: "a pause began during a hold and outlasted the lease",
    // A design with one, exclusive, mode refuses the read rounds (recorded as failed
    // acquisitions) and runs the write rounds as everywhere else.
    world: |base| Workload {
        read_share: Some(READ_SHARE),
        ..base.clone()
    },
    quantities: &[Param::PauseMs],
    plan: writer_pauses,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};

/// Four pauses, 2-4 leases each, armed for the holder's next write: readers never
/// write, so each strikes a writer inside its critical section, after its read.
fn writer_pauses(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..4 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::PauseBeforeWrite {
                target: Target::Holder,
                duration_ms: d.quantity(Param::PauseMs, lease * 2..=lease * 4),
            },
        });
    }
    faults
}
