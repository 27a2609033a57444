//! The `locksim` command line: parsing only; the work lives in the other modules.
//!
//! The `locksim` binary is [`main_with`] with no designs of its own. A crate with a lock
//! of its own gets the same command over its design with a two-line binary that hands
//! the design to [`main_with`] (the `locksim` facade crate's `locksim::cli::main`):
//! every subcommand then finds it by name (`--design my-lock`), before the built-ins,
//! and the catalog matrix, `list`, `sweep`, `report` and `gate` include it by default.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use crate::{commands, exit, input};
use clap::{Args, Parser, Subcommand};
use scenarios::sweep::DesignSpec;

/// Proves or breaks distributed locks (Redis, Redlock, Redisson, ZooKeeper, MySQL, MongoDB): real
/// lock clients in a deterministic simulation under faults, or against real servers.
///
/// With no subcommand, runs every design under every scenario and prints the verdict
/// matrix (`--detail` for the full table with replay commands).
#[derive(Debug, Parser)]
#[command(name = "locksim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Seeds for the catalog table (A..B or N): every seed of the range runs in every
    /// cell. Without it, seeds are adaptive: each cell runs seeds 0, 1, 2, … until its
    /// first unsafe run settles it or 60 clean runs bound its unsafe rate below 4.9 %
    /// at 95 % (a cell that spends its budget first is marked `~`, a weak bound).
    #[arg(long, allow_hyphen_values = true)]
    seeds: Option<String>,
    /// Adaptive seeds' budget per cell, in host runs (the simulator's unit of work, the
    /// same on every machine), or `none`: a cell that spends it stops with the clean
    /// runs it has, marked `~`. The default keeps the main job under two minutes on two
    /// cores; `none` runs every cell to its first unsafe run or its 60 clean runs (about
    /// 22 minutes on two cores; `--shard I/N --out FILE` on N machines and `locksim
    /// merge` split that time).
    #[arg(long)]
    budget: Option<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the detailed table (runs, fault, classes, invalid runs per checker,
    /// latency, replay command per cell) instead of the 120-column matrix.
    #[arg(long)]
    detail: bool,
    #[command(flatten)]
    shard: ShardArgs,
}

