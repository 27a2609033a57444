//! Scenarios without faults: plain contention, critical sections ten leases long,
//! nested acquisitions, and the flash sale of "redis之分布式锁详解" (2023).

use sim::faults::Fault;
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use sim::system::Capability;

/// The plan of a scenario without faults.
pub(super) fn nothing(_: &mut Draw) -> Vec<Fault> {
    Vec::new()
}

pub(super) static NO_FAULTS: Def = Def {
    name: "no-faults",
    description: "eight clients contend for one lock; nothing goes wrong",
    fault_about: "none (the lock must be contended)",
    class: FaultClass::None,
    needs: &[],
    // Short runs: the suite sweeps 200 seeds of every design; two simulated seconds
    // still hold the lock about sixty times per run.
    world: |base| Workload {
        duration_ms: 2_000,
        drain_ms: 500,
        ..base.clone()
    },
    quantities: &[],
    plan: nothing,
    probe: |h, _| probes::contended(h),
};

pub(super) static LONG_WORK: Def = Def {
    name: "long-work",
    description: "every critical section lasts ten leases; no faults (a watchdog must keep the lock)",
    fault_about: "a hold outlasted the lease",
    class: FaultClass::None,
    needs: &[],
    world: |base| Workload {
        work_ms: base.lease_ms * 10,
        duration_ms: 8_000,
        drain_ms: base.lease_ms * 10 + 1_000,
        ..base.clone()
    },
    quantities: &[],
    plan: nothing,
    probe: |h, _| probes::hold_outlasted_lease(h),
};

pub(super) static REENTRANCY: Def = Def {
    name: "reentrancy",
    description: "each round acquires the lock three times, nested, then releases three times",
    fault_about: "a nested acquisition by the holder succeeded",
    class: FaultClass::None,
    needs: &[],
    world: |base| Workload {
        reentrant_depth: 3,
        ..base.clone()
    },
    quantities: &[],
    plan: nothing,
    probe: |h, _| probes::nested_acquisition(h),
};

pub(super) static FLASH_SALE: Def = Def {
    name: "flash-sale",
    description: "the 2023 article's flash sale: 100 buyers each try once for the lock on one product (lease 10 s, stock 100), again and again; nothing goes wrong",
    fault_about: "none (the lock must be contended)",
    class: FaultClass::None,
    needs: &[Capability::ServingAtStart],
    // The world whose cost is its hosts: a hundred clients, most of them thinking at
    // any moment. The numbers of "redis之分布式锁详解" (2023; docs/designs.md): `kill:123`,
    // a 10 s lease, `setIfAbsent` once (no waiting), stock 100. Each purchase takes one
    // unit (the article's random 1..9
    // changes nothing a checker sees), and buyers keep buying after the stock runs out
    // (the storage is not the point here).
    world: |base| Workload {
        clients: 100,
        key: "kill:123".into(),
        lease_ms: 10_000,
        wait_ms: 0,
        work_ms: 5,
        think_ms_max: 50,
        // A second of buying: about 2,000 tries, a hundred of them at once.
        duration_ms: 1_000,
        drain_ms: 500,
        initial_stock: 100,
        ..base.clone()
    },
    quantities: &[],
    plan: nothing,
    probe: |h, _| probes::contended(h),
};
