//! Sentinel hosts: each a turmoil host running the Sentinel model on port 26379, under
//! its own pause gate, dialling the servers and the other Sentinels over turmoil TCP
//! (so partitions and delays hit Sentinel's view as they hit the clients').
//!
//! A restarted Sentinel keeps what `sentinel.conf` would have kept (Sentinel rewrites
//! its configuration on every change): the master's address, the epochs and its vote.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::HostClock;
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::redis::server::SharedEngine;
use crate::sentinel::driver::{DialFn, LinkStream, SentinelEngine, SpawnFn};
use crate::sentinel::{Addr, SENTINEL_PORT, Saved, Sentinel, SentinelConfig, SentinelEvent};

use super::servers::{REDIS_PORT, accept_loop, dial_host};
use super::spec::SentinelSpec;
use crate::seed::{stream, sub_seed};

/// What the nemesis and the observer reach a Sentinel through.
#[derive(Clone)]
pub(crate) struct SentinelCtl {
    pub name: String,
    config: SentinelConfig,
    engine: Arc<Mutex<Option<SharedEngine<SentinelEngine>>>>,
    /// Its `sentinel.conf`.
    saved: Arc<Mutex<Option<Saved>>>,
    pub gate: PauseGate,
    starts: Arc<Mutex<u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SentinelCtl {
    /// The `index`-th (1-based) of `names`, monitoring `master`.
    pub fn new(
        spec: &SentinelSpec,
        names: &[String],
        index: usize,
        master: &str,
        replicas: &[String],
        seed: u64,
    ) -> Self {
        let name = names[index - 1].clone();
        let config = SentinelConfig {
            master_name: spec.master_name.clone(),
            master: Addr::new(master, REDIS_PORT),
            quorum: spec.quorum,
            down_after_ms: spec.down_after_ms,
            failover_timeout_ms: spec.failover_timeout_ms,
            parallel_syncs: spec.parallel_syncs,
            known_replicas: replicas
                .iter()
                .map(|r| Addr::new(r.clone(), REDIS_PORT))
                .collect(),
            me: Addr::new(name.clone(), SENTINEL_PORT),
            peers: names
                .iter()
                .map(|n| Addr::new(n.clone(), SENTINEL_PORT))
                .collect(),
            seed: sub_seed(seed, stream::sentinel(index)),
        };
        Self {
            name,
            config,
            engine: Arc::default(),
            saved: Arc::default(),
            gate: PauseGate::new(),
            starts: Arc::default(),
        }
    }

    /// The running Sentinel, if it is up.
    pub fn engine(&self) -> Option<SharedEngine<SentinelEngine>> {
        lock(&self.engine).clone()
    }

    /// It went down: its memory is gone, its configuration file stays (Sentinel
    /// rewrites it on every change, so it holds the state at the crash).
    pub fn crash(&self) {
        if let Some(engine) = lock(&self.engine).take() {
            *lock(&self.saved) = Some(engine.with_engine(|e| e.sentinel.saved()));
        }
    }

    /// The events it logged since the last call.
    pub fn take_events(&self) -> Vec<SentinelEvent> {
        let Some(engine) = self.engine() else {
            return Vec::new();
        };
        engine.with_engine(|e| e.sentinel.take_events())
    }

    /// Adds the Sentinel's host to `sim`.
    pub fn add_host(&self, sim: &mut turmoil::Sim<'_>, clock: HostClock, net: &NetFaults) {
        let ctl = self.clone();
        let net = net.clone();
        sim.host(self.name.as_str(), move || {
            let ctl = ctl.clone();
            let net = net.clone();
            let clock = clock.clone();
            async move {
                let start = {
                    let mut starts = lock(&ctl.starts);
                    *starts += 1;
                    *starts
                };
                let mut config = ctl.config.clone();
                config.seed ^= start - 1;
                // A Sentinel of a running deployment has been up a while when the run
                // begins, so its once-a-second rhythm (PING, the down checks, the
                // asks) has its own phase against the run's clients and faults. One
                // whose links all came up at time zero pinged in step with the fault
                // plan: a master crashed 3 s in was always found down about 1 s later
                // (real Sentinels: 1-2 s, by where the crash falls between two PINGs).
                // So at the run's start its timer (and the links it opens) begins
                // after a phase drawn from its seed, below the ping period; it serves
                // its port from time zero. A restart starts at once, as a real one.
                let phase_ms = if start == 1 {
                    sub_seed(config.seed, stream::SENTINEL_PING_PHASE)
                        % crate::sentinel::PING_PERIOD_MS
                } else {
                    0
                };
                let now_ms = crate::redis::ServerClock::now_us(&clock) / 1000 + phase_ms;
                let mut sentinel = Sentinel::new(config, now_ms);
                if let Some(saved) = lock(&ctl.saved).clone() {
                    sentinel.restore(saved, now_ms);
                }
                let shared = SharedEngine::new(SentinelEngine::new(sentinel), Arc::new(clock));
                *lock(&ctl.engine) = Some(shared.clone());
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SENTINEL_PORT)).await?;
                let dial: DialFn = {
                    let (net, me, gate) = (net.clone(), ctl.name.clone(), ctl.gate.clone());
                    std::rc::Rc::new(move |host: String, port: u16| {
                        let (net, me, gate) = (net.clone(), me.clone(), gate.clone());
                        Box::pin(async move {
                            let timeout = Some(crate::sentinel::driver::LINK_RESPONSE_TIMEOUT);
                            let (stream, _) =
                                dial_host(&net, &me, &gate, &host, port, timeout).await?;
                            let stream: Box<dyn LinkStream> = Box::new(stream);
                            Ok(stream)
                        })
                    })
                };
                let spawn: SpawnFn = {
                    let gate = ctl.gate.clone();
                    std::rc::Rc::new(move |task| {
                        tokio::task::spawn_local(gate.wrap(task));
                    })
                };
                tokio::task::spawn_local(ctl.gate.wrap(crate::sentinel::driver::run_after(
                    std::time::Duration::from_millis(phase_ms),
                    shared.clone(),
                    dial,
                    spawn,
                )));
                accept_loop(listener, shared, &ctl.name, &ctl.gate, &net).await
            }
        });
    }
}
