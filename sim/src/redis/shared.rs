//! One model server's shared state, which the connection loop (`server.rs`) and a
//! replica's link to its master (`link.rs`) both drive: the engine behind a lock, the
//! host's clock, and a channel per connection for pub/sub messages.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::engine::{Engine, Session};
use super::reply::Reply;

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
