//! Clients crash while holding, acquiring, or owning the key on the server.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;

pub(super) static CLIENT_CRASH: Def = Def {
    name: "client-crash",
    description: "clients crash while holding, acquiring, or owning the key on the server; they restart a second later",
    fault_about: "a client crashed while the server held its lock",
    class: FaultClass::ClientCrash,
    needs: &[],
    world: |base| base.clone(),
    quantities: &[],
    plan,
    probe: |h, _| probes::crash_while_holding(h),
};

fn plan(d: &mut Draw) -> Vec<Fault> {
    let mut faults = Vec::new();
    for _ in 0..10 {
        let target = match d.rng.random_range(0..4) {
            0 => Target::Holder,
            1 => Target::Acquirer,
            _ => Target::LockOwner,
        };
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Crash {
                target,
                restart_after_ms: Some(1_000),
            },
        });
    }
    faults
}
