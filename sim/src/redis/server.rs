//! The network side of the Redis model: one [`Engine`] shared by every connection,
//! served over turmoil's simulated TCP (the simulator) or tokio's real TCP
//! (`locksim serve-model`, the differential tests).
//!
//! Determinism: the connection loop uses `select! { biased; ... }`; time comes only
//! from a [`ServerClock`] (the simulator passes the server host's clock, never
//! [`SystemClock`]); the engine lock is a `std::sync::Mutex` held only around
//! synchronous engine calls, never across an `.await`.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::engine::{Engine, Session};
use super::reply::Reply;
use super::resp::{self, Parsed};

/// The server host's clock, as unix microseconds.
pub trait ServerClock: Send + Sync {
    /// Now, in unix microseconds.
    fn now_us(&self) -> u64;
}

/// The machine's real clock, for `locksim serve-model` and tests against real time.
/// Never used by the simulator.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl ServerClock for SystemClock {
    fn now_us(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that always reads the same instant: for tests.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub u64);

impl ServerClock for FixedClock {
    fn now_us(&self) -> u64 {
        self.0
    }
}

type PushSenders = BTreeMap<u64, UnboundedSender<Reply>>;

/// What the server layer needs from a command engine. [`Engine`] is the one real
/// implementation; the trait exists so the connection loop can be tested with a tiny
/// fake engine.
pub trait CommandEngine: Send + 'static {
    /// See [`Engine::connect`].
    fn connect(&mut self, peer: String) -> Session;
    /// See [`Engine::disconnect`].
    fn disconnect(&mut self, session: &Session);
    /// See [`Engine::execute`].
    fn execute(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply;
    /// See [`Engine::active_expire`].
    fn active_expire(&mut self, now_us: u64) -> usize;
    /// See [`Engine::take_pushes`].
    fn take_pushes(&mut self) -> Vec<(u64, Reply)>;
    /// See [`Engine::serve_waiters`].
    fn serve_waiters(&mut self, _now_us: u64) {}
    /// See [`Engine::next_wait_deadline`].
    fn next_wait_deadline(&self) -> Option<u64> {
        None
    }
}

impl CommandEngine for Engine {
    fn connect(&mut self, peer: String) -> Session {
        Engine::connect(self, peer)
    }
    fn disconnect(&mut self, session: &Session) {
        Engine::disconnect(self, session)
    }
    fn execute(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        Engine::execute(self, session, argv, now_us)
    }
    fn active_expire(&mut self, now_us: u64) -> usize {
        Engine::active_expire(self, now_us)
    }
    fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        Engine::take_pushes(self)
    }
    fn serve_waiters(&mut self, now_us: u64) {
        Engine::serve_waiters(self, now_us)
    }
    fn next_wait_deadline(&self) -> Option<u64> {
        Engine::next_wait_deadline(self)
    }
}

/// One model server: the engine, the clock it reads, and a channel per connection for
/// pub/sub messages. Cheap to clone (all shared).
pub struct SharedEngine<E = Engine> {
    engine: Arc<Mutex<E>>,
    pushes: Arc<Mutex<PushSenders>>,
    clock: Arc<dyn ServerClock>,
}

