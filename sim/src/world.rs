//! One run: build a turmoil simulation from a [`RunConfig`], run the workload on every
//! client with the nemesis applying the fault plan, and return the [`History`].
//!
//! Hosts: `redis` (the model), `storage` (the stock counter), `client-1` … `client-N`
//! (lock-impl code over turmoil TCP). The driver steps the simulation one tick at a
//! time; between ticks it applies due faults and moves the Redis server's own key
//! events into the history, stamped with true time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use lock_impl::{Acquire, AcquireOptions, Deps, LockDesign, Release, SeededEntropy};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::clock::{ClockSpec, SimClock, true_now};
use crate::faults::{FaultKind, FaultPlan, Target};
use crate::history::{EventKind, FaultPhase, History, OpF, Phase, RunParams, ServerEvent};
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::redis::{KeyCause, KeyEvent};
use crate::storage::{self, StorageClient};

/// Builds a design over a client's dependencies: any [`LockDesign`], built-in or the
/// user's own.
pub type DesignFactory = Arc<dyn Fn(Deps) -> Arc<dyn LockDesign> + Send + Sync>;

/// The factory of a built-in design, by name.
pub fn builtin_factory(name: &str) -> Result<DesignFactory, lock_impl::LockError> {
    if !lock_impl::DESIGNS.iter().any(|d| d.name == name) {
        return Err(lock_impl::LockError::UnknownDesign {
            name: name.to_string(),
            allowed: lock_impl::design_names(),
        });
    }
    let name = name.to_string();
    Ok(Arc::new(move |deps| {
        lock_impl::build(&name, deps).expect("name checked above")
    }))
}

/// What each client does, and the world's shape. Units are in the names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Client hosts.
    pub clients: u32,
    /// The lock key.
    pub key: String,
    /// Lease per acquisition.
    pub lease_ms: u64,
    /// Wait budget per acquisition (0: try once).
    pub wait_ms: u64,
    /// Time inside the critical section between the read and the write.
    pub work_ms: u64,
    /// Largest pause between a client's attempts (uniform in 0..=think_ms_max).
    pub think_ms_max: u64,
    /// How long clients keep starting new acquisitions.
    pub duration_ms: u64,
    /// Extra time after `duration_ms` for in-flight work to finish.
    pub drain_ms: u64,
    /// The redis crate's response timeout: past it a reply is an unknown outcome.
    pub response_timeout_ms: u64,
    /// Stock at the start.
    pub initial_stock: i64,
    /// Fencing storage: refuse reads and writes whose token is lower than the highest
    /// seen (requests without a token are never checked, so designs without tokens see
    /// a plain storage).
    pub fencing: bool,
    /// Nested acquisitions per round (1: none); a reentrant design counts them.
    pub reentrant_depth: u32,
    /// Liveness slack added to the lease.
    pub liveness_slack_ms: u64,
    /// One-way network latency range between any two hosts.
    pub latency_ms_min: u64,
    /// See `latency_ms_min`.
    pub latency_ms_max: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            clients: 8,
            key: "lock:stock".into(),
            lease_ms: 200,
            wait_ms: 300,
            work_ms: 20,
            think_ms_max: 20,
            duration_ms: 5_000,
            drain_ms: 1_000,
            response_timeout_ms: 5_000,
            initial_stock: 100_000,
            fencing: true,
            reentrant_depth: 1,
            liveness_slack_ms: 500,
            latency_ms_min: 1,
            latency_ms_max: 2,
        }
    }
}

/// Everything one run needs.
#[derive(Clone)]
pub struct RunConfig {
    /// The seed: turmoil's RNG, every client's entropy and think times derive from it.
    pub seed: u64,
    /// The design's name, for the history.
    pub design: String,
    /// Builds the design.
    pub factory: DesignFactory,
    /// The scenario's name, for the history.
    pub scenario: String,
    /// The workload.
    pub workload: Workload,
    /// Per-client clocks (`client-1` first); missing entries are perfect clocks.
    pub client_clocks: Vec<ClockSpec>,
    /// The Redis host's clock.
    pub redis_clock: ClockSpec,
    /// The faults.
    pub plan: FaultPlan,
}

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The simulation itself failed (a host's software returned an error).
    #[error("simulation failed at {at_ms} ms: {message}")]
    Sim {
        /// When.
        at_ms: u64,
        /// turmoil's error.
        message: String,
    },
    /// The configuration is unusable.
    #[error("invalid run configuration: {0}")]
    Config(String),
}

