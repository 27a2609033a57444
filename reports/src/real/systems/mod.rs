//! The systems the real runner knows, one module each, and the one list of them. A
//! system the list does not name stays model-only, and the runner says so.

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
