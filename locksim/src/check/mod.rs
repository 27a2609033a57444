//! The test API: [`check`] a design under a scenario over seeds, and assert what must
//! (or, for a known failure, must not) hold. A failed assertion panics with the
//! evidence, the seed, a timeline around the violation and the `locksim replay` and
//! `shrink` commands that reproduce it against the same design.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use scenarios::checkers::{self, Safety, Verdict};
use scenarios::planfile::PlanFile;
use scenarios::stats::Rate;
use scenarios::sweep::{RunSummary, sweep};
use sim::faults::FaultPlan;

use crate::design::{Design, IntoDesign};

mod run;
#[cfg(test)]
mod tests;

/// The environment variable that changes how many seeds every check runs: `N` runs
/// `N` seeds from the check's first seed, `A..B` runs exactly those (`LOCKSIM_SEEDS=500
/// cargo test` for a long sweep on the same tests).
pub const SEEDS_ENV: &str = "LOCKSIM_SEEDS";

/// The environment variable that sets the worker threads of every check (else
/// `RUST_TEST_THREADS`, which `cargo test -- --test-threads N` does not set but CI
/// often does, else every core).
pub const THREADS_ENV: &str = "LOCKSIM_THREADS";

/// The environment variable that replaces the command prefix of printed replay and
/// shrink commands (see [`Check::command`]).
pub const COMMAND_ENV: &str = "LOCKSIM_COMMAND";

/// The environment variable that says where failing generated plans are written
/// (default: `locksim-plans` in the cargo target directory).
pub const PLAN_DIR_ENV: &str = "LOCKSIM_PLAN_DIR";

/// Starts a check of `design`: a [`Design`], or a function from [`crate::Deps`] to your
/// lock (`MyLock::new`, registered as `my-lock`: see [`Design::of`]).
///
/// A lock takes everything from [`Deps`](crate::Deps): a reconnecting Redis connection, a clock, a
/// source of entropy (for owner values) and a task spawner. It never reads the
/// machine's clock or spawns tasks itself, so the simulator can pause or kill
/// everything it runs.
///
/// ```
/// use std::time::Duration;
/// use locksim::{Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError,
///               Release, async_trait, redis, retry_acquire};
///
/// /// `SET key owner NX PX lease`; release by a compare-and-delete script.
/// pub struct MyLock { deps: Deps }
///
/// impl MyLock {
///     pub fn new(deps: Deps) -> Self { MyLock { deps } }
/// }
///
/// #[async_trait]
/// impl LockDesign for MyLock {
///     fn name(&self) -> &str { "my-lock" }
///
///     async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
///         let deps = &self.deps;
///         retry_acquire(deps, key, options, || async move {
///             let owner = deps.entropy.owner_value();
///             let sent_at = deps.clock.now();
///             let set: Option<String> = redis::cmd("SET").arg(key).arg(&owner)
///                 .arg("NX").arg("PX").arg(options.lease_ms)
///                 .query_async(&mut deps.conn.clone()).await
///                 .map_err(|source| LockError::Redis { command: "SET", source })?;
///             Ok(match set {
///                 None => Attempt::Held,
///                 Some(_) => Attempt::Acquired(Guard {
///                     design: "my-lock".into(), key: key.into(), owner,
///                     acquired_at: sent_at,
///                     valid_until: Some(sent_at + Duration::from_millis(options.lease_ms)),
///                     token: None,
///                 }),
///             })
///         }).await
///     }
///
///     async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
///         let removed: i64 = redis::Script::new(
///             "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
///         )
///         .key(&guard.key).arg(&guard.owner)
///         .invoke_async(&mut self.deps.conn.clone()).await
///         .map_err(|source| LockError::Redis { command: "EVALSHA", source })?;
///         Ok(if removed == 1 { Release::Removed } else { Release::NotFound })
///     }
/// }
///
/// // In tests/my_lock.rs, each of these is a #[test]:
///
/// // Crashed holders: the lease frees the lock, nobody else's lock is touched.
/// locksim::check(MyLock::new).scenario("client-crash").seeds(0..2).assert_safe();
///
/// // A pause past the lease gives two holders: a known failure, pinned, so a fix (or
/// // a scenario that stops provoking it) is noticed.
/// let run = locksim::check(MyLock::new).scenario("gc-pause").seeds(0..20).expect_unsafe();
/// assert!(run.verdict("mutual-exclusion").unwrap().is_invalid());
/// ```
///
/// `locksim::check(MyLock::new)` registers the design as `my-lock` (the type's name,
/// see [`Design::of`]); name it yourself with [`Design::new`]. When an assertion fails,
/// the panic reads:
///
/// ```text
/// locksim: my-lock under gc-pause, seeds 0..20: expected every run safe, but at seed 0 the run is unsafe (20 of 20 runs break it, rate > 86% at 95%: seeds 0, 1, 2, …)
///   fault seen: client-6 paused at 1.233 s for 706 ms while holding lock:stock (owner=client-6-36-04eba00c), lease 200 ms
///   mutual-exclusion: INVALID: client-6 and client-8 both believed they held lock lock:stock from 1.425 s to 1.449 s …
///   lost-update: INVALID: client-6 wrote 99959 at 1.940 s based on a read of 99960, but the storage held 99944 …
///   timeline around the violation (1.425 s):
///        1.424000s redis     removed lock:stock (owner=client-6-36-04eba00c by expiry, expired)
///        1.424000s redis     wrote lock:stock (owner=client-8-45-af088317 by client-8)
///     !! 1.425000s client-8  acquire ok      owner=client-8-45-af088317 value=1 valid-until=1.623000s
///        …
///   replay: cargo run --quiet --bin locksim -- replay --design my-lock --scenario gc-pause --seed 0
///   shrink: cargo run --quiet --bin locksim -- shrink --design my-lock --scenario gc-pause --seed 0
/// ```
///
/// Those commands run *your* `locksim` binary ([`crate::cli`]). A built-in design is
/// checked the same way:
///
/// ```
/// // A built-in design, two short seeds: every run is judged by every checker.
/// let runs = locksim::check(locksim::builtin("set-nx-px-lua"))
///     .scenario("no-faults")
///     .seeds(0..2)
///     .assert_safe();
/// assert_eq!(runs.runs.len(), 2);
/// ```
pub fn check(design: impl IntoDesign) -> Check {
    Check {
        design: design.into_design(),
        scenario: None,
        params: Vec::new(),
        plan: None,
        seeds: 0..10,
        seeds_env: true,
        threads: None,
        command: None,
        min_fault_runs: None,
        context: 6,
        placed: false,
    }
}

