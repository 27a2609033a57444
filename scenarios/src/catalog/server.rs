//! The Redis server crashes while a lock is held (restarting at once or after a lease,
//! with or without an AOF), or stops for longer than the lease.

use sim::faults::{Fault, FaultKind, Target};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::{ServerSpec, Workload};

use super::{Def, Draw, FaultClass};
use crate::params::Param;
use lock_impl::scale::{REDIS_START, SYSTEMD_RESTART_SEC};
use sim::system::Capability;

pub(super) static SERVER_RESTART: Def = Def {
    name: "server-restart",
    description: "the Redis server crashes while a lock is held and is back as systemd restarts it (100 ms RestartSec and its start, at the world's scale: restart-ms), without persistence",
    fault_about: "a server restarted without the lock key its record held (or, keeping its locks on disk, crashed holding it and restarted)",
    class: FaultClass::ServerCrash,
    needs: &[Capability::LockServer],
    world: half_lease_work,
    quantities: &[Param::RestartMs],
    plan: |d| restarts(d, Restart::AtOnce),
    probe: |h, _| crate::checkers::server_restart_struck_the_lock(h),
};

pub(super) static SERVER_RESTART_AOF: Def = Def {
    name: "server-restart-aof",
    description: "the Redis server's machine crashes while a lock is held and is back after a Redis start (at the world's scale: restart-ms); appendonly yes, appendfsync always",
    fault_about: "a server crashed holding the lock and restarted",
    class: FaultClass::ServerCrash,
    needs: &[Capability::AppendOnlyFile],
    world: |base| Workload {
        servers: vec![ServerSpec {
            persistence: Persistence::Aof {
                fsync: Fsync::Always,
            },
            ..ServerSpec::named("redis")
        }],
        ..half_lease_work(base)
    },
    quantities: &[Param::RestartMs],
    plan: |d| restarts(d, Restart::MachineAtOnce),
    probe: |h, _| crate::checkers::server_crashed_holding_the_lock(h, 0),
};

pub(super) static SERVER_RESTART_DELAYED: Def = Def {
    name: "server-restart-delayed",
    description: "the Redis server crashes while a lock is held and stays down at least a lease before restarting (antirez's delayed restart)",
    fault_about: "a server crashed holding the lock and stayed down at least a lease",
    class: FaultClass::ServerCrash,
    needs: &[Capability::LockServer],
    world: half_lease_work,
    quantities: &[Param::RestartMs],
    plan: |d| restarts(d, Restart::Delayed),
    probe: |h, w| crate::checkers::server_crashed_holding_the_lock(h, w.lease_ms),
};

pub(super) static SERVER_PAUSE: Def = Def {
    name: "server-pause",
    description: "the Redis server stops for 1.5-3 leases while clients wait on it; its clock runs on",
    fault_about: "a server pause outlasted the lease while the lock was held or wanted",
    class: FaultClass::ServerPause,
    needs: &[Capability::LockServer],
    world: |base| base.clone(),
    quantities: &[Param::PauseMs],
    plan: pauses,
    probe: |h, _| crate::checkers::server_pause_outlasted_the_lease(h),
};

/// Critical sections half a lease long, so a holder is still working when the server
/// comes back empty and grants the lock again.
fn half_lease_work(base: &Workload) -> Workload {
    Workload {
        work_ms: base.lease_ms / 2,
        ..base.clone()
    }
}

/// How a crashed server comes back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Restart {
    /// The process dies and systemd starts it again: `RestartSec` (100 ms) and a
    /// Redis start, at the world's scale.
    AtOnce,
    /// The machine dies and is back after a Redis start, at the world's scale (the
    /// machine's own reboot is left out: pin `restart-ms` to add it).
    MachineAtOnce,
    /// The process dies and stays down one to two leases.
    Delayed,
}

/// Three crashes of the server holding the lock.
fn restarts(d: &mut Draw, how: Restart) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..3 {
        let restart_after_ms = match how {
            Restart::Delayed => d.quantity(Param::RestartMs, lease..=lease * 2),
            Restart::AtOnce => d.restart_ms(&[&SYSTEMD_RESTART_SEC, &REDIS_START]),
            Restart::MachineAtOnce => d.restart_ms(&[&REDIS_START]),
        };
        let at_ms = d.at();
        let target = Target::LockServer;
        let restart_after_ms = Some(restart_after_ms);
        faults.push(Fault {
            at_ms,
            kind: if how == Restart::MachineAtOnce {
                FaultKind::MachineCrash {
                    target,
                    restart_after_ms,
                }
            } else {
                FaultKind::Crash {
                    target,
                    restart_after_ms,
                }
            },
        });
    }
    faults
}

/// Three pauses of the server holding the lock, 1.5-3 leases each.
fn pauses(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..3 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::Pause {
                target: Target::LockServer,
                duration_ms: d.quantity(Param::PauseMs, lease * 3 / 2..=lease * 3),
            },
        });
    }
    faults
}
