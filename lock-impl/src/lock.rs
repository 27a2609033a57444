//! The lock trait every design implements, and the values it trades in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{Clock, Conn, Entropy, LockError};
use async_trait::async_trait;

/// A boxed task a design runs in the background (a watchdog).
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Starts background tasks for a design.
///
/// A design never calls `tokio::spawn` itself: in the simulator a client's background
/// tasks must freeze with it during a stop-the-world pause and die with it in a crash,
/// which only the simulator's spawner can arrange.
pub trait Spawner: Send + Sync + 'static {
    /// Runs `task` in the background.
    fn spawn(&self, task: Task);
}

/// `tokio::spawn`: the production spawner.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioSpawner;

impl Spawner for TokioSpawner {
    fn spawn(&self, task: Task) {
        tokio::spawn(task);
    }
}

/// Opens a dedicated pub/sub connection (Redis needs one per subscriber: a subscribed
/// connection can run nothing else).
pub trait PubSubConnector: Send + Sync + 'static {
    /// A new subscriber connection.
    fn connect(
        &self,
    ) -> Pin<Box<dyn Future<Output = redis::RedisResult<redis::aio::PubSub>> + Send + '_>>;
}

/// What a design needs from its environment, passed in rather than reached for, so the
/// simulator can substitute its own connection, clock, entropy and task spawner.
#[derive(Clone)]
pub struct Deps {
    /// A connection to the Redis server holding the lock. It reconnects by itself: a
    /// broken connection fails the command in flight and the next command dials again.
    pub conn: Conn,
    /// One connection per independent Redis server, in a fixed order, for designs that
    /// lock on several servers at once (Redlock). Single-server worlds give `[conn]`;
    /// single-server designs read `conn` and never look here.
    pub servers: Vec<Conn>,
    /// The client's monotonic clock.
    pub clock: Arc<dyn Clock>,
    /// Owner values and jitter.
    pub entropy: Arc<dyn Entropy>,
    /// Background tasks (watchdogs).
    pub spawner: Arc<dyn Spawner>,
    /// Subscriber connections, for designs whose waiters listen for unlock messages;
    /// `None` makes such designs poll instead.
    pub pubsub: Option<Arc<dyn PubSubConnector>>,
    /// Told what a design does on its own between the calls it answers (a watchdog's
    /// renewals); `None`: nobody listens.
    pub observer: Option<Arc<dyn Observer>>,
    /// Each other system's client-side handle, for the designs on that system (the
    /// ZooKeeper ensemble for `zk-curator`, the MySQL server for `mysql-unique-index`,
    /// the MongoDB replica set for `mongo-find-and-modify`, …), one slot per system:
    /// read with [`Deps::system`], set with [`Deps::with_system`]. A design whose
    /// system's handle is missing refuses to run with the error naming its system
    /// ([`LockError::NoZooKeeper`], [`LockError::NoMySql`], [`LockError::NoMongo`]).
    pub systems: SystemHandles,
    /// The world's clock scale ([`crate::scale`]): every client-library constant that
    /// competes with the lease (reconnect sleeps, retry pauses, resend intervals) is
    /// read through it, so a world that shrinks the lease shrinks them alike.
    /// Production: [`TimeScale::REAL`](crate::TimeScale::REAL).
    pub scale: crate::TimeScale,
}

/// What a design does on its own, between the calls it answers: a watchdog extends the
/// validity its holder believes in, and a test harness (or a service's metrics) wants
/// to know.
pub trait Observer: Send + Sync {
    /// A watchdog re-armed `key` for `owner`: the holder's validity now runs to
    /// `valid_until` on its clock ([`Clock::now`] when the renewal was sent, plus the
    /// lease), as [`Guard::valid_until`] does for the acquisition.
    fn renewed(&self, key: &str, owner: &str, valid_until: Duration);
}

impl Deps {
    /// Dependencies over Redis connections (`conn`, and `servers` for the designs that
    /// lock on several masters) with `clock`, `entropy` and `spawner`, and nothing
    /// else: no subscriber connections, no observer, no server of another system, at
    /// real time. The one place that lists every field: set the others with struct
    /// update syntax (`Deps { observer: Some(..), ..Deps::new(..) }`), and a system's
    /// handle with [`Deps::with_system`].
    pub fn new(
        conn: Conn,
        servers: Vec<Conn>,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        spawner: Arc<dyn Spawner>,
    ) -> Deps {
        Deps {
            conn,
            servers,
            clock,
            entropy,
            spawner,
            pubsub: None,
            observer: None,
            systems: SystemHandles::default(),
            scale: crate::TimeScale::REAL,
        }
    }

