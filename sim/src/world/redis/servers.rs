//! Redis server hosts: each a turmoil host running the model, with its own clock, pause
//! gate and control handle for the nemesis.
//!
//! A server host builds a *fresh* engine every time it starts: a restart never keeps
//! the live keyspace. What survives a crash is what persistence kept; without
//! persistence (Redis's default with no snapshot), nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::HostClock;
use crate::net::NetFaults;
use crate::pause::PauseGate;
use crate::redis::engine::{ConfigFile, Rewritten};
use crate::redis::link::replication_cron;
use crate::redis::persistence::DurableStore;
use crate::redis::reply::Reply;
use crate::redis::server::{ACTIVE_EXPIRY_PERIOD, CommandEngine, SharedEngine, active_expiry_loop};
use crate::redis::{Engine, Session, serve_connection};

use super::spec::ServerSpec;

/// A stable number for a server's name (FNV-1a), to seed its identity.
/// A server's engine with its disk: every command and expiry cycle ends an event-loop
/// iteration, after which the durable store takes what the policy writes and fsyncs.
pub(crate) struct ServerEngine {
    pub engine: Engine,
    store: Arc<Mutex<DurableStore>>,
}

impl ServerEngine {
    fn store(&self) -> MutexGuard<'_, DurableStore> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn iteration_ended(&mut self, now_us: u64) {
        let engine = &self.engine;
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if store.enabled() {
            store.after_iteration(|| engine.dump(), now_us);
        }
    }
}

impl crate::redis::link::Replicating for ServerEngine {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

impl CommandEngine for ServerEngine {
    fn connect(&mut self, peer: String) -> Session {
        self.engine.connect(peer)
    }
    fn disconnect(&mut self, session: &Session) {
        self.engine.disconnect(session)
    }
    fn execute(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        let reply = self.engine.execute(session, argv, now_us);
        self.iteration_ended(now_us);
        reply
    }
    fn active_expire(&mut self, now_us: u64) -> usize {
        let n = self.engine.active_expire(now_us);
        if n > 0 {
            self.iteration_ended(now_us);
        } else {
            self.store().tick(now_us);
        }
        n
    }
    fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        self.engine.take_pushes()
    }
    fn serve_waiters(&mut self, now_us: u64) {
        self.engine.serve_waiters(now_us)
    }
    fn next_wait_deadline(&self) -> Option<u64> {
        self.engine.next_wait_deadline()
    }
}

/// The engine type every simulated server runs.
pub(crate) type ServerShared = SharedEngine<ServerEngine>;

/// The port every server listens on.
pub(crate) use crate::net::dial_host;

pub(crate) const REDIS_PORT: u16 = 6379;

/// What a Redis world has (see [`crate::system`]): masters that pause, crash and
/// restart (with or without an AOF), replicas Sentinel promotes, pub/sub
/// notifications, independent masters for Redlock, and observers of any number of keys.
pub const REDIS_CAPABILITIES: &[crate::system::Capability] = &[
    crate::system::Capability::LockServer,
    crate::system::Capability::ServingAtStart,
    crate::system::Capability::Notifications,
    crate::system::Capability::SentinelFailover,
    crate::system::Capability::AppendOnlyFile,
    crate::system::Capability::IndependentMasters,
    crate::system::Capability::ManyKeys,
];

/// What the nemesis and the observer reach a server through.
#[derive(Clone)]
pub(crate) struct ServerCtl {
    pub name: String,
    /// Its configuration (role at start, replication settings).
    pub spec: ServerSpec,
    /// The running engine; `None` while the server is down.
    engine: Arc<Mutex<Option<ServerShared>>>,
    /// Its disk, which outlives every engine.
    store: Arc<Mutex<DurableStore>>,
    /// Set when the server started from its disk, until the observer has compared what
    /// came back with the record.
    reloaded: Arc<AtomicBool>,
    pub gate: PauseGate,
    /// Set while a drop-pushes fault is in force; applied to every engine the host
    /// starts, so a restart does not quietly end the fault.
    drop_pushes: Arc<AtomicBool>,
    /// Starts of this server's software, for engine identities.
    starts: Arc<Mutex<u64>>,
    /// Trace client commands (`Workload::trace_commands`).
    trace_commands: bool,
    /// Its config file, which outlives every engine: a start takes its role and
    /// replication settings from the last `CONFIG REWRITE`, if there was one, else
    /// from `spec` (the file as deployed).
    config_file: ConfigFile,
}

impl ServerCtl {
    pub fn new(spec: &ServerSpec, trace_commands: bool) -> Self {
        Self {
            name: spec.name.clone(),
            spec: spec.clone(),
            engine: Arc::default(),
            store: Arc::new(Mutex::new(DurableStore::new(spec.persistence))),
            reloaded: Arc::default(),
            gate: PauseGate::new(),
            drop_pushes: Arc::default(),
            config_file: ConfigFile::default(),
            starts: Arc::default(),
            trace_commands,
        }
    }

