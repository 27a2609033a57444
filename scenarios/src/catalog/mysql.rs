//! MySQL's own faults: a holder's connection dropped under its `GET_LOCK`, by a reset
//! or by the server's `wait_timeout`; a primary lost with a lock its asynchronous
//! replica had not received, and the replica promoted; the server's machine crashing
//! right after a lock was granted and restarting from what
//! `innodb_flush_log_at_trx_commit` made durable.

use crate::params::Param;
use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::{MySqlReplicaSpec, MySqlSpec, SystemSpecs, Workload};

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use lock_impl::scale::MARIADB_START;
use sim::system::Capability;

/// A world of one MySQL server (`mysql-1`, the MariaDB 10.11 model) and no Redis
/// server, at the failover world's scale: an 8 s lease (4/15 of real time) and
/// critical sections of 3 s, inside the lease, so the lock's own rules never lapse
/// under a holder that works; what breaks a hold here is the scenario's fault (a
/// connection dropped under a `GET_LOCK`, a grant a restart lost), nothing else.
/// Four clients that think up to a second, for 10 s.
fn mysql_world(base: &Workload) -> Workload {
    Workload {
        servers: Vec::new(),
        clients: 4,
        think_ms_max: 1_000,
        lease_ms: 8_000,
        work_ms: 3_000,
        duration_ms: 10_000,
        drain_ms: 2_000,
        response_timeout_ms: 2_000,
        systems: SystemSpecs {
            mysql: Some(MySqlSpec::default()),
            ..base.systems.clone()
        },
        ..base.clone()
    }
}

/// A fault's start: while clients still work (after warm-up, a critical section
/// before the end).
fn within_the_run(d: &mut Draw) -> u64 {
    let w = d.workload;
    let last = w.duration_ms.saturating_sub(w.work_ms).max(301);
    let drawn = d.rng.random_range(300..last);
    d.timed(drawn)
}

pub(super) static MYSQL_CONNECTION_DROP: Def = Def {
    name: "mysql-connection-drop",
    description: "the holder's connections to the MySQL server are reset (a proxy, a firewall, a pool recycling them) four times while it works a 3 s critical section inside its 8 s lease",
    fault_about: "the server ended the holder's connection (and with it whatever the connection held: a GET_LOCK) while the holder believed it held the lock",
    class: FaultClass::Partition,
    needs: &[Capability::ConnectionLocks],
    world: mysql_world,
    quantities: &[],
    plan: holder_resets,
    probe: |h, _| probes::connection_closed_during_a_hold(h),
};

/// Four resets of the holder's connections.
fn holder_resets(d: &mut Draw) -> Vec<Fault> {
    (0..4)
        .map(|_| Fault {
            at_ms: within_the_run(d),
            kind: FaultKind::ResetConnections {
                target: Target::Holder,
            },
        })
        .collect()
}

/// The same world with the server's `wait_timeout` at its smallest, 1 s (a DBA's
/// setting to reap idle pool connections), and critical sections of 0.5 s: a holder
/// that is not stopped never leaves its connection idle that long, and one stopped for
/// up to three pauses of 1.2-2 s is still inside its 8 s lease when it resumes.
///
/// The clients go on for 20 s and the pauses come in the first 10: a lock whose
/// holder's release failed on the closed connection (a unique-index row has no expiry)
/// then stays past the liveness bound (the lease and the slack, 8.5 s) while the others
/// still try, so the `liveness` checker can judge whether it was freed.
fn mysql_wait_timeout_world(base: &Workload) -> Workload {
    let mut w = Workload {
        work_ms: 500,
        duration_ms: 20_000,
        ..mysql_world(base)
    };
    if let Some(m) = &mut w.systems.mysql {
        m.wait_timeout_s = WAIT_TIMEOUT_S;
    }
    w
}

/// `mysql-wait-timeout`'s `wait_timeout`, seconds (MariaDB's smallest).
const WAIT_TIMEOUT_S: u64 = 1;

pub(super) static MYSQL_WAIT_TIMEOUT: Def = Def {
    name: "mysql-wait-timeout",
    description: "the server's wait_timeout is 1 s; the holder of a 0.5 s critical section stops the world for 1.2-2 s (inside its 8 s lease) while it holds the lock, so its connection sits idle past the timeout",
    fault_about: "the server closed the paused holder's idle connection (and with it whatever the connection held: a GET_LOCK) while the holder believed it held the lock",
    class: FaultClass::ClientPause,
    needs: &[Capability::ConnectionLocks],
    world: mysql_wait_timeout_world,
    quantities: &[Param::PauseMs],
    plan: holder_long_pauses,
    probe: |h, _| probes::connection_closed_during_a_hold(h),
};

/// Three pauses of the holder in the first half of the run, 1.2-2 times
/// `wait_timeout` each.
fn holder_long_pauses(d: &mut Draw) -> Vec<Fault> {
    let timeout_ms = WAIT_TIMEOUT_S * 1_000;
    let half = d.workload.duration_ms / 2;
    (0..3)
        .map(|_| Fault {
            at_ms: {
                let drawn = d.rng.random_range(300..half.max(301));
                d.timed(drawn)
            },
            kind: FaultKind::Pause {
                target: Target::Holder,
                duration_ms: d.quantity(Param::PauseMs, timeout_ms * 6 / 5..=timeout_ms * 2),
            },
        })
        .collect()
}

