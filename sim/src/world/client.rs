//! A client host: lock-impl code over turmoil TCP, running the workload loop (acquire,
//! read-modify-write at the storage, release, think), with every task it runs under
//! its pause gate and every connection it dials wrapped by the link-fault registry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use lock_impl::{AcquireOptions, Deps, LockDesign, SeededEntropy};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::{HostClock, SimClock, true_now};
use crate::history::{EventKind, LockMode, OpF, Phase};
use crate::net::{NetFaults, until_reachable};
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::storage::StorageClient;

use super::config::{DesignFactory, Workload};
use super::redis::servers::REDIS_PORT;
use super::system::SystemReach;
use crate::seed::{stream, sub_seed};

/// Runs a design's background tasks on the client host, under its pause gate: a
/// watchdog freezes with its client and dies with it (a crash drops the host's tasks).
struct HostSpawner(PauseGate);

impl lock_impl::Spawner for HostSpawner {
    fn spawn(&self, task: lock_impl::Task) {
        tokio::task::spawn_local(self.0.wrap(task));
    }
}

/// How one client dials any host over turmoil TCP. Every dial of a Redis server is
/// recorded in the history (`connect`); the stream is wrapped by the link-fault
/// registry and the client's pause gate, and the multiplexed connection's driver runs
/// under the gate, so no byte of a paused client moves.
pub(crate) struct TurmoilDialer {
    client: String,
    gate: PauseGate,
    net: NetFaults,
    recorder: Recorder,
    response_timeout: Duration,
}

/// Records a dial that was abandoned (the connection's own timeout gave up on it).
struct DialRecord<'a> {
    dialer: &'a TurmoilDialer,
    server: &'a str,
    done: bool,
}

impl DialRecord<'_> {
    fn finish(&mut self, result: Result<(), String>) {
        self.done = true;
        let (ok, detail) = match result {
            Ok(()) => (true, None),
            Err(e) => (false, Some(e)),
        };
        self.dialer.recorder.record(
            &self.dialer.client,
            EventKind::Connect {
                server: self.server.to_string(),
                ok,
                detail,
            },
        );
    }
}

impl Drop for DialRecord<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(Err("dial abandoned (timed out)".into()));
        }
    }
}

impl TurmoilDialer {
    /// A stream to `host:port`, once it is reachable (a dial across a partition or to
    /// a dead machine hangs, as an unanswered SYN does).
    async fn stream(
        &self,
        host: &str,
        port: u16,
    ) -> std::io::Result<crate::pause::GatedIo<crate::net::FaultyStream<turmoil::net::TcpStream>>>
    {
        until_reachable(&self.net, &self.client, host).await;
        let stream = turmoil::net::TcpStream::connect((host, port)).await?;
        let stream = self
            .net
            .wrap(stream, &self.client, host)
            .replies_within(self.response_timeout);
        Ok(self.gate.wrap_io(stream))
    }

    /// A multiplexed connection to `host:port`; a dial of a Redis server (not of a
    /// Sentinel) is recorded.
    async fn multiplexed(
        &self,
        host: &str,
        port: u16,
    ) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        let mut record = (port == REDIS_PORT).then(|| DialRecord {
            dialer: self,
            server: host,
            done: false,
        });
        let result = async {
            let stream = self.stream(host, port).await?;
            let config = redis::AsyncConnectionConfig::new()
                .set_response_timeout(Some(self.response_timeout));
            let (conn, driver) =
                redis::aio::MultiplexedConnection::new_with_config(&REDIS_INFO, stream, config)
                    .await?;
            tokio::task::spawn_local(self.gate.wrap(driver));
            Ok::<_, redis::RedisError>(conn)
        }
        .await;
        if let Some(record) = &mut record {
            record.finish(result.as_ref().map(|_| ()).map_err(|e| {
                if e.is_connection_refusal() {
                    format!("connection refused by {host}")
                } else {
                    e.to_string()
                }
            }));
        }
        result
    }
}

impl lock_impl::AddrConnector for TurmoilDialer {
    fn connect_to(
        &self,
        host: &str,
        port: u16,
    ) -> lock_impl::Dial<'_, redis::aio::MultiplexedConnection> {
        let host = host.to_string();
        Box::pin(async move { self.multiplexed(&host, port).await })
    }

    fn pubsub_to(&self, host: &str, port: u16) -> lock_impl::Dial<'_, redis::aio::PubSub> {
        let host = host.to_string();
        Box::pin(async move {
            let stream = self.stream(&host, port).await?;
            redis::aio::PubSub::new(&REDIS_INFO, stream).await
        })
    }
}

