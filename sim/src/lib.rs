//! The deterministic world: a Redis 7 model, hosts with their own clocks, faults, and
//! the history every run records.

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
pub mod storage;
pub mod system;
pub mod world;
pub mod zk;