impl<E> Clone for SharedEngine<E> {
    fn clone(&self) -> Self {
        Self {
            engine: self.engine.clone(),
            pushes: self.pushes.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<E> std::fmt::Debug for SharedEngine<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedEngine").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another connection's engine call must not take the server down with
    // a poisoned lock: the panic itself already fails the test or run.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<E: CommandEngine> SharedEngine<E> {
    /// Wraps `engine`, read at `clock`.
    pub fn new(engine: E, clock: Arc<dyn ServerClock>) -> Self {
        Self {
            engine: Arc::new(Mutex::new(engine)),
            pushes: Arc::new(Mutex::new(BTreeMap::new())),
            clock,
        }
    }

    /// The clock's reading now.
    pub fn now_us(&self) -> u64 {
        self.clock.now_us()
    }

    /// Runs `f` with the engine locked (synchronously: no `.await` can happen inside).
    pub fn with_engine<R>(&self, f: impl FnOnce(&mut E) -> R) -> R {
        f(&mut lock(&self.engine))
    }

    /// Registers a new connection from `peer`: its session and the receiver of the
    /// pushes addressed to it.
    pub fn connect(&self, peer: String) -> (Session, UnboundedReceiver<Reply>) {
        let session = self.with_engine(|e| CommandEngine::connect(e, peer));
        let (tx, rx) = unbounded_channel();
        lock(&self.pushes).insert(session.id, tx);
        (session, rx)
    }

    /// Forgets a closed connection.
    pub fn disconnect(&self, session: &Session) {
        lock(&self.pushes).remove(&session.id);
        self.with_engine(|e| e.disconnect(session));
    }

    /// Executes one command at the clock's current reading, then forwards the pushes
    /// it produced to their connections (in the engine's delivery order).
    pub fn execute(&self, session: &mut Session, argv: &[Vec<u8>]) -> Reply {
        let now = self.clock.now_us();
        let (reply, pushes) = self.with_engine(|e| {
            let reply = e.execute(session, argv, now);
            (reply, e.take_pushes())
        });
        self.forward(pushes);
        reply
    }

    /// One active-expiry cycle at the clock's current reading; returns how many keys
    /// it removed.
    pub fn active_expire(&self) -> usize {
        let now = self.clock.now_us();
        let (n, pushes) = self.with_engine(|e| (e.active_expire(now), e.take_pushes()));
        self.forward(pushes);
        n
    }

    /// Answers the blocked `WAIT`s whose time is up; returns how long (server clock)
    /// until the next one is, if any waits.
    pub fn serve_waiters(&self) -> Option<Duration> {
        let now = self.clock.now_us();
        let (next, pushes) = self.with_engine(|e| {
            e.serve_waiters(now);
            (e.next_wait_deadline(), e.take_pushes())
        });
        self.forward(pushes);
        next.map(|d| Duration::from_micros(d.saturating_sub(now).max(1_000)))
    }

    /// Runs `f` on the engine at the clock's reading, then forwards the pushes it
    /// produced (replication stream bytes, answered `WAIT`s).
    pub fn with_engine_at<R>(&self, f: impl FnOnce(&mut E, u64) -> R) -> R {
        let now = self.clock.now_us();
        let (r, pushes) = self.with_engine(|e| {
            let r = f(e, now);
            (r, e.take_pushes())
        });
        self.forward(pushes);
        r
    }

    fn forward(&self, pushes: Vec<(u64, Reply)>) {
        if pushes.is_empty() {
            return;
        }
        let senders = lock(&self.pushes);
        for (id, push) in pushes {
            if let Some(tx) = senders.get(&id) {
                // The receiver may be closing; a lost push to a closing connection is
                // what Redis does too.
                let _ = tx.send(push);
            }
        }
    }
}

const READ_CHUNK: usize = 16 * 1024;

/// Serves one connection until the peer closes it, a protocol error, `QUIT`, or an I/O
/// error. Always calls the engine's `disconnect` at the end.
pub async fn serve_connection<E, S>(shared: SharedEngine<E>, stream: S, peer: String)
where
    E: CommandEngine,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut session, mut pushes) = shared.connect(peer);
    let _ = connection_loop(&shared, &mut session, &mut pushes, stream).await;
    shared.disconnect(&session);
}

async fn connection_loop<E, S>(
    shared: &SharedEngine<E>,
    session: &mut Session,
    pushes: &mut UnboundedReceiver<Reply>,
    mut stream: S,
) -> io::Result<()>
where
    E: CommandEngine,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut inbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        // Requests first, then pushes: a reply and the pushes its command caused are
        // written in the order the engine produced them.
        let mut out = Vec::new();
        let mut close = false;
        let mut used = 0;
        while !session.blocked {
            match resp::parse_request(&inbuf[used..]) {
                Parsed::Incomplete => break,
                Parsed::Complete(argv, n) => {
                    used += n;
                    if argv.is_empty() {
                        continue;
                    }
                    let reply = shared.execute(session, &argv);
                    resp::encode_into(&reply, session.protocol, &mut out);
                    // Pushes caused by this very command (e.g. a PUBLISH to a channel
                    // this connection subscribes to) follow its reply.
                    while let Ok(push) = pushes.try_recv() {
                        close |= accept_push(session, &push);
                        resp::encode_into(&push, session.protocol, &mut out);
                    }
                    if session.close_after_reply {
                        close = true;
                        break;
                    }
                }
                Parsed::ProtocolError(text) => {
                    resp::encode_into(&Reply::Error(text), session.protocol, &mut out);
                    close = true;
                    break;
                }
            }
        }
        inbuf.drain(..used);
        if !out.is_empty() {
            stream.write_all(&out).await?;
            stream.flush().await?;
        }
        if close {
            let _ = stream.shutdown().await;
            return Ok(());
        }
        // A client blocked in WAIT wakes up when its timeout passes.
        let wait_timer = async {
            if !session.blocked {
                return std::future::pending::<()>().await;
            }
            match shared.serve_waiters() {
                Some(d) => turmoil::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            push = pushes.recv() => {
                let Some(push) = push else { return Ok(()) };
                let mut close = accept_push(session, &push);
                let mut out = resp::encode(&push, session.protocol);
                while let Ok(push) = pushes.try_recv() {
                    close |= accept_push(session, &push);
                    resp::encode_into(&push, session.protocol, &mut out);
                }
                stream.write_all(&out).await?;
                stream.flush().await?;
                if close {
                    let _ = stream.shutdown().await;
                    return Ok(());
                }
            }
            () = wait_timer => {
                shared.serve_waiters();
            }
            read = stream.read(&mut chunk) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                inbuf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Notes what a push means for the connection: the reply a blocked `WAIT` was waiting
/// for ends the block; [`Reply::Close`] closes the connection (returns true).
fn accept_push(session: &mut Session, push: &Reply) -> bool {
    match push {
        Reply::Close => true,
        Reply::Push(_) | Reply::Raw(_) => false,
        _ => {
            session.blocked = false;
            false
        }
    }
}

/// Accepts connections on a turmoil listener forever, one task per connection. The
/// peer name is the client's turmoil host name (or its address if it has none).
pub async fn serve_turmoil<E: CommandEngine>(
    listener: turmoil::net::TcpListener,
    shared: SharedEngine<E>,
) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            continue;
        };
        let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
        tokio::spawn(serve_connection(shared.clone(), stream, peer));
    }
}

