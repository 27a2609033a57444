//! One run: build a turmoil simulation from a [`RunConfig`], run the workload on every
//! client with the nemesis applying the fault plan, and return the [`History`].
//!
//! Hosts: each lock-server system's (the workload names them; the Redis default is one
//! server called `redis`), `storage` (the stock counter) and `client-1` … `client-N`
//! (lock-impl code over turmoil TCP). Between steps the nemesis applies due faults and
//! the observer moves each system's own record into the history, stamped with true time.
//!
//! Layout: [`config`] (what a run is made of), `system` (the neutral traits every
//! system implements), `registry` (the one list of systems), one module per system
//! (`redis`, `zookeeper`, `mysql`, `mongo`, `etcd`), `client` (the workload loop and the
//! simulated connector), `nemesis` (the fault plan) and this module's step loop.

mod client;
pub mod config;
mod etcd;
mod mongo;
mod mysql;
mod nemesis;
mod redis;
mod registry;
mod system;
mod zookeeper;

pub use registry::{capabilities, missing};
pub use system::SystemInfo;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::Duration;

// What a run is made of, each system's spec among it, at `sim::world::`.
pub use config::*;

use crate::clock::{ClockSpec, HostClock};
use crate::history::{EventKind, History, RunParams};
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::storage;

use client::Client;
use nemesis::{ClientCtl, Nemesis, WorldCtl};

/// Runs one simulation and returns its history.
///
/// A run that jumps (see [`Stepping`]) and finds that a timer fired inside a jump
/// without a hint (a design that arms tokio timers itself instead of sleeping on
/// `Deps::clock`) is run again tick by tick, whose history is returned: the jump may
/// have sent that timer's messages late. Its `stats.unhinted_wakes` says how many the
/// jump saw.
pub fn run(cfg: &RunConfig) -> Result<History, RunError> {
    let history = run_stepping(cfg, cfg.stepping)?;
    if history.stats.unhinted_wakes == 0 {
        return Ok(history);
    }
    let mut again = run_stepping(cfg, Stepping::Tick)?;
    again.stats.unhinted_wakes = history.stats.unhinted_wakes;
    Ok(again)
}

fn run_stepping(cfg: &RunConfig, stepping: Stepping) -> Result<History, RunError> {
    let w = &cfg.workload;
    w.validate()?;
    let end = Duration::from_millis(w.duration_ms + w.drain_ms);
    let mut sim = new_sim(cfg, stepping, end);
    let recorder = Recorder::new();
    let net = NetFaults::new();
    let mut clocks = Clocks {
        seed: cfg.seed,
        recorder: recorder.clone(),
        all: BTreeMap::new(),
    };

    // Every lock-server system the workload names, each host with its clock.
    let systems = {
        let mut clock_of = |host: &str, spec: ClockSpec| clocks.of(host, spec);
        let mut build = system::Build {
            sim: &mut sim,
            clock_of: &mut clock_of,
            server_clock: cfg.server_clock,
            net: &net,
            key: &w.key,
            seed: cfg.seed,
            trace_commands: w.trace_commands,
        };
        system::Systems(
            registry::systems_of(w)
                .into_iter()
                .map(|spec| spec.build(&mut build))
                .collect(),
        )
    };
    let stock = match w.segments {
        Some(n) => storage::Shared::segmented(
            crate::history::segment_stocks(w.initial_stock, n),
            w.fencing,
        ),
        None => storage::Shared::new(w.initial_stock, w.fencing),
    };
    {
        let (recorder, stock) = (recorder.clone(), stock.clone());
        sim.host("storage", move || {
            // A restarted storage host would start afresh; it is never crashed.
            storage::serve(recorder.clone(), stock.clone())
        });
    }
    let retry_horizon_ms = Arc::new(AtomicU64::new(0));
    let clients = add_clients(
        &mut sim,
        cfg,
        &mut clocks,
        &net,
        &systems,
        &retry_horizon_ms,
    );

    let mut world = WorldCtl {
        recorder: recorder.clone(),
        net,
        clients,
        systems,
        clocks: clocks.all,
        key: w.key.clone(),
        reply_delay: Duration::from_millis(w.latency_ms_max + 1),
    };
    let mut nemesis = Nemesis::new(&cfg.plan, cfg.seed);
    let steps = drive(&mut sim, &mut nemesis, &mut world, stepping, end)?;
    world.observe(sim.elapsed());
    // The storage's own final value of each counter (one for an unsegmented stock).
    for (segment, value) in stock.finals() {
        recorder.record_at(
            sim.elapsed().as_micros() as u64,
            "storage",
            EventKind::Storage(crate::history::StorageEvent::Final { value, segment }),
        );
    }

    let redis_commands = world
        .systems
        .0
        .iter()
        .map(|s| s.commands_processed())
        .sum::<u64>();
    drop(world);
    let events = recorder.into_events();
    let stats = crate::history::RunStats {
        redis_commands,
        storage_requests: storage_requests(&events),
        steps,
        unhinted_wakes: sim.unhinted_wakes(),
        host_runs: sim.host_runs(),
    };
    Ok(History {
        seed: cfg.seed,
        design: cfg.design.clone(),
        scenario: cfg.scenario.clone(),
        params: RunParams {
            key: w.key.clone(),
            lease_ms: w.lease_ms,
            // The lease, then the world's slack or the design's own retry horizon
            // (`LockDesign::retry_horizon`), whichever is longer: a waiter that
            // follows its client's retry schedule is not stuck.
            liveness_bound_ms: w.lease_ms
                + w.liveness_slack_ms
                    .max(retry_horizon_ms.load(std::sync::atomic::Ordering::Relaxed)),
            initial_stock: w.initial_stock,
            clients: w.clients,
            masters: registry::systems_of(w)
                .iter()
                .map(|s| s.masters())
                .max()
                .unwrap_or(1),
            segments: w.segments,
            server_records: true,
        },
        plan: cfg.plan.clone(),
        events,
        end_us: end.as_micros() as u64,
        stats,
    })
}

