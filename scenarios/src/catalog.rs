//! The scenario catalog: a name, one line of description, the workload, and a fault
//! plan generator that draws every fault from the run's seed within the scenario's
//! bounds.
//!
//! A scenario never names a design: the same scenario runs every design, and the
//! checkers judge only the history.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::{SentinelSpec, ServerSpec, Workload, sub_seed};

use crate::params::Param;

/// One scenario of the catalog.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The user-facing identifier.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// The fault this scenario is about, as its probe checks it.
    pub fault_about: &'static str,
    /// The workload.
    pub workload: Workload,
    /// A hand-written plan that replaces the seed's (`locksim run --plan FILE`), and
    /// the file it came from (for replay commands).
    pub fixed_plan: Option<(FaultPlan, String)>,
    kind: Kind,
    /// Quantities pinned by `--param` (see [`crate::params`]), sorted.
    pub(crate) params: Vec<(Param, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NoFaults,
    ClientCrash,
    GcPause,
    SlowWork,
    NetworkDelay,
    LongWork,
    Reentrancy,
    UnlockMessageLost,
    ServerRestart,
    ServerRestartAof,
    ServerRestartDelayed,
    ServerPause,
    Partition,
    Failover,
    FailoverWait,
    SplitBrain,
    SplitBrainMinReplicas,
    ClockJump,
    ClockDrift,
    AcquirePause,
    RedlockClockJump,
    RedlockRestart,
    RedlockRestartAof,
    RedlockRestartDelayed,
    RedlockGcPause,
}

/// The client the Redlock scenarios single out: it reaches only a bare majority of the
/// masters (`redis-1` … `redis-3`), as in Kleppmann's example.
pub const BARE_MAJORITY_CLIENT: &str = "client-1";

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

/// A master `redis`, its replicas `redis-2` …, and three Sentinels (quorum 2) that
/// notice a dead master within a second and a half (`down-after-milliseconds` 1000;
/// Redis's default of 30 s would make every run half a minute longer and change
/// nothing but the wait) and fail over within a few seconds. Leases are long and
/// critical sections last seconds (8 s and 3 s), as in the jobs seeds 003 and 004
/// describe, so a holder is still working when the failover completes.
fn replicated(base: &Workload, replicas: usize, min_replicas: u64) -> Workload {
    let mut servers = vec![ServerSpec {
        min_replicas_to_write: min_replicas,
        // A lag bound shorter than Redis's example of 10 s, so the bound passes within
        // a short partition; what matters is its size against the failover time.
        min_replicas_max_lag_s: 3,
        ..ServerSpec::named("redis")
    }];
    // Every server gets the same `min-replicas-*` lines, as one config file deployed
    // to all of them would: a replica ignores them until it is promoted, and then
    // refuses writes while it has no replica of its own (real Redis does the same).
    let master = servers[0].clone();
    for i in 0..replicas {
        servers.push(ServerSpec {
            name: format!("redis-{}", i + 2),
            replica_of: Some("redis".into()),
            ..master.clone()
        });
    }
    Workload {
        // Four clients that think up to a second between attempts: the lock is
        // sometimes free long enough for its release to reach the replica before the
        // next grant (a grant on a lock the replica still holds would not be lost).
        clients: 4,
        think_ms_max: 1_000,
        lease_ms: 8_000,
        work_ms: 3_000,
        duration_ms: 8_000,
        drain_ms: 2_000,
        response_timeout_ms: 2_000,
        servers,
        sentinel: Some(SentinelSpec {
            down_after_ms: 1_000,
            failover_timeout_ms: 5_000,
            ..SentinelSpec::default()
        }),
        ..base.clone()
    }
}

/// The shape of a scenario's world, which decides the designs it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One master, no replicas: every design runs here; a design that locks on N
    /// independent masters (Redlock) gets N copies of that master.
    SingleMaster,
    /// A master with replicas (and Sentinels): single-master designs only (Redlock is
    /// defined over independent masters, without replication).
    Replicated,
    /// N independent masters: designs that lock on several masters only.
    Masters(usize),
}

