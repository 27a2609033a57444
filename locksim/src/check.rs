//! The test API: [`check`] a design under a scenario over seeds, and assert what must
//! (or, for a known failure, must not) hold. A failed assertion panics with the
//! evidence, the seed, a timeline around the violation and the `locksim replay` and
//! `shrink` commands that reproduce it against the same design.

use std::fmt::{self, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};

use scenarios::catalog::Scenario;
use scenarios::checkers::{self, Safety, Verdict};
use scenarios::planfile::PlanFile;
use scenarios::stats::Rate;
use scenarios::sweep::{DesignSpec, RunSummary, run_seed, sweep};
use sim::faults::FaultPlan;
use sim::world::RunError;

use crate::design::{Design, IntoDesign};

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

/// Everything a check needs, resolved.
struct Prepared {
    spec: DesignSpec,
    scenario: Scenario,
    seeds: Range<u64>,
    seeds_from_env: bool,
    threads: usize,
    min_fault_runs: usize,
}

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

    /// An every-run expectation: all seeds, then the first offending run.
    fn every(&self, p: &Prepared, expect: &Expect) -> Result<Runs, Failure> {
        let runs = sweep(
            &p.spec,
            &p.scenario,
            p.seeds.clone(),
            p.threads,
            false,
            &|_, _| {},
        )
        .map_err(|e| self.run_error(p, e))?;
        let bad: Vec<&RunSummary> = runs.iter().filter(|r| expect.hit(r)).collect();
        if let Some(first) = bad.first() {
            let seeds: Vec<String> = bad.iter().take(10).map(|r| r.seed.to_string()).collect();
            let more = if bad.len() > 10 { ", …" } else { "" };
            let what = match expect {
                Expect::CheckerValid(c) => format!(
                    "{c} is {}",
                    first.verdict(c).map_or("missing", verdict_word)
                ),
                _ => format!("the run is {}", first.safety()),
            };
            let rate = Rate::of(bad.len() as u64, runs.len() as u64)
                .map(|r| format!(", {}", r.claim()))
                .unwrap_or_default();
            let headline = format!(
                "{}: expected {}, but at seed {} {what} ({} of {} runs break it{rate}: seeds {}{more})",
                self.subject(p),
                expect.describe(),
                first.seed,
                bad.len(),
                runs.len(),
                seeds.join(", ")
            );
            return Err(self.failure(p, headline, first, expect.checker()));
        }
        let faulted = runs.iter().filter(|r| r.fault_seen.is_some()).count();
        if faulted < p.min_fault_runs {
            return Err(Failure::input(format!(
                "{}: every run passed, but the scenario's fault ({}) happened in only {faulted} of {} \
                 runs (at least {} wanted): the pass proves nothing. More seeds (`.seeds(..)` or \
                 {SEEDS_ENV}), or `.min_fault_runs(0)` if the plan is not about that fault",
                self.subject(p),
                p.scenario.fault_about,
                runs.len(),
                p.min_fault_runs
            )));
        }
        Ok(Runs {
            design: p.spec.name.clone(),
            scenario: p.scenario.name.to_string(),
            seeds: p.seeds.clone(),
            runs,
        })
    }

    /// A search: seeds in order, `threads` at a time, up to the first hit.
    fn search(&self, p: &Prepared, expect: &Expect) -> Result<Runs, Failure> {
        let mut all = Vec::new();
        let mut start = p.seeds.start;
        while start < p.seeds.end {
            let end = start.saturating_add(p.threads as u64).min(p.seeds.end);
            let runs = sweep(
                &p.spec,
                &p.scenario,
                start..end,
                p.threads,
                false,
                &|_, _| {},
            )
            .map_err(|e| self.run_error(p, e))?;
            let hit = runs.iter().position(|r| expect.hit(r));
            match hit {
                Some(i) => {
                    all.extend(runs.into_iter().take(i + 1));
                    let found = all.last().expect("just pushed");
                    if p.min_fault_runs > 0 && found.fault_seen.is_none() {
                        let headline = format!(
                            "{}: found {} at seed {}, but in a run where the scenario's fault ({}) \
                             never happened: not the fault's doing",
                            self.subject(p),
                            expect.describe(),
                            found.seed,
                            p.scenario.fault_about
                        );
                        return Err(self.failure(p, headline, found, expect.checker()));
                    }
                    return Ok(Runs {
                        design: p.spec.name.clone(),
                        scenario: p.scenario.name.to_string(),
                        seeds: p.seeds.clone(),
                        runs: all,
                    });
                }
                None => all.extend(runs),
            }
            start = end;
        }
        let mut classes = String::new();
        for c in Safety::WORST_FIRST {
            let n = all.iter().filter(|r| r.safety() == c).count();
            if n > 0 {
                let _ = write!(
                    classes,
                    "{}{n} {c}",
                    if classes.is_empty() { "" } else { ", " }
                );
            }
        }
        let faulted = all.iter().filter(|r| r.fault_seen.is_some()).count();
        let label = match expect {
            Expect::Invalid(c) => format!("{c} invalid"),
            _ => "unsafe".to_string(),
        };
        Err(Failure::input(format!(
            "{}: expected {}, but none of {} runs was ({classes}; the scenario's fault happened in \
             {faulted}; {}). More seeds ({SEEDS_ENV}=N) may find it",
            self.subject(p),
            expect.describe(),
            all.len(),
            scenarios::stats::describe(&label, 0, all.len() as u64),
        )))
    }

    fn subject(&self, p: &Prepared) -> String {
        format!(
            "locksim: {} under {}{}{}, seeds {}..{}{}",
            p.spec.name,
            p.scenario.name,
            p.scenario.param_flags().replace(" --param ", " "),
            match &self.plan {
                Some(PlanSource::File(path)) => format!(" with plan {}", path.display()),
                Some(PlanSource::Inline(_)) => " with a plan of its own".into(),
                None => String::new(),
            },
            p.seeds.start,
            p.seeds.end,
            if p.seeds_from_env {
                format!(" (from {SEEDS_ENV})")
            } else {
                String::new()
            }
        )
    }

    fn run_error(&self, p: &Prepared, e: RunError) -> Failure {
        Failure::input(format!("{}: the run could not start: {e}", self.subject(p)))
    }

    /// The failure of `run`: its evidence, the timeline, the commands.
    fn failure(
        &self,
        p: &Prepared,
        headline: String,
        run: &RunSummary,
        checker: Option<&str>,
    ) -> Failure {
        let mut text = format!("{headline}\n");
        match &run.fault_seen {
            Some(f) => {
                let _ = writeln!(text, "  fault seen: {f}");
            }
            // A plan of its own need not be about the scenario's fault.
            None if self.plan.is_none() => {
                let _ = writeln!(
                    text,
                    "  fault not seen: {} never happened in this run",
                    p.scenario.fault_about
                );
            }
            None => {}
        }
        for (name, v) in &run.verdicts {
            match v {
                Verdict::Invalid(ev) => {
                    let _ = writeln!(text, "  {name}: INVALID: {}", ev.summary);
                }
                Verdict::Unknown { reason } => {
                    let _ = writeln!(text, "  {name}: unknown: {reason}");
                }
                Verdict::Valid => {}
            }
        }
        // The timeline around the violation that matters: the named checker's, else
        // the earliest.
        let evidence = checker
            .and_then(|c| run.verdict(c))
            .and_then(Verdict::evidence)
            .or_else(|| {
                run.verdicts
                    .iter()
                    .filter_map(|(_, v)| v.evidence())
                    .min_by_key(|ev| ev.at_us)
            });
        if let Some(ev) = evidence
            && self.context > 0
            && let Ok(again) = run_seed(&p.spec, &p.scenario, run.seed, true)
            && let Some(h) = &again.history
        {
            let _ = writeln!(
                text,
                "  timeline around the violation ({}):",
                checkers::fmt_s(ev.at_us)
            );
            for line in reports::timeline::render_evidence(h, ev, self.context).lines() {
                let _ = writeln!(text, "    {line}");
            }
        }
        let plan_file = match &self.plan {
            Some(PlanSource::Inline(plan)) => match write_plan(&p.spec.name, &p.scenario, plan) {
                Ok(path) => {
                    let _ = writeln!(text, "  plan file, written to {}:", path.display());
                    for line in plan.to_json().lines() {
                        let _ = writeln!(text, "    {line}");
                    }
                    Some(path)
                }
                Err(e) => {
                    let _ = writeln!(text, "  plan file (could not be written: {e}):");
                    for line in plan.to_json().lines() {
                        let _ = writeln!(text, "    {line}");
                    }
                    None
                }
            },
            Some(PlanSource::File(path)) => Some(path.clone()),
            None => None,
        };
        let prefix = self.command_prefix();
        let flags = format!(
            "--design {} --scenario {} --seed {}{}{}",
            shell_word(&p.spec.name),
            p.scenario.name,
            run.seed,
            p.scenario.param_flags(),
            plan_file
                .as_deref()
                .map(|f| format!(" --plan {}", shell_word(&f.display().to_string())))
                .unwrap_or_default()
        );
        let replay = format!("{prefix} replay {flags}");
        let shrink = format!(
            "{prefix} shrink {flags}{}",
            checker
                .map(|c| format!(" --checker {c}"))
                .unwrap_or_default()
        );
        let _ = writeln!(text, "  replay: {replay}");
        let _ = writeln!(text, "  shrink: {shrink}");
        if self.command.is_none()
            && std::env::var_os(COMMAND_ENV).is_none()
            && !self.design.is_builtin()
        {
            let _ = writeln!(
                text,
                "  (run them in your crate: they need a `locksim` binary that registers `{}`, \
                 src/bin/locksim.rs with `fn main() -> std::process::ExitCode {{ locksim::cli::main([design]) }}`)",
                p.spec.name
            );
        }
        Failure(Box::new(FailureInner {
            headline,
            run: Some(run.clone()),
            replay: Some(replay),
            shrink: Some(shrink),
            plan_file,
            text,
        }))
    }

    fn command_prefix(&self) -> String {
        if let Some(c) = &self.command {
            return c.clone();
        }
        if let Ok(c) = std::env::var(COMMAND_ENV) {
            return c;
        }
        if self.design.is_builtin() {
            "locksim".into()
        } else {
            "cargo run --quiet --bin locksim --".into()
        }
    }

    /// Resolves names, parameters, the plan, the seeds and the threads.
    fn prepare(&self) -> Result<Prepared, Failure> {
        let bad = |m: String| Failure::input(format!("locksim: {m}"));
        let name = self.scenario.as_deref().ok_or_else(|| {
            bad(format!(
                "no scenario: add .scenario(NAME), NAME one of {}",
                scenarios::catalog::scenario_names()
            ))
        })?;
        let mut scenario = scenarios::catalog::find(name).map_err(bad)?;
        for (param, value) in &self.params {
            let p =
                scenarios::params::Param::parse(param).map_err(|e| bad(format!(".param: {e}")))?;
            scenario = scenario.with_param(p, *value).map_err(bad)?;
        }
        match &self.plan {
            None => {}
            Some(PlanSource::File(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| bad(format!("cannot read plan file {}: {e}", path.display())))?;
                scenario = scenarios::planfile::apply(scenario, &text, &path.display().to_string())
                    .map_err(bad)?;
            }
            Some(PlanSource::Inline(plan)) => {
                scenario =
                    scenarios::planfile::apply(scenario, &plan.to_json(), "(a plan of its own)")
                        .map_err(bad)?;
            }
        }
        let spec = self.design.spec().clone();
        reports::input::check_pair(&spec, &scenario).map_err(|e| bad(e.0))?;
        let (seeds, seeds_from_env) = self.effective_seeds().map_err(bad)?;
        let threads = self.threads.unwrap_or_else(default_threads);
        let min_fault_runs = self
            .min_fault_runs
            .unwrap_or(if self.plan.is_none() { 1 } else { 0 });
        Ok(Prepared {
            spec,
            scenario,
            seeds,
            seeds_from_env,
            threads,
            min_fault_runs,
        })
    }

    fn effective_seeds(&self) -> Result<(Range<u64>, bool), String> {
        if self.seeds.start >= self.seeds.end {
            return Err(format!(
                ".seeds({}..{}): give a range A..B with A < B",
                self.seeds.start, self.seeds.end
            ));
        }
        if !self.seeds_env {
            return Ok((self.seeds.clone(), false));
        }
        match std::env::var(SEEDS_ENV) {
            Ok(text) if !text.trim().is_empty() => {
                parse_seeds_env(&text, self.seeds.start).map(|s| (s, true))
            }
            _ => Ok((self.seeds.clone(), false)),
        }
    }
}