/// ZooKeeper connections: the same gated, faultable streams; every dial of the
/// ZooKeeper server is recorded (`connect`); the client's connection driver runs under
/// the pause gate.
impl lock_impl::zk::StreamDialer for TurmoilDialer {
    fn dial(&self, host: &str, port: u16) -> lock_impl::zk::StreamDial<'_> {
        let host = host.to_string();
        Box::pin(async move {
            let mut record = DialRecord {
                dialer: self,
                server: &host,
                done: false,
            };
            let result = self.stream(&host, port).await;
            record.finish(result.as_ref().map(|_| ()).map_err(|e| e.to_string()));
            Ok(Box::new(result?) as lock_impl::zk::ZkStream)
        })
    }

    fn spawn(&self, task: lock_impl::Task) {
        tokio::task::spawn_local(self.gate.wrap(task));
    }
}

/// Connections from one client to one Redis host.
struct TurmoilConnector {
    dialer: Arc<TurmoilDialer>,
    server: String,
}

impl lock_impl::Connector for TurmoilConnector {
    fn server(&self) -> &str {
        &self.server
    }

    fn connect(&self) -> lock_impl::Dial<'_, redis::aio::MultiplexedConnection> {
        Box::pin(self.dialer.multiplexed(&self.server, REDIS_PORT))
    }

    fn pubsub(&self) -> lock_impl::Dial<'_, redis::aio::PubSub> {
        Box::pin(async move {
            let stream = self.dialer.stream(&self.server, REDIS_PORT).await?;
            redis::aio::PubSub::new(&REDIS_INFO, stream).await
        })
    }
}

/// Connection settings shared by every server (host and port travel in the stream; a
/// static because the connection driver borrows it for the connection's life).
static REDIS_INFO: std::sync::LazyLock<redis::RedisConnectionInfo> =
    std::sync::LazyLock::new(|| {
        redis::IntoConnectionInfo::into_connection_info("redis://redis:6379")
            .expect("static url")
            .redis_settings()
            .clone()
    });

/// A pause armed for a client's next write: the fault's index and length.
pub(crate) type PauseBeforeWrite = Arc<std::sync::Mutex<Option<(usize, u64)>>>;

/// How long a client waits for one Sentinel's answer before asking the next.
const SENTINEL_ASK_TIMEOUT_MS: u64 = 250;

/// One client host's program. Cloned for each (re)start.
#[derive(Clone)]
pub(crate) struct Client {
    pub name: String,
    pub index: u64,
    pub seed: u64,
    pub workload: Workload,
    pub clock: HostClock,
    pub factory: DesignFactory,
    pub recorder: Recorder,
    pub gate: PauseGate,
    pub net: NetFaults,
    pub slow_ms: Arc<AtomicU64>,
    pub pause_before_write: PauseBeforeWrite,
    pub incarnation: Arc<AtomicU32>,
    /// The world's system serves (a ZooKeeper ensemble's first leader): the client
    /// starts only then, as a service starts once its ZooKeeper is up (a connection
    /// made during the first election is closed, and the Java client's reconnect waits
    /// up to a second). `None`: a system that serves from the start.
    pub system_ready: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The primary's address, re-pointed by a failover (a MySQL primary with a
    /// replica).
    pub primary_address: Option<Arc<std::sync::Mutex<String>>>,
    /// The longest retry horizon of the design any client built
    /// ([`lock_impl::LockDesign::retry_horizon`], ms): the liveness bound's share.
    pub retry_horizon_ms: Arc<AtomicU64>,
}

