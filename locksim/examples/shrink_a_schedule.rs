//! proptest searches fault schedules for one that breaks a lock, and shrinks the one it
//! finds to a minimal plan: printed as a plan file with the command that replays it.
//!
//! The lock here is a user's, with a classic bug: its release is a plain `DEL`, so a
//! holder that comes back after its lease ran out deletes the next holder's lock. Run
//! it: `cargo run -p locksim --example shrink_a_schedule`.
//!
//! In a test of your own, `proptest!` does what [`find_and_shrink`] does here:
//!
//! ```ignore
//! proptest! {
//!     #[test]
//!     fn release_never_removes_another_clients_lock(plan in plans("gc-pause")) {
//!         locksim::check(DelRelease::new).scenario("gc-pause").plan(plan).seeds(0..1)
//!             .verify(Expect::CheckerValid("ownership".into()))?;
//!     }
//! }
//! ```

use std::time::Duration;

use locksim::proptest::prelude::*;
use locksim::proptest::test_runner::{RngAlgorithm, TestError, TestRng, TestRunner};
use locksim::strategy::{FaultSort, plans};
use locksim::{
    Acquire, AcquireOptions, Attempt, Deps, Design, Expect, Failure, Guard, LockDesign, LockError,
    PlanFile, Release, async_trait, redis, retry_acquire,
};

/// `SET NX PX`, released by a plain `DEL`.
pub struct DelRelease {
    deps: Deps,
}

impl DelRelease {
    /// The lock over a client's dependencies.
    pub fn new(deps: Deps) -> Self {
        DelRelease { deps }
    }
}

#[async_trait]
impl LockDesign for DelRelease {
    fn name(&self) -> &str {
        "del-release"
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let deps = &self.deps;
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sent_at = deps.clock.now();
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&owner)
                .arg("NX")
                .arg("PX")
                .arg(options.lease_ms)
                .query_async(&mut deps.conn.clone())
                .await
                .map_err(|source| LockError::Redis {
                    command: "SET",
                    source,
                })?;
            Ok(match set {
                None => Attempt::Held,
                Some(_) => Attempt::Acquired(Guard {
                    design: "del-release".into(),
                    key: key.into(),
                    owner,
                    acquired_at: sent_at,
                    valid_until: Some(sent_at + Duration::from_millis(options.lease_ms)),
                    token: None,
                }),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        // The bug: whoever holds the key now, it goes.
        let n: i64 = redis::cmd("DEL")
            .arg(&guard.key)
            .query_async(&mut self.deps.conn.clone())
            .await
            .map_err(|source| LockError::Redis {
                command: "DEL",
                source,
            })?;
        Ok(if n == 1 {
            Release::Removed
        } else {
            Release::NotFound
        })
    }
}

/// Searches `cases` generated plans of `scenario`'s world (client pauses and slow
/// work, at most three faults, fewer clients and shorter runs) for one under which
/// `checker` finds `design` invalid, and shrinks it. Returns the minimal plan and its
/// failure, or `None` if every case passed. The runner is seeded, so the search and
/// its result are the same on every machine.
pub fn find_and_shrink(
    design: Design,
    scenario: &str,
    checker: &str,
    cases: u32,
) -> Option<(PlanFile, Failure)> {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let strategy = plans(scenario)
        .sorts(&[FaultSort::Pause, FaultSort::SlowWork])
        .max_faults(3);
    let check = locksim::check(design)
        .scenario(scenario)
        .seeds(0..1)
        .fixed_seeds();
    let expect = Expect::CheckerValid(checker.to_string());
    let result = runner.run(&strategy, |plan| {
        check.clone().plan(plan).verify(expect.clone())?;
        Ok(())
    });
    match result {
        Ok(()) => None,
        Err(TestError::Fail(_, minimal)) => {
            // The minimal case's failure, with its plan file and replay command.
            let failure = check
                .clone()
                .plan(minimal.clone())
                .verify(expect)
                .expect_err("the minimal case fails again: runs are deterministic");
            Some((minimal, failure))
        }
        Err(TestError::Abort(why)) => panic!("the search gave up: {why}"),
    }
}

#[allow(dead_code)] // Unused when a test includes this file for `find_and_shrink`.
fn main() {
    let design = Design::new("del-release", DelRelease::new);
    match find_and_shrink(design, "gc-pause", "ownership", 32) {
        None => println!("no generated schedule broke del-release"),
        Some((plan, failure)) => {
            println!(
                "minimal plan: {} fault(s), workload changes {:?}",
                plan.faults.len(),
                plan.workload
            );
            println!("{failure}");
        }
    }
}