/// Accepts connections on a real tokio listener forever, one task per connection. The
/// peer name is the client's socket address.
pub async fn serve_tokio<E: CommandEngine>(
    listener: tokio::net::TcpListener,
    shared: SharedEngine<E>,
) {
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

/// Redis's active expiry cycle: every `period` (Redis: 100 ms, `hz 10`) of tokio
/// time, which is simulated time under turmoil.
pub async fn active_expiry_loop<E: CommandEngine>(shared: SharedEngine<E>, period: Duration) {
    loop {
        turmoil::time::sleep(period).await;
        shared.active_expire();
    }
}

/// Redis's default active-expiry period.
pub const ACTIVE_EXPIRY_PERIOD: Duration = Duration::from_millis(100);

/// Binds `addr` and serves a fresh model on it with the real clock until the process
/// ends (`locksim serve-model`). Runs its own multi-threaded tokio runtime.
pub fn serve_model(addr: SocketAddr) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "locksim model of Redis listening on {}",
            listener.local_addr()?
        );
        let port = listener.local_addr()?.port();
        let mut engine = Engine::new();
        engine.set_tcp_port(port);
        let shared = SharedEngine::new(engine, Arc::new(SystemClock));
        tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
        spawn_replication_cron(&shared, port);
        serve_tokio(listener, shared).await;
        Ok(())
    })
}

/// Runs the replication cron of a model served over real TCP (`REPLICAOF` dials the
/// master with tokio).
fn spawn_replication_cron(shared: &SharedEngine, port: u16) {
    let dial = |host: String, port: u16| async move {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        let _ = stream.set_nodelay(true);
        Ok((stream, format!("{host}:{port}")))
    };
    tokio::spawn(super::link::replication_cron(
        shared.clone(),
        port,
        dial,
        |task| {
            tokio::spawn(task);
        },
    ));
}

/// Starts a model server with the real clock on a free loopback port inside the
/// current tokio runtime, following the master at `master` if given (over real TCP,
/// with the replication cron running); returns its address. For tests and tools.
/// Without `active_expiry` no expiry cycle runs (keys expire only when touched).
pub async fn spawn_tokio_model_with(
    master: Option<SocketAddr>,
    active_expiry: bool,
) -> io::Result<(SocketAddr, SharedEngine)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let mut engine = Engine::new();
    engine.set_tcp_port(addr.port());
    if let Some(m) = master {
        engine.follow(m.ip().to_string(), m.port(), SystemClock.now_us());
    }
    let shared = SharedEngine::new(engine, Arc::new(SystemClock));
    if active_expiry {
        tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
    }
    spawn_replication_cron(&shared, addr.port());
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}

/// Starts a model server with the real clock on a free loopback port inside the
/// current tokio runtime; returns its address. For tests and tools.
pub async fn spawn_tokio_model() -> io::Result<(SocketAddr, SharedEngine)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let shared = SharedEngine::new(Engine::new(), Arc::new(SystemClock));
    tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}