/// Mixes the run seed with a stream id: independent, reproducible sub-seeds.
pub fn sub_seed(seed: u64, stream: u64) -> u64 {
    // SplitMix64 finaliser over seed ^ stream·golden.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Per-client state the nemesis reaches into.
struct ClientCtl {
    gate: PauseGate,
    /// Extra critical-section time for the next hold (slow-work faults).
    slow_ms: Arc<AtomicU64>,
    incarnation: Arc<AtomicU32>,
}

/// A fault end still to apply.
enum Pending {
    PauseEnd { fault: usize, host: String },
    Restart { fault: usize, host: String },
    DelayEnd { fault: usize, host: String },
    PushesBack { fault: usize },
}

/// Runs one simulation and returns its history.
pub fn run(cfg: &RunConfig) -> Result<History, RunError> {
    let w = &cfg.workload;
    if w.clients == 0 {
        return Err(RunError::Config(
            "workload.clients must be at least 1".into(),
        ));
    }
    if w.lease_ms == 0 {
        return Err(RunError::Config(
            "workload.lease_ms must be positive".into(),
        ));
    }
    if w.latency_ms_min > w.latency_ms_max {
        return Err(RunError::Config(
            "workload.latency_ms_min must not exceed latency_ms_max".into(),
        ));
    }
    let end = Duration::from_millis(w.duration_ms + w.drain_ms);
    let mut sim = turmoil::Builder::new()
        .rng_seed(sub_seed(cfg.seed, 0))
        .simulation_duration(end + Duration::from_secs(3600))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(w.latency_ms_min))
        .max_message_latency(Duration::from_millis(w.latency_ms_max))
        .tcp_capacity(1 << 16)
        .build();
    let recorder = Recorder::new();

    let engine = crate::redis::server::SharedEngine::new(
        crate::redis::Engine::new(),
        Arc::new(cfg.redis_clock),
    );
    {
        let engine = engine.clone();
        sim.host("redis", move || {
            let engine = engine.clone();
            async move {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
                tokio::task::spawn_local(crate::redis::server::active_expiry_loop(
                    engine.clone(),
                    Duration::from_millis(100),
                ));
                crate::redis::server::serve_turmoil(listener, engine).await;
                Ok(())
            }
        });
    }
    {
        let recorder = recorder.clone();
        let (initial, fencing) = (w.initial_stock, w.fencing);
        sim.host("storage", move || {
            storage::serve(recorder.clone(), initial, fencing)
        });
    }

    let mut clients = BTreeMap::new();
    for i in 1..=w.clients {
        let name = format!("client-{i}");
        let ctl = ClientCtl {
            gate: PauseGate::new(),
            slow_ms: Arc::new(AtomicU64::new(0)),
            incarnation: Arc::new(AtomicU32::new(0)),
        };
        let clock = cfg
            .client_clocks
            .get(i as usize - 1)
            .copied()
            .unwrap_or_default();
        let client = Client {
            name: name.clone(),
            index: u64::from(i),
            seed: cfg.seed,
            workload: w.clone(),
            clock,
            factory: cfg.factory.clone(),
            recorder: recorder.clone(),
            gate: ctl.gate.clone(),
            slow_ms: ctl.slow_ms.clone(),
            incarnation: ctl.incarnation.clone(),
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

    // The nemesis: faults sorted by start time (stable: plan order breaks ties).
    let mut order: Vec<usize> = (0..cfg.plan.faults.len()).collect();
    order.sort_by_key(|&i| cfg.plan.faults[i].at_ms);
    let mut next_fault = 0;
    let mut pending: Vec<(Duration, Pending)> = Vec::new();
    let mut nemesis_rng = ChaCha8Rng::seed_from_u64(sub_seed(cfg.seed, 1));
    let mut lock_owner: Option<String> = None;

    loop {
        let now = sim.elapsed();
        // Fault ends first, in due order.
        pending.sort_by_key(|(at, _)| *at);
        while pending.first().is_some_and(|(at, _)| *at <= now) {
            let (_, p) = pending.remove(0);
            match p {
                Pending::PauseEnd { fault, host } => {
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        fault,
                        FaultPhase::End,
                        format!("pause of {host} ends"),
                    );
                }
                Pending::Restart { fault, host } => {
                    sim.bounce(host.as_str());
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        fault,
                        FaultPhase::End,
                        format!("{host} restarts"),
                    );
                }
                Pending::PushesBack { fault } => {
                    engine.with_engine(|e| e.set_drop_pushes(false));
                    fault_event(
                        &recorder,
                        now,
                        "redis",
                        fault,
                        FaultPhase::End,
                        "redis delivers pub/sub messages again".into(),
                    );
                }
                Pending::DelayEnd { fault, host } => {
                    sim.set_link_latency(
                        "redis",
                        host.as_str(),
                        Duration::from_millis(w.latency_ms_min),
                    );
                    sim.set_link_max_message_latency(
                        "redis",
                        host.as_str(),
                        Duration::from_millis(w.latency_ms_max),
                    );
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        fault,
                        FaultPhase::End,
                        format!("replies to {host} on time again"),
                    );
                }
            }
        }
        while next_fault < order.len()
            && Duration::from_millis(cfg.plan.faults[order[next_fault]].at_ms) <= now
        {
            let index = order[next_fault];
            next_fault += 1;
            let fault = &cfg.plan.faults[index];
            if let FaultKind::DropPushes { duration_ms } = fault.kind {
                engine.with_engine(|e| e.set_drop_pushes(true));
                fault_event(
                    &recorder,
                    now,
                    "redis",
                    index,
                    FaultPhase::Start,
                    format!("redis drops pub/sub messages for {duration_ms} ms"),
                );
                let at = now + Duration::from_millis(duration_ms);
                pending.push((at, Pending::PushesBack { fault: index }));
                continue;
            }
            let target = match &fault.kind {
                FaultKind::Pause { target, .. }
                | FaultKind::Crash { target, .. }
                | FaultKind::Delay { target, .. }
                | FaultKind::SlowWork { target, .. } => target,
                FaultKind::DropPushes { .. } => unreachable!("handled above"),
            };
            let Some(host) = resolve(
                target,
                &recorder,
                &clients,
                lock_owner.as_deref(),
                &mut nemesis_rng,
            ) else {
                continue;
            };
            let Some(ctl) = clients.get(&host) else {
                continue;
            };
            match &fault.kind {
                FaultKind::Pause { duration_ms, .. } => {
                    let until = now + Duration::from_millis(*duration_ms);
                    ctl.gate.pause_until(until);
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("pause {host} for {duration_ms} ms"),
                    );
                    pending.push((until, Pending::PauseEnd { fault: index, host }));
                }
                FaultKind::Crash {
                    restart_after_ms, ..
                } => {
                    if !sim.is_host_running(host.as_str()) {
                        continue;
                    }
                    sim.crash(host.as_str());
                    recorder.forget_host(&host);
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("crash {host}"),
                    );
                    if let Some(after) = restart_after_ms {
                        let at = now + Duration::from_millis(*after);
                        pending.push((at, Pending::Restart { fault: index, host }));
                    }
                }
                FaultKind::Delay {
                    latency_ms,
                    duration_ms,
                    ..
                } => {
                    let latency = Duration::from_millis(*latency_ms);
                    // The link exists once the client has connected; a client that never
                    // did has nothing to delay.
                    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        sim.set_link_latency("redis", host.as_str(), latency)
                    }));
                    if applied.is_err() {
                        continue;
                    }
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!(
                            "delay messages between redis and {host} by {latency_ms} ms for {duration_ms} ms"
                        ),
                    );
                    let at = now + Duration::from_millis(*duration_ms);
                    pending.push((at, Pending::DelayEnd { fault: index, host }));
                }
                FaultKind::DropPushes { .. } => {}
                FaultKind::SlowWork { extra_ms, .. } => {
                    ctl.slow_ms.store(*extra_ms, Ordering::Relaxed);
                    fault_event(
                        &recorder,
                        now,
                        &host,
                        index,
                        FaultPhase::Start,
                        format!("{host}'s next critical section runs {extra_ms} ms longer"),
                    );
                }
            }
        }
        if now >= end {
            break;
        }
        if let Err(e) = sim.step() {
            return Err(RunError::Sim {
                at_ms: now.as_millis() as u64,
                message: e.to_string(),
            });
        }
        // Stamped with the tick's own time, the time the hosts saw while it ran.
        drain_server_events(&engine, &recorder, now, &w.key, &mut lock_owner);
    }
    drain_server_events(&engine, &recorder, sim.elapsed(), &w.key, &mut lock_owner);

    let events = recorder.into_events();
    let storage_requests = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Storage(_)))
        .count() as u64;
    let stats = crate::history::RunStats {
        redis_commands: engine.with_engine(|e| e.commands_processed()),
        storage_requests,
    };
    Ok(History {
        seed: cfg.seed,
        design: cfg.design.clone(),
        scenario: cfg.scenario.clone(),
        params: RunParams {
            key: w.key.clone(),
            lease_ms: w.lease_ms,
            liveness_bound_ms: w.lease_ms + w.liveness_slack_ms,
            initial_stock: w.initial_stock,
            clients: w.clients,
        },
        plan: cfg.plan.clone(),
        events,
        end_us: end.as_micros() as u64,
        stats,
    })
}