    /// These dependencies with `handle` in its system's slot (replacing any handle of
    /// that system already there).
    pub fn with_system<T: SystemHandle>(mut self, handle: T) -> Deps {
        self.systems.insert(handle);
        self
    }

    /// The handle of `T`'s system, if the world gave one.
    pub fn system<T: SystemHandle>(&self) -> Option<&T> {
        self.systems.get::<T>()
    }

    /// The handle of `T`'s system, or the error that names `design` and the system
    /// ([`LockError::NoSystem`]): how a design of a new system asks for its servers.
    pub fn require<T: SystemHandle>(&self, design: &'static str) -> Result<&T, LockError> {
        self.system::<T>().ok_or(LockError::NoSystem {
            design,
            system: T::BACKEND.name(),
        })
    }
}

/// A system's client-side handle in [`Deps`]: what a design on that system needs to
/// reach its servers (addresses, dialer, timeouts). Each system's module implements it
/// for its one handle type, naming its [`crate::Backend`].
pub trait SystemHandle: std::any::Any + Clone + Send + Sync {
    /// The system whose slot the handle fills.
    const BACKEND: crate::Backend;
}

/// One slot per lock-server system other than Redis (whose connections are
/// [`Deps::conn`] and [`Deps::servers`]): the handle a world or a service gives its
/// clients for that system, typed by [`SystemHandle`], so adding a system adds no
/// field here.
#[derive(Clone, Default)]
pub struct SystemHandles {
    slots: std::collections::BTreeMap<crate::Backend, Arc<dyn std::any::Any + Send + Sync>>,
}

impl SystemHandles {
    /// The handle of `T`'s system, if one was given.
    pub fn get<T: SystemHandle>(&self) -> Option<&T> {
        self.slots.get(&T::BACKEND)?.downcast_ref::<T>()
    }

    /// Puts `handle` in its system's slot (replacing any handle of that system).
    pub fn insert<T: SystemHandle>(&mut self, handle: T) {
        self.slots.insert(T::BACKEND, Arc::new(handle));
    }

    /// Empties `T`'s system's slot, returning its handle if there was one.
    pub fn remove<T: SystemHandle>(&mut self) -> Option<T> {
        let any = self.slots.remove(&T::BACKEND)?;
        any.downcast_ref::<T>().cloned()
    }

    /// The systems with a handle, in the systems table's order.
    pub fn backends(&self) -> impl Iterator<Item = crate::Backend> + '_ {
        self.slots.keys().copied()
    }
}

impl std::fmt::Debug for SystemHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.backends().map(crate::Backend::name))
            .finish()
    }
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").finish_non_exhaustive()
    }
}

/// How long `acquire` may keep trying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// One attempt; report `NotAcquired` if the lock is held.
    TryOnce,
    /// Retry with jittered backoff until `budget_ms` has passed on the client's clock.
    Retry {
        /// Total time allowed for acquiring, in milliseconds.
        budget_ms: u64,
        /// Smallest pause between attempts.
        backoff_min_ms: u64,
        /// Largest pause between attempts (the pause doubles up to this).
        backoff_max_ms: u64,
    },
}

/// Validated arguments of an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireOptions {
    /// The lease: how long the lock lives on the server unless released or extended.
    pub lease_ms: u64,
    /// The wait budget.
    pub wait: Wait,
}

impl AcquireOptions {
    /// Default smallest retry pause.
    pub const BACKOFF_MIN_MS: u64 = 5;
    /// Default largest retry pause.
    pub const BACKOFF_MAX_MS: u64 = 100;

    /// Options from user-supplied numbers: `lease_ms > 0`; `wait_ms == 0` means try once,
    /// `wait_ms > 0` retries with the default backoff until that budget is spent.
    ///
    /// Signed inputs on purpose: configuration files and command lines can hold negative
    /// numbers, and they deserve an error that names them rather than a wrap-around.
    pub fn new(lease_ms: i64, wait_ms: i64) -> Result<Self, LockError> {
        if lease_ms <= 0 {
            return Err(LockError::InvalidLease { lease_ms });
        }
        let wait = match wait_ms {
            0 => Wait::TryOnce,
            w if w > 0 => Wait::Retry {
                budget_ms: w as u64,
                backoff_min_ms: Self::BACKOFF_MIN_MS,
                backoff_max_ms: Self::BACKOFF_MAX_MS,
            },
            w => return Err(LockError::InvalidWait { wait_ms: w }),
        };
        Ok(Self {
            lease_ms: lease_ms as u64,
            wait,
        })
    }

