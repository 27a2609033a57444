//! The systems the real runner knows, one module each, and the one list of them (the
//! only place outside a system's module that names systems; only `servers.rs`, which
//! starts them, reads it). A system the list does not name stays model-only, and the
//! runner says so.

mod mariadb;
mod mongo;
mod redis;
mod zookeeper;

use crate::real::system::RealSystem;

/// Every system with a real side, in the order a world's systems are started.
pub(crate) static SYSTEMS: &[&dyn RealSystem] = &[
    &redis::Redis,
    &zookeeper::ZooKeeper,
    &mariadb::MariaDb,
    &mongo::Mongo,
];

/// Why a clock fault on a server whose clock the real run does not move is refused.
pub(crate) const SERVER_CLOCKS: &str = "clock faults on Sentinels, ZooKeeper servers or MariaDB: \
    a real run moves a Redis server's wall clock (locksim's clock shim, preloaded) and a \
    client's (its process's Deps clock); these servers' clocks are not moved yet";