/// The MySQL world with an asynchronous replica `mysql-2` (10 ms behind) and an
/// orchestrator that promotes it a second after the primary went down. Leases are long
/// and critical sections last seconds, as in the Redis `failover` scenario, so a holder
/// still works when the failover completes; four clients that think up to a second.
fn mysql_replicated_world(base: &Workload) -> Workload {
    Workload {
        servers: Vec::new(),
        clients: 4,
        think_ms_max: 1_000,
        lease_ms: 8_000,
        work_ms: 3_000,
        duration_ms: 8_000,
        drain_ms: 2_000,
        response_timeout_ms: 2_000,
        systems: SystemSpecs {
            mysql: Some(MySqlSpec {
                replica: Some(MySqlReplicaSpec::default()),
                ..MySqlSpec::default()
            }),
            ..base.systems.clone()
        },
        ..base.clone()
    }
}

pub(super) static MYSQL_FAILOVER: Def = Def {
    name: "mysql-failover",
    description: "a primary with an asynchronous replica 10 ms behind; the primary's machine dies right after committing a lock write the replica has not received, taking the unsent binlog events with it, and the orchestrator promotes the replica and re-points the clients after 1 s",
    fault_about: "the primary's machine died holding a lock its replica did not have (a row write not yet received, or a connection's GET_LOCK or row lock, which is never replicated), and the replica was promoted without it",
    class: FaultClass::Failover,
    needs: &[Capability::AsyncReplicaPromotion],
    world: mysql_replicated_world,
    quantities: &[],
    plan: primary_crash,
    probe: |h, _| probes::failover_lost_the_lock(h),
};

/// The crash is armed early and hits the first grant the primary committed and the
/// replica has not yet received; the primary stays down. A machine crash: a `kill -9`ed
/// server's kernel would still send the binlog events its dump thread had written, and
/// the replica would get the grant 10 ms late (see Redis's `failover`).
fn primary_crash(d: &mut Draw) -> Vec<Fault> {
    vec![Fault {
        at_ms: {
            let drawn = d.rng.random_range(300..=2_000);
            d.timed(drawn)
        },
        kind: FaultKind::MachineCrash {
            target: Target::UnreplicatedLockMaster { within_ms: 6_000 },
            restart_after_ms: None,
        },
    }]
}

/// The MySQL world with `innodb_flush_log_at_trx_commit` set to `setting`: critical
/// sections of 3 s inside the 8 s lease, so a holder still works when the server is
/// back (a restart takes what MariaDB's start takes, at the world's scale); two
/// clients that think up to 1.5 s between rounds (a scheduled job's lock rather than
/// a hot one), so a grant often comes more than a flush after the release before it
/// and what a crash loses is the grant itself, not also the release.
fn mysql_restart_world(base: &Workload, setting: u8) -> Workload {
    let mut w = Workload {
        clients: 2,
        think_ms_max: 1_500,
        ..mysql_world(base)
    };
    if let Some(m) = &mut w.systems.mysql {
        m.innodb_flush_log_at_trx_commit = setting;
    }
    w
}

// Two scenarios, not a `--param`: a `Param` is a fault's size or a workload knob that a
// sweep steps through numbers (and that the seed draws); the durability setting is
// the server's configuration, one of three values that mean different mechanisms, as
// `server-restart` and `server-restart-aof` are two scenarios for Redis.

pub(super) static MYSQL_RESTART: Def = Def {
    name: "mysql-restart",
    description: "the MySQL server's machine crashes right after it granted a lock and is back after a MariaDB start (86-344 ms real, at the world's scale: restart-ms); innodb_flush_log_at_trx_commit=1 (the default: the redo log is flushed at every commit)",
    fault_about: "the MySQL server crashed while a lock was held and recovered",
    class: FaultClass::ServerCrash,
    needs: &[Capability::RedoLogRecovery],
    world: |base| mysql_restart_world(base, 1),
    quantities: &[Param::RestartMs],
    plan: machine_crash_after_a_grant,
    probe: |h, _| probes::restart_struck_a_hold(h),
};

pub(super) static MYSQL_RESTART_FLUSH_2: Def = Def {
    name: "mysql-restart-flush-2",
    description: "mysql-restart with innodb_flush_log_at_trx_commit=2: the redo log is written to the OS at commit and flushed once a second, so the machine crash loses the last second's commits",
    fault_about: "the MySQL server crashed while a lock was held and recovered",
    class: FaultClass::ServerCrash,
    needs: &[Capability::RedoLogRecovery],
    world: |base| mysql_restart_world(base, 2),
    quantities: &[Param::RestartMs],
    plan: machine_crash_after_a_grant,
    probe: |h, _| probes::restart_struck_a_hold(h),
};

/// The crash is armed early and hits the server as soon as a client holds a lock it
/// granted after that; the machine is back after a MariaDB start with crash recovery
/// (its own reboot left out: pin `restart-ms` to add it).
fn machine_crash_after_a_grant(d: &mut Draw) -> Vec<Fault> {
    let at_ms = within_the_run(d);
    vec![Fault {
        at_ms,
        kind: FaultKind::MachineCrash {
            target: Target::FreshLockMaster {
                within_ms: d.workload.duration_ms,
            },
            restart_after_ms: Some(d.restart_ms(&[&MARIADB_START])),
        },
    }]
}
