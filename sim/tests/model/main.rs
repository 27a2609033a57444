//! The simulator's own tests, against its models only (no real server): one test
//! binary, so that the code they share (the models, turmoil, the `redis` crate's
//! client) is compiled and linked once, not once per file. Each module is one subject.

mod conformance_model;
mod engine;
mod etcd_model;
mod every_system;
mod host_clock;
mod mongo_model;
mod mysql_model;
mod replication_sim;
mod sentinel_sim;
mod server_faults;
mod server_loop;
mod turmoil_redis_crate;
mod watchdog_freeze;
mod zk_ensemble;
mod zk_model;
