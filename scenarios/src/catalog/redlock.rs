//! Five independent masters (Redlock's N = 5), and `client-1` reaching only a bare
//! majority of them: while it holds the lock, a node of its majority jumps its clock,
//! restarts (without persistence, with an AOF, or after a lease), or the holder stops
//! the world right after checking its validity.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::{ServerSpec, Workload};

use super::{Def, Draw, FaultClass};
use crate::checkers::{clock_probes, probes};
use crate::params::Param;
use lock_impl::scale::{REDIS_START, SYSTEMD_RESTART_SEC};
use sim::system::Capability;

/// The client the Redlock scenarios single out: it reaches only a bare majority of the
/// masters (`redis-1` … `redis-3`), as in Kleppmann's example.
pub const BARE_MAJORITY_CLIENT: &str = "client-1";

pub(super) static REDLOCK_CLOCK_JUMP: Def = Def {
    name: "redlock-clock-jump",
    description: "five masters; client-1 reaches only redis-1..3; while it holds the lock, a node of its majority jumps forward 2-4 leases (Kleppmann's clock jump)",
    fault_about: "a node of the holder's majority jumped forward past the lease and expired the key early",
    class: FaultClass::ServerClock,
    needs: &[Capability::IndependentMasters],
    world: |base| masters(base, Persistence::None),
    quantities: &[Param::JumpMs],
    plan: |d| bare_majority(d, Hit::ClockJump),
    probe: |h, _| clock_probes::clock_jump_freed_the_lock(h),
};

pub(super) static REDLOCK_RESTART: Def = Def {
    name: "redlock-restart",
    description: "five masters; client-1 reaches only redis-1..3; while it holds the lock, a node of its majority crashes and is back as systemd restarts it (100 ms RestartSec and a Redis start, at the world's scale: restart-ms), without persistence",
    fault_about: "a node of the holder's majority restarted without the lock",
    class: FaultClass::ServerCrash,
    needs: &[Capability::IndependentMasters],
    world: |base| masters(base, Persistence::None),
    quantities: &[Param::RestartMs],
    plan: |d| bare_majority(d, Hit::Restart),
    probe: |h, _| crate::checkers::server_restart_lost_the_lock(h),
};

pub(super) static REDLOCK_RESTART_AOF: Def = Def {
    name: "redlock-restart-aof",
    description: "redlock-restart with appendonly yes, appendfsync always: the node's machine crashes and is back after a Redis start (at the world's scale: restart-ms)",
    fault_about: "a node of the holder's majority crashed holding the lock and restarted",
    class: FaultClass::ServerCrash,
    needs: &[Capability::IndependentMasters, Capability::AppendOnlyFile],
    world: |base| {
        masters(
            base,
            Persistence::Aof {
                fsync: Fsync::Always,
            },
        )
    },
    quantities: &[Param::RestartMs],
    plan: |d| bare_majority(d, Hit::MachineRestart),
    probe: |h, _| crate::checkers::server_crashed_holding_the_lock(h, 0),
};

pub(super) static REDLOCK_RESTART_DELAYED: Def = Def {
    name: "redlock-restart-delayed",
    description: "redlock-restart, but the node stays down at least a lease before restarting (antirez's delayed restart)",
    fault_about: "a node of the holder's majority crashed holding the lock and stayed down at least a lease",
    class: FaultClass::ServerCrash,
    needs: &[Capability::IndependentMasters],
    world: |base| masters(base, Persistence::None),
    quantities: &[Param::RestartMs],
    plan: |d| bare_majority(d, Hit::DelayedRestart),
    probe: |h, w| crate::checkers::server_crashed_holding_the_lock(h, w.lease_ms),
};

pub(super) static REDLOCK_GC_PAUSE: Def = Def {
    name: "redlock-gc-pause",
    description: "five masters; clients check their validity before writing, and the holder stops the world for 2-4 leases right after the check",
    fault_about: "a pause began during a hold and outlasted the lease",
    class: FaultClass::ClientPause,
    needs: &[Capability::IndependentMasters],
    world: |base| Workload {
        check_validity_ms: Some(1),
        ..masters(base, Persistence::None)
    },
    quantities: &[Param::PauseMs],
    plan: pauses_before_write,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};

