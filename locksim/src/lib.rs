//! Test your own Redis lock in `cargo test`: locksim runs your lock's real client code
//! in a deterministic simulated world (clients, Redis servers, the network, clocks),
//! injects the faults that break locks (stop-the-world pauses, crashes, delays,
//! partitions, failovers, clock jumps), records every operation and judges the
//! history. A failed assertion prints the evidence, the seed, a timeline and the
//! `locksim replay` / `shrink` commands that reproduce it against your design.
//!
//! This crate is the one dependency your tests need: the lock trait ([`LockDesign`],
//! [`Deps`]) and what a lock is written with ([`redis`], [`macro@async_trait`]), the test
//! API ([`check`]), the scenario [`catalog`], the [`checkers`] and their
//! [`Verdict`]s, plan files ([`PlanFile`]), proptest strategies ([`strategy`]), and
//! the `locksim` command over your designs ([`cli`]).
//!
//! # Test your own lock
//!
//! A lock takes everything from [`Deps`]: a reconnecting Redis connection, a clock, a
//! source of entropy (for owner values) and a task spawner. It never reads the
//! machine's clock or spawns tasks itself, so the simulator can pause or kill
//! everything it runs.
//!
//! ```
//! use std::time::Duration;
//! use locksim::{Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError,
//!               Release, async_trait, redis, retry_acquire};
//!
//! /// `SET key owner NX PX lease`; release by a compare-and-delete script.
//! pub struct MyLock { deps: Deps }
//!
//! impl MyLock {
//!     pub fn new(deps: Deps) -> Self { MyLock { deps } }
//! }
//!
//! #[async_trait]
//! impl LockDesign for MyLock {
//!     fn name(&self) -> &str { "my-lock" }
//!
//!     async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
//!         let deps = &self.deps;
//!         retry_acquire(deps, key, options, || async move {
//!             let owner = deps.entropy.owner_value();
//!             let sent_at = deps.clock.now();
//!             let set: Option<String> = redis::cmd("SET").arg(key).arg(&owner)
//!                 .arg("NX").arg("PX").arg(options.lease_ms)
//!                 .query_async(&mut deps.conn.clone()).await
//!                 .map_err(|source| LockError::Redis { command: "SET", source })?;
//!             Ok(match set {
//!                 None => Attempt::Held,
//!                 Some(_) => Attempt::Acquired(Guard {
//!                     design: "my-lock".into(), key: key.into(), owner,
//!                     acquired_at: sent_at,
//!                     valid_until: Some(sent_at + Duration::from_millis(options.lease_ms)),
//!                     token: None,
//!                 }),
//!             })
//!         }).await
//!     }
//!
//!     async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
//!         let removed: i64 = redis::Script::new(
//!             "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
//!         )
//!         .key(&guard.key).arg(&guard.owner)
//!         .invoke_async(&mut self.deps.conn.clone()).await
//!         .map_err(|source| LockError::Redis { command: "EVALSHA", source })?;
//!         Ok(if removed == 1 { Release::Removed } else { Release::NotFound })
//!     }
//! }
//!
//! // In tests/my_lock.rs, each of these is a #[test]:
//!
//! // Crashed holders: the lease frees the lock, nobody else's lock is touched.
//! locksim::check(MyLock::new).scenario("client-crash").seeds(0..2).assert_safe();
//!
//! // A pause past the lease gives two holders: a known failure, pinned, so a fix (or
//! // a scenario that stops provoking it) is noticed.
//! let run = locksim::check(MyLock::new).scenario("gc-pause").seeds(0..20).expect_unsafe();
//! assert!(run.verdict("mutual-exclusion").unwrap().is_invalid());
//! ```
//!
//! `locksim::check(MyLock::new)` registers the design as `my-lock` (the type's name,
//! see [`Design::of`]); name it yourself with [`Design::new`]. When an assertion fails,
//! the panic reads:
//!
//! ```text
//! locksim: my-lock under gc-pause, seeds 0..20: expected every run safe, but at seed 0 the run is unsafe (20 of 20 runs break it, rate > 86% at 95%: seeds 0, 1, 2, …)
//!   fault seen: client-6 paused at 1.233 s for 706 ms while holding lock:stock (owner=client-6-36-04eba00c), lease 200 ms
//!   mutual-exclusion: INVALID: client-6 and client-8 both believed they held lock lock:stock from 1.425 s to 1.449 s …
//!   lost-update: INVALID: client-6 wrote 99959 at 1.940 s based on a read of 99960, but the storage held 99944 …
//!   timeline around the violation (1.425 s):
//!        1.424000s redis     removed lock:stock (owner=client-6-36-04eba00c by expiry, expired)
//!        1.424000s redis     wrote lock:stock (owner=client-8-45-af088317 by client-8)
//!     !! 1.425000s client-8  acquire ok      owner=client-8-45-af088317 value=1 valid-until=1.623000s
//!        …
//!   replay: cargo run --quiet --bin locksim -- replay --design my-lock --scenario gc-pause --seed 0
//!   shrink: cargo run --quiet --bin locksim -- shrink --design my-lock --scenario gc-pause --seed 0
//! ```
//!
//! Those commands run *your* `locksim` binary, which hands your design to the same
//! command line the project ships ([`cli`]):
//!
//! ```no_run
//! // src/bin/locksim.rs
//! fn main() -> std::process::ExitCode {
//!     # let my_design = || locksim::builtin("set-nx-px-lua").named("my-lock");
//!     locksim::cli::main([my_design()]) // e.g. locksim::Design::new("my-lock", MyLock::new)
//! }
//! ```
//!
//! # Seeds, threads and time
//!
//! A check runs `0..10` unless told otherwise; [`SEEDS_ENV`] (`LOCKSIM_SEEDS=500 cargo
//! test`) runs more on the same tests. Runs go to worker threads
//! ([`THREADS_ENV`], else `RUST_TEST_THREADS`, else every core). A run of the default
//! world (eight clients, five simulated seconds) takes tens of milliseconds when the
//! simulator is optimised; in your `Cargo.toml`:
//!
//! ```toml
//! [profile.dev.package."*"]
//! opt-level = 2
//! ```
//!
//! # Generated fault schedules
//!
//! [`strategy`] gives proptest strategies for plans within a scenario's world, so
//! `proptest!` searches schedules and shrinks a failure to a minimal plan, printed as
//! a plan file with its replay command.
//!
//! ```
//! use locksim::proptest::prelude::*;
//! use locksim::proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
//! use locksim::strategy::{plans, FaultSort};
//! use locksim::Expect;
//!
//! // What `proptest!` does: here with a fixed RNG, two cases, and a known-good lock.
//! let config = ProptestConfig { cases: 2, failure_persistence: None, ..ProptestConfig::default() };
//! let mut runner =
//!     TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
//! runner.run(&plans("no-faults").sorts(&[FaultSort::Crash]).max_faults(1), |plan| {
//!     locksim::check(locksim::builtin("set-nx-px-lua"))
//!         .scenario("no-faults")
//!         .plan(plan)
//!         .seeds(0..1)
//!         .verify(Expect::CheckerValid("ownership".into()))?;
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! # Dependencies
//!
//! One line: the simulator's patched turmoil (the workspace's `vendor/turmoil`) comes
//! with it, as a path dependency inside the same repository.
//!
//! ```toml
//! [dependencies]
//! locksim = { git = "<the locksim repository>" }
//! ```

