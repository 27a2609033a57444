//! A Redis server's wall clock jumps forward while it holds the lock, or every
//! server's clock runs fast; or a client's wall clock steps back while it acquires, or
//! NTP slews a holder's clock.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::checkers::clock_probes;
use crate::params::Param;
use sim::system::Capability;

pub(super) static CLOCK_JUMP: Def = Def {
    name: "clock-jump",
    description: "the wall clock of the Redis server holding the lock jumps forward by 2-4 leases while the lock is held",
    fault_about: "a server's clock jumped forward past the lease while it held the lock, and the key expired early (or it held it with no expiry for the jump to advance)",
    class: FaultClass::ServerClock,
    needs: &[Capability::LockServer],
    world: |base| Workload {
        work_ms: base.lease_ms / 2,
        ..base.clone()
    },
    quantities: &[Param::JumpMs],
    plan: jumps,
    probe: |h, _| clock_probes::clock_jump_struck_the_lock(h),
};

pub(super) static CLOCK_DRIFT: Def = Def {
    name: "clock-drift",
    description: "every Redis server's clock runs fast by 0-10 % (seed-chosen) for the whole run; critical sections last a whole lease",
    fault_about: "a server's clock ran fast while it granted the lock",
    class: FaultClass::ServerClock,
    needs: &[Capability::LockServer],
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
    class: FaultClass::ClientClock,
    needs: &[],
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
    class: FaultClass::ClientClock,
    needs: &[],
    world: |base| Workload {
        work_ms: base.lease_ms / 2,
        ..base.clone()
    },
    quantities: &[Param::JumpMs],
    plan: clients_apart,
    probe: |h, _| clock_probes::client_wall_clocks_apart(h),
};

/// chrony's default `maxslewrate`, in ppm: the fastest it corrects a clock by slewing.
pub const CHRONY_MAX_SLEW_PPM: u64 = 83_333;

/// `client-clock-slew`'s shortest lease: long enough that the few milliseconds an
/// acquisition takes (on five masters too) are small beside the 8.3 % a slew takes off
/// it.
const SLEW_LEASE_MS: u64 = 2_000;

pub(super) static CLIENT_CLOCK_SLEW: Def = Def {
    name: "client-clock-slew",
    description: "NTP (chrony, 83,333 ppm) slews the holder's clock back by 0.1-0.2 lease, three times: on Linux the monotonic clock slews too, so its lease timers run 8.3 % slow for seconds; 2 s leases, four careful holders work 0.93 lease and write only with 1/40 lease of validity left",
    fault_about: "a holder's clock ran slow under an NTP slew while it held the lock",
    class: FaultClass::ClientClock,
    needs: &[],
    // Careful holders: they work most of the lease, then write only if their validity
    // (on their own clock) still covers the write. On a true clock that is safe; on a
    // clock running 8.3 % slow the validity they see is up to 8.3 % of the lease
    // longer than the key's, and a drift allowance of 1 % + 2 ms (Redlock's) does not
    // cover it. Every time scales with the lease (waits, timeouts, think time).
    world: |base| {
        // The catalog's 200 ms lease becomes 2 s; a profile's longer lease stays.
        let lease = base.lease_ms.max(SLEW_LEASE_MS);
        let scale = lease / base.lease_ms.max(1);
        Workload {
            clients: 4,
            lease_ms: lease,
            work_ms: lease * 93 / 100,
            check_validity_ms: Some(lease / 40),
            wait_ms: base.wait_ms * scale,
            think_ms_max: base.think_ms_max * scale,
            response_timeout_ms: base.response_timeout_ms * scale,
            liveness_slack_ms: base.liveness_slack_ms * scale,
            duration_ms: base.duration_ms.max(lease * 15 / 2),
            drain_ms: 3 * lease,
            ..base.clone()
        }
    },
    // `jump-ms` pins the correction, `drift-ppm` the slew rate (500: ntpd's).
    quantities: &[Param::JumpMs, Param::DriftPpm],
    plan: client_slews,
    // The slew matters if it cost the holder's clock at least the validity a careful
    // holder keeps in hand before writing (else a hundredth of the lease).
    probe: |h, w| {
        let margin_ms = w.check_validity_ms.unwrap_or(w.lease_ms / 100);
        clock_probes::holder_clock_ran_slow(h, margin_ms * 1_000)
    },
};

/// Three slews back of the holder's clock, 0.1-0.2 lease each, at chrony's rate (a
/// slew of 0.2 lease lasts 2.4 leases).
fn client_slews(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..3 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::ClockSlew {
                target: Target::Holder,
                delta_ms: -(d.quantity(Param::JumpMs, lease / 10..=lease / 5) as i64),
                rate_ppm: d.quantity(Param::DriftPpm, CHRONY_MAX_SLEW_PPM..=CHRONY_MAX_SLEW_PPM),
            },
        });
    }
    faults
}

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