/// `N` (a count from `start`) or `A..B`.
fn parse_seeds_env(text: &str, start: u64) -> Result<Range<u64>, String> {
    let bad =
        || format!("{SEEDS_ENV}='{text}': expected a seed count N or a range A..B with A < B");
    match text.trim().split_once("..") {
        Some((a, b)) => {
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b.trim().parse().map_err(|_| bad())?;
            (a < b).then_some(a..b).ok_or_else(bad)
        }
        None => {
            let n: u64 = text.trim().parse().map_err(|_| bad())?;
            (n > 0)
                .then(|| start..start.saturating_add(n))
                .ok_or_else(bad)
        }
    }
}

fn default_threads() -> usize {
    [THREADS_ENV, "RUST_TEST_THREADS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Valid => "valid",
        Verdict::Invalid(_) => "invalid",
        Verdict::Unknown { .. } => "unknown",
    }
}

/// A word a POSIX shell reads back as itself.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Where generated plans go: [`PLAN_DIR_ENV`], else `locksim-plans` in the cargo
/// target directory (`CARGO_TARGET_DIR`, else the nearest directory cargo tagged as a
/// build cache above the test binary or the crate), else the system's temporary
/// directory.
fn plan_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(PLAN_DIR_ENV) {
        return d.into();
    }
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return Path::new(&d).join("locksim-plans");
    }
    let starts = [
        std::env::current_exe().ok(),
        std::env::var_os("CARGO_MANIFEST_DIR").map(|d| Path::new(&d).join("target")),
    ];
    for start in starts.iter().flatten() {
        // Cargo writes CACHEDIR.TAG at the top of every target directory; a workspace
        // member's manifest directory has none, its workspace's has.
        let found = start.ancestors().find_map(|a| {
            let target = if a.ends_with("target") {
                a.to_path_buf()
            } else {
                a.join("target")
            };
            [a.to_path_buf(), target]
                .into_iter()
                .find(|d| d.join("CACHEDIR.TAG").is_file())
        });
        if let Some(d) = found {
            return d.join("locksim-plans");
        }
    }
    std::env::temp_dir().join("locksim-plans")
}

