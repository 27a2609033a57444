//! The subcommands over one design × one scenario: `run`, `replay`, `shrink` and
//! `explore`.

use std::process::ExitCode;

use clap::Args;
use scenarios::catalog::Scenario;
use scenarios::sweep::DesignSpec;

use super::{Cx, Exec, ShardArgs, threads};
use crate::commands;
use crate::input::{self, BadInput};
use crate::seeds::{Seeds, seeds_of};

/// What a cell's world and faults are: the time scale, pinned quantities, and a plan
/// file or a placement instead of the seed's times.
#[derive(Debug, Args)]
pub(super) struct WorldArgs {
    /// A design family's time scale as the world's base: `catalog` (200 ms leases, the
    /// default), `redisson` (30 s lease, 3 s reply timeout, 4 clients, 240 s) or
    /// `mongodb` (the `mongo-*` worlds at real time: 30 s lease, MongoDB's 2 s heartbeat
    /// and 10 s election timeout).
    #[arg(long, default_value = "catalog")]
    profile: String,
    /// Pin a scenario quantity, NAME=V (repeatable; see `locksim sweep --help`).
    #[arg(long = "param")]
    params: Vec<String>,
    /// A hand-written fault plan (JSON) instead of the seed's.
    #[arg(long)]
    plan: Option<std::path::PathBuf>,
    /// Place the scenario's fault at this millisecond instead of the seed's times
    /// (`none`: the world's standing faults only), as the main job's placed runs do.
    #[arg(long)]
    place: Option<String>,
}

impl WorldArgs {
    /// The scenario called `name` with `--profile`, `--param`, `--plan` and `--place`
    /// applied.
    fn scenario(&self, name: &str) -> Result<Scenario, BadInput> {
        let s = input::with_plan(
            input::with_params(
                input::with_profile(input::scenario(name)?, &self.profile)?,
                &self.params,
            )?,
            self.plan.as_deref(),
        )?;
        input::with_place(s, self.place.as_deref(), self.plan.is_some())
    }
}

/// The design and scenario a cell's flags name, refused if the scenario does not run
/// the design.
fn cell(
    cx: &Cx,
    design: &str,
    scenario: &str,
    world: &WorldArgs,
) -> Result<(DesignSpec, Scenario), BadInput> {
    let d = cx.design(design)?;
    let s = world.scenario(scenario)?;
    input::check_pair(&d, &s)?;
    Ok((d, s))
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// Lock design (see `locksim list`).
    #[arg(long, required_unless_present = "client")]
    design: Option<String>,
    /// With --real: run this command (through `sh -c`) as each client instead of a
    /// design, a program in any language that speaks the client protocol
    /// (docs/clients.md); needs --system.
    #[arg(long, conflicts_with = "design", requires = "system")]
    client: Option<String>,
    /// The system a --client locks on: redis, zookeeper, mysql, mongodb or etcd.
    #[arg(long, requires = "client")]
    system: Option<String>,
    /// Scenario (see `locksim list`).
    #[arg(long)]
    scenario: String,
    /// Seeds: A..B (half-open) or one seed N; every seed runs. Without it, seeds are
    /// adaptive: 0, 1, 2, … until the first unsafe run or 60 clean runs.
    #[arg(long, alias = "seed", allow_hyphen_values = true)]
    seeds: Option<String>,
    /// Adaptive seeds' budget in host runs, or `none` (as the main job's `--budget`;
    /// default: the main job's).
    #[arg(long)]
    budget: Option<String>,
    /// Adaptive seeds without placed faults: the seeds alone, as the search was before
    /// it placed faults at a client's steps (to measure what placement finds).
    #[arg(long)]
    seeds_only: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    world: WorldArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Against real servers: start the servers the world names (redis-server,
    /// redis-sentinel, ZooKeeper, MariaDB) on loopback and each client as its own
    /// process, apply the seed's fault plan with real signals, and judge the history
    /// with the same checkers. Faults not made real yet are refused, naming why.
    #[arg(long)]
    real: bool,
    #[command(flatten)]
    shard: ShardArgs,
}

impl Exec for RunArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let (d, s, client) = match (&a.client, &a.system) {
            (Some(command), Some(system)) => {
                let (d, s, f) = foreign_cell(command, system, &a)?;
                (d, s, Some(f))
            }
            _ => {
                let design = a.design.as_deref().unwrap_or_default();
                let (d, s) = cell(cx, design, &a.scenario, &a.world)?;
                (d, s, None)
            }
        };
        let shard = a.shard.resolve()?;
        // Real runs take real time, one at a time: without `--seeds`, five.
        let seeds = match (a.real, a.seeds.as_deref()) {
            (true, _) if a.budget.is_some() => {
                return Err(BadInput(
                    "--budget bounds the simulator's adaptive seeds; --real runs a fixed range (--seeds A..B, five seeds without it)".into(),
                ));
            }
            (true, None) => Seeds::Fixed(0..5),
            (_, given) => seeds_of(given, a.budget.as_deref(), shard.is_some(), a.seeds_only)?,
        };
        if a.real
            && let Seeds::Fixed(range) = &seeds
        {
            let mut why = crate::parity::real_refusals(&d, &s, range.clone());
            if client.is_some() {
                why.extend(crate::real::foreign::refusals_over(&d, &s, range.clone()));
            }
            if !why.is_empty() {
                return Err(BadInput(format!(
                    "--real cannot run {} × {}: {}",
                    d.name,
                    s.name,
                    why.join("; ")
                )));
            }
        }
        Ok(commands::run(
            &d,
            &s,
            seeds,
            threads(a.threads),
            a.json,
            a.real,
            shard,
            client.as_ref(),
        ))
    }
}