/// Records a fault event at `now` (the driver runs between ticks, outside any host, so
/// it passes the time rather than reading it).
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

/// Moves the server's key events into the history and keeps `lock_owner` (the host whose
/// value the lock key holds on the server) up to date.
fn drain_server_events(
    engine: &crate::redis::server::SharedEngine,
    recorder: &Recorder,
    now: Duration,
    lock_key: &str,
    lock_owner: &mut Option<String>,
) {
    let at_us = now.as_micros() as u64;
    for event in engine.with_engine(|e| e.take_key_events()) {
        match &event {
            KeyEvent::Written { by, key, .. } if key == lock_key => *lock_owner = Some(by.clone()),
            KeyEvent::Removed { key, .. } if key == lock_key => *lock_owner = None,
            _ => {}
        }
        let kind = match event {
            KeyEvent::Written { by, key, value, .. } => ServerEvent::Written { by, key, value },
            KeyEvent::ExpireSet {
                by, key, ttl_ms, ..
            } => ServerEvent::ExpireSet { by, key, ttl_ms },
            KeyEvent::Removed {
                by,
                key,
                value,
                cause,
                ..
            } => ServerEvent::Removed {
                by,
                key,
                value,
                cause: match cause {
                    KeyCause::Command => "command",
                    KeyCause::Expired => "expired",
                    KeyCause::Overwritten => "overwritten",
                    KeyCause::Flushed => "flushed",
                }
                .into(),
            },
        };
        recorder.record_at(at_us, "redis", EventKind::Server(kind));
    }
}