impl Client {
    pub async fn main(self) {
        if let Some(ready) = &self.system_ready {
            while !ready.load(Ordering::Relaxed) {
                turmoil::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let w = &self.workload;
        let incarnation = u64::from(self.incarnation.fetch_add(1, Ordering::Relaxed));
        let stream_id = (self.index << 16) | incarnation;
        let clock: Arc<dyn lock_impl::Clock> = Arc::new(SimClock::new(self.clock.clone()));
        let dialer = Arc::new(TurmoilDialer {
            client: self.name.clone(),
            gate: self.gate.clone(),
            net: self.net.clone(),
            recorder: self.recorder.clone(),
            response_timeout: Duration::from_millis(w.response_timeout_ms),
        });
        let (conn, servers) = self.redis_connections(&dialer, &clock).await;
        let Ok(mut storage) = StorageClient::connect(&self.name).await else {
            return;
        };
        let deps = Deps {
            pubsub: Some(Arc::new(lock_impl::ConnectorPubSub(
                conn.connector().clone(),
            ))),
            observer: Some(Arc::new(RenewalRecorder {
                recorder: self.recorder.clone(),
                host: self.name.clone(),
                clock: self.clock.clone(),
            })),
            scale: lock_impl::TimeScale::for_lease(w.lease_ms),
            ..Deps::new(
                conn,
                servers,
                clock,
                Arc::new(SeededEntropy::new(
                    sub_seed(self.seed, stream::client_entropy(stream_id)),
                    self.name.clone(),
                )),
                Arc::new(HostSpawner(self.gate.clone())),
            )
        };
        // Each system's part of the design's dependencies: how to reach its servers.
        let reach = SystemReach {
            dialer: dialer.clone(),
            primary_address: self.primary_address.clone(),
            response_timeout_ms: w.response_timeout_ms,
            scale: lock_impl::TimeScale::for_lease(w.lease_ms),
        };
        let mut deps = deps;
        for system in super::registry::systems_of(w) {
            system.client_deps(&mut deps, &reach);
        }
        let design = (self.factory)(deps);
        self.retry_horizon_ms
            .fetch_max(design.retry_horizon().as_millis() as u64, Ordering::Relaxed);
        let mut rng =
            ChaCha8Rng::seed_from_u64(sub_seed(self.seed, stream::client_rounds(stream_id)));
        let options = AcquireOptions::new(w.lease_ms as i64, w.wait_ms as i64)
            .expect("lease validated by run()");
        let deadline = Duration::from_millis(w.duration_ms);
        let sleep = |ms: u64| clock_sleep(&self.clock, Duration::from_millis(ms));

        while true_now() < deadline {
            // A read/write mix draws each round's mode (only then: without the knob the
            // random stream, and so the history, is what it always was).
            let reading = w.read_share.map(|share| rng.random_range(0..100u8) < share);
            // The lock a round takes: a read round takes the read lock of a design that
            // has one and its only, exclusive, lock otherwise (as a service would), so
            // exclusive designs run the same rounds and are judged on what they hold.
            let mode = reading.map(|r| {
                if r && design.has_read_mode() {
                    LockMode::Read
                } else {
                    LockMode::Write
                }
            });
            // A segmented stock draws the round's segment (only then, as above), and
            // the round takes that segment's lock.
            let segment = w.segments.map(|n| rng.random_range(0..n));
            let key = crate::history::segment_key(&w.key, segment);
            // The outer acquisition, then `reentrant_depth - 1` nested ones by the same
            // client (a reentrant design counts them; others refuse them).
            let mut guards = Vec::new();
            for depth in 1..=w.reentrant_depth.max(1) {
                match self
                    .acquire(design.as_ref(), &key, options, depth, mode)
                    .await
                {
                    Some(g) => guards.push(g),
                    None => break,
                }
            }
            if let Some(outer) = guards.first() {
                if reading == Some(true) {
                    self.read_section(&mut storage, outer).await;
                } else {
                    self.critical_section(&mut storage, outer, segment).await;
                }
            }
            while let Some(guard) = guards.pop() {
                self.release(design.as_ref(), &key, &guard, guards.len() as i64 + 1, mode)
                    .await;
            }
            let think = rng.random_range(0..=w.think_ms_max);
            sleep(think).await;
        }
    }

    /// The Redis connections of a client's `Deps`: the lock's (through the Sentinels,
    /// if any) and one per server, dialled before the first acquisition as a service
    /// connects at start-up (a failure here is retried by the first command).
    async fn redis_connections(
        &self,
        dialer: &Arc<TurmoilDialer>,
        clock: &Arc<dyn lock_impl::Clock>,
    ) -> (lock_impl::Conn, Vec<lock_impl::Conn>) {
        let w = &self.workload;
        let policy = lock_impl::ReconnectPolicy {
            connect_timeout_ms: w.connect_timeout_ms,
            ..Default::default()
        };
        let servers: Vec<lock_impl::Conn> = w
            .servers
            .iter()
            .map(|server| {
                let connector: Arc<dyn lock_impl::Connector> = Arc::new(TurmoilConnector {
                    dialer: dialer.clone(),
                    server: server.name.clone(),
                });
                lock_impl::Conn::new(connector, clock.clone(), policy)
            })
            .collect();
        // With Sentinels, the lock's connection follows whichever server they name.
        let conn = match &w.sentinel {
            Some(spec) => {
                let sentinels = w
                    .sentinel_names()
                    .into_iter()
                    .map(|n| (n, crate::sentinel::SENTINEL_PORT))
                    .collect();
                let connector: Arc<dyn lock_impl::Connector> =
                    Arc::new(lock_impl::SentinelConnector::new(
                        spec.master_name.clone(),
                        sentinels,
                        dialer.clone(),
                        clock.clone(),
                        Duration::from_millis(SENTINEL_ASK_TIMEOUT_MS),
                    ));
                lock_impl::Conn::new(connector, clock.clone(), policy)
            }
            None => match servers.first() {
                Some(first) => first.clone(),
                // A ZooKeeper world has no Redis server: the design's `Deps.conn`
                // reaches none (see `lock_impl::zookeeper_deps`).
                None => {
                    lock_impl::zookeeper_deps(
                        lock_impl::zk::ZkEnsemble {
                            servers: Vec::new(),
                            dialer: dialer.clone(),
                            session_timeout_ms: 0,
                            scale: lock_impl::TimeScale::for_lease(w.lease_ms),
                        },
                        clock.clone(),
                        Arc::new(SeededEntropy::new(0, "")),
                        Arc::new(lock_impl::TokioSpawner),
                    )
                    .conn
                }
            },
        };
        if w.sentinel.is_some() {
            let _ = conn.ensure_connected().await;
        } else {
            for server in &servers {
                let _ = server.ensure_connected().await;
            }
        }
        let servers = if servers.is_empty() {
            vec![conn.clone()]
        } else {
            servers
        };
        (conn, servers)
    }

    /// One acquisition, recorded; `depth` is the client's hold count if it succeeds
    /// (recorded as the ok's `value`); `mode`, in a read/write workload, says which
    /// side to take and is recorded on every phase.
    async fn acquire(
        &self,
        design: &dyn LockDesign,
        key: &str,
        options: AcquireOptions,
        depth: u32,
        mode: Option<LockMode>,
    ) -> Option<lock_impl::Guard> {
        let (rec, host) = (&self.recorder, self.name.as_str());
        let op = rec.invoke(host, OpF::Acquire, |o| {
            o.key = Some(key.into());
            o.mode = mode;
        });
        let outcome = match mode {
            Some(LockMode::Read) => design.acquire_read(key, options).await,
            Some(LockMode::Write) | None => design.acquire(key, options).await,
        };
        let (phase, guard, detail) = crate::outcome::acquired(outcome);
        rec.complete(host, op, OpF::Acquire, phase, |o| {
            o.key = Some(key.into());
            o.detail = detail;
            o.mode = mode;
            if let Some(g) = &guard {
                o.owner = Some(g.owner.clone());
                o.token = g.token;
                o.value = Some(i64::from(depth));
                o.valid_until_us = g.valid_until.map(|local| {
                    let t = self.clock.true_time_of(true_now(), local);
                    u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
                });
            }
        });
        guard
    }

    /// One release, recorded; `depth` is the client's hold count before it (recorded as
    /// the invocation's `value`).
    async fn release(
        &self,
        design: &dyn LockDesign,
        key: &str,
        guard: &lock_impl::Guard,
        depth: i64,
        mode: Option<LockMode>,
    ) {
        let (rec, host) = (&self.recorder, self.name.as_str());
        let op = rec.invoke(host, OpF::Release, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.value = Some(depth);
            o.mode = mode;
        });
        let (phase, detail) = crate::outcome::released(design.release(guard).await);
        rec.complete(host, op, OpF::Release, phase, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.detail = Some(detail);
            o.mode = mode;
        });
    }

