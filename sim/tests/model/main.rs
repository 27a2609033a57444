//! The simulator's own tests, against its models only (no real server): one test
//! binary, so that the code they share (the models, turmoil, the `redis` crate's
//! client) is compiled and linked once, not once per file. Each module is one subject.
//! The `*_unit` modules are `sim`'s own unit tests, moved here from its modules so that
//! a test build does not compile `sim` a second time as its own test harness: they go
//! through its public API (the few items they need beyond it are `#[doc(hidden)]`).

mod clock_unit;
mod conformance_model;
mod engine;
mod etcd_model;
mod every_system;
mod host_clock;
mod lua_helpers_unit;
mod mongo_member_unit;
mod mongo_model;
mod mongo_query_unit;
mod mysql_model;
mod mysql_server_unit;
mod mysql_sql_unit;
mod persistence_unit;
mod recorder_unit;
mod replication_sim;
mod replication_unit;
mod resp_unit;
mod sentinel_sim;
mod server_faults;
mod server_loop;
mod turmoil_redis_crate;
mod watchdog_freeze;
mod world_config_unit;
mod zk_ensemble;
mod zk_java_unit;
mod zk_model;
mod zk_tree_unit;
