//! Lock designs as a library: the code a service ships, and the code locksim runs
//! inside its simulator, unchanged.
//!
//! - Every design implements [`LockDesign`] and takes its environment as [`Deps`]: a
//!   Redis connection ([`Conn`]), each other system's handle, a [`Clock`], an
//!   [`Entropy`] and a [`Spawner`]. Nothing here reads the machine's clock or
//!   randomness directly, so the simulator can substitute its own; production code
//!   uses [`production_deps`] and the systems' `production_*_deps`.
//! - The built-in designs are [`DESIGNS`], one [`DesignInfo`] each, built by name with
//!   [`build`]; docs/designs.md describes every one. Your own design implements
//!   [`LockDesign`] (its documentation has a complete example).
//! - Each lock-server system is one module (`redis`, [`zk`], [`mysql`], [`mongo`],
//!   [`etcd`]) holding its client, its record ([`BackendInfo`]) and its `*_deps`
//!   functions; the `backends!` list below is the one place that names them all.

#![warn(missing_docs)]
// No function over 150 lines (the limit is clippy.toml's): a reader holds one whole.
#![warn(clippy::too_many_lines)]

mod clock;
pub mod designs;
mod entropy;
mod error;
pub mod etcd;
mod lock;
pub mod mongo;
pub mod mysql;
mod redis;
pub mod scale;
mod system;
#[cfg(feature = "testing")]
pub mod testing;
pub mod zk;

pub use self::redis::{
    AddrConnector, ClientAddrConnector, ClientConnector, Conn, Connector, ConnectorPubSub, Dial,
    ReconnectPolicy, SentinelConnector, connect, production_deps, production_deps_multi,
};
pub use clock::{Clock, Sleep, TokioClock};
pub use designs::registry::{
    DESIGNS, DesignInfo, REDLOCK_MASTERS, build, design, design_names, designs_on,
};
pub use entropy::{Entropy, OsEntropy, SeededEntropy};
pub use error::LockError;
pub use etcd::{etcd_deps, production_etcd_deps};
pub use lock::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, Observer, PubSubConnector, Release,
    Spawner, SystemHandle, SystemHandles, Task, TokioSpawner, Wait, retry_acquire,
};
pub use mongo::{mongo_deps, production_mongo_deps};
pub use mysql::{mysql_deps, production_mysql_deps};
pub use scale::TimeScale;
pub use system::BackendInfo;
pub use zk::{production_zk_deps, zookeeper_deps};

// The systems, one row each (`Variant => its record`), in the order reports list them
// and worlds build them: this defines [`Backend`], [`Backend::ALL`] and
// [`Backend::info`].
system::backends! {
    Redis => self::redis::SYSTEM,
    ZooKeeper => zk::SYSTEM,
    MySql => mysql::SYSTEM,
    MongoDb => mongo::SYSTEM,
    Etcd => etcd::SYSTEM,
}