/// The simulation of a run: its seed, its step, the workload's latencies.
fn new_sim<'s>(cfg: &RunConfig, stepping: Stepping, end: Duration) -> turmoil::Sim<'s> {
    let w = &cfg.workload;
    turmoil::Builder::new()
        .rng_seed(sub_seed(cfg.seed, crate::seed::stream::SIMULATION))
        .simulation_duration(end + Duration::from_secs(3600))
        .tick_duration(STEP)
        .min_message_latency(Duration::from_millis(w.latency_ms_min))
        .max_message_latency(Duration::from_millis(w.latency_ms_max))
        .tcp_capacity(1 << 16)
        // A step runs only the hosts with something to do (a message, a hinted timer
        // due, a wake from a fault): most host-steps of a lock workload do nothing.
        // What a fault wakes from outside the simulation runs after its host caught
        // up (`Nemesis::apply_due`), so the history is the tick-by-tick one.
        .skip_idle_hosts(stepping == Stepping::Jump)
        .build()
}

/// Every host's clock, for the nemesis to step or bend; an imperfect one is recorded
/// at time zero, so the history says which clocks were off.
struct Clocks {
    seed: u64,
    recorder: Recorder,
    all: BTreeMap<String, HostClock>,
}

impl Clocks {
    /// The clock of `host`, made from `spec`.
    fn of(&mut self, host: &str, spec: ClockSpec) -> HostClock {
        // Each host has been up for its own while (not recorded: no history reads a
        // monotonic reading, only true times).
        let clock = HostClock::new(spec).booted(HostClock::uptime_for(self.seed, host));
        if spec != ClockSpec::default() {
            self.recorder.record_at(
                0,
                host,
                EventKind::Clock {
                    wall_offset_us: spec.offset_ms * 1000,
                    drift_ppm: spec.drift_ppm,
                    step_ms: 0,
                },
            );
        }
        self.all.insert(host.to_string(), clock.clone());
        clock
    }
}

/// Adds the client hosts, `client-1` … `client-N`, and returns their control handles.
fn add_clients(
    sim: &mut turmoil::Sim<'_>,
    cfg: &RunConfig,
    clocks: &mut Clocks,
    net: &NetFaults,
    systems: &system::Systems,
    retry_horizon_ms: &Arc<AtomicU64>,
) -> BTreeMap<String, ClientCtl> {
    let w = &cfg.workload;
    let hooks =
        systems
            .0
            .iter()
            .map(|s| s.client_hooks())
            .fold(system::ClientHooks::default(), |a, b| system::ClientHooks {
                ready: a.ready.or(b.ready),
                primary_address: a.primary_address.or(b.primary_address),
            });
    let mut clients = BTreeMap::new();
    for i in 1..=w.clients {
        let name = format!("client-{i}");
        let ctl = ClientCtl {
            gate: PauseGate::new(),
            slow_ms: Arc::new(AtomicU64::new(0)),
            pause_before_write: Default::default(),
        };
        let clock = clocks.of(
            &name,
            cfg.client_clocks
                .get(i as usize - 1)
                .copied()
                .unwrap_or_default(),
        );
        let client = Client {
            name: name.clone(),
            index: u64::from(i),
            seed: cfg.seed,
            workload: w.clone(),
            clock,
            factory: cfg.factory.clone(),
            recorder: clocks.recorder.clone(),
            gate: ctl.gate.clone(),
            net: net.clone(),
            slow_ms: ctl.slow_ms.clone(),
            pause_before_write: ctl.pause_before_write.clone(),
            incarnation: Arc::new(AtomicU32::new(0)),
            system_ready: hooks.ready.clone(),
            retry_horizon_ms: retry_horizon_ms.clone(),
            primary_address: hooks.primary_address.clone(),
        };
        sim.host(name.as_str(), move || {
            let client = client.clone();
            let gate = client.gate.clone();
            gate.wrap(async move {
                client.main().await;
                Ok(())
            })
        });
        clients.insert(name, ctl);
    }
    clients
}

