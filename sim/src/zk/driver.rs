//! Runs a [`ZkServer`] over a network: turmoil's TCP in the simulator, tokio's on a real
//! loopback port for the differential test. The server lock is a `std::sync::Mutex`
//! held only around synchronous calls, never across an `.await`; every connection
//! loop uses `select! { biased; ... }`; the session tracker sleeps with turmoil's
//! hinted sleep, so a simulation that jumps in time sees its wake-ups.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lock_impl::zk::proto::split_frame;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::server::{ConnId, Out, ServerEvent, ZkConfig, ZkNow, ZkServer};
use crate::clock::{HostClock, true_now};

/// The port ZooKeeper serves clients on.
pub const ZK_PORT: u16 = 2181;

/// The server host's clocks.
pub trait ZkClock: Send + Sync {
    /// Now, monotonic and wall.
    fn now(&self) -> ZkNow;
    /// The true time to sleep for `local` to pass on this clock.
    fn true_duration(&self, local: Duration) -> Duration {
        local
    }
}

/// The machine's clocks: for the real-port model of the differential test and tools,
/// never in the simulator.
#[derive(Debug, Clone)]
pub struct SystemZkClock {
    origin: std::time::Instant,
}

impl Default for SystemZkClock {
    fn default() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

impl ZkClock for SystemZkClock {
    fn now(&self) -> ZkNow {
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        ZkNow {
            // Time.currentElapsedTime is System.nanoTime: any origin. A large one
            // keeps session ids looking like a real server's.
            elapsed_ms: self.origin.elapsed().as_millis() as u64 + 1_000_000,
            wall_ms,
        }
    }
}

/// A simulated host's clock: monotonic time follows its rate, the wall clock its
/// steps too.
impl ZkClock for HostClock {
    fn now(&self) -> ZkNow {
        let t = true_now();
        ZkNow {
            elapsed_ms: self.local_elapsed(t).as_millis() as u64,
            wall_ms: (self.unix_us(t) / 1000) as i64,
        }
    }

    fn true_duration(&self, local: Duration) -> Duration {
        HostClock::true_duration(self, local)
    }
}

type Senders = BTreeMap<ConnId, UnboundedSender<Out>>;

/// One model server shared by its connections and its session tracker. Cheap to
/// clone.
#[derive(Clone)]
pub struct SharedZk {
    server: Arc<Mutex<ZkServer>>,
    senders: Arc<Mutex<Senders>>,
    clock: Arc<dyn ZkClock>,
}

impl std::fmt::Debug for SharedZk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedZk").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SharedZk {
    /// A fresh server with `config`, reading `clock`.
    pub fn new(config: ZkConfig, clock: Arc<dyn ZkClock>) -> Self {
        let server = ZkServer::new(config, clock.now());
        Self {
            server: Arc::new(Mutex::new(server)),
            senders: Arc::new(Mutex::new(BTreeMap::new())),
            clock,
        }
    }

    /// Runs `f` on the server at the clock's reading, then hands each connection what
    /// it queued.
    pub fn with<R>(&self, f: impl FnOnce(&mut ZkServer, ZkNow) -> R) -> R {
        let now = self.clock.now();
        let (r, out) = {
            let mut s = lock(&self.server);
            let r = f(&mut s, now);
            (r, s.take_output())
        };
        if !out.is_empty() {
            let senders = lock(&self.senders);
            for (conn, o) in out {
                if let Some(tx) = senders.get(&conn) {
                    let _ = tx.send(o);
                }
            }
        }
        r
    }

    /// Takes the server's events (sessions created, expired, closed).
    pub fn take_events(&self) -> Vec<ServerEvent> {
        self.with(|s, _| s.take_events())
    }
}

/// Serves one connection until either side closes it.
pub async fn serve_connection<S>(shared: SharedZk, stream: S, peer: String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (tx, rx) = unbounded_channel();
    let id = shared.with(|s, _| s.connect(peer));
    lock(&shared.senders).insert(id, tx);
    pump_frames(stream, rx, |payload| {
        shared.with(|s, now| s.receive(id, payload, now))
    })
    .await;
    lock(&shared.senders).remove(&id);
    shared.with(|s, _| s.disconnect(id));
}