/// What a check asserts; [`Check::verify`] takes one, the `assert_*` and `expect_*`
/// methods are shorthands that panic instead of returning the [`Failure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Every run is [`Safety::Safe`].
    Safe,
    /// Every run is of this class or a better one ([`Safety::WORST_FIRST`] order),
    /// never *unknown* unless this is [`Safety::Unknown`]: a run no checker could
    /// judge proves nothing.
    Class(Safety),
    /// This checker judges every run valid (not invalid, not unknown).
    CheckerValid(String),
    /// Some run is [`Safety::Unsafe`] (a known failure, pinned).
    Unsafe,
    /// This checker finds some run invalid.
    Invalid(String),
}

impl Expect {
    fn describe(&self) -> String {
        match self {
            Expect::Safe => "every run safe".into(),
            Expect::Class(c) => format!("every run {c} or better"),
            Expect::CheckerValid(c) => format!("{c} valid in every run"),
            Expect::Unsafe => "some run unsafe".into(),
            Expect::Invalid(c) => format!("{c} invalid in some run"),
        }
    }

    /// True for the expectations that search for one failing run.
    fn searches(&self) -> bool {
        matches!(self, Expect::Unsafe | Expect::Invalid(_))
    }

    fn checker(&self) -> Option<&str> {
        match self {
            Expect::CheckerValid(c) | Expect::Invalid(c) => Some(c),
            _ => None,
        }
    }

    /// Whether `run` breaks an every-run expectation, or matches a search.
    fn hit(&self, run: &RunSummary) -> bool {
        match self {
            Expect::Safe => run.safety() != Safety::Safe,
            Expect::Class(want) => !class_passes(run.safety(), *want),
            Expect::CheckerValid(c) => !run.verdict(c).is_some_and(Verdict::is_valid),
            Expect::Unsafe => run.safety() == Safety::Unsafe,
            Expect::Invalid(c) => run.verdict(c).is_some_and(Verdict::is_invalid),
        }
    }
}

