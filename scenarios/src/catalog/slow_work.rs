//! A holder's critical section runs about as long as the lease, or longer.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;

pub(super) static SLOW_WORK: Def = Def {
    name: "slow-work",
    description: "a holder's critical section runs about as long as the lease, or longer",
    fault_about: "a hold outlasted the lease",
    class: FaultClass::SlowWork,
    needs: &[],
    world: |base| base.clone(),
    quantities: &[],
    plan,
    probe: |h, _| probes::hold_outlasted_lease(h),
};

fn plan(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    // Most faults end the critical section right around the lease's expiry, where the
    // races between expiry and release live; the rest overrun it clearly.
    let centre = lease.saturating_sub(d.workload.work_ms);
    let mut faults = Vec::new();
    for _ in 0..12 {
        let extra_ms = if d.rng.random_bool(0.75) {
            d.rng.random_range(centre.saturating_sub(12)..=centre + 4)
        } else {
            d.rng.random_range(centre + lease / 4..=centre + lease)
        };
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::SlowWork {
                target: Target::Holder,
                extra_ms,
            },
        });
    }
    faults
}
