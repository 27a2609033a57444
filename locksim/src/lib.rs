//! Test your own lock in `cargo test`: locksim runs your lock's real client code in a
//! deterministic simulated world (clients, lock servers, the network, clocks), injects
//! the faults that break locks (stop-the-world pauses, crashes, delays, partitions,
//! failovers, clock jumps), records every operation and judges the history. A failed
//! assertion prints the evidence, the seed, a timeline and the `locksim replay` /
//! `shrink` commands that reproduce it against your design. docs/testing-your-lock.md
//! is the guide; this crate is the one dependency your tests need:
//!
//! - the lock trait ([`LockDesign`], [`Deps`]) and what a lock is written with
//!   ([`redis`], [`macro@async_trait`]);
//! - the test API: [`check`] (its documentation has a complete lock and its tests),
//!   [`Check`], [`Expect`], and the seeds and threads variables ([`SEEDS_ENV`],
//!   [`THREADS_ENV`]);
//! - what a test reads: the scenario [`catalog`], the [`checkers`] and their
//!   [`Verdict`]s, plan files ([`PlanFile`]);
//! - proptest strategies for fault schedules ([`strategy`]) and the `locksim` command
//!   over your designs ([`cli`]).

#![warn(missing_docs)]
// No function over 150 lines (the limit is clippy.toml's): a reader holds one whole.
#![warn(clippy::too_many_lines)]

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
