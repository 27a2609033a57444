//! A client stops the world (a GC pause): while it holds the lock, against a storage
//! that checks fencing tokens or one that does not, or in the middle of an
//! acquisition a server has already granted.

use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::checkers::{clock_probes, probes};
use crate::params::Param;

pub(super) static GC_PAUSE: Def = Def {
    name: "gc-pause",
    description: "the holder stops the world for 2-4 leases (a GC pause)",
    fault_about: "a pause began during a hold and outlasted the lease",
    class: FaultClass::ClientPause,
    needs: &[],
    world: |base| base.clone(),
    quantities: &[Param::PauseMs],
    plan: holder_pauses,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};

pub(super) static GC_PAUSE_PLAIN_STORAGE: Def = Def {
    name: "gc-pause-plain-storage",
    description: "gc-pause, with a storage that does not check fencing tokens: the lock's tokens alone protect nothing",
    fault_about: "a pause began during a hold and outlasted the lease",
    class: FaultClass::ClientPause,
    needs: &[],
    // Every other scenario writes through a fencing storage, which enforces what
    // token-order checks; here only the lock's own promise stands between a stale
    // holder and the data.
    world: |base| Workload {
        fencing: false,
        ..base.clone()
    },
    quantities: &[Param::PauseMs],
    plan: holder_pauses,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};

pub(super) static ACQUIRE_PAUSE: Def = Def {
    name: "acquire-pause",
    description: "a client stops the world for 2-4 leases in the middle of an acquisition a server has already granted",
    fault_about: "a pause longer than the lease fell inside an acquisition that completed after it",
    class: FaultClass::ClientPause,
    needs: &[],
    world: |base| base.clone(),
    quantities: &[Param::PauseMs],
    plan: acquire_pauses,
    probe: |h, _| clock_probes::pause_during_acquire(h),
};

/// Four pauses of the holder, 2-4 leases each.
pub(super) fn holder_pauses(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..4 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Pause {
                target: Target::Holder,
                duration_ms: d.quantity(Param::PauseMs, lease * 2..=lease * 4),
            },
        });
    }
    faults
}

/// Four pauses of a client mid-acquisition, 2-4 leases each.
fn acquire_pauses(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..4 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Pause {
                target: Target::MidAcquire {
                    within_ms: lease * 4,
                },
                duration_ms: d.quantity(Param::PauseMs, lease * 2..=lease * 4),
            },
        });
    }
    faults
}
