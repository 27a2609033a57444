//! The deterministic world: a Redis 7 model, hosts with their own clocks, faults, and
//! the history every run records.

pub mod faults;
pub mod history;
pub mod redis;
