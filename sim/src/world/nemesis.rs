//! The nemesis: applies the fault plan between simulation steps, and ends each fault
//! when its time comes. Every start and end is recorded as a fault event on the host
//! it hit.
//!
//! Faults compose: two pauses of one host end when the later ends (the pause gate keeps
//! the latest end), two partitions or delays of one link are tracked per fault (the
//! link heals when the last ends), and a crash of a host that is already down is a
//! no-op.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::faults::{FaultKind, FaultPlan, Target};
use crate::history::{EventKind, FaultPhase};
use crate::net::NetFaults;
use crate::recorder::Recorder;

use super::config::sub_seed;
use super::observe::Observer;
use super::servers::ServerCtl;

/// Per-client handles the nemesis reaches into.
pub(crate) struct ClientCtl {
    pub gate: crate::pause::PauseGate,
    /// Extra critical-section time for the next hold (slow-work faults).
    pub slow_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Everything in the world the nemesis can hurt, and what it aims with.
pub(crate) struct WorldCtl {
    pub recorder: Recorder,
    pub net: NetFaults,
    pub clients: BTreeMap<String, ClientCtl>,
    /// In world order (`Deps.servers` order).
    pub servers: Vec<ServerCtl>,
    pub observer: Observer,
    /// The lock key (for the targets that follow the server's record).
    pub key: String,
}

impl WorldCtl {
    fn server(&self, name: &str) -> Option<&ServerCtl> {
        self.servers.iter().find(|s| s.name == name)
    }

    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    fn is_host(&self, name: &str) -> bool {
        self.clients.contains_key(name) || self.server(name).is_some()
    }

    /// Drains every server's record now (before a server's memory goes).
    fn observe(&mut self, now: Duration) {
        self.observer.drain(&self.servers, &self.recorder, now);
    }
}

/// A fault end still to apply.
enum Pending {
    PauseEnd {
        fault: usize,
        host: String,
    },
    Restart {
        fault: usize,
        host: String,
        machine: bool,
    },
    DelayEnd {
        fault: usize,
        host: String,
    },
    PushesBack {
        fault: usize,
    },
    Heal {
        fault: usize,
        hosts: Vec<String>,
        detail: String,
    },
}

/// The fault plan's state during a run.
pub(crate) struct Nemesis {
    plan: FaultPlan,
    /// Fault indices by start time (stable: plan order breaks ties).
    order: Vec<usize>,
    next: usize,
    pending: Vec<(Duration, Pending)>,
    rng: ChaCha8Rng,
}

fn fault_event(
    recorder: &Recorder,
    now: Duration,
    host: &str,
    fault: usize,
    phase: FaultPhase,
    detail: String,
) {
    recorder.record_at(
        now.as_micros() as u64,
        host,
        EventKind::Fault {
            fault,
            phase,
            detail,
        },
    );
}

impl Nemesis {
    pub fn new(plan: &FaultPlan, seed: u64) -> Self {
        let mut order: Vec<usize> = (0..plan.faults.len()).collect();
        order.sort_by_key(|&i| plan.faults[i].at_ms);
        Self {
            plan: plan.clone(),
            order,
            next: 0,
            pending: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(sub_seed(seed, 1)),
        }
    }

    /// Applies every fault end and start due at `now`: ends first, in due order.
    pub fn apply_due(&mut self, sim: &mut turmoil::Sim<'_>, world: &mut WorldCtl, now: Duration) {
        self.pending.sort_by_key(|(at, _)| *at);
        while self.pending.first().is_some_and(|(at, _)| *at <= now) {
            let (_, p) = self.pending.remove(0);
            self.end(sim, world, now, p);
        }
        while self.next < self.order.len()
            && Duration::from_millis(self.plan.faults[self.order[self.next]].at_ms) <= now
        {
            let index = self.order[self.next];
            self.next += 1;
            self.start(sim, world, now, index);
        }
    }