/// Splitting a sweep across machines.
#[derive(Debug, Args)]
struct ShardArgs {
    /// Run only slice I of N of the seed range (a contiguous slice; needs --out). The
    /// main job without --seeds splits its cells instead: cells I, I+N, I+2N, … of the
    /// matrix, each under the adaptive seeds.
    #[arg(long)]
    shard: Option<String>,
    /// Also write the cells with their latency histograms to FILE (never replaces an
    /// existing file), for `locksim merge`.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

impl ShardArgs {
    fn resolve(
        &self,
    ) -> Result<Option<(crate::shard::Shard, std::path::PathBuf)>, input::BadInput> {
        let shard = self
            .shard
            .as_deref()
            .map(crate::shard::Shard::parse)
            .transpose()
            .map_err(input::BadInput)?;
        match (shard, &self.out) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(input::BadInput(
                "--shard needs --out FILE: a shard's cells are only useful merged".into(),
            )),
            (s, Some(out)) => {
                crate::shard::check_out(out)?;
                Ok(Some((s.unwrap_or(crate::shard::Shard::WHOLE), out.clone())))
            }
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List designs, scenarios and checkers.
    List,
    /// Run one design under one scenario over a seed range and judge every run.
    Run(RunArgs),
    /// Re-run one seed and print its knobs, verdicts and the timeline around the first
    /// violation.
    Replay(ReplayArgs),
    /// Search for the smallest run that still fails the same checker (fewer faults,
    /// shorter faults, earlier faults, fewer clients, a shorter run, less latency) and
    /// write it as a plan file that `--plan` replays.
    Shrink(ShrinkArgs),
    /// Place each fault kind just before and just after every protocol step of one
    /// client's first acquisitions (as the wire saw them in a fault-free run), with
    /// durations of ½, 1, 2 and 4 leases, and print which checker each placement breaks.
    Explore(ExploreArgs),
    /// Measure harness throughput against a bare turmoil baseline, time to the first
    /// violation per cell, and the peak memory of a long sweep.
    Bench(BenchArgs),
    /// Serve the Redis model on a real TCP port with the real clock, to poke at it with
    /// redis-cli or any client.
    ServeModel(ServeModelArgs),
    /// Add shard files (`--shard I/N --out FILE`) back into exactly the unsharded
    /// run's cells, printed as it prints them.
    Merge(MergeArgs),
    /// Run designs at every value of one scenario parameter and print the rate of
    /// unsafe runs (and optionally plot it).
    Sweep(SweepArgs),
    /// Write a report to a directory, from the main job's adaptive seeds (or --seeds):
    /// index.html (no scripts, no network: the comparison by system, the matrix, latency,
    /// sweeps), a page per failing cell with its holder timeline and sequence diagram
    /// (cells/), latency.html, summary.md and results.json; --full puts everything on
    /// one page, with a PNG of every plot.
    Report(ReportCliArgs),
    /// Run the headline cells against real servers and in the simulator and print
    /// them side by side, flagging a cell where one side shows a safety class the
    /// other never does or the unsafe rates' 95% intervals do not overlap.
    Parity(ParityArgs),
    /// A client host of a real run (`locksim run --real`), started by the parent.
    #[command(name = "__client", hide = true)]
    Client,
    /// Measure what the main job's adaptive seeds miss: run every cell under the
    /// adaptive default, then over a deep fixed seed range, and name each cell whose
    /// mark differs (a miss: unsafe at depth, not by default); also list the cells
    /// that cost the default pass most.
    Completeness(CompletenessArgs),
    /// Compare a fresh run with a committed baseline (locksim.baseline.json): exit 0 if
    /// nothing got worse, 1 on a regression (more unsafe runs, a checker failing more,
    /// the acquire p99 over its budget), 2 on bad input; prints a Markdown diff.
    Gate(GateCliArgs),
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// Lock design (repeatable; default: every built-in design the scenario runs).
    #[arg(long = "design")]
    designs: Vec<String>,
    /// Scenario.
    #[arg(long)]
    scenario: String,
    /// NAME=A..B:STEP, NAME=A..B, NAME=V1,V2,… with NAME one of pause-ms, delay-ms,
    /// lag-ms, drift-ppm, jump-ms, partition-ms, lease-ms, clients, work-ms. Repeatable:
    /// the one with several values is swept, the others (NAME=V) pinned at every point.
    #[arg(long = "param", required = true)]
    params: Vec<String>,
    /// Seeds per point: A..B or N.
    #[arg(long, default_value = "0..20", allow_hyphen_values = true)]
    seeds: String,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the plot to FILE.svg or FILE.png (never over an existing file).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    shard: ShardArgs,
}

#[derive(Debug, Args)]
struct ReportCliArgs {
    /// Seeds of every matrix cell: A..B or N, the same range in every cell. Without it,
    /// the main job's search: each cell from seed 0 until its first unsafe run or 60
    /// clean runs, within its budget (the cells `locksim` prints).
    #[arg(long, allow_hyphen_values = true)]
    seeds: Option<String>,
    /// Adaptive seeds' budget per cell, in host runs, or `none` (as `locksim --budget`;
    /// not with --seeds).
    #[arg(long)]
    budget: Option<String>,
    /// Seeds of every sweep point: A..B or N.
    #[arg(long, default_value = "0..2", allow_hyphen_values = true)]
    sweep_seeds: String,
    /// Only this design (repeatable; built-in names or broken/<name>).
    #[arg(long = "design")]
    designs: Vec<String>,
    /// Only this scenario (repeatable).
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// Leave out the sweeps.
    #[arg(long)]
    no_sweeps: bool,
    /// Everything on one page (each failing cell's timeline and sequence diagram
    /// inline, every latency plot) and a PNG of every plot: tens of megabytes for the
    /// whole matrix. Without it, index.html links to a page per failing cell
    /// (cells/DESIGN--SCENARIO.html) and to latency.html, with no PNG.
    #[arg(long)]
    full: bool,
    /// The directory to write (new, empty, or an earlier report's) [default: report];
    /// with --shard, the shard file to write.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Run only slice I of N of both seed ranges and write it to --out FILE, for
    /// `locksim report --from`.
    #[arg(long)]
    shard: Option<String>,
    /// Build the report from these shard files (`report --shard I/N --out FILE`, every
    /// shard once) instead of running.
    #[arg(long, num_args = 1.., conflicts_with = "shard")]
    from: Vec<std::path::PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
struct ExploreArgs {
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

#[derive(Debug, Args)]
struct MergeArgs {
    /// The shard files, one per shard 1..=N.
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    /// Print JSON instead of the matrix.
    #[arg(long)]
    json: bool,
    /// Print the detailed table instead of the matrix.
    #[arg(long)]
    detail: bool,
}

#[derive(Debug, Args)]
struct CompletenessArgs {
    /// The deep run's seeds: A..B or N (`0` for none: the default pass's costs only).
    #[arg(long, default_value = "0..200", allow_hyphen_values = true)]
    deep: String,
    /// Only this design (repeatable; built-in names or broken/<name>).
    #[arg(long = "design")]
    designs: Vec<String>,
    /// Only this scenario (repeatable).
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// The default pass's budget per cell in host runs, or `none` (to measure what the
    /// budget costs in completeness) [default: the main job's].
    #[arg(long)]
    budget: Option<String>,
    /// How many of the default pass's slowest cells to list.
    #[arg(long, default_value_t = 25)]
    slowest: usize,
    /// Only every Kth cell (in catalog order, after --design/--scenario): a sample for
    /// a deep run that would take hours over every cell.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
struct GateCliArgs {
    /// The baseline file.
    #[arg(long, default_value = crate::gate::DEFAULT_BASELINE)]
    baseline: std::path::PathBuf,
    /// Rewrite the baseline from a fresh run (after a human decided the change is
    /// intended).
    #[arg(long)]
    update: bool,
    /// Seeds for --update (A..B or N; default the baseline's, or 0..3 for a new one).
    #[arg(long, allow_hyphen_values = true)]
    seeds: Option<String>,
    /// Only this design (repeatable; built-in names or broken/<name>).
    #[arg(long = "design")]
    designs: Vec<String>,
    /// Only this scenario (repeatable).
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// Also write the Markdown diff to this file (for a CI comment).
    #[arg(long)]
    markdown: Option<std::path::PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Lock design (see `locksim list`).
    #[arg(long)]
    design: String,
    /// Scenario (see `locksim list`).
    #[arg(long)]
    scenario: String,
    /// Seeds: A..B (half-open) or one seed N; every seed runs. Without it, seeds are
    /// adaptive: 0, 1, 2, … until the first unsafe run or 60 clean runs.
    #[arg(long, allow_hyphen_values = true)]
    seeds: Option<String>,
    /// Adaptive seeds' budget in host runs, or `none` (as the main job's `--budget`;
    /// default: the main job's).
    #[arg(long)]
    budget: Option<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
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

#[derive(Debug, Args)]
struct ParityArgs {
    /// Real runs per cell (seeds 0..N: the same fault plans the simulator draws).
    #[arg(long, default_value_t = 20)]
    runs: u64,
    /// Simulator seeds per cell: A..B or N.
    #[arg(long, default_value = "0..100", allow_hyphen_values = true)]
    model_seeds: String,
    /// A cell, DESIGN,SCENARIO (repeatable; default: the headline cells, see
    /// `docs/parity.md`).
    #[arg(long = "cell")]
    cells: Vec<String>,
    /// Worker threads for the simulator's side (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Also write the table (Markdown) to FILE (never over an existing file).
    #[arg(long)]
    markdown: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// Lock design.
    #[arg(long)]
    design: String,
    /// Scenario.
    #[arg(long)]
    scenario: String,
    /// The seed to replay.
    #[arg(long)]
    seed: u64,
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

#[derive(Debug, Args)]
struct ShrinkArgs {
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
    /// A design family's time scale as the world's base: `catalog` (200 ms leases, the
    /// default), `redisson` (30 s lease, 3 s reply timeout, 4 clients, 240 s) or
    /// `mongodb` (the `mongo-*` worlds at real time: 30 s lease, MongoDB's 2 s heartbeat
    /// and 10 s election timeout).
    #[arg(long, default_value = "catalog")]
    profile: String,
    /// Pin a scenario quantity, NAME=V (repeatable; see `locksim sweep --help`).
    #[arg(long = "param")]
    params: Vec<String>,
    /// Start from a plan file instead of the seed's plan.
    #[arg(long)]
    plan: Option<std::path::PathBuf>,
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

#[derive(Debug, Args)]
struct BenchArgs {
    /// Runs per throughput figure (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeats: u64,
    /// Seeds in the memory sweep.
    #[arg(long, default_value_t = 1000)]
    memory_seeds: u64,
    /// The main job's pass runs every Kth cell of the catalog (1: every cell, about
    /// the main job's own time).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Worker threads for the sweep (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
struct ServeModelArgs {
    /// TCP port to listen on.
    #[arg(long)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Allow binding a non-loopback address (the model has no authentication).
    #[arg(long)]
    allow_non_loopback: bool,
}

fn serve_model(args: ServeModelArgs) -> ExitCode {
    if !args.bind.is_loopback() && !args.allow_non_loopback {
        eprintln!(
            "locksim serve-model: refusing to bind non-loopback address {}: the model has \
             no authentication; pass --allow-non-loopback to do it anyway",
            args.bind
        );
        return ExitCode::from(2);
    }
    match sim::redis::serve_model(SocketAddr::new(args.bind, args.port)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("locksim serve-model: {e}");
            ExitCode::FAILURE
        }
    }
}

fn threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn bad_input(e: input::BadInput) -> ExitCode {
    eprintln!("locksim: {}", e.0);
    ExitCode::from(exit::EXIT_BAD_INPUT)
}

/// The `locksim` command over the process's arguments, with `extra` designs found by
/// name before the built-ins: what a binary's `main` returns.
pub fn main_with(extra: Vec<DesignSpec>) -> ExitCode {
    // Like any Unix filter: end quietly when the reader goes away (`locksim | head`)
    // instead of panicking on a broken pipe.
    // SAFETY: resetting a signal's disposition to the default at start-up, before any
    // other thread of this command exists (a binary's `main` calls this first).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    run(Cli::parse(), extra)
}

/// The `locksim` command over `args` (the first is the program's name, as
/// `std::env::args` gives it), with `extra` designs: [`main_with`] without touching
/// the process's arguments or signals, for tests. Bad arguments print clap's message
/// and give exit code 2, as the command does.
pub fn run_from<I, T>(args: I, extra: Vec<DesignSpec>) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => run(cli, extra),
        Err(e) => {
            let _ = e.print();
            ExitCode::from(if e.use_stderr() {
                exit::EXIT_BAD_INPUT
            } else {
                0
            })
        }
    }
}

fn run(cli: Cli, extra: Vec<DesignSpec>) -> ExitCode {
    let design = |name: &str| input::design_among(name, &extra);
    // Every built-in design, then the caller's own.
    let every_design = || -> Result<Vec<DesignSpec>, input::BadInput> {
        let mut all: Vec<DesignSpec> = lock_impl::DESIGNS
            .iter()
            .map(DesignSpec::from_info)
            .collect();
        all.extend(extra.iter().cloned());
        Ok(all)
    };
    let result = match cli.command {
        None => (|| {
            let shard = cli.shard.resolve()?;
            // Without `--seeds`, shards split the cells, not a seed range.
            let seeds = crate::seeds::seeds_of(cli.seeds.as_deref(), cli.budget.as_deref(), false)?;
            Ok(commands::catalog_table(
                &every_design()?,
                seeds,
                threads(cli.threads),
                cli.json,
                cli.detail,
                shard,
            ))
        })(),
        Some(Command::List) => Ok(commands::list(&extra)),
        Some(Command::Run(a)) => (|| {
            let d = design(&a.design)?;
            let s = input::with_plan(
                input::with_params(
                    input::with_profile(input::scenario(&a.scenario)?, &a.profile)?,
                    &a.params,
                )?,
                a.plan.as_deref(),
            )?;
            input::check_pair(&d, &s)?;
            let shard = a.shard.resolve()?;
            // Real runs take real time, one at a time: without `--seeds`, five.
            let seeds = match (a.real, a.seeds.as_deref()) {
                (true, _) if a.budget.is_some() => {
                    return Err(input::BadInput(
                        "--budget bounds the simulator's adaptive seeds; --real runs a fixed range (--seeds A..B, five seeds without it)".into(),
                    ));
                }
                (true, None) => crate::seeds::Seeds::Fixed(0..5),
                (_, given) => crate::seeds::seeds_of(given, a.budget.as_deref(), shard.is_some())?,
            };
            if a.real
                && let crate::seeds::Seeds::Fixed(range) = &seeds
            {
                let why = crate::parity::real_refusals(&d, &s, range.clone());
                if !why.is_empty() {
                    return Err(input::BadInput(format!(
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
            ))
        })(),
        Some(Command::Replay(a)) => (|| {
            let d = design(&a.design)?;
            let s = input::with_plan(
                input::with_params(
                    input::with_profile(input::scenario(&a.scenario)?, &a.profile)?,
                    &a.params,
                )?,
                a.plan.as_deref(),
            )?;
            input::check_pair(&d, &s)?;
            let diagram = a
                .diagram
                .as_deref()
                .map(|p| commands::diagram_target(p, a.full))
                .transpose()?;
            Ok(commands::replay_one(
                &d, &s, a.seed, a.context, a.json, diagram,
            ))
        })(),
        Some(Command::Shrink(a)) => (|| {
            let d = design(&a.design)?;
            let s = input::with_plan(
                input::with_params(
                    input::with_profile(input::scenario(&a.scenario)?, &a.profile)?,
                    &a.params,
                )?,
                a.plan.as_deref(),
            )?;
            input::check_pair(&d, &s)?;
            let out = a.out.clone().unwrap_or_else(|| {
                format!("shrunk-{}-{}-{}.json", a.design, a.scenario, a.seed).into()
            });
            let budget = scenarios::shrink::Budget {
                max_runs: a.max_runs.max(1),
                wall: std::time::Duration::from_secs(a.max_seconds.max(1)),
                threads: threads(a.threads),
            };
            commands::shrink(&d, &s, a.seed, a.checker.as_deref(), budget, &out, a.force)
        })(),
        Some(Command::Explore(a)) => (|| {
            let d = design(&a.design)?;
            let s = input::scenario(&a.scenario)?;
            let sorts = scenarios::explore::Sort::parse_list(&a.faults).map_err(input::BadInput)?;
            if a.acquisitions == 0 || a.acquisitions > 10 {
                return Err(input::BadInput(format!(
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
        })(),
        Some(Command::Bench(a)) => {
            crate::bench::run_all(
                a.repeats.max(1),
                a.memory_seeds,
                threads(a.threads),
                a.sample as usize,
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::ServeModel(args)) => Ok(serve_model(args)),
        Some(Command::Sweep(a)) => (|| {
            let mut scenario = input::scenario(&a.scenario)?;
            let ranges = a
                .params
                .iter()
                .map(|p| scenarios::params::ParamRange::parse(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(input::BadInput)?;
            let swept: Vec<usize> = (0..ranges.len())
                .filter(|i| ranges[*i].values.len() > 1)
                .collect();
            let which = match swept[..] {
                [] => ranges.len() - 1,
                [i] => i,
                _ => {
                    return Err(input::BadInput(
                        "--param: sweep one quantity at a time; give the others one value (NAME=V) to pin them".into(),
                    ));
                }
            };
            for (i, r) in ranges.iter().enumerate() {
                if i != which {
                    scenario = scenario
                        .with_param(r.param, r.values[0])
                        .map_err(input::BadInput)?;
                }
            }
            let range = ranges[which].clone();
            let designs = if a.designs.is_empty() {
                every_design()?
                    .into_iter()
                    .filter(|d| scenario.applies_to(d.backend, d.masters))
                    .collect()
            } else {
                a.designs
                    .iter()
                    .map(|d| design(d))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let seeds = input::parse_seeds(&a.seeds)?;
            let shard = a.shard.resolve()?;
            commands::sweep_cmd(
                &designs,
                &scenario,
                &range,
                seeds,
                threads(a.threads),
                commands::SweepOutput {
                    json: a.json,
                    plot: a.plot.as_deref(),
                    shard,
                },
            )
        })(),
        Some(Command::Report(a)) => (|| {
            let designs = if a.designs.is_empty() {
                every_design()?
            } else {
                a.designs
                    .iter()
                    .map(|d| design(d))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let mut scenarios = if a.scenarios.is_empty() {
                scenarios::catalog::catalog()
            } else {
                a.scenarios
                    .iter()
                    .map(|s| input::scenario(s))
                    .collect::<Result<Vec<_>, _>>()?
            };
            // Columns in the catalog's order, however they were asked for (so a report
            // merged from shards lays out the same).
            let order: Vec<&str> = scenarios::catalog::catalog()
                .iter()
                .map(|s| s.name)
                .collect();
            scenarios.sort_by_key(|s| order.iter().position(|o| *o == s.name));
            scenarios.dedup_by(|a, b| a.name == b.name);
            let shard = a
                .shard
                .as_deref()
                .map(crate::shard::Shard::parse)
                .transpose()
                .map_err(input::BadInput)?;
            let out = match (&shard, a.out) {
                (Some(_), None) => {
                    return Err(input::BadInput(
                        "--shard needs --out FILE: the shard file `report --from` reads".into(),
                    ));
                }
                (_, Some(out)) => out,
                (None, None) => "report".into(),
            };
            if shard.is_none() {
                crate::report::check_out(&out)?;
            }
            if !a.from.is_empty() {
                return crate::report::from_shards(&a.from, &out, threads(a.threads), a.full);
            }
            if shard.is_some() && a.seeds.is_none() {
                return Err(input::BadInput(
                    "report --shard splits a fixed seed range: give --seeds A..B (the default, the main job's adaptive seeds, has no range to split)".into(),
                ));
            }
            let args = crate::report::ReportArgs {
                seeds: crate::seeds::seeds_of(
                    a.seeds.as_deref(),
                    a.budget.as_deref(),
                    shard.is_some(),
                )?,
                sweep_seeds: input::parse_seeds(&a.sweep_seeds)?,
                designs,
                scenarios,
                sweeps: !a.no_sweeps,
                out,
                threads: threads(a.threads),
                progress: true,
                full: a.full,
            };
            match shard {
                Some(s) => crate::report::write_shard(&args, s),
                None => Ok(commands::report(&args)),
            }
        })(),
        Some(Command::Completeness(a)) => (|| {
            let designs = if a.designs.is_empty() {
                every_design()?
            } else {
                a.designs
                    .iter()
                    .map(|d| design(d))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let scenarios = if a.scenarios.is_empty() {
                scenarios::catalog::catalog()
            } else {
                a.scenarios
                    .iter()
                    .map(|s| input::scenario(s))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let pairs: Vec<(DesignSpec, scenarios::catalog::Scenario)> = designs
                .iter()
                .flat_map(|d| {
                    scenarios
                        .iter()
                        .filter(|s| s.applies_to(d.backend, d.masters))
                        .map(move |s| (d.clone(), s.clone()))
                })
                .collect();
            if pairs.is_empty() {
                return Err(input::BadInput(
                    "--design/--scenario: no scenario of those fits any of those designs".into(),
                ));
            }
            let of = pairs.len();
            let pairs = crate::bench::sample(&pairs, a.sample as usize);
            let rule = crate::seeds::rule_with(a.budget.as_deref())?;
            let deep = if a.deep == "0" {
                0..0
            } else {
                input::parse_seeds(&a.deep)
                    .map_err(|e| input::BadInput(e.0.replace("--seeds", "--deep")))?
            };
            Ok(crate::completeness::run(&crate::completeness::Args {
                pairs,
                of,
                sample: a.sample,
                rule,
                deep,
                threads: threads(a.threads),
                slowest: a.slowest,
            }))
        })(),
        Some(Command::Merge(a)) => commands::merge_files(&a.files, a.json, a.detail),
        Some(Command::Client) => return crate::real::child::main(),
        Some(Command::Parity(a)) => (|| {
            let cells: Vec<(String, String)> = if a.cells.is_empty() {
                crate::parity::HEADLINE
                    .iter()
                    .map(|(d, s)| (d.to_string(), s.to_string()))
                    .collect()
            } else {
                a.cells
                    .iter()
                    .map(|c| {
                        c.split_once(',')
                            .map(|(d, s)| (d.trim().to_string(), s.trim().to_string()))
                            .ok_or_else(|| {
                                input::BadInput(format!(
                                    "invalid --cell '{c}': expected DESIGN,SCENARIO (e.g. set-nx-px-lua,gc-pause)"
                                ))
                            })
                    })
                    .collect::<Result<_, _>>()?
            };
            if a.runs == 0 {
                return Err(input::BadInput(
                    "invalid --runs 0: expected at least 1 real run per cell".into(),
                ));
            }
            let seeds = input::parse_seeds(&a.model_seeds)?;
            if let Some(path) = &a.markdown
                && path.exists()
            {
                return Err(input::BadInput(format!(
                    "--markdown {}: the file exists; name a new one",
                    path.display()
                )));
            }
            Ok(commands::parity(
                &cells,
                a.runs,
                seeds,
                threads(a.threads),
                a.markdown.as_deref(),
                a.json,
            ))
        })(),
        Some(Command::Gate(a)) => (|| {
            let seeds = a.seeds.as_deref().map(input::parse_seeds).transpose()?;
            crate::gate::gate(&crate::gate::GateArgs {
                baseline: a.baseline,
                update: a.update,
                seeds,
                designs: a.designs,
                scenarios: a.scenarios,
                markdown: a.markdown,
                threads: threads(a.threads),
                extra_designs: extra.clone(),
            })
        })(),
    };
    result.unwrap_or_else(bad_input)
}