fn resolve(
    target: &Target,
    recorder: &Recorder,
    clients: &BTreeMap<String, ClientCtl>,
    lock_owner: Option<&str>,
    rng: &mut ChaCha8Rng,
) -> Option<String> {
    let pick = |candidates: Vec<String>, rng: &mut ChaCha8Rng| {
        if candidates.is_empty() {
            None
        } else {
            let i = rng.random_range(0..candidates.len());
            Some(candidates[i].clone())
        }
    };
    match target {
        Target::Host(h) => clients.contains_key(h).then(|| h.clone()),
        Target::Holder => pick(recorder.holders(), rng),
        Target::Acquirer => pick(recorder.acquirers(), rng),
        Target::LockOwner => lock_owner
            .filter(|h| clients.contains_key(*h))
            .map(str::to_string),
    }
}

/// Runs a design's background tasks on the client host, under its pause gate: a
/// watchdog freezes with its client and dies with it (a crash drops the host's tasks).
struct HostSpawner(PauseGate);

impl lock_impl::Spawner for HostSpawner {
    fn spawn(&self, task: lock_impl::Task) {
        tokio::task::spawn_local(self.0.wrap(task));
    }
}

/// Connections to a Redis host over turmoil TCP, their drivers under the client's pause
/// gate.
struct TurmoilConnector {
    server: String,
    gate: PauseGate,
    response_timeout: Duration,
}

impl lock_impl::Connector for TurmoilConnector {
    fn server(&self) -> &str {
        &self.server
    }