/// Writes `plan` under a name derived from its content, so each distinct plan gets
/// its own file (a proptest writes one per failing case) and rewriting one is
/// harmless; returns the absolute path.
fn write_plan(design: &str, scenario: &Scenario, plan: &PlanFile) -> std::io::Result<PathBuf> {
    let json = plan.to_json();
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in design
        .bytes()
        .chain(scenario.name.bytes())
        .chain(scenario.param_flags().into_bytes())
        .chain(json.bytes())
    {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let dir = plan_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!(
        "{}-{}-{hash:016x}.json",
        design.replace('/', "-"),
        scenario.name
    ));
    std::fs::write(&path, json)?;
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_variable_takes_a_count_or_a_range() {
        assert_eq!(parse_seeds_env("50", 10), Ok(10..60));
        assert_eq!(parse_seeds_env(" 5..9 ", 0), Ok(5..9));
        for bad in ["0", "9..3", "x", "1..x"] {
            let e = parse_seeds_env(bad, 0).unwrap_err();
            assert!(e.contains(SEEDS_ENV) && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn classes_pass_at_their_level_or_better_and_unknown_only_when_asked() {
        use Safety::*;
        assert!(class_passes(Safe, Fenced));
        assert!(class_passes(Fenced, Fenced));
        assert!(class_passes(Promise, Fenced));
        assert!(!class_passes(Unsafe, Fenced));
        assert!(!class_passes(Unknown, Fenced));
        assert!(class_passes(Unknown, Unknown));
        assert!(!class_passes(Fenced, Safe));
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("broken/constant-owner"), "broken/constant-owner");
        assert_eq!(shell_word("/tmp/a b.json"), "'/tmp/a b.json'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
