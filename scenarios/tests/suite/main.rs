//! The scenarios crate's suites: the catalog's scenarios, checkers, sweeps and their
//! verdicts, one module per subject, in one test binary (the simulator, the clients
//! and the checkers are linked once, not once per file). `cargo test -p scenarios
//! --test suite <module>` runs one subject.

/// mimalloc, as the `locksim` binary allocates (`reports/src/main.rs`): the golden and
/// stepping suites run every cell of the catalog, and glibc's malloc and free were a
/// sixth of a world's instructions. No history depends on the allocator (the golden
/// file pins them).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

mod adaptive;
mod broken;
mod catalog_unit;
mod checkers;
mod checkers_on_runs;
mod checkers_reentrancy;
mod client_clocks;
mod client_crash;
mod determinism;
mod etcd;
mod every_system;
mod explore;
mod failover;
mod gc_pause;
mod golden_histories;
mod mongo;
mod mysql;
mod network_delay;
mod no_faults;
mod node_redlock_using;
mod outcomes;
mod params_unit;
mod planfile_unit;
mod profiles;
mod read_write;
mod redisson_and_fencing;
mod redlock;
mod renewal;
mod replication;
mod runaway;
mod rw_exclusion_unit;
mod segments;
mod server_faults;
mod shrink;
mod slow_work;
mod stats;
mod stepping;
mod zookeeper;