/// Five independent masters `redis-1` … `redis-5` (Redlock's N = 5), each with
/// `persistence`.
fn masters(base: &Workload, persistence: Persistence) -> Workload {
    Workload {
        servers: (1..=lock_impl::REDLOCK_MASTERS)
            .map(|i| ServerSpec {
                persistence,
                ..ServerSpec::named(format!("redis-{i}"))
            })
            .collect(),
        // A one-second lease and wait, as `tryLock(1, 1, SECONDS)`: Redisson's RedLock
        // spends a fifth of the wait on each node, and client-1 must get through its
        // two unreachable ones within it.
        lease_ms: 1_000,
        wait_ms: 1_000,
        // Critical sections half a lease long, so the holder is still working when a
        // node of its majority forgets or expires the lock.
        work_ms: 500,
        // Two clients, as in Kleppmann's example: client-1 gets its turn at the lock
        // often, and client-2 is the one that gathers a majority behind its back.
        clients: 2,
        // Up to a lease of thought between attempts, so the lock is sometimes free when
        // a waiter polls (Redisson's RedLock here polls a held node after its TTL
        // rather than hearing the unlock message).
        think_ms_max: 1_000,
        // Reply and dial timeouts a real service would use: a node cut off from a client
        // costs it that long per command (Redisson waits for the reply; the spec's
        // Redlock gives up after its own per-instance timeout first).
        response_timeout_ms: 100,
        connect_timeout_ms: 100,
        ..base.clone()
    }
}

/// What happens to a node of client-1's majority.
#[derive(Clone, Copy)]
enum Hit {
    /// Its wall clock jumps forward 2-4 leases.
    ClockJump,
    /// Its process crashes and systemd starts it again (`RestartSec` and a Redis
    /// start, at the world's scale).
    Restart,
    /// Its machine crashes and is back after a Redis start, at the world's scale.
    MachineRestart,
    /// Its process crashes and stays down one to two leases.
    DelayedRestart,
}

/// client-1 never reaches redis-4 and redis-5: when it holds the lock, it holds exactly
/// redis-1..3, a bare majority; one fault then hits a node of that majority.
fn bare_majority(d: &mut Draw, hit: Hit) -> Vec<Fault> {
    let (w, lease) = (d.workload, d.lease);
    let mut faults = vec![Fault {
        at_ms: 0,
        kind: FaultKind::Partition {
            a: vec![Target::Host(BARE_MAJORITY_CLIENT.into())],
            b: vec![
                Target::Host("redis-4".into()),
                Target::Host("redis-5".into()),
            ],
            one_way: false,
            duration_ms: w.duration_ms + w.drain_ms,
        },
    }];
    let target = Target::LockServerOf {
        client: BARE_MAJORITY_CLIENT.into(),
        within_ms: w.duration_ms,
    };
    // Early, so client-1 has the whole run to take the lock.
    let drawn = d.rng.random_range(300..=1_000);
    let at_ms = d.timed(drawn);
    faults.push(Fault {
        at_ms,
        kind: match hit {
            Hit::ClockJump => FaultKind::ClockJump {
                target,
                delta_ms: d.quantity(Param::JumpMs, lease * 2..=lease * 4) as i64,
            },
            Hit::Restart => FaultKind::Crash {
                target,
                restart_after_ms: Some(d.restart_ms(&[&SYSTEMD_RESTART_SEC, &REDIS_START])),
            },
            Hit::MachineRestart => FaultKind::MachineCrash {
                target,
                restart_after_ms: Some(d.restart_ms(&[&REDIS_START])),
            },
            Hit::DelayedRestart => FaultKind::Crash {
                target,
                restart_after_ms: Some(d.quantity(Param::RestartMs, lease..=lease * 2)),
            },
        },
    });
    faults
}

/// Four pauses of the holder right after its validity check, 2-4 leases each.
fn pauses_before_write(d: &mut Draw) -> Vec<Fault> {
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