/// Steps the simulation to `end`, the nemesis applying due faults and the observer
/// moving the servers' records into the history between steps; returns the steps.
fn drive(
    sim: &mut turmoil::Sim<'_>,
    nemesis: &mut Nemesis,
    world: &mut WorldCtl,
    stepping: Stepping,
    end: Duration,
) -> Result<u64, RunError> {
    let tick = Duration::from_millis(1);
    let mut steps = 0u64;
    loop {
        let now = sim.elapsed();
        let acted = nemesis
            .apply_due(sim, world, now)
            .map_err(|message| RunError::Sim {
                at_ms: now.as_millis() as u64,
                message,
            })?;
        if now >= end {
            return Ok(steps);
        }
        // A fault that changed something may have woken a host's task from outside the
        // simulation (a pause gate, a link): every host runs in the next step, and
        // `idle_until` is now until then.
        if acted {
            sim.wake_all();
        }
        // Jump over the ticks in which nothing can happen: no message is delivered, no
        // timer fires, no fault starts or ends (turmoil's `idle_until` knows the first
        // two, the nemesis the last). The jump lands on the tick before the next event,
        // so that tick runs as it would have, and every history is the one tick-by-tick
        // stepping gives.
        let until = match stepping {
            Stepping::Jump => sim.idle_until().min(nemesis.next_due(now)).min(end),
            Stepping::Tick => now,
        };
        let step = if until > now + tick {
            sim.step_by(until - now)
        } else {
            sim.step()
        };
        steps += 1;
        if let Err(e) = step {
            return Err(RunError::Sim {
                at_ms: now.as_millis() as u64,
                message: e.to_string(),
            });
        }
        // Stamped with the tick's own time, the time the hosts saw while it ran (after
        // a jump, its last tick: only then could anything have happened).
        world.observe(sim.elapsed() - tick);
    }
}

/// The storage's reads and writes in a run's events (run statistics).
fn storage_requests(events: &[crate::history::Event]) -> u64 {
    events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Storage(
                    crate::history::StorageEvent::Read { .. }
                        | crate::history::StorageEvent::Write { .. }
                )
            )
        })
        .count() as u64
}

pub use crate::step::STEP;

/// The default wall-clock budget of [`run_bounded`]: far above any honest run (the
/// longest catalog run takes well under a second), so only a run that never yields
/// reaches it.
pub const DEFAULT_WALL_BUDGET: Duration = Duration::from_secs(60);

/// [`run`] on a thread of its own, given up after `wall_budget` of real time with
/// [`RunError::Budget`].
///
/// The simulated time of a run is bounded by its workload, but a task that never
/// yields (a user's design spinning in a loop without awaiting) blocks a simulation
/// step forever, and nothing inside the step can stop it. So the budget is watched from
/// outside: the run's thread is abandoned (it spins on, but the sweep goes on and the
/// run's verdicts are unknown, never valid). Real time decides only *whether* a run is
/// abandoned, never anything in its history.
pub fn run_bounded(cfg: &RunConfig, wall_budget: Duration) -> Result<History, RunError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let cfg = cfg.clone();
    std::thread::Builder::new()
        .name(format!("locksim-run-{}", cfg.seed))
        .spawn(move || {
            let _ = tx.send(run(&cfg));
        })
        .map_err(|e| RunError::Sim {
            at_ms: 0,
            message: format!("cannot start the run's thread: {e}"),
        })?;
    match rx.recv_timeout(wall_budget) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(RunError::Budget {
            budget_ms: wall_budget.as_millis() as u64,
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(RunError::Sim {
            at_ms: 0,
            message: "the run's thread panicked".into(),
        }),
    }
}
