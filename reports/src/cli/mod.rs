//! The `locksim` command line: parsing only; the work lives in the other modules.
//!
//! The `locksim` binary is [`main_with`] with no designs of its own. A crate with a lock
//! of its own gets the same command over its design with a two-line binary that hands
//! the design to [`main_with`] (the `locksim` facade crate's `locksim::cli::main`):
//! every subcommand then finds it by name (`--design my-lock`), before the built-ins,
//! and the catalog matrix, `list`, `sweep`, `report` and `gate` include it by default.
//!
//! Each subcommand's arguments sit beside the one function that hands them on
//! ([`Exec`]): `cell` (one design × one scenario: run, replay, shrink, explore),
//! `matrix` (many cells: the main job, sweep, report, completeness, merge, gate) and
//! `tools` (bench, serve-model, parity).

mod cell;
mod matrix;
mod tools;

use std::process::ExitCode;

use crate::input::BadInput;
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
    /// Adaptive seeds without placed faults: the seeds alone, as the search was before
    /// it placed faults at a client's steps (to measure what placement finds).
    #[arg(long)]
    seeds_only: bool,
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
    fn resolve(&self) -> Result<Option<(crate::shard::Shard, std::path::PathBuf)>, BadInput> {
        let shard = self
            .shard
            .as_deref()
            .map(crate::shard::Shard::parse)
            .transpose()
            .map_err(BadInput)?;
        match (shard, &self.out) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(BadInput(
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
    Run(cell::RunArgs),
    /// Re-run one seed and print its knobs, verdicts and the timeline around the first
    /// violation.
    Replay(cell::ReplayArgs),
    /// Search for the smallest run that still fails the same checker (fewer faults,
    /// shorter faults, earlier faults, fewer clients, a shorter run, less latency) and
    /// write it as a plan file that `--plan` replays.
    Shrink(cell::ShrinkArgs),
    /// Place each fault kind just before and just after every protocol step of one
    /// client's first acquisitions (as the wire saw them in a fault-free run), with
    /// durations of ½, 1, 2 and 4 leases, and print which checker each placement breaks.
    Explore(cell::ExploreArgs),
    /// Measure harness throughput against a bare turmoil baseline, time to the first
    /// violation per cell, and the peak memory of a long sweep.
    Bench(tools::BenchArgs),
    /// Serve the Redis model on a real TCP port with the real clock, to poke at it with
    /// redis-cli or any client.
    ServeModel(tools::ServeModelArgs),
    /// Add shard files (`--shard I/N --out FILE`) back into exactly the unsharded
    /// run's cells, printed as it prints them.
    Merge(matrix::MergeArgs),
    /// Run designs at every value of one scenario parameter and print the rate of
    /// unsafe runs (and optionally plot it).
    Sweep(matrix::SweepArgs),
    /// Write a report to a directory, from the main job's adaptive seeds (or --seeds):
    /// index.html (no scripts, no network: the comparison by system, the matrix, latency,
    /// sweeps), a page per failing cell with its holder timeline and sequence diagram
    /// (cells/), latency.html, summary.md and results.json; --full puts everything on
    /// one page, with a PNG of every plot.
    Report(matrix::ReportCliArgs),
    /// Run the headline cells against real servers and in the simulator and print
    /// them side by side, flagging a cell where one side shows a safety class the
    /// other never does or the unsafe rates' 95% intervals do not overlap.
    Parity(tools::ParityArgs),
    /// A client host of a real run (`locksim run --real`), started by the parent.
    #[command(name = "__client", hide = true)]
    Client,
    /// Measure what the main job's adaptive seeds miss: run every cell under the
    /// adaptive default, then over a deep fixed seed range, and name each cell whose
    /// mark differs (a miss: unsafe at depth, not by default); also list the cells
    /// that cost the default pass most.
    Completeness(matrix::CompletenessArgs),
    /// Compare a fresh run with a committed baseline (locksim.baseline.json): exit 0 if
    /// nothing got worse, 1 on a regression (more unsafe runs, a checker failing more,
    /// the acquire p99 over its budget), 2 on bad input; prints a Markdown diff.
    Gate(matrix::GateCliArgs),
}

/// What every subcommand is given besides its arguments: the caller's own designs,
/// found by name before the built-ins.
struct Cx {
    extra: Vec<DesignSpec>,
}

impl Cx {
    /// The design `--design NAME` names.
    fn design(&self, name: &str) -> Result<DesignSpec, BadInput> {
        input::design_among(name, &self.extra)
    }

    /// The designs `--design` names, as given, or every design without any.
    fn designs_or_every(&self, names: &[String]) -> Result<Vec<DesignSpec>, BadInput> {
        if names.is_empty() {
            return Ok(self.every_design());
        }
        names.iter().map(|d| self.design(d)).collect()
    }

    /// Every built-in design, then the caller's own.
    fn every_design(&self) -> Vec<DesignSpec> {
        let mut all: Vec<DesignSpec> = lock_impl::DESIGNS
            .iter()
            .map(DesignSpec::from_info)
            .collect();
        all.extend(self.extra.iter().cloned());
        all
    }
}

/// A subcommand's arguments, handed to the module that does the work.
trait Exec {
    /// Checks the arguments and runs the subcommand.
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput>;
}

impl Exec for Command {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        match self {
            Command::List => Ok(commands::list(&cx.extra)),
            Command::Run(a) => a.exec(cx),
            Command::Replay(a) => a.exec(cx),
            Command::Shrink(a) => a.exec(cx),
            Command::Explore(a) => a.exec(cx),
            Command::Bench(a) => a.exec(cx),
            Command::ServeModel(a) => a.exec(cx),
            Command::Merge(a) => a.exec(cx),
            Command::Sweep(a) => a.exec(cx),
            Command::Report(a) => a.exec(cx),
            Command::Parity(a) => a.exec(cx),
            Command::Client => Ok(crate::real::child::main()),
            Command::Completeness(a) => a.exec(cx),
            Command::Gate(a) => a.exec(cx),
        }
    }
}

fn threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn bad_input(e: BadInput) -> ExitCode {
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

fn run(mut cli: Cli, extra: Vec<DesignSpec>) -> ExitCode {
    let cx = Cx { extra };
    let result = match cli.command.take() {
        None => matrix::main_job(&cli, &cx),
        Some(command) => command.exec(&cx),
    };
    result.unwrap_or_else(bad_input)
}