#![warn(missing_docs)]

mod check;
pub mod cli;
mod design;
pub mod strategy;

pub use check::{
    COMMAND_ENV, Check, Expect, Failure, PLAN_DIR_ENV, Runs, SEEDS_ENV, THREADS_ENV, check,
};
pub use design::{Design, IntoDesign, builtin};

// What a lock is written with.
pub use async_trait::async_trait;
pub use lock_impl::{
    Acquire, AcquireOptions, Attempt, Clock, Deps, Entropy, Guard, LockDesign, LockError, Release,
    Wait, retry_acquire,
};
pub use redis;

// What a test reads.
pub use scenarios::catalog::{self, Scenario};
pub use scenarios::checkers::{self, Evidence, Safety, Verdict};
pub use scenarios::planfile::{self, PlanFile};
pub use scenarios::stats::{self, Rate};
pub use scenarios::sweep::RunSummary;
pub use sim::faults::{Fault, FaultKind, FaultPlan, Target};
pub use sim::history::History;
pub use sim::world::Workload;

/// proptest, as [`strategy`] uses it: `use locksim::proptest::prelude::*;` and
/// `locksim::proptest::proptest!` need no dependency of their own.
pub use proptest;

/// The layers underneath, for what the facade does not cover (the lock designs, the
/// simulator, the catalog and sweeps, the reports and the gate).
pub use {lock_impl, reports, scenarios, sim};