/// The loop of one client connection of a ZooKeeper server, standalone or in an
/// ensemble: writes what the server queued for it (`out`) and hands each whole frame
/// it reads to `receive`, until either side closes it (a length ZooKeeper refuses,
/// "Len error", closes it too).
pub(super) async fn pump_frames<S>(
    mut stream: S,
    mut out: UnboundedReceiver<Out>,
    mut receive: impl FnMut(&[u8]),
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut inbuf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    'conn: loop {
        tokio::select! {
            biased;
            first = out.recv() => {
                let mut next = first;
                while let Some(o) = next {
                    match o {
                        Out::Frame(f) => {
                            if stream.write_all(&f).await.is_err() {
                                break 'conn;
                            }
                        }
                        Out::Close => {
                            let _ = stream.flush().await;
                            let _ = stream.shutdown().await;
                            break 'conn;
                        }
                    }
                    next = out.try_recv().ok();
                }
                if stream.flush().await.is_err() {
                    break;
                }
            }
            read = stream.read(&mut chunk) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                inbuf.extend_from_slice(&chunk[..n]);
                let mut used = 0;
                loop {
                    match split_frame(&inbuf[used..]) {
                        Ok(Some((payload, len))) => {
                            receive(payload);
                            used += len;
                        }
                        Ok(None) => break,
                        Err(_) => break 'conn,
                    }
                }
                inbuf.drain(..used);
            }
        }
    }
}

/// The session tracker: wakes at every bucket boundary of the server's monotonic
/// clock and expires what is due (`SessionTrackerImpl.run`).
pub async fn session_tracker(shared: SharedZk) {
    loop {
        let (next, now) = shared.with(|s, now| (s.next_tick_ms(), now.elapsed_ms));
        if next > now {
            let wait = shared
                .clock
                .true_duration(Duration::from_millis(next - now));
            turmoil::time::sleep(wait).await;
        }
        shared.with(|s, now| s.tick(now));
    }
}

/// Accepts connections on a turmoil listener forever, one task per connection.
pub async fn serve_turmoil(listener: turmoil::net::TcpListener, shared: SharedZk) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            continue;
        };
        let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
        tokio::spawn(serve_connection(shared.clone(), stream, peer));
    }
}

/// Accepts connections on a real tokio listener forever.
pub async fn serve_tokio(listener: tokio::net::TcpListener, shared: SharedZk) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(shared.clone(), stream, addr.to_string()));
            }
            Err(_) => turmoil::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Starts a model server with the machine's clock on a free loopback port inside the
/// current tokio runtime (for the differential test and tools): its address.
pub async fn spawn_tokio_zk(config: ZkConfig) -> io::Result<(SocketAddr, SharedZk)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let shared = SharedZk::new(config, Arc::new(SystemZkClock::default()));
    tokio::spawn(session_tracker(shared.clone()));
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}

/// The program of a ZooKeeper host in a turmoil simulation: a fresh server (nothing
/// survives a restart yet: no snapshot or txn log on disk) reading `clock`, serving
/// [`ZK_PORT`]. `on_start` receives the shared server (for probes and tests).
///
/// `sim.host("zk-1", zk_host(ZkConfig::default(), clock, |_| {}))` adds one.
pub fn zk_host(
    config: ZkConfig,
    clock: HostClock,
    on_start: impl Fn(SharedZk) + Send + Sync + 'static,
) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = turmoil::Result> + 'static>> + 'static
{
    let on_start = Arc::new(on_start);
    move || {
        let (clock, on_start) = (clock.clone(), on_start.clone());
        Box::pin(async move {
            let shared = SharedZk::new(config, Arc::new(clock));
            on_start(shared.clone());
            let listener =
                turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ZK_PORT)).await?;
            tokio::spawn(session_tracker(shared.clone()));
            serve_turmoil(listener, shared).await;
            Ok(())
        })
    }
}
