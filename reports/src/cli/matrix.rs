//! The subcommands over many cells: the main job (no subcommand), `sweep`, `report`,
//! `completeness`, `merge` and `gate`.

use std::process::ExitCode;

use clap::Args;
use scenarios::catalog::Scenario;
use scenarios::sweep::DesignSpec;

use super::{Cli, Cx, Exec, ShardArgs, threads};
use crate::commands;
use crate::input::{self, BadInput};
use crate::seeds::{rule_with, seeds_of};

/// `locksim` with no subcommand: every design × every scenario that fits it.
pub(super) fn main_job(cli: &Cli, cx: &Cx) -> Result<ExitCode, BadInput> {
    let shard = cli.shard.resolve()?;
    // Without `--seeds`, shards split the cells, not a seed range.
    let seeds = seeds_of(
        cli.seeds.as_deref(),
        cli.budget.as_deref(),
        false,
        cli.seeds_only,
    )?;
    Ok(commands::catalog_table(
        &cx.every_design(),
        seeds,
        threads(cli.threads),
        cli.json,
        cli.detail,
        shard,
    ))
}

/// The scenarios `--scenario` names, as given, or the whole catalog without any.
fn scenarios_or_catalog(names: &[String]) -> Result<Vec<Scenario>, BadInput> {
    if names.is_empty() {
        return Ok(scenarios::catalog::catalog());
    }
    names.iter().map(|s| input::scenario(s)).collect()
}

#[derive(Debug, Args)]
pub(super) struct SweepArgs {
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

impl Exec for SweepArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let mut scenario = input::scenario(&a.scenario)?;
        let ranges = a
            .params
            .iter()
            .map(|p| scenarios::params::ParamRange::parse(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(BadInput)?;
        let swept: Vec<usize> = (0..ranges.len())
            .filter(|i| ranges[*i].values.len() > 1)
            .collect();
        let which = match swept[..] {
            [] => ranges.len() - 1,
            [i] => i,
            _ => {
                return Err(BadInput(
                    "--param: sweep one quantity at a time; give the others one value (NAME=V) to pin them".into(),
                ));
            }
        };
        for (i, r) in ranges.iter().enumerate() {
            if i != which {
                scenario = scenario
                    .with_param(r.param, r.values[0])
                    .map_err(BadInput)?;
            }
        }
        let range = ranges[which].clone();
        let designs = if a.designs.is_empty() {
            cx.every_design()
                .into_iter()
                .filter(|d| scenario.applies_to(d.backend, d.masters))
                .collect()
        } else {
            cx.designs_or_every(&a.designs)?
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
    }
}

#[derive(Debug, Args)]
pub(super) struct ReportCliArgs {
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

impl Exec for ReportCliArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let designs = cx.designs_or_every(&a.designs)?;
        let mut scenarios = scenarios_or_catalog(&a.scenarios)?;
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
            .map_err(BadInput)?;
        let out = match (&shard, a.out) {
            (Some(_), None) => {
                return Err(BadInput(
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
            return Err(BadInput(
                "report --shard splits a fixed seed range: give --seeds A..B (the default, the main job's adaptive seeds, has no range to split)".into(),
            ));
        }
        let args = crate::report::ReportArgs {
            seeds: seeds_of(
                a.seeds.as_deref(),
                a.budget.as_deref(),
                shard.is_some(),
                false,
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
    }
}

#[derive(Debug, Args)]
pub(super) struct MergeArgs {
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

impl Exec for MergeArgs {
    fn exec(self, _cx: &Cx) -> Result<ExitCode, BadInput> {
        commands::merge_files(&self.files, self.json, self.detail)
    }
}

#[derive(Debug, Args)]
pub(super) struct CompletenessArgs {
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
    /// Adaptive seeds without placed faults: the seeds alone, as the search was before
    /// it placed faults at a client's steps (to measure what placement finds).
    #[arg(long)]
    seeds_only: bool,
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

impl Exec for CompletenessArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let designs = cx.designs_or_every(&a.designs)?;
        let scenarios = scenarios_or_catalog(&a.scenarios)?;
        let pairs: Vec<(DesignSpec, Scenario)> = designs
            .iter()
            .flat_map(|d| {
                scenarios
                    .iter()
                    .filter(|s| s.applies_to(d.backend, d.masters))
                    .map(move |s| (d.clone(), s.clone()))
            })
            .collect();
        if pairs.is_empty() {
            return Err(BadInput(
                "--design/--scenario: no scenario of those fits any of those designs".into(),
            ));
        }
        let of = pairs.len();
        let pairs = crate::bench::sample(&pairs, a.sample as usize);
        let rule = rule_with(a.budget.as_deref(), a.seeds_only)?;
        let deep = if a.deep == "0" {
            0..0
        } else {
            input::parse_seeds(&a.deep).map_err(|e| BadInput(e.0.replace("--seeds", "--deep")))?
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
    }
}

#[derive(Debug, Args)]
pub(super) struct GateCliArgs {
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

impl Exec for GateCliArgs {
    fn exec(self, cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let seeds = a.seeds.as_deref().map(input::parse_seeds).transpose()?;
        crate::gate::gate(&crate::gate::GateArgs {
            baseline: a.baseline,
            update: a.update,
            seeds,
            designs: a.designs,
            scenarios: a.scenarios,
            markdown: a.markdown,
            threads: threads(a.threads),
            extra_designs: cx.extra.clone(),
        })
    }
}
