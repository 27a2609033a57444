//! A Redis server's wall clock jumps forward while it holds the lock, or every
//! server's clock runs fast; or a client's wall clock steps back while it acquires.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw};
use crate::checkers::clock_probes;
use crate::params::Param;

pub(super) static CLOCK_JUMP: Def = Def {
    name: "clock-jump",
    description: "the wall clock of the Redis server holding the lock jumps forward by 2-4 leases while the lock is held",
    fault_about: "a server's clock jumped forward past the lease while it held the lock, and the key expired early",
    world: |base| Workload {
        work_ms: base.lease_ms / 2,
        ..base.clone()
    },
    quantities: &[Param::JumpMs],
    plan: jumps,
    probe: |h, _| clock_probes::clock_jump_freed_the_lock(h),
};

pub(super) static CLOCK_DRIFT: Def = Def {
    name: "clock-drift",
    description: "every Redis server's clock runs fast by 0-10 % (seed-chosen) for the whole run; critical sections last a whole lease",
    fault_about: "a server's clock ran fast while it granted the lock",
    // Holders work up to the end of their validity, where a server's fast clock has
    // already expired the key.
    world: |base| Workload {
        work_ms: base.lease_ms,
        ..base.clone()
    },
    quantities: &[Param::DriftPpm],
    plan: drift,
    probe: |h, _| clock_probes::server_clock_ran_fast(h),
};

pub(super) static CLIENT_CLOCK_STEP: Def = Def {
    name: "client-clock-step",
    description: "the wall clock of a client that is acquiring the lock steps back by 2-4 leases (an NTP step during its wait), five times; critical sections last 1.25 leases",
    fault_about: "a client's wall clock stepped back while it waited for a lock it then got",
    // Holders work past the end of their validity (as in `clock-drift`, every lease
    // lock overruns here): `validity` tells a validity misjudged on the wall clock,
    // which runs past the key's expiry, from one that ends before it.
    world: |base| Workload {
        work_ms: base.lease_ms + base.lease_ms / 4,
        ..base.clone()
    },
    quantities: &[Param::JumpMs],
    plan: client_steps,
    probe: |h, _| clock_probes::client_clock_stepped_back_while_acquiring(h),
};

pub(super) static CLIENT_CLOCKS_APART: Def = Def {
    name: "client-clocks-apart",
    description: "every client's wall clock is off by up to ±1-5 minutes (seed-drawn per client) from the start: hosts without NTP, or NTP that lost its servers; critical sections last half a lease",
    fault_about: "two clients' wall clocks disagreed by more than the lease while they took the lock",
    world: |base| Workload {
        work_ms: base.lease_ms / 2,
        ..base.clone()
    },
    quantities: &[Param::JumpMs],
    plan: clients_apart,
    probe: |h, _| clock_probes::client_wall_clocks_apart(h),
};

/// Each client's wall clock steps at time zero by its own offset in ±spread, the
/// spread 1-5 minutes (`jump-ms` pins the spread).
fn clients_apart(d: &mut Draw) -> Vec<Fault> {
    let spread = d.quantity(Param::JumpMs, 60_000..=300_000) as i64;
    (1..=d.workload.clients)
        .map(|i| Fault {
            at_ms: 0,
            kind: FaultKind::ClockJump {
                target: Target::Host(format!("client-{i}")),
                delta_ms: d.rng.random_range(-spread..=spread),
            },
        })
        .collect()
}

/// Five backward steps of an acquiring client's wall clock, 2-4 leases each.
fn client_steps(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..5 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::ClockJump {
                target: Target::Acquirer,
                delta_ms: -(d.quantity(Param::JumpMs, lease * 2..=lease * 4) as i64),
            },
        });
    }
    faults
}

/// Three forward jumps of the lock server's clock, 2-4 leases each.
fn jumps(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..3 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::ClockJump {
                target: Target::LockServer,
                delta_ms: d.quantity(Param::JumpMs, lease * 2..=lease * 4) as i64,
            },
        });
    }
    faults
}

/// Every server fast by 0-10 % from the start to the end.
fn drift(d: &mut Draw) -> Vec<Fault> {
    vec![Fault {
        at_ms: 0,
        kind: FaultKind::ClockDrift {
            target: Target::AllServers,
            drift_ppm: d.quantity(Param::DriftPpm, 0..=100_000) as i64,
            duration_ms: None,
        },
    }]
}