    /// A reader's section: read the stock, then work as long as a writer would (the
    /// cache refill under Dewu's read-write lock, docs/designs.md); nothing is written.
    async fn read_section(&self, storage: &mut StorageClient, guard: &lock_impl::Guard) {
        let token = guard.token;
        let (rec, host) = (&self.recorder, self.name.as_str());
        let op = rec.invoke(host, OpF::Read, |o| o.token = token);
        match storage.read(token, None).await {
            Ok(Some(v)) => rec.complete(host, op, OpF::Read, Phase::Ok, |o| o.value = Some(v)),
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
        }
        let extra = self.slow_ms.swap(0, Ordering::Relaxed);
        clock_sleep(
            &self.clock,
            Duration::from_millis(self.workload.work_ms + extra),
        )
        .await;
    }

    /// Read the stock, work, write stock − 1: the read-modify-write the lock protects.
    /// With `check_validity_ms`, the write is abandoned (recorded as a failed write)
    /// unless the guard has at least that much validity left, as careful code checks
    /// `Guard::remaining` before acting. On a segmented stock the section reads and
    /// writes the round's `segment`, and sells only if the segment has stock left: a
    /// sold-out segment is read and left alone.
    async fn critical_section(
        &self,
        storage: &mut StorageClient,
        guard: &lock_impl::Guard,
        segment: Option<u32>,
    ) {
        let token = guard.token;
        let rec = &self.recorder;
        let host = self.name.as_str();
        // A segmented stock's reads and writes name the segment's lock key, so that
        // each segment's record can be judged on its own.
        let key = segment.map(|s| crate::history::segment_key(&self.workload.key, Some(s)));
        let op = rec.invoke(host, OpF::Read, |o| {
            o.token = token;
            o.key = key.clone();
        });
        let read = match storage.read(token, segment).await {
            Ok(Some(v)) => {
                rec.complete(host, op, OpF::Read, Phase::Ok, |o| {
                    o.value = Some(v);
                    o.key = key.clone();
                });
                v
            }
            Ok(None) => {
                rec.complete(host, op, OpF::Read, Phase::Fail, |o| {
                    o.detail = Some("rejected by fencing".into());
                    o.key = key.clone();
                });
                return;
            }
            Err(e) => {
                rec.complete(host, op, OpF::Read, Phase::Info, |o| {
                    o.detail = Some(e.to_string());
                    o.key = key.clone();
                });
                return;
            }
        };
        if segment.is_some() && read <= 0 {
            return;
        }
        let extra = self.slow_ms.swap(0, Ordering::Relaxed);
        let work = Duration::from_millis(self.workload.work_ms + extra);
        clock_sleep(&self.clock, work).await;
        let op = rec.invoke(host, OpF::Write, |o| {
            o.value = Some(read - 1);
            o.token = token;
            o.key = key.clone();
        });
        if let Some(margin) = self.workload.check_validity_ms {
            let left = guard.remaining(self.clock.monotonic(true_now()));
            if left.is_some_and(|l| l < Duration::from_millis(margin)) {
                let left_ms = left.unwrap_or_default().as_millis();
                rec.complete(host, op, OpF::Write, Phase::Fail, |o| {
                    o.detail = Some(format!(
                        "abandoned: {left_ms} ms of validity left, {margin} ms required"
                    ));
                    o.key = key.clone();
                });
                return;
            }
        }
        let armed = self
            .pause_before_write
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((fault, ms)) = armed {
            // The pause strikes here: the write below waits under the gate.
            let start = true_now();
            let end = start + Duration::from_millis(ms);
            self.gate.pause_until(end);
            let event = |phase, detail: String| EventKind::Fault {
                fault,
                phase,
                detail,
                peers: Vec::new(),
            };
            rec.record(
                host,
                event(
                    crate::history::FaultPhase::Start,
                    format!("pause {host} for {ms} ms, just before its write"),
                ),
            );
            self.gate.wrap(async {}).await;
            rec.record_at(
                end.as_micros() as u64,
                host,
                event(
                    crate::history::FaultPhase::End,
                    format!("pause of {host} ends"),
                ),
            );
        }
        match storage.write(read, read - 1, token, segment).await {
            Ok(true) => rec.complete(host, op, OpF::Write, Phase::Ok, |o| {
                o.value = Some(read - 1);
                o.key = key.clone();
            }),
            Ok(false) => rec.complete(host, op, OpF::Write, Phase::Fail, |o| {
                o.detail = Some("rejected by fencing".into());
                o.key = key.clone();
            }),
            Err(e) => rec.complete(host, op, OpF::Write, Phase::Info, |o| {
                o.detail = Some(e.to_string());
                o.key = key.clone();
            }),
        }
    }
}

/// Sleeps `local` on the host's own clock (rate changes during the sleep included).
/// Records a watchdog's renewals in the history, so that the validity checkers judge
/// the validity the client believed, not the first lease's.
struct RenewalRecorder {
    recorder: Recorder,
    host: String,
    clock: HostClock,
}

impl lock_impl::Observer for RenewalRecorder {
    fn renewed(&self, key: &str, owner: &str, valid_until: Duration) {
        let t = self.clock.true_time_of(true_now(), valid_until);
        self.recorder.record(
            &self.host,
            EventKind::Renewed {
                key: key.to_string(),
                owner: owner.to_string(),
                valid_until_us: u64::try_from(t.as_micros()).unwrap_or(u64::MAX),
            },
        );
    }
}

fn clock_sleep(clock: &HostClock, local: Duration) -> lock_impl::Sleep {
    lock_impl::Clock::sleep(&SimClock::new(clock.clone()), local)
}