/// `class` is `want` or better; unknown only passes when asked for.
fn class_passes(class: Safety, want: Safety) -> bool {
    class == want
        || class == Safety::Safe
        || (class != Safety::Unknown && class.rank() > want.rank())
}

#[derive(Debug, Clone)]
enum PlanSource {
    File(PathBuf),
    Inline(PlanFile),
}

/// A check being built: a design, a scenario, seeds, and what must hold. Every method
/// takes and returns the check, so a check reads as one sentence; clone it to run
/// variations.
///
/// Nothing runs until an `assert_*`, `expect_*`, [`Check::verify`] or [`Check::run`]:
/// a bad name or value (an unknown scenario, checker or parameter, a plan file that
/// names a host the world lacks, a design whose world the scenario does not have)
/// then fails with a message that lists what is allowed.
#[derive(Debug, Clone)]
pub struct Check {
    design: Design,
    scenario: Option<String>,
    params: Vec<(String, u64)>,
    plan: Option<PlanSource>,
    seeds: Range<u64>,
    seeds_env: bool,
    threads: Option<usize>,
    command: Option<String>,
    min_fault_runs: Option<usize>,
    context: usize,
    placed: bool,
}

/// The runs a check made.
///
/// ```
/// use locksim::Safety;
/// let runs = locksim::check(locksim::builtin("fenced")).scenario("gc-pause").seeds(0..2).run().unwrap();
/// assert_eq!(runs.seeds, 0..2);
/// assert_eq!(runs.count(Safety::Unsafe), 0);
/// assert!(runs.fault_runs() > 0);
/// ```
#[derive(Debug, Clone)]
pub struct Runs {
    /// The design's name.
    pub design: String,
    /// The scenario's name.
    pub scenario: String,
    /// The seeds asked for (after [`SEEDS_ENV`]); a search stops at its first hit.
    pub seeds: Range<u64>,
    /// One summary per run, by seed.
    pub runs: Vec<RunSummary>,
}

impl Runs {
    /// Runs in which the scenario's fault happened (its probe saw it).
    pub fn fault_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.fault_seen.is_some()).count()
    }

    /// Runs of safety class `class`.
    pub fn count(&self, class: Safety) -> usize {
        self.runs.iter().filter(|r| r.safety() == class).count()
    }

    /// The share of runs of class `class` with its 95 % interval (exact
    /// Clopper–Pearson, [`Rate`]); `None` with no runs.
    ///
    /// ```
    /// use locksim::Safety;
    /// let runs = locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("client-crash").seeds(0..3).assert_safe();
    /// let unsafe_rate = runs.rate(Safety::Unsafe).unwrap();
    /// assert_eq!(unsafe_rate.text(), "0/3: rate < 64% at 95%");
    /// ```
    pub fn rate(&self, class: Safety) -> Option<Rate> {
        Rate::of(self.count(class) as u64, self.runs.len() as u64)
    }
}

/// Why a check failed: printed by the panicking methods, returned by
/// [`Check::verify`] (it converts to a proptest failure with `?`).
///
/// ```
/// let failure = locksim::check(locksim::builtin("setnx-del"))
///     .scenario("client-crash")
///     .seeds(0..3)
///     .verify(locksim::Expect::CheckerValid("liveness".into()))
///     .unwrap_err();
/// let run = failure.run().unwrap();
/// assert!(failure.headline().contains(&format!("at seed {}", run.seed)));
/// assert!(failure.shrink().unwrap().ends_with("--checker liveness"));
/// assert!(failure.plan_file().is_none()); // the scenario's own plan
/// ```
#[derive(Debug, Clone)]
pub struct Failure(Box<FailureInner>);

#[derive(Debug, Clone)]
struct FailureInner {
    headline: String,
    run: Option<RunSummary>,
    replay: Option<String>,
    shrink: Option<String>,
    plan_file: Option<PathBuf>,
    text: String,
}

impl Failure {
    fn input(message: String) -> Failure {
        Failure(Box::new(FailureInner {
            headline: message.clone(),
            run: None,
            replay: None,
            shrink: None,
            plan_file: None,
            text: message,
        }))
    }