    fn slot(&self) -> MutexGuard<'_, Option<ServerShared>> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running engine, if the server is up.
    pub fn engine(&self) -> Option<ServerShared> {
        self.slot().clone()
    }

    /// Whether a restart keeps anything.
    pub fn persists(&self) -> bool {
        self.store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enabled()
    }

    /// The server went down: its memory is gone; its disk keeps what the crash leaves
    /// (the page cache after a process crash, only the platter after a machine crash).
    pub fn crash(&self, machine: bool) {
        *self.slot() = None;
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if machine {
            store.crash_machine();
        } else {
            store.crash_process();
        }
    }

    /// True once after the server started again from its disk.
    pub fn take_reloaded(&self) -> bool {
        self.reloaded.swap(false, Ordering::Relaxed)
    }

    pub fn set_drop_pushes(&self, drop: bool) {
        self.drop_pushes.store(drop, Ordering::Relaxed);
        if let Some(engine) = self.engine() {
            engine.with_engine(|e| e.engine.set_drop_pushes(drop));
        }
    }

    /// Adds the server's host to `sim`: on every (re)start, a fresh engine reading
    /// `clock`, an accept loop and the active-expiry cycle, all under the pause gate,
    /// every accepted connection wrapped by `net`.
    pub fn add_host(&self, sim: &mut turmoil::Sim<'_>, clock: HostClock, net: &NetFaults) {
        let ctl = self.clone();
        let net = net.clone();
        sim.host(self.name.as_str(), move || {
            let ctl = ctl.clone();
            let net = net.clone();
            let clock = clock.clone();
            async move {
                let start = {
                    let mut starts = ctl.starts.lock().unwrap_or_else(|e| e.into_inner());
                    *starts += 1;
                    *starts
                };
                // Each server's identity differs: its name seeds it, and so does the start.
                let mut engine = Engine::with_seed(
                    (start - 1) ^ crate::seed::sub_seed(0, crate::seed::stream::host(&ctl.name)),
                );
                engine.set_drop_pushes(ctl.drop_pushes.load(Ordering::Relaxed));
                engine.set_tracing(ctl.trace_commands);
                engine.set_tcp_port(REDIS_PORT);
                engine.set_config_file(ctl.config_file.clone());
                // The config file as deployed, or as Sentinel last rewrote it.
                let file = ctl.config_file.read().unwrap_or_else(|| Rewritten {
                    replica_of: ctl.spec.replica_of.clone().map(|m| (m, REDIS_PORT)),
                    min_replicas_to_write: ctl.spec.min_replicas_to_write,
                    min_replicas_max_lag_s: ctl.spec.min_replicas_max_lag_s,
                    priority: ctl.spec.replica_priority,
                });
                {
                    let repl = engine.replication_mut();
                    repl.priority = file.priority;
                    repl.min_replicas_to_write = file.min_replicas_to_write;
                    repl.min_replicas_max_lag_s = file.min_replicas_max_lag_s;
                }
                if let Some((master, port)) = file.replica_of {
                    engine.follow(master, port, crate::redis::ServerClock::now_us(&clock));
                }
                if start > 1 && ctl.persists() {
                    let surviving = ctl
                        .store
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .surviving();
                    engine.load(surviving);
                    ctl.reloaded.store(true, Ordering::Relaxed);
                }
                let engine = ServerEngine {
                    engine,
                    store: ctl.store.clone(),
                };
                let shared = SharedEngine::new(engine, Arc::new(clock));
                *ctl.slot() = Some(shared.clone());
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", REDIS_PORT)).await?;
                tokio::task::spawn_local(
                    ctl.gate
                        .wrap(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD)),
                );
                let dial = {
                    let (net, me, gate) = (net.clone(), ctl.name.clone(), ctl.gate.clone());
                    move |host: String, port: u16| {
                        let (net, me, gate) = (net.clone(), me.clone(), gate.clone());
                        // The replication link arms its timers through turmoil::time.
                        async move { dial_host(&net, &me, &gate, &host, port, None).await }
                    }
                };
                let gate = ctl.gate.clone();
                tokio::task::spawn_local(ctl.gate.wrap(replication_cron(
                    shared.clone(),
                    REDIS_PORT,
                    dial,
                    move |task| {
                        tokio::task::spawn_local(gate.wrap(task));
                    },
                )));
                accept_loop(listener, shared, &ctl.name, &ctl.gate, &net).await
            }
        });
    }
}

/// Serves `shared` on `listener` for good: every accepted connection wrapped by the
/// link-fault registry and served under host `me`'s pause gate.
pub(crate) async fn accept_loop<E: CommandEngine>(
    listener: turmoil::net::TcpListener,
    shared: SharedEngine<E>,
    me: &str,
    gate: &PauseGate,
    net: &NetFaults,
) -> turmoil::Result {
    loop {
        let Ok((stream, addr)) = gate.wrap(listener.accept()).await else {
            turmoil::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
        let stream = net.wrap(stream, me, &peer);
        tokio::task::spawn_local(gate.wrap(serve_connection(shared.clone(), stream, peer)));
    }
}