    /// Checks options built by hand (the fields are public).
    pub fn validate(&self) -> Result<(), LockError> {
        if self.lease_ms == 0 || self.lease_ms > i64::MAX as u64 {
            return Err(LockError::InvalidLease {
                lease_ms: self.lease_ms as i64,
            });
        }
        Ok(())
    }
}

/// Proof of an acquisition, as the client believes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The design that issued this guard.
    pub design: String,
    /// The locked key.
    pub key: String,
    /// The unique value this acquisition stored (the owner value).
    pub owner: String,
    /// Client clock when the successful attempt was sent.
    pub acquired_at: Duration,
    /// Client clock until which the client believes the lock is its own: the attempt's
    /// send time plus the lease, as in Redlock, because the server started the lease
    /// some time after the send. `None` for a lock that never expires.
    pub valid_until: Option<Duration>,
    /// A fencing token, for designs that issue one.
    pub token: Option<u64>,
}

impl Guard {
    /// Validity the client believes it still has at client time `now`: `None` if the
    /// lock never expires, zero once it has run out.
    pub fn remaining(&self, now: Duration) -> Option<Duration> {
        self.valid_until.map(|until| until.saturating_sub(now))
    }
}

/// Outcome of an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// The lock is ours.
    Acquired(Guard),
    /// The lock is held by someone else and the wait budget is spent.
    NotAcquired,
    /// The outcome is unknown (a reply timed out or the connection dropped): the lock
    /// may be ours. A Jepsen `info` outcome.
    Unknown(String),
}

/// Outcome of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// The release deleted the lock, and, as far as the design can tell, it was ours.
    /// (Designs that `DEL` blindly report this even when the key held another owner's
    /// value: they cannot know. Only the server's record can tell.)
    Removed,
    /// There was no lock to delete (it had expired, or was deleted already).
    NotFound,
    /// The lock was held by another owner and was left in place.
    HeldByOther,
    /// Nothing was deleted, and the design's reply cannot say whether the lock was
    /// absent or someone else's (the Lua compare-and-delete returns `0` for both).
    NotRemoved,
    /// A reentrant lock's hold count went down but the server's is still above zero:
    /// the lock stays held by this owner.
    StillHeld {
        /// The holder's own count left. 0: the holder is done, yet the server still
        /// holds the lock under its name (its count went astray, e.g. an unlock whose
        /// reply was lost, then a re-entry); the lock is freed only by its expiry.
        count: u64,
    },
    /// The outcome is unknown (a reply timed out or the connection dropped).
    Unknown(String),
}

/// A lock design: how to acquire and release one lock key on Redis.
///
/// Implementations hold their [`Deps`]. `acquire` honours the wait budget through
/// [`crate::retry_acquire`], which designs may use; `release` takes the guard that
/// `acquire` returned. Implement this for your own lock to run every locksim scenario
/// on it.
///
/// # Your own design
///
/// Checking *your* lock is the point. Implement [`LockDesign`]; [`retry_acquire`]
/// gives you the wait-budget loop. `examples/custom_design.rs` is a complete one (a
/// `SET NX EX` lock with a `GETDEL` release), and the real-Redis test suite runs the
/// same conformance bodies on it as on the built-in designs:
///
/// ```no_run
/// use async_trait::async_trait;
/// use lock_impl::{Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError,
///                 Release, retry_acquire};
///
/// struct MyLock { deps: Deps }
///
/// #[async_trait]
/// impl LockDesign for MyLock {
///     fn name(&self) -> &str { "my-lock" }
///
///     async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
///         let deps = &self.deps;
///         retry_acquire(deps, key, options, || async move {
///             let owner = deps.entropy.owner_value();
///             let sent_at = deps.clock.now();
///             let set: Option<String> = redis::cmd("SET").arg(key).arg(&owner)
///                 .arg("NX").arg("PX").arg(options.lease_ms)
///                 .query_async(&mut deps.conn.clone()).await
///                 .map_err(|source| LockError::Redis { command: "SET", source })?;
///             Ok(match set {
///                 Some(_) => Attempt::Acquired(Guard {
///                     design: "my-lock".into(), key: key.into(), owner,
///                     acquired_at: sent_at,
///                     valid_until: Some(sent_at + std::time::Duration::from_millis(options.lease_ms)),
///                     token: None,
///                 }),
///                 None => Attempt::Held,
///             })
///         }).await
///     }
///
///     async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
///         let n: i64 = redis::cmd("DEL").arg(&guard.key)
///             .query_async(&mut self.deps.conn.clone()).await
///             .map_err(|source| LockError::Redis { command: "DEL", source })?;
///         Ok(if n == 1 { Release::Removed } else { Release::NotFound })
///     }
/// }
/// ```
#[async_trait]
pub trait LockDesign: Send + Sync {
    /// The user-facing identifier, e.g. `set-nx-px-lua`.
    fn name(&self) -> &str;