/// Every scenario, in the order reports list them.
pub fn catalog() -> Vec<Scenario> {
    // A reply timeout a real service would use: a few leases (500 ms for a 200 ms
    // lease), not the redis crate's generous default. A reply later than that is an
    // unknown outcome (`info`), so every scenario that delays, pauses or cuts off a
    // server exercises how a design handles not knowing.
    let base = Workload {
        response_timeout_ms: 500,
        ..Workload::default()
    };
    vec![
        Scenario {
            name: "no-faults",
            description: "eight clients contend for one lock; nothing goes wrong",
            fault_about: "none (the lock must be contended)",
            // Short runs: the suite sweeps 200 seeds of every design; two simulated
            // seconds still hold the lock about sixty times per run.
            workload: Workload {
                duration_ms: 2_000,
                drain_ms: 500,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::NoFaults,
            params: Vec::new(),
        },
        Scenario {
            name: "client-crash",
            description: "clients crash while holding, acquiring, or owning the key on the server; they restart a second later",
            fault_about: "a client crashed while the server held its lock",
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::ClientCrash,
            params: Vec::new(),
        },
        Scenario {
            name: "gc-pause",
            description: "the holder stops the world for 2-4 leases (a GC pause)",
            fault_about: "a pause began during a hold and outlasted the lease",
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::GcPause,
            params: Vec::new(),
        },
        Scenario {
            name: "gc-pause-plain-storage",
            description: "gc-pause, with a storage that does not check fencing tokens: the lock's tokens alone protect nothing",
            fault_about: "a pause began during a hold and outlasted the lease",
            // Every other scenario writes through a fencing storage, which enforces
            // what token-order checks; here only the lock's own promise stands between
            // a stale holder and the data.
            workload: Workload {
                fencing: false,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::GcPause,
            params: Vec::new(),
        },
        Scenario {
            name: "slow-work",
            description: "a holder's critical section runs about as long as the lease, or longer",
            fault_about: "a hold outlasted the lease",
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::SlowWork,
            params: Vec::new(),
        },
        Scenario {
            name: "network-delay",
            description: "replies to an acquiring client are delayed beyond the lease",
            fault_about: "the server granted the lock while replies to the acquirer were delayed, and the reply came late or never",
            // A response timeout a real service would use, between the lease and the
            // longest delay (1.1-1.5 leases): some replies arrive late, others time out
            // and leave the acquire's outcome unknown (`info`).
            workload: Workload {
                response_timeout_ms: base.lease_ms * 3 / 2 - 20,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::NetworkDelay,
            params: Vec::new(),
        },
        Scenario {
            name: "long-work",
            description: "every critical section lasts ten leases; no faults (a watchdog must keep the lock)",
            fault_about: "a hold outlasted the lease",
            workload: Workload {
                work_ms: base.lease_ms * 10,
                duration_ms: 8_000,
                drain_ms: base.lease_ms * 10 + 1_000,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::LongWork,
            params: Vec::new(),
        },
        Scenario {
            name: "reentrancy",
            description: "each round acquires the lock three times, nested, then releases three times",
            fault_about: "a nested acquisition by the holder succeeded",
            workload: Workload {
                reentrant_depth: 3,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::Reentrancy,
            params: Vec::new(),
        },
        Scenario {
            name: "unlock-message-lost",
            description: "the server drops pub/sub messages: waiters never hear the unlock and must fall back on the TTL",
            fault_about: "a release freed the lock while messages were dropped and a waiter waited",
            // A wait budget far beyond the bound, so only the TTL fallback can rescue a
            // waiter whose unlock message was lost.
            workload: Workload {
                wait_ms: 3_000,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::UnlockMessageLost,
            params: Vec::new(),
        },
        Scenario {
            name: "server-restart",
            description: "the Redis server crashes while a lock is held and restarts at once, without persistence",
            fault_about: "a server restarted without the lock key its record held",
            // Critical sections half a lease long, so a holder is still working when the
            // server comes back empty and grants the lock again.
            workload: Workload {
                work_ms: base.lease_ms / 2,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::ServerRestart,
            params: Vec::new(),
        },
        Scenario {
            name: "server-restart-aof",
            description: "the Redis server's machine crashes while a lock is held and restarts at once; appendonly yes, appendfsync always",
            fault_about: "a server crashed holding the lock and restarted",
            workload: Workload {
                work_ms: base.lease_ms / 2,
                servers: vec![ServerSpec {
                    persistence: Persistence::Aof {
                        fsync: Fsync::Always,
                    },
                    ..ServerSpec::named("redis")
                }],
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::ServerRestartAof,
            params: Vec::new(),
        },
        Scenario {
            name: "server-restart-delayed",
            description: "the Redis server crashes while a lock is held and stays down at least a lease before restarting (antirez's delayed restart)",
            fault_about: "a server crashed holding the lock and stayed down at least a lease",
            workload: Workload {
                work_ms: base.lease_ms / 2,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::ServerRestartDelayed,
            params: Vec::new(),
        },
        Scenario {
            name: "server-pause",
            description: "the Redis server stops for 1.5-3 leases while clients wait on it; its clock runs on",
            fault_about: "a server pause outlasted the lease while the lock was held or wanted",
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::ServerPause,
            params: Vec::new(),
        },
        Scenario {
            name: "partition",
            description: "the holder is cut off from Redis for 2-8 leases, then the network heals",
            fault_about: "a holder was partitioned from the servers for longer than the lease",
            // The base's response timeout (2.5 leases) lies between the shortest and the
            // longest partition: some commands come back late when the network heals,
            // others time out.
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::Partition,
            params: Vec::new(),
        },
        Scenario {
            name: "failover",
            description: "one master, one replica lagging 5-20 ms, three Sentinels: the master crashes right after granting a lock its replica has not received; Sentinel promotes the replica",
            fault_about: "the master crashed holding a lock write no replica had, and a replica without it was promoted",
            workload: replicated(&base, 1, 0),
            fixed_plan: None,
            kind: Kind::Failover,
            params: Vec::new(),
        },
        Scenario {
            name: "failover-wait",
            description: "two replicas, one cut off from the master from the start (so WAIT counts one); just after a grant the master and the replica that acknowledged it are cut off from everyone else, and the one that never synced is promoted",
            fault_about: "the master was lost holding the lock and a replica without it was promoted",
            workload: replicated(&base, 2, 0),
            fixed_plan: None,
            kind: Kind::FailoverWait,
            params: Vec::new(),
        },
        Scenario {
            name: "split-brain",
            description: "the master and the holder are cut off from the Sentinels, the replica and the other clients; the majority promotes the replica and both sides grant the lock",
            fault_about: "the master was partitioned away and another server was promoted while the old one still accepted lock writes",
            workload: Workload {
                duration_ms: 9_000,
                ..replicated(&base, 1, 0)
            },
            fixed_plan: None,
            kind: Kind::SplitBrain,
            params: Vec::new(),
        },
        Scenario {
            name: "split-brain-min-replicas",
            description: "split-brain with min-replicas-to-write 1 (max lag 3 s) on every server, as one config file sets it: the old master refuses writes once its replica's acknowledgement is older than the lag bound, and the promoted replica, with no replica of its own, refuses them too",
            fault_about: "the master was partitioned away and another server was promoted",
            workload: Workload {
                duration_ms: 9_000,
                ..replicated(&base, 1, 1)
            },
            fixed_plan: None,
            kind: Kind::SplitBrainMinReplicas,
            params: Vec::new(),
        },
        Scenario {
            name: "clock-jump",
            description: "the wall clock of the Redis server holding the lock jumps forward by 2-4 leases while the lock is held",
            fault_about: "a server's clock jumped forward past the lease while it held the lock, and the key expired early",
            workload: Workload {
                work_ms: base.lease_ms / 2,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::ClockJump,
            params: Vec::new(),
        },
        Scenario {
            name: "clock-drift",
            description: "every Redis server's clock runs fast by 0-10 % (seed-chosen) for the whole run; critical sections last a whole lease",
            fault_about: "a server's clock ran fast while it granted the lock",
            // Holders work up to the end of their validity, where a server's fast clock
            // has already expired the key.
            workload: Workload {
                work_ms: base.lease_ms,
                ..base.clone()
            },
            fixed_plan: None,
            kind: Kind::ClockDrift,
            params: Vec::new(),
        },
        Scenario {
            name: "acquire-pause",
            description: "a client stops the world for 2-4 leases in the middle of an acquisition a server has already granted",
            fault_about: "a pause longer than the lease fell inside an acquisition that completed after it",
            workload: base.clone(),
            fixed_plan: None,
            kind: Kind::AcquirePause,
            params: Vec::new(),
        },
        Scenario {
            name: "redlock-clock-jump",
            description: "five masters; client-1 reaches only redis-1..3; while it holds the lock, a node of its majority jumps forward 2-4 leases (Kleppmann's clock jump)",
            fault_about: "a node of the holder's majority jumped forward past the lease and expired the key early",
            workload: masters(&base, Persistence::None),
            fixed_plan: None,
            kind: Kind::RedlockClockJump,
            params: Vec::new(),
        },
        Scenario {
            name: "redlock-restart",
            description: "five masters; client-1 reaches only redis-1..3; while it holds the lock, a node of its majority crashes and restarts at once without persistence",
            fault_about: "a node of the holder's majority restarted without the lock",
            workload: masters(&base, Persistence::None),
            fixed_plan: None,
            kind: Kind::RedlockRestart,
            params: Vec::new(),
        },
        Scenario {
            name: "redlock-restart-aof",
            description: "redlock-restart with appendonly yes, appendfsync always: the node's machine crashes and it restarts at once",
            fault_about: "a node of the holder's majority crashed holding the lock and restarted",
            workload: masters(
                &base,
                Persistence::Aof {
                    fsync: Fsync::Always,
                },
            ),
            fixed_plan: None,
            kind: Kind::RedlockRestartAof,
            params: Vec::new(),
        },
        Scenario {
            name: "redlock-restart-delayed",
            description: "redlock-restart, but the node stays down at least a lease before restarting (antirez's delayed restart)",
            fault_about: "a node of the holder's majority crashed holding the lock and stayed down at least a lease",
            workload: masters(&base, Persistence::None),
            fixed_plan: None,
            kind: Kind::RedlockRestartDelayed,
            params: Vec::new(),
        },
        Scenario {
            name: "redlock-gc-pause",
            description: "five masters; clients check their validity before writing, and the holder stops the world for 2-4 leases right after the check",
            fault_about: "a pause began during a hold and outlasted the lease",
            workload: Workload {
                check_validity_ms: Some(1),
                ..masters(&base, Persistence::None)
            },
            fixed_plan: None,
            kind: Kind::RedlockGcPause,
            params: Vec::new(),
        },
        Scenario {
            name: "flash-sale",
            description: "seed 000's flash sale: 100 buyers each try once for the lock on one product (lease 10 s, stock 100), again and again; nothing goes wrong",
            fault_about: "none (the lock must be contended)",
            // The world whose cost is its hosts: a hundred clients, most of them
            // thinking at any moment. The seed's numbers: `kill:123`, a 10 s lease,
            // `setIfAbsent` once (no waiting), stock 100. Each purchase takes one unit
            // (the seed's random 1..9 changes nothing a checker sees), and buyers keep
            // buying after the stock runs out (the storage is not the point here).
            workload: Workload {
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
            fixed_plan: None,
            kind: Kind::NoFaults,
            params: Vec::new(),
        },
    ]
}

/// The catalog's names, comma separated, for error messages.
pub fn scenario_names() -> String {
    catalog()
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The scenario called `name`, or an error listing the allowed names.
pub fn find(name: &str) -> Result<Scenario, String> {
    catalog()
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| format!("unknown scenario '{name}'; allowed: {}", scenario_names()))
}

impl Scenario {
    /// The shape of this scenario's world.
    pub fn topology(&self) -> Topology {
        let w = &self.workload;
        if w.sentinel.is_some() || w.servers.iter().any(|s| s.replica_of.is_some()) {
            Topology::Replicated
        } else if w.servers.len() > 1 {
            Topology::Masters(w.servers.len())
        } else {
            Topology::SingleMaster
        }
    }

    /// Whether `param` is a quantity of this scenario (a size of its faults, or a
    /// workload knob every scenario has).
    pub fn has_param(&self, param: Param) -> bool {
        use Kind::*;
        match param {
            Param::LeaseMs | Param::Clients | Param::WorkMs => true,
            Param::PauseMs => matches!(
                self.kind,
                GcPause | ServerPause | AcquirePause | RedlockGcPause
            ),
            Param::DelayMs => self.kind == NetworkDelay,
            Param::LagMs => self.kind == Failover,
            Param::DriftPpm => self.kind == ClockDrift,
            Param::JumpMs => matches!(self.kind, ClockJump | RedlockClockJump),
            Param::PartitionMs => self.kind == Partition,
        }
    }

    /// Whether a design that locks on `masters` independent masters runs here.
    pub fn applies_to(&self, masters: usize) -> bool {
        match self.topology() {
            Topology::SingleMaster => true,
            Topology::Replicated => masters <= 1,
            Topology::Masters(_) => masters > 1,
        }
    }

    /// The workload for a design on `masters` independent masters: a single-master
    /// world becomes `redis-1` … `redis-N`, each configured as the one master was
    /// (persistence, clock); every other world is the scenario's own.
    pub fn workload_for(&self, masters: usize) -> Workload {
        let mut w = self.workload.clone();
        if masters > 1 && self.topology() == Topology::SingleMaster {
            let one = w.servers[0].clone();
            w.servers = (1..=masters)
                .map(|i| ServerSpec {
                    name: format!("redis-{i}"),
                    ..one.clone()
                })
                .collect();
        }
        w
    }

    /// The scenario's "the fault happened" probe: a description of the witness, or
    /// `None` if this history never saw the fault the scenario is about.
    pub fn probe(&self, history: &sim::history::History) -> Option<String> {
        use crate::checkers::{clock_probes, probes};
        match self.kind {
            Kind::NoFaults => probes::contended(history),
            Kind::ClientCrash => probes::crash_while_holding(history),
            Kind::GcPause => probes::pause_outlasted_a_hold(history),
            Kind::SlowWork => probes::hold_outlasted_lease(history),
            Kind::NetworkDelay => crate::checkers::delayed_reply_to_a_granted_acquire(history),
            Kind::LongWork => probes::hold_outlasted_lease(history),
            Kind::Reentrancy => probes::nested_acquisition(history),
            Kind::UnlockMessageLost => probes::unlock_message_dropped_with_a_waiter(history),
            Kind::ServerRestart => crate::checkers::server_restart_lost_the_lock(history),
            Kind::ServerRestartAof => crate::checkers::server_crashed_holding_the_lock(history, 0),
            Kind::ServerRestartDelayed => {
                crate::checkers::server_crashed_holding_the_lock(history, self.workload.lease_ms)
            }
            Kind::ServerPause => crate::checkers::server_pause_outlasted_the_lease(history),
            Kind::Partition => crate::checkers::holder_partitioned_past_the_lease(history),
            Kind::Failover => crate::checkers::failover_lost_the_lock(history, true),
            Kind::FailoverWait => crate::checkers::failover_lost_the_lock(history, false),
            Kind::SplitBrain => {
                crate::checkers::split_brain(history).and_then(|(d, w)| (w > 0).then_some(d))
            }
            Kind::SplitBrainMinReplicas => crate::checkers::split_brain(history).map(|(d, _)| d),
            Kind::ClockJump | Kind::RedlockClockJump => {
                clock_probes::clock_jump_freed_the_lock(history)
            }
            Kind::ClockDrift => clock_probes::server_clock_ran_fast(history),
            Kind::AcquirePause => clock_probes::pause_during_acquire(history),
            Kind::RedlockRestart => crate::checkers::server_restart_lost_the_lock(history),
            Kind::RedlockRestartAof => crate::checkers::server_crashed_holding_the_lock(history, 0),
            Kind::RedlockRestartDelayed => {
                crate::checkers::server_crashed_holding_the_lock(history, self.workload.lease_ms)
            }
            Kind::RedlockGcPause => probes::pause_outlasted_a_hold(history),
        }
    }

    /// The fault plan for `seed`: times, targets and sizes drawn from the seed.
    pub fn plan(&self, seed: u64) -> FaultPlan {
        if let Some((plan, _)) = &self.fixed_plan {
            return plan.clone();
        }
        let w = &self.workload;
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(seed, 0xFA17));
        // Faults start after warm-up and early enough for their effects to show.
        let window = 300..w.duration_ms.saturating_sub(w.lease_ms * 4).max(301);
        let lease = w.lease_ms;
        let mut faults = Vec::new();
        match self.kind {
            Kind::NoFaults | Kind::LongWork | Kind::Reentrancy => {}
            Kind::UnlockMessageLost => {
                // Two long windows with a short gap at a seed-chosen time.
                let gap_at = rng.random_range(window.clone());
                faults.push(Fault {
                    at_ms: 200,
                    kind: FaultKind::DropPushes {
                        duration_ms: gap_at - 200,
                    },
                });
                faults.push(Fault {
                    at_ms: gap_at + 100,
                    kind: FaultKind::DropPushes {
                        duration_ms: w.duration_ms - gap_at,
                    },
                });
            }
            Kind::ClientCrash => {
                for _ in 0..10 {
                    let target = match rng.random_range(0..4) {
                        0 => Target::Holder,
                        1 => Target::Acquirer,
                        _ => Target::LockOwner,
                    };
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Crash {
                            target,
                            restart_after_ms: Some(1_000),
                        },
                    });
                }
            }
            Kind::GcPause => {
                for _ in 0..4 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Pause {
                            target: Target::Holder,
                            duration_ms: self
                                .pinned(Param::PauseMs, rng.random_range(lease * 2..=lease * 4)),
                        },
                    });
                }
            }
            Kind::SlowWork => {
                // Most faults end the critical section right around the lease's expiry,
                // where the races between expiry and release live; the rest overrun it
                // clearly.
                let centre = lease.saturating_sub(w.work_ms);
                for _ in 0..12 {
                    let extra_ms = if rng.random_bool(0.75) {
                        rng.random_range(centre.saturating_sub(12)..=centre + 4)
                    } else {
                        rng.random_range(centre + lease / 4..=centre + lease)
                    };
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::SlowWork {
                            target: Target::Holder,
                            extra_ms,
                        },
                    });
                }
            }
            Kind::ServerRestart | Kind::ServerRestartAof | Kind::ServerRestartDelayed => {
                for _ in 0..3 {
                    let restart_after_ms = if self.kind == Kind::ServerRestartDelayed {
                        rng.random_range(lease..=lease * 2)
                    } else {
                        rng.random_range(1..=lease / 4)
                    };
                    let at_ms = rng.random_range(window.clone());
                    let target = Target::LockServer;
                    let restart_after_ms = Some(restart_after_ms);
                    faults.push(Fault {
                        at_ms,
                        kind: if self.kind == Kind::ServerRestartAof {
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
            }
            Kind::ServerPause => {
                for _ in 0..3 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Pause {
                            target: Target::LockServer,
                            duration_ms: self.pinned(
                                Param::PauseMs,
                                rng.random_range(lease * 3 / 2..=lease * 3),
                            ),
                        },
                    });
                }
            }
            Kind::Partition => {
                for _ in 0..3 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Partition {
                            a: vec![Target::Holder],
                            b: vec![Target::AllServers],
                            one_way: false,
                            duration_ms: self.pinned(
                                Param::PartitionMs,
                                rng.random_range(lease * 2..=lease * 8),
                            ),
                        },
                    });
                }
            }
            Kind::Failover => {
                // The replica lags 5-20 ms (everything reaching it is delayed), as a
                // busy or distant replica does; the crash is armed early and hits the
                // first grant the master has acknowledged and the replica not yet got.
                faults.push(Fault {
                    at_ms: 0,
                    kind: FaultKind::Delay {
                        target: Target::Host("redis-2".into()),
                        latency_ms: self.pinned(Param::LagMs, rng.random_range(5..=20)),
                        duration_ms: w.duration_ms + w.drain_ms,
                    },
                });
                faults.push(Fault {
                    at_ms: rng.random_range(300..=2_000),
                    kind: FaultKind::Crash {
                        target: Target::UnreplicatedLockMaster { within_ms: 6_000 },
                        // Back (empty, no persistence) after the failover; Sentinel
                        // turns it into a replica of the new master.
                        restart_after_ms: Some(rng.random_range(5_000..=7_000)),
                    },
                });
            }
            Kind::FailoverWait => {
                // redis-3 never reaches its master; just after a grant (which `WAIT 1`
                // saw redis-2 acknowledge), the master and redis-2 are cut off from
                // everyone else, and the Sentinels promote redis-3.
                faults.push(Fault {
                    at_ms: 0,
                    kind: FaultKind::Partition {
                        a: vec![Target::Host("redis-3".into())],
                        b: vec![Target::Host("redis".into())],
                        one_way: false,
                        duration_ms: w.duration_ms + w.drain_ms,
                    },
                });
                faults.push(Fault {
                    at_ms: rng.random_range(300..=2_000),
                    kind: FaultKind::Partition {
                        a: vec![
                            Target::FreshLockMaster { within_ms: 4_000 },
                            Target::Host("redis-2".into()),
                        ],
                        b: vec![Target::Rest],
                        one_way: false,
                        duration_ms: w.duration_ms + w.drain_ms,
                    },
                });
            }
            Kind::SplitBrain | Kind::SplitBrainMinReplicas => {
                // With min-replicas on every server, no server accepts a write before
                // its replica's first sync (a replica connects from its once-a-second
                // cron, as Redis's does): the partition comes after the first grant.
                let start = if self.kind == Kind::SplitBrain {
                    1_000..=3_000
                } else {
                    1_500..=3_500
                };
                faults.push(Fault {
                    at_ms: rng.random_range(start),
                    kind: FaultKind::Partition {
                        a: vec![Target::Holder, Target::Host("redis".into())],
                        b: vec![Target::Rest],
                        one_way: false,
                        duration_ms: rng.random_range(5_000..=6_000),
                    },
                });
            }
            Kind::ClockJump => {
                for _ in 0..3 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::ClockJump {
                            target: Target::LockServer,
                            delta_ms: self
                                .pinned(Param::JumpMs, rng.random_range(lease * 2..=lease * 4))
                                as i64,
                        },
                    });
                }
            }
            Kind::ClockDrift => {
                faults.push(Fault {
                    at_ms: 0,
                    kind: FaultKind::ClockDrift {
                        target: Target::AllServers,
                        drift_ppm: self.pinned(Param::DriftPpm, rng.random_range(0..=100_000))
                            as i64,
                        duration_ms: None,
                    },
                });
            }
            Kind::AcquirePause => {
                for _ in 0..4 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Pause {
                            target: Target::MidAcquire {
                                within_ms: lease * 4,
                            },
                            duration_ms: self
                                .pinned(Param::PauseMs, rng.random_range(lease * 2..=lease * 4)),
                        },
                    });
                }
            }
            Kind::RedlockClockJump
            | Kind::RedlockRestart
            | Kind::RedlockRestartAof
            | Kind::RedlockRestartDelayed => {
                // client-1 never reaches redis-4 and redis-5: when it holds the lock, it
                // holds exactly redis-1..3, a bare majority.
                faults.push(Fault {
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
                });
                let target = Target::LockServerOf {
                    client: BARE_MAJORITY_CLIENT.into(),
                    within_ms: w.duration_ms,
                };
                // Early, so client-1 has the whole run to take the lock.
                let at_ms = rng.random_range(300..=1_000);
                faults.push(Fault {
                    at_ms,
                    kind: match self.kind {
                        Kind::RedlockClockJump => FaultKind::ClockJump {
                            target,
                            delta_ms: self
                                .pinned(Param::JumpMs, rng.random_range(lease * 2..=lease * 4))
                                as i64,
                        },
                        Kind::RedlockRestart => FaultKind::Crash {
                            target,
                            restart_after_ms: Some(rng.random_range(1..=lease / 4)),
                        },
                        Kind::RedlockRestartAof => FaultKind::MachineCrash {
                            target,
                            restart_after_ms: Some(rng.random_range(1..=lease / 4)),
                        },
                        _ => FaultKind::Crash {
                            target,
                            restart_after_ms: Some(rng.random_range(lease..=lease * 2)),
                        },
                    },
                });
            }
            Kind::RedlockGcPause => {
                for _ in 0..4 {
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::PauseBeforeWrite {
                            target: Target::Holder,
                            duration_ms: self
                                .pinned(Param::PauseMs, rng.random_range(lease * 2..=lease * 4)),
                        },
                    });
                }
            }
            Kind::NetworkDelay => {
                for _ in 0..4 {
                    let latency_ms = self.pinned(
                        Param::DelayMs,
                        rng.random_range(lease + lease / 10..=lease + lease / 2),
                    );
                    faults.push(Fault {
                        at_ms: rng.random_range(window.clone()),
                        kind: FaultKind::Delay {
                            target: Target::Acquirer,
                            latency_ms,
                            duration_ms: latency_ms * 3,
                        },
                    });
                }
            }
        }
        FaultPlan { faults }
    }
}
