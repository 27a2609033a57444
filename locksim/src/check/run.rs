//! How a [`Check`] runs: resolving it ([`Prepared`]), running every seed or searching
//! for a hit, and turning an offending run into a [`Failure`] with its evidence,
//! timeline, plan file and the commands that reproduce it.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use scenarios::catalog::Scenario;
use scenarios::checkers::{self, Safety, Verdict};
use scenarios::planfile::PlanFile;
use scenarios::stats::Rate;
use scenarios::sweep::{DesignSpec, RunSummary, run_seed, sweep};
use sim::world::RunError;

use super::{
    COMMAND_ENV, Check, Expect, Failure, FailureInner, PLAN_DIR_ENV, PlanSource, Runs, SEEDS_ENV,
    THREADS_ENV,
};
/// Everything a check needs, resolved.
pub(super) struct Prepared {
    pub(super) spec: DesignSpec,
    pub(super) scenario: Scenario,
    pub(super) seeds: Range<u64>,
    pub(super) seeds_from_env: bool,
    pub(super) threads: usize,
    pub(super) min_fault_runs: usize,
}

impl Check {
    /// The placed runs of an every-run expectation ([`Check::placed`]): the first that
    /// breaks it fails the check, named by its placement.
    fn every_placed(&self, p: &Prepared, expect: &Expect) -> Result<(), Failure> {
        let placed = scenarios::place::placed_runs(&p.spec, &p.scenario, p.seeds.start)
            .map_err(|e| self.run_error(p, e))?;
        let Some(bad) = placed.iter().find(|r| expect.hit(r)) else {
            return Ok(());
        };
        let at = Prepared {
            spec: p.spec.clone(),
            scenario: p.scenario.clone().placed(bad.placement),
            seeds: p.seeds.clone(),
            seeds_from_env: p.seeds_from_env,
            threads: p.threads,
            min_fault_runs: p.min_fault_runs,
        };
        let place = match bad.placement {
            Some(scenarios::catalog::Placement::At(ms)) => format!("its fault placed at {ms} ms"),
            _ => "its timed faults left out".to_string(),
        };
        let headline = format!(
            "{}: expected {}, but at seed {} with {place} the run is {} (the seeds passed; {} placed runs)",
            self.subject(p),
            expect.describe(),
            bad.seed,
            bad.safety(),
            placed.len()
        );
        Err(self.failure(&at, headline, bad, expect.checker()))
    }

    /// An every-run expectation: all seeds, then the first offending run.
    pub(super) fn every(&self, p: &Prepared, expect: &Expect) -> Result<Runs, Failure> {
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
        if bad.is_empty() && self.placed {
            self.every_placed(p, expect)?;
        }
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
    pub(super) fn search(&self, p: &Prepared, expect: &Expect) -> Result<Runs, Failure> {
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

    pub(super) fn subject(&self, p: &Prepared) -> String {
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

    pub(super) fn run_error(&self, p: &Prepared, e: RunError) -> Failure {
        Failure::input(format!("{}: the run could not start: {e}", self.subject(p)))
    }

    /// The failure of `run`: its evidence, the timeline, the commands.
    pub(super) fn failure(
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

    pub(super) fn command_prefix(&self) -> String {
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
    pub(super) fn prepare(&self) -> Result<Prepared, Failure> {
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

    pub(super) fn effective_seeds(&self) -> Result<(Range<u64>, bool), String> {
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
pub(super) fn parse_seeds_env(text: &str, start: u64) -> Result<Range<u64>, String> {
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
pub(super) fn shell_word(s: &str) -> String {
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