/// The client, world and scenario `--client COMMAND --system NAME` name (with
/// `--scenario`, `--profile`, `--param`, `--plan` and `--place` applied), refused without
/// --real.
fn foreign_cell(
    command: &str,
    system: &str,
    a: &RunArgs,
) -> Result<(DesignSpec, Scenario, crate::real::foreign::Foreign), BadInput> {
    if !a.real {
        return Err(BadInput(
            "--client runs a program against real servers: add --real".into(),
        ));
    }
    let f = crate::real::foreign::Foreign::new(command, system).map_err(BadInput)?;
    let s = a.world.scenario(&a.scenario)?;
    let d = f.design(&s).map_err(BadInput)?;
    Ok((d, s, f))
}

#[derive(Debug, Args)]
pub(super) struct ReplayArgs {
    /// Lock design.
    #[arg(long)]
    design: String,
    /// Scenario.
    #[arg(long)]
    scenario: String,
    /// The seed to replay.
    #[arg(long)]
    seed: u64,
    #[command(flatten)]
    world: WorldArgs,
    /// Events shown before and after the first violation.
    #[arg(long, default_value_t = 12)]
    context: usize,
    /// Print the verdicts and the whole history as JSON.
    #[arg(long)]
    json: bool,
    /// Draw the run as a sequence diagram: FILE.svg (SVG) or FILE.mmd (Mermaid text).
    #[arg(long)]
    diagram: Option<std::path::PathBuf>,
    /// Draw every host over the whole run, not only what the first violation involves.
    #[arg(long)]
    full: bool,
}

impl Exec for ReplayArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let (d, s) = cell(cx, &a.design, &a.scenario, &a.world)?;
        let diagram = a
            .diagram
            .as_deref()
            .map(|p| commands::diagram_target(p, a.full))
            .transpose()?;
        Ok(commands::replay_one(
            &d, &s, a.seed, a.context, a.json, diagram,
        ))
    }
}

#[derive(Debug, Args)]
pub(super) struct ShrinkArgs {
    /// Lock design.
    #[arg(long)]
    design: String,
    /// Scenario.
    #[arg(long)]
    scenario: String,
    /// The failing seed to start from.
    #[arg(long)]
    seed: u64,
    /// The checker the smaller run must still fail (default: the first safety checker
    /// the run fails).
    #[arg(long)]
    checker: Option<String>,
    #[command(flatten)]
    world: WorldArgs,
    /// Where to write the minimal plan [default: shrunk-DESIGN-SCENARIO-SEED.json].
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
    /// Most candidate runs to try.
    #[arg(long, default_value_t = 400)]
    max_runs: usize,
    /// Most seconds of wall time to spend.
    #[arg(long, default_value_t = 120)]
    max_seconds: u64,
    /// Worker threads trying candidates (default: all cores; the result does not
    /// depend on it).
    #[arg(long)]
    threads: Option<usize>,
}

impl Exec for ShrinkArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let (d, s) = cell(cx, &a.design, &a.scenario, &a.world)?;
        let out = a.out.clone().unwrap_or_else(|| {
            format!("shrunk-{}-{}-{}.json", a.design, a.scenario, a.seed).into()
        });
        let budget = scenarios::shrink::Budget {
            max_runs: a.max_runs.max(1),
            wall: std::time::Duration::from_secs(a.max_seconds.max(1)),
            threads: threads(a.threads),
        };
        commands::shrink(&d, &s, a.seed, a.checker.as_deref(), budget, &out, a.force)
    }
}

#[derive(Debug, Args)]
pub(super) struct ExploreArgs {
    /// Lock design.
    #[arg(long)]
    design: String,
    /// The scenario whose workload runs (its own faults are left out).
    #[arg(long, default_value = "no-faults")]
    scenario: String,
    /// Fault kinds, comma separated: pause, crash, delay, server-crash.
    #[arg(long, default_value = "pause,crash,delay,server-crash")]
    faults: String,
    /// The explored client's acquisitions to cover.
    #[arg(long, default_value_t = 2)]
    acquisitions: usize,
    /// The explored client.
    #[arg(long, default_value = "client-1")]
    client: String,
    /// The seed of every run.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where to write the plan file of each placement that broke something
    /// [default: explore-DESIGN].
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print the grid as JSON.
    #[arg(long)]
    json: bool,
    /// Worker threads (default: all cores; the result does not depend on it).
    #[arg(long)]
    threads: Option<usize>,
}

impl Exec for ExploreArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let d = cx.design(&a.design)?;
        let s = input::scenario(&a.scenario)?;
        let sorts = scenarios::explore::Sort::parse_list(&a.faults).map_err(BadInput)?;
        if a.acquisitions == 0 || a.acquisitions > 10 {
            return Err(BadInput(format!(
                "invalid --acquisitions {}: give 1 to 10",
                a.acquisitions
            )));
        }
        let params = scenarios::explore::Params {
            sorts,
            acquisitions: a.acquisitions,
            client: a.client.clone(),
            seed: a.seed,
            threads: threads(a.threads),
            ..Default::default()
        };
        let out = a
            .out
            .clone()
            .unwrap_or_else(|| format!("explore-{}", a.design.replace('/', "-")).into());
        crate::explore::run(&d, &s, &params, &out, a.json)
    }
}