    fn connect(&self) -> lock_impl::Dial<'_, redis::aio::MultiplexedConnection> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect((self.server.as_str(), 6379)).await?;
            let config = redis::AsyncConnectionConfig::new()
                .set_response_timeout(Some(self.response_timeout));
            let (conn, driver) =
                redis::aio::MultiplexedConnection::new_with_config(&REDIS_INFO, stream, config)
                    .await?;
            tokio::task::spawn_local(self.gate.wrap(driver));
            Ok(conn)
        })
    }

    fn pubsub(&self) -> lock_impl::Dial<'_, redis::aio::PubSub> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect((self.server.as_str(), 6379)).await?;
            redis::aio::PubSub::new(&REDIS_INFO, stream).await
        })
    }
}

/// Subscriber connections to the `redis` host over turmoil TCP.
struct TurmoilPubSub;

impl lock_impl::PubSubConnector for TurmoilPubSub {
    fn connect(
        &self,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = redis::RedisResult<redis::aio::PubSub>> + Send + '_>,
    > {
        Box::pin(async {
            let stream = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
            redis::aio::PubSub::new(&REDIS_INFO, stream).await
        })
    }
}

/// Connection settings for the `redis` host (a static: the connection driver borrows it
/// for the connection's life).
static REDIS_INFO: std::sync::LazyLock<redis::RedisConnectionInfo> =
    std::sync::LazyLock::new(|| {
        redis::IntoConnectionInfo::into_connection_info("redis://redis:6379")
            .expect("static url")
            .redis_settings()
            .clone()
    });

/// One client host's program. Cloned for each (re)start.
#[derive(Clone)]
struct Client {
    name: String,
    index: u64,
    seed: u64,
    workload: Workload,
    clock: ClockSpec,
    factory: DesignFactory,
    recorder: Recorder,
    gate: PauseGate,
    slow_ms: Arc<AtomicU64>,
    incarnation: Arc<AtomicU32>,
}

impl Client {
    async fn main(self) {
        let w = &self.workload;
        let incarnation = u64::from(self.incarnation.fetch_add(1, Ordering::Relaxed));
        let stream_id = (self.index << 16) | incarnation;
        let Ok(mut storage) = StorageClient::connect(&self.name).await else {
            return;
        };
        let clock: Arc<dyn lock_impl::Clock> = Arc::new(SimClock::new(self.clock));
        let connector: Arc<dyn lock_impl::Connector> = Arc::new(TurmoilConnector {
            server: "redis".into(),
            gate: self.gate.clone(),
            response_timeout: Duration::from_millis(w.response_timeout_ms),
        });
        let conn = lock_impl::Conn::new(connector, clock.clone(), Default::default());
        // Dial before the first acquisition, as a service connects at start-up (a
        // failure here is retried by the first command).
        let _ = conn.ensure_connected().await;
        let deps = Deps {
            servers: vec![conn.clone()],
            conn,
            clock,
            entropy: Arc::new(SeededEntropy::new(
                sub_seed(self.seed, 2 + 2 * stream_id),
                self.name.clone(),
            )),
            spawner: Arc::new(HostSpawner(self.gate.clone())),
            pubsub: Some(Arc::new(TurmoilPubSub)),
        };
        let design = (self.factory)(deps);
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(self.seed, 3 + 2 * stream_id));
        let options = AcquireOptions::new(w.lease_ms as i64, w.wait_ms as i64)
            .expect("lease validated by run()");
        let deadline = Duration::from_millis(w.duration_ms);
        let sleep =
            |ms: u64| tokio::time::sleep(self.clock.true_duration(Duration::from_millis(ms)));

        while true_now() < deadline {
            // The outer acquisition, then `reentrant_depth - 1` nested ones by the same
            // client (a reentrant design counts them; others refuse them).
            let mut guards = Vec::new();
            for depth in 1..=w.reentrant_depth.max(1) {
                match self.acquire(design.as_ref(), options, depth).await {
                    Some(g) => guards.push(g),
                    None => break,
                }
            }
            if let Some(outer) = guards.first() {
                self.critical_section(&mut storage, outer.token).await;
            }
            while let Some(guard) = guards.pop() {
                self.release(design.as_ref(), &guard, guards.len() as i64 + 1)
                    .await;
            }
            let think = rng.random_range(0..=w.think_ms_max);
            sleep(think).await;
        }
    }

