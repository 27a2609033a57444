//! What every lock-server system shares: its record ([`BackendInfo`]), the
//! `backends!` macro that turns the one list of systems in `lib.rs` into [`Backend`],
//! and the dependencies of a design on a system other than Redis ([`system_deps`]):
//! its handle in [`Deps`], and a [`Deps::conn`] that reaches no Redis (its commands
//! fail, naming why).

use std::sync::Arc;

use crate::{
    Backend, Clock, Conn, Connector, Deps, Dial, Entropy, OsEntropy, ReconnectPolicy, Spawner,
    SystemHandle, TokioClock, TokioSpawner,
};

/// What a lock-server system says of itself, once: its name and its promise. Each
/// system's module holds its record (`redis::SYSTEM`, `zk::SYSTEM`, ...), and
/// [`Backend`] reads it; a new system is its modules plus its one row in the
/// `backends!` list of `lib.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendInfo {
    /// Its name in reports and messages.
    pub name: &'static str,
    /// What the system promises a lock, and what it does not, in a sentence (the
    /// report's legend and docs/designs.md's design table).
    pub promise: &'static str,
    /// The design the lock-service comparison "常见分布式锁方案对比" names for it
    /// (docs/designs.md, "Where the designs come from"; a comparison row of
    /// `scenarios::family`).
    pub seed_design: &'static str,
}

/// The systems table: one row per system, `Variant => its record`, in the order
/// reports list systems (and worlds build them). It defines [`Backend`], its
/// [`Backend::ALL`] and [`Backend::info`].
macro_rules! backends {
    ($($variant:ident => $info:path,)*) => {
        /// The system a design's lock lives on: it picks the world a design runs in and
        /// the scenarios whose faults make sense for it (`Scenario::applies_to`). What
        /// each says of itself is its [`BackendInfo`] ([`Backend::info`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Backend {
            $(
                #[doc = concat!("The system whose record is `", stringify!($info), "`.")]
                $variant,
            )*
        }

        impl Backend {
            /// Every system, in the table's order.
            pub const ALL: &'static [Backend] = &[$(Backend::$variant,)*];

            /// What the system says of itself.
            pub fn info(self) -> &'static $crate::BackendInfo {
                match self {
                    $(Backend::$variant => &$info,)*
                }
            }
        }
    };
}
pub(crate) use backends;

impl Backend {
    /// Its name in reports and messages.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// What the system promises a lock, and what it does not, in a sentence (the
    /// report's legend and docs/designs.md's design table).
    pub fn promise(self) -> &'static str {
        self.info().promise
    }
}

/// A connector for worlds without Redis (the ZooKeeper designs never use
/// [`Deps::conn`]): every dial fails, naming why.
struct NoRedis;

impl Connector for NoRedis {
    fn server(&self) -> &str {
        "no-redis"
    }

    fn connect(&self) -> Dial<'_, redis::aio::MultiplexedConnection> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "not connected",
                "this world has no Redis server".to_string(),
            )))
        })
    }

    fn pubsub(&self) -> Dial<'_, redis::aio::PubSub> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "not connected",
                "this world has no Redis server".to_string(),
            )))
        })
    }
}

/// Dependencies for a design on `handle`'s system: `clock`, `entropy` and `spawner` as
/// given, [`Deps::conn`] reaching no Redis (its commands fail), and `handle` as the one
/// system handle set. Each system's `*_deps` function is this with its handle's type.
pub(crate) fn system_deps<T: SystemHandle>(
    handle: T,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    let conn = Conn::new(Arc::new(NoRedis), clock.clone(), ReconnectPolicy::default());
    Deps::new(conn.clone(), vec![conn], clock, entropy, spawner).with_system(handle)
}

/// Production dependencies for a design on `handle`'s system: [`system_deps`] with
/// tokio's clock, OS randomness and `tokio::spawn`.
pub(crate) fn production_system_deps<T: SystemHandle>(handle: T) -> Deps {
    system_deps(
        handle,
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    )
}