    /// Acquire `key` with the given lease, within the wait budget.
    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError>;

    /// Release the lock that `guard` stands for.
    async fn release(&self, guard: &Guard) -> Result<Release, LockError>;

    /// Acquire `key` in shared (read) mode: holders in read mode share the lock with
    /// each other and exclude [`Self::acquire`]'s holders, which are exclusive.
    ///
    /// A read-write lock (`redisson-rw`) implements both sides: `acquire` takes its
    /// write lock and this its read lock, and `release` tells them apart by the guard.
    /// The mode is a method rather than a field of [`AcquireOptions`] so that the
    /// designs with one mode, and every caller that builds options by hand, stay as
    /// they are; those designs refuse a read acquisition with
    /// [`LockError::NoReadMode`], before sending anything.
    async fn acquire_read(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let _ = (key, options);
        Err(LockError::NoReadMode {
            design: self.name().to_string(),
        })
    }

    /// Whether [`Self::acquire_read`] takes a shared lock (a read-write lock), rather
    /// than refusing. A service whose lock has one mode takes that lock for its reads
    /// too, and so does locksim's read/write workload.
    fn has_read_mode(&self) -> bool {
        false
    }

    /// How long, at most, a waiter of this design may take to take a lock that was
    /// freed, when nothing fails: its longest pause between attempts, or between a
    /// lost connection and the next try (a reconnect's sleeps, a retry policy's longest
    /// backoff), at the world's scale ([`Deps::scale`]). The checkers' liveness bound
    /// is the lease plus the larger of this and the world's slack, so a design whose
    /// own retry schedule is slow is not called stuck for following it. Default: zero
    /// (the world's slack alone).
    fn retry_horizon(&self) -> Duration {
        Duration::ZERO
    }
}

/// One attempt's outcome, for [`retry_acquire`].
pub enum Attempt {
    /// Acquired: the guard.
    Acquired(Guard),
    /// Held by someone else.
    Held,
    /// Outcome unknown.
    Unknown(String),
}

/// Runs `attempt` once, or again after jittered, doubling backoff until the wait budget
/// is spent on `deps.clock`. An unknown outcome ends the loop at once: a retry could
/// not tell a lock we already hold from someone else's.
pub async fn retry_acquire<F, Fut>(
    deps: &Deps,
    key: &str,
    options: AcquireOptions,
    mut attempt: F,
) -> Result<Acquire, LockError>
where
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt, LockError>> + Send,
{
    if key.is_empty() {
        return Err(LockError::EmptyKey);
    }
    options.validate()?;
    let start = deps.clock.now();
    let mut backoff_ms = match options.wait {
        Wait::TryOnce => 0,
        Wait::Retry { backoff_min_ms, .. } => backoff_min_ms.max(1),
    };
    loop {
        match attempt().await? {
            Attempt::Acquired(guard) => return Ok(Acquire::Acquired(guard)),
            Attempt::Unknown(why) => return Ok(Acquire::Unknown(why)),
            Attempt::Held => {}
        }
        let Wait::Retry {
            budget_ms,
            backoff_max_ms,
            ..
        } = options.wait
        else {
            return Ok(Acquire::NotAcquired);
        };
        let elapsed = deps.clock.now().saturating_sub(start);
        let budget = Duration::from_millis(budget_ms);
        if elapsed >= budget {
            return Ok(Acquire::NotAcquired);
        }
        // Full jitter in [backoff/2, backoff], capped by what is left of the budget.
        let pause_ms = backoff_ms / 2 + deps.entropy.below(backoff_ms / 2 + 1);
        let pause = Duration::from_millis(pause_ms.max(1)).min(budget - elapsed);
        deps.clock.sleep(pause).await;
        backoff_ms = (backoff_ms * 2).min(backoff_max_ms.max(1));
    }
}

/// Maps a Redis error from `command` to an outcome or an error: a timeout or a broken
/// connection leaves the outcome unknown; anything the server said is an error.
pub(crate) fn classify(command: &'static str, err: redis::RedisError) -> Result<String, LockError> {
    if err.is_timeout() || err.is_io_error() || err.is_connection_dropped() {
        Ok(format!("{command}: {err}"))
    } else {
        Err(LockError::Redis {
            command,
            source: err,
        })
    }
}