    /// One acquisition, recorded; `depth` is the client's hold count if it succeeds
    /// (recorded as the ok's `value`).
    async fn acquire(
        &self,
        design: &dyn LockDesign,
        options: AcquireOptions,
        depth: u32,
    ) -> Option<lock_impl::Guard> {
        let (rec, host, key) = (
            &self.recorder,
            self.name.as_str(),
            self.workload.key.as_str(),
        );
        let op = rec.invoke(host, OpF::Acquire, |o| o.key = Some(key.into()));
        let (phase, guard, detail) = match design.acquire(key, options).await {
            Ok(Acquire::Acquired(g)) => (Phase::Ok, Some(g), None),
            Ok(Acquire::NotAcquired) => (Phase::Fail, None, None),
            Ok(Acquire::Unknown(why)) => (Phase::Info, None, Some(why)),
            Err(e) => (Phase::Fail, None, Some(e.to_string())),
        };
        rec.complete(host, op, OpF::Acquire, phase, |o| {
            o.key = Some(key.into());
            o.detail = detail;
            if let Some(g) = &guard {
                o.owner = Some(g.owner.clone());
                o.token = g.token;
                o.value = Some(i64::from(depth));
            }
        });
        guard
    }

    /// One release, recorded; `depth` is the client's hold count before it (recorded as
    /// the invocation's `value`).
    async fn release(&self, design: &dyn LockDesign, guard: &lock_impl::Guard, depth: i64) {
        let (rec, host, key) = (
            &self.recorder,
            self.name.as_str(),
            self.workload.key.as_str(),
        );
        let op = rec.invoke(host, OpF::Release, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.value = Some(depth);
        });
        let (phase, detail) = match design.release(guard).await {
            Ok(Release::Removed) => (Phase::Ok, "removed".to_string()),
            Ok(Release::NotFound) => (Phase::Fail, "not-found".into()),
            Ok(Release::HeldByOther) => (Phase::Fail, "held-by-other".into()),
            Ok(Release::NotRemoved) => (Phase::Fail, "not-removed".into()),
            Ok(Release::StillHeld { count }) => (Phase::Ok, format!("still-held count={count}")),
            Ok(Release::Unknown(why)) => (Phase::Info, why),
            Err(e) => (Phase::Fail, e.to_string()),
        };
        rec.complete(host, op, OpF::Release, phase, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.detail = Some(detail);
        });
    }

    /// Read the stock, work, write stock − 1: the read-modify-write the lock protects.
    async fn critical_section(&self, storage: &mut StorageClient, token: Option<u64>) {
        let rec = &self.recorder;
        let host = self.name.as_str();
        let op = rec.invoke(host, OpF::Read, |o| o.token = token);
        let read = match storage.read(token).await {
            Ok(Some(v)) => {
                rec.complete(host, op, OpF::Read, Phase::Ok, |o| o.value = Some(v));
                v
            }
            Ok(None) => {
                rec.complete(host, op, OpF::Read, Phase::Fail, |o| {
                    o.detail = Some("rejected by fencing".into())
                });
                return;
            }
            Err(e) => {
                rec.complete(host, op, OpF::Read, Phase::Info, |o| {
                    o.detail = Some(e.to_string())
                });
                return;
            }
        };
        let extra = self.slow_ms.swap(0, Ordering::Relaxed);
        let work = Duration::from_millis(self.workload.work_ms + extra);
        tokio::time::sleep(self.clock.true_duration(work)).await;
        let op = rec.invoke(host, OpF::Write, |o| {
            o.value = Some(read - 1);
            o.token = token;
        });
        match storage.write(read, read - 1, token).await {
            Ok(true) => rec.complete(host, op, OpF::Write, Phase::Ok, |o| {
                o.value = Some(read - 1)
            }),
            Ok(false) => rec.complete(host, op, OpF::Write, Phase::Fail, |o| {
                o.detail = Some("rejected by fencing".into())
            }),
            Err(e) => rec.complete(host, op, OpF::Write, Phase::Info, |o| {
                o.detail = Some(e.to_string())
            }),
        }
    }
}