    fn end(&mut self, sim: &mut turmoil::Sim<'_>, world: &mut WorldCtl, now: Duration, p: Pending) {
        let rec = &world.recorder;
        match p {
            Pending::PauseEnd { fault, host } => {
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("pause of {host} ends"),
                );
            }
            Pending::Restart {
                fault,
                host,
                machine,
            } => {
                if machine {
                    world.net.machine_back(&host);
                }
                sim.bounce(host.as_str());
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("{host} restarts"),
                );
            }
            Pending::PushesBack { fault } => {
                for server in &world.servers {
                    server.set_drop_pushes(false);
                }
                fault_event(
                    rec,
                    now,
                    &world.servers[0].name,
                    fault,
                    FaultPhase::End,
                    "the servers deliver pub/sub messages again".into(),
                );
            }
            Pending::DelayEnd { fault, host } => {
                world.net.end_delay(fault);
                fault_event(
                    rec,
                    now,
                    &host,
                    fault,
                    FaultPhase::End,
                    format!("messages to {host} on time again"),
                );
            }
            Pending::Heal {
                fault,
                hosts,
                detail,
            } => {
                world.net.release(fault);
                for host in hosts {
                    fault_event(
                        rec,
                        now,
                        &host,
                        fault,
                        FaultPhase::End,
                        format!("partition heals: {detail}"),
                    );
                }
            }
        }
    }

    /// The hosts `target` names at `now`: none if it names nobody (then the fault is a
    /// no-op and records nothing).
    fn resolve(&mut self, target: &Target, world: &WorldCtl) -> Vec<String> {
        let rng = &mut self.rng;
        let mut pick = |candidates: Vec<String>| {
            if candidates.is_empty() {
                Vec::new()
            } else {
                let i = rng.random_range(0..candidates.len());
                vec![candidates[i].clone()]
            }
        };
        match target {
            Target::Host(h) => {
                if world.is_host(h) {
                    vec![h.clone()]
                } else {
                    Vec::new()
                }
            }
            Target::Holder => pick(world.recorder.holders()),
            Target::Acquirer => pick(world.recorder.acquirers()),
            Target::LockOwner => world
                .observer
                .owner_of(&world.servers, &world.key)
                .filter(|h| world.clients.contains_key(h))
                .into_iter()
                .collect(),
            Target::LockServer => world
                .observer
                .server_holding(&world.servers, &world.key)
                .into_iter()
                .collect(),
            Target::AllServers => world.server_names(),
            Target::AllClients => world.clients.keys().cloned().collect(),
        }
    }

    fn start(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut WorldCtl,
        now: Duration,
        index: usize,
    ) {
        let fault = self.plan.faults[index].clone();
        let after = |ms: u64| now + Duration::from_millis(ms);
        match &fault.kind {
            FaultKind::DropPushes { duration_ms } => {
                for server in &world.servers {
                    server.set_drop_pushes(true);
                }
                fault_event(
                    &world.recorder,
                    now,
                    &world.servers[0].name,
                    index,
                    FaultPhase::Start,
                    format!("the servers drop pub/sub messages for {duration_ms} ms"),
                );
                self.pending
                    .push((after(*duration_ms), Pending::PushesBack { fault: index }));
            }
            FaultKind::Partition {
                a,
                b,
                one_way,
                duration_ms,
            } => {
                let side = |nemesis: &mut Self, targets: &[Target]| {
                    let mut hosts: Vec<String> = targets
                        .iter()
                        .flat_map(|t| nemesis.resolve(t, world))
                        .collect();
                    hosts.sort();
                    hosts.dedup();
                    hosts
                };
                let side_a = side(self, a);
                let side_b = side(self, b);
                if side_a.is_empty() || side_b.is_empty() {
                    return;
                }
                world.net.hold(index, &side_a, &side_b);
                if !one_way {
                    world.net.hold(index, &side_b, &side_a);
                }
                let arrow = if *one_way { "->" } else { "<->" };
                let detail = format!("[{}] {arrow} [{}]", side_a.join(", "), side_b.join(", "));
                // Recorded on every host of side `a`: the side a fault is aimed at (the
                // holder cut off from the servers).
                for host in &side_a {
                    fault_event(
                        &world.recorder,
                        now,
                        host,
                        index,
                        FaultPhase::Start,
                        format!("partition {detail} for {duration_ms} ms"),
                    );
                }
                self.pending.push((
                    after(*duration_ms),
                    Pending::Heal {
                        fault: index,
                        hosts: side_a,
                        detail,
                    },
                ));
            }
            FaultKind::Pause {
                target,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let gate = match world.clients.get(&host) {
                        Some(c) => c.gate.clone(),
                        None => match world.server(&host) {
                            Some(s) => s.gate.clone(),
                            None => continue,
                        },
                    };
                    gate.pause_until(after(*duration_ms));
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("pause {host} for {duration_ms} ms"),
                    );
                    self.pending.push((
                        after(*duration_ms),
                        Pending::PauseEnd { fault: index, host },
                    ));
                }
            }
            FaultKind::Crash {
                target,
                restart_after_ms,
            }
            | FaultKind::MachineCrash {
                target,
                restart_after_ms,
            } => {
                let machine = matches!(fault.kind, FaultKind::MachineCrash { .. });
                for host in self.resolve(target, world) {
                    if !sim.is_host_running(host.as_str()) {
                        continue;
                    }
                    // The server's last record first: its memory is about to go.
                    world.observe(now);
                    sim.crash(host.as_str());
                    if machine {
                        world.net.black_hole(&host);
                    } else {
                        world.net.reset_host(&host);
                    }
                    world.recorder.forget_host(&host);
                    let what = if machine { "machine crash" } else { "crash" };
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{what} {host}"),
                    );
                    if let Some(server) = world.server(&host).cloned() {
                        if let Some(engine) = server.engine() {
                            world.observer.commands_of_dead_engines +=
                                engine.with_engine(|e| e.engine.commands_processed());
                        }
                        server.crash(machine);
                        if !server.persists() {
                            // Without persistence the memory was all there was; with it,
                            // what came back is compared with the record at restart.
                            world.observer.lose_all(&host, &world.recorder, now);
                        }
                    }
                    if let Some(ms) = restart_after_ms {
                        self.pending.push((
                            after(*ms),
                            Pending::Restart {
                                fault: index,
                                host,
                                machine,
                            },
                        ));
                    }
                }
            }
            FaultKind::Delay {
                target,
                latency_ms,
                duration_ms,
            } => {
                for host in self.resolve(target, world) {
                    let from = if world.clients.contains_key(&host) {
                        world.server_names()
                    } else {
                        Vec::new()
                    };
                    world
                        .net
                        .delay(index, &host, &from, Duration::from_millis(*latency_ms));
                    let source = if from.is_empty() {
                        "every host".to_string()
                    } else {
                        from.join(", ")
                    };
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!(
                            "delay messages from {source} to {host} by {latency_ms} ms for {duration_ms} ms"
                        ),
                    );
                    self.pending.push((
                        after(*duration_ms),
                        Pending::DelayEnd { fault: index, host },
                    ));
                }
            }
            FaultKind::SlowWork { target, extra_ms } => {
                for host in self.resolve(target, world) {
                    let Some(ctl) = world.clients.get(&host) else {
                        continue;
                    };
                    ctl.slow_ms.store(*extra_ms, Ordering::Relaxed);
                    fault_event(
                        &world.recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{host}'s next critical section runs {extra_ms} ms longer"),
                    );
                }
            }
        }
    }
}