    /// One line: the design, scenario, seeds, what was expected and what happened.
    pub fn headline(&self) -> &str {
        &self.0.headline
    }

    /// The run that broke the expectation (the first by seed), if one did: its seed,
    /// verdicts and evidence.
    pub fn run(&self) -> Option<&RunSummary> {
        self.0.run.as_ref()
    }

    /// The command that replays that run against the same design.
    pub fn replay(&self) -> Option<&str> {
        self.0.replay.as_deref()
    }

    /// The command that shrinks it to the smallest run that still fails.
    pub fn shrink(&self) -> Option<&str> {
        self.0.shrink.as_deref()
    }

    /// The plan file the commands replay, when the check ran a plan of its own.
    pub fn plan_file(&self) -> Option<&Path> {
        self.0.plan_file.as_deref()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl std::error::Error for Failure {}

impl Check {
    /// The scenario to run (`locksim list` shows them all; also
    /// [`crate::catalog::catalog`]).
    pub fn scenario(mut self, name: &str) -> Check {
        self.scenario = Some(name.to_string());
        self
    }

    /// The seeds to run (default `0..10`); [`SEEDS_ENV`] changes them at run time.
    pub fn seeds(mut self, seeds: Range<u64>) -> Check {
        self.seeds = seeds;
        self
    }

    /// Also place the scenario's fault at each step of the first acquisition of the
    /// first seed's bare run, as the main job does (`scenarios::place`): an every-run
    /// expectation ([`Check::assert_safe`], [`Check::assert_valid`]) then holds only if
    /// every placed run meets it too, and a placed run that breaks it fails the check
    /// with its `--place` replay command. Up to 13 runs more.
    pub fn placed(mut self) -> Check {
        self.placed = true;
        self
    }

    /// Run exactly the seeds given to [`Check::seeds`], whatever [`SEEDS_ENV`] says
    /// (for a check whose seeds are part of its meaning).
    pub fn fixed_seeds(mut self) -> Check {
        self.seeds_env = false;
        self
    }

    /// Pins a scenario quantity as `locksim … --param NAME=V` does: `pause-ms`,
    /// `delay-ms`, `lag-ms`, `drift-ppm`, `jump-ms`, `partition-ms` (the size of the
    /// scenario's faults), `lease-ms`, `clients`, `work-ms`.
    ///
    /// ```
    /// // A pause shorter than the lease (200 ms) never gives two holders.
    /// locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("gc-pause")
    ///     .param("pause-ms", 100)
    ///     .seeds(0..2)
    ///     .min_fault_runs(0) // a pause this short is not the scenario's fault
    ///     .assert_checker_valid("mutual-exclusion");
    /// ```
    pub fn param(mut self, name: &str, value: u64) -> Check {
        self.params.push((name.to_string(), value));
        self
    }

    /// Runs `plan` (faults, and workload fields that differ from the scenario's)
    /// instead of the scenario's own plan for each seed: a shrunk plan, or one a
    /// [`crate::strategy`] generated. A failure writes it to a file (see
    /// [`PLAN_DIR_ENV`]) so that its replay command can name it.
    ///
    /// ```
    /// use locksim::{Fault, FaultKind, PlanFile, Target};
    /// // Two clients, and one pause of whoever holds the lock at 0.5 s, four leases long.
    /// let plan = PlanFile {
    ///     faults: vec![Fault {
    ///         at_ms: 500,
    ///         kind: FaultKind::Pause { target: Target::Holder, duration_ms: 800 },
    ///     }],
    ///     workload: [("clients".to_string(), 2.into())].into_iter().collect(),
    /// };
    /// let failure = locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("gc-pause")
    ///     .plan(plan)
    ///     .seeds(0..1)
    ///     .verify(locksim::Expect::CheckerValid("mutual-exclusion".into()))
    ///     .unwrap_err();
    /// // The plan was written to a file, which the replay command names.
    /// let file = failure.plan_file().unwrap();
    /// assert!(failure.replay().unwrap().ends_with(&format!("--plan {}", file.display())));
    /// ```
    pub fn plan(mut self, plan: PlanFile) -> Check {
        self.plan = Some(PlanSource::Inline(plan));
        self
    }

    /// Runs these faults, with the scenario's workload, instead of the scenario's plan.
    ///
    /// ```
    /// use locksim::{Fault, FaultKind, FaultPlan, Target};
    /// // Crash whoever holds the lock at 1 s; it restarts 0.3 s later.
    /// let crash = FaultPlan {
    ///     faults: vec![Fault {
    ///         at_ms: 1_000,
    ///         kind: FaultKind::Crash { target: Target::Holder, restart_after_ms: Some(300) },
    ///     }],
    /// };
    /// locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("client-crash")
    ///     .faults(crash)
    ///     .seeds(0..1)
    ///     .assert_safe();
    /// ```
    pub fn faults(self, faults: FaultPlan) -> Check {
        self.plan(PlanFile {
            faults: faults.faults,
            workload: Default::default(),
        })
    }

    /// Runs the plan file at `path` (relative to where the test runs: the crate's
    /// directory under `cargo test`), as `locksim run --plan FILE` does.
    pub fn plan_file(mut self, path: impl Into<PathBuf>) -> Check {
        self.plan = Some(PlanSource::File(path.into()));
        self
    }

    /// Worker threads for the runs (default: [`THREADS_ENV`], else
    /// `RUST_TEST_THREADS`, else every core).
    pub fn threads(mut self, threads: usize) -> Check {
        self.threads = Some(threads.max(1));
        self
    }

    /// The command that printed replay and shrink commands start with (default:
    /// `locksim` for a built-in design, `cargo run --quiet --bin locksim --` for your
    /// own, which runs your crate's `locksim` binary: see [`crate::cli`];
    /// [`COMMAND_ENV`] overrides the default).
    pub fn command(mut self, prefix: impl Into<String>) -> Check {
        self.command = Some(prefix.into());
        self
    }

    /// How many runs must show the scenario's fault for a passing check to count
    /// (default: 1 with the scenario's own plan, so a pass is never vacuous; 0 with a
    /// plan of your own). An `expect_*` check with a non-zero value also requires the
    /// fault in the run it found, so the failure is the fault's doing.
    pub fn min_fault_runs(mut self, runs: usize) -> Check {
        self.min_fault_runs = Some(runs);
        self
    }

    /// Runs the design under another name (the name replay commands use).
    pub fn named(mut self, name: impl Into<String>) -> Check {
        self.design = self.design.named(name);
        self
    }

    /// Events shown either side of the violation in a failure's timeline (default 6;
    /// 0 leaves the timeline out).
    pub fn timeline_context(mut self, events: usize) -> Check {
        self.context = events;
        self
    }

    /// Asserts every run is safe ([`Safety::Safe`]: no overlap in belief, no harm,
    /// nothing unjudged) and the scenario's fault happened (see
    /// [`Check::min_fault_runs`]); panics with the first unsafe run's evidence and
    /// replay command otherwise.
    ///
    /// ```
    /// locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("client-crash")
    ///     .seeds(0..2)
    ///     .assert_safe();
    /// ```
    pub fn assert_safe(&self) -> Runs {
        self.verify(Expect::Safe).unwrap_or_else(|f| panic!("{f}"))
    }

    /// Asserts every run is of class `class` or better ([`Expect::Class`]).
    ///
    /// ```
    /// use locksim::Safety;
    /// // `fenced` lets two clients believe they hold the lock after a pause, but its
    /// // tokens let the storage refuse the stale one: fenced, never unsafe.
    /// locksim::check(locksim::builtin("fenced"))
    ///     .scenario("gc-pause")
    ///     .seeds(0..2)
    ///     .assert_class(Safety::Fenced);
    /// ```
    pub fn assert_class(&self, class: Safety) -> Runs {
        self.verify(Expect::Class(class))
            .unwrap_or_else(|f| panic!("{f}"))
    }

    /// Asserts checker `name` judges every run valid (`locksim list` names the
    /// checkers; also [`crate::checkers::names`]).
    ///
    /// ```
    /// // A compare-and-delete release never removes another client's lock.
    /// locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("gc-pause")
    ///     .seeds(0..2)
    ///     .assert_checker_valid("ownership");
    /// ```
    pub fn assert_checker_valid(&self, name: &str) -> Runs {
        self.verify(Expect::CheckerValid(name.to_string()))
            .unwrap_or_else(|f| panic!("{f}"))
    }

    /// Asserts some run is unsafe, in a run where the scenario's fault happened, and
    /// returns the first such run: a test that pins a known failure, so a change that
    /// hides it (or a scenario that stops provoking it) is noticed. Searches the seeds
    /// in order and stops at the first hit.
    ///
    /// ```
    /// // A plain DEL release, past the lease, deletes the next holder's lock.
    /// let run = locksim::check(locksim::builtin("set-nx-px-del"))
    ///     .scenario("gc-pause")
    ///     .seeds(0..20)
    ///     .expect_unsafe();
    /// assert!(run.verdict("ownership").unwrap().is_invalid());
    /// ```
    pub fn expect_unsafe(&self) -> RunSummary {
        self.expect(Expect::Unsafe)
    }

    /// Asserts checker `name` finds some run invalid (with the scenario's fault) and
    /// returns the first such run.
    ///
    /// ```
    /// let run = locksim::check(locksim::builtin("setnx-del"))
    ///     .scenario("client-crash")
    ///     .seeds(0..20)
    ///     .expect_invalid("liveness");
    /// let evidence = run.verdict("liveness").unwrap().evidence().unwrap();
    /// assert!(!evidence.hosts.is_empty());
    /// ```
    pub fn expect_invalid(&self, name: &str) -> RunSummary {
        self.expect(Expect::Invalid(name.to_string()))
    }

    fn expect(&self, e: Expect) -> RunSummary {
        let runs = self.verify(e).unwrap_or_else(|f| panic!("{f}"));
        runs.runs
            .last()
            .cloned()
            .expect("a search that passed found a run")
    }

    /// Runs every seed and judges every run, asserting nothing: for a test that reads
    /// the verdicts itself. Fails only on bad input.
    ///
    /// ```
    /// use locksim::Safety;
    /// let runs = locksim::check(locksim::builtin("set-nx-px-lua"))
    ///     .scenario("gc-pause")
    ///     .seeds(0..3)
    ///     .run()
    ///     .unwrap();
    /// assert_eq!(runs.runs.len(), 3);
    /// println!("{} unsafe of 3", runs.count(Safety::Unsafe));
    /// ```
    pub fn run(&self) -> Result<Runs, Failure> {
        let p = self.prepare()?;
        let runs = sweep(
            &p.spec,
            &p.scenario,
            p.seeds.clone(),
            p.threads,
            false,
            &|_, _| {},
        )
        .map_err(|e| self.run_error(&p, e))?;
        Ok(Runs {
            design: p.spec.name.clone(),
            scenario: p.scenario.name.to_string(),
            seeds: p.seeds,
            runs,
        })
    }

    /// Runs the check and returns the runs, or the [`Failure`] the `assert_*` and
    /// `expect_*` methods would panic with. For an every-run expectation the runs are
    /// every seed's; for a search ([`Expect::Unsafe`], [`Expect::Invalid`]) they end
    /// at the run found. In a `proptest!`, `?` turns the failure into the test case's.
    ///
    /// ```
    /// use locksim::Expect;
    /// let failure = locksim::check(locksim::builtin("set-nx-px-del"))
    ///     .scenario("gc-pause")
    ///     .seeds(0..20)
    ///     .verify(Expect::CheckerValid("ownership".into()))
    ///     .unwrap_err();
    /// let replay = failure.replay().unwrap();
    /// assert!(replay.starts_with("locksim replay --design set-nx-px-del --scenario gc-pause --seed"));
    /// assert!(failure.to_string().contains("ownership: INVALID"));
    /// ```
    pub fn verify(&self, expect: Expect) -> Result<Runs, Failure> {
        let p = self.prepare()?;
        if let Some(c) = expect.checker()
            && !checkers::all_names().contains(&c)
        {
            return Err(Failure::input(format!(
                "locksim: unknown checker '{c}'; allowed: {}",
                checkers::all_names().join(", ")
            )));
        }
        if expect.searches() {
            self.search(&p, &expect)
        } else {
            self.every(&p, &expect)
        }
    }
}
