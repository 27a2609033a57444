//! Redis server hosts: each a turmoil host running the model, with its own clock, pause
//! gate and control handle for the nemesis.
//!
//! A server host builds a *fresh* engine every time it starts: a restart never keeps
//! the live keyspace. What survives a crash is what persistence kept; without
//! persistence (Redis's default with no snapshot), nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::ClockSpec;
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::redis::server::{ACTIVE_EXPIRY_PERIOD, SharedEngine, active_expiry_loop};
use crate::redis::{Engine, serve_connection};

/// The port every server listens on.
pub(crate) const REDIS_PORT: u16 = 6379;

/// What the nemesis and the observer reach a server through.
#[derive(Clone)]
pub(crate) struct ServerCtl {
    pub name: String,
    /// The running engine; `None` while the server is down.
    engine: Arc<Mutex<Option<SharedEngine>>>,
    pub gate: PauseGate,
    /// Set while a drop-pushes fault is in force; applied to every engine the host
    /// starts, so a restart does not quietly end the fault.
    drop_pushes: Arc<AtomicBool>,
    /// Starts of this server's software, for engine identities.
    starts: Arc<Mutex<u64>>,
}

impl ServerCtl {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            engine: Arc::default(),
            gate: PauseGate::new(),
            drop_pushes: Arc::default(),
            starts: Arc::default(),
        }
    }

    fn slot(&self) -> MutexGuard<'_, Option<SharedEngine>> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running engine, if the server is up.
    pub fn engine(&self) -> Option<SharedEngine> {
        self.slot().clone()
    }

    /// The server went down: its memory is gone.
    pub fn clear(&self) {
        *self.slot() = None;
    }

    pub fn set_drop_pushes(&self, drop: bool) {
        self.drop_pushes.store(drop, Ordering::Relaxed);
        if let Some(engine) = self.engine() {
            engine.with_engine(|e| e.set_drop_pushes(drop));
        }
    }

    /// Adds the server's host to `sim`: on every (re)start, a fresh engine reading
    /// `clock`, an accept loop and the active-expiry cycle, all under the pause gate,
    /// every accepted connection wrapped by `net`.
    pub fn add_host(&self, sim: &mut turmoil::Sim<'_>, clock: ClockSpec, net: &NetFaults) {
        let ctl = self.clone();
        let net = net.clone();
        sim.host(self.name.as_str(), move || {
            let ctl = ctl.clone();
            let net = net.clone();
            async move {
                let start = {
                    let mut starts = ctl.starts.lock().unwrap_or_else(|e| e.into_inner());
                    *starts += 1;
                    *starts
                };
                let mut engine = Engine::with_seed(start - 1);
                engine.set_drop_pushes(ctl.drop_pushes.load(Ordering::Relaxed));
                let shared = SharedEngine::new(engine, Arc::new(clock));
                *ctl.slot() = Some(shared.clone());
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", REDIS_PORT)).await?;
                tokio::task::spawn_local(
                    ctl.gate
                        .wrap(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD)),
                );
                loop {
                    let Ok((stream, addr)) = ctl.gate.wrap(listener.accept()).await else {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    };
                    let peer =
                        turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                    let stream = net.wrap(stream, &ctl.name, &peer);
                    tokio::task::spawn_local(ctl.gate.wrap(serve_connection(
                        shared.clone(),
                        stream,
                        peer,
                    )));
                }
            }
        });
    }
}
