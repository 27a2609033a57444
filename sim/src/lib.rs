//! The deterministic world: models of the lock servers (Redis with Sentinel, ZooKeeper,
//! MariaDB, MongoDB, etcd), hosts with their own clocks, faults, and the history every
//! run records. The world reaches each system through one registry
//! (`world::registry`) and the traits of `world::system`.

// No function over 150 lines (the limit is clippy.toml's): a reader holds one whole.
#![warn(clippy::too_many_lines)]

pub mod clock;
pub mod etcd;
pub mod faults;
pub mod history;
pub mod mongo;
pub mod mysql;
pub mod net;
pub mod outcome;
pub mod pause;
pub mod recorder;
pub mod redis;
pub mod seed;
pub mod sentinel;
pub mod step;
pub mod storage;
pub mod system;
pub mod world;
pub mod zk;
