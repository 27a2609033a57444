//! Sweeps: the rate of unsafe runs as one scenario parameter grows, one line per
//! design (`locksim sweep`, and the report's sweep plots).
//!
//! Each point is a whole cell (the scenario with the parameter pinned, over the seed
//! range), so a point carries the same evidence as a table cell: safety classes, how
//! many runs saw the fault, and the replay command of its first invalid run, which
//! pins the parameter with `--param`.

use std::ops::Range;

use indicatif::ProgressBar;
use scenarios::catalog::Scenario;
use scenarios::params::{Param, ParamRange};
use scenarios::sweep::DesignSpec;
use serde::{Deserialize, Serialize};

use crate::cells::run_cells_fixed;
use crate::input::BadInput;
use crate::plot;
use crate::table::CellResult;

/// One value of the parameter for one design.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepPoint {
    /// The parameter's value.
    pub value: u64,
    /// The cell at that value, written with its `rates` (every share with its 95 %
    /// interval).
    #[serde(serialize_with = "crate::table::serialize_cell")]
    pub cell: CellResult,
}

impl SweepPoint {
    /// Unsafe runs / runs (0 with no runs).
    pub fn unsafe_rate(&self) -> f64 {
        let c = &self.cell;
        if c.runs == 0 {
            return 0.0;
        }
        c.classes.get("unsafe").copied().unwrap_or(0) as f64 / c.runs as f64
    }

    /// The unsafe share's 95 % interval as (low, high), if the point has runs.
    pub fn unsafe_interval(&self) -> Option<(f64, f64)> {
        scenarios::stats::Rate::of(
            self.cell.classes.get("unsafe").copied().unwrap_or(0) as u64,
            self.cell.runs,
        )
        .map(|r| (r.low, r.high))
    }
}

/// One design's points.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepLine {
    /// The design.
    pub design: String,
    /// One point per value, in the order of the values.
    pub points: Vec<SweepPoint>,
}

/// A finished sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepResult {
    /// The scenario.
    pub scenario: String,
    /// The parameter's name.
    pub param: String,
    /// Quantities pinned at every point, as `--param` flags (empty if none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pinned: String,
    /// The seed range of every point.
    pub seeds: String,
    /// The scenario's lease, ms (for the x axis of durations: value / lease).
    pub lease_ms: u64,
    /// One line per design.
    pub lines: Vec<SweepLine>,
}

/// Whether `param` is a duration best read as a multiple of the lease.
pub fn per_lease(param: Param) -> bool {
    matches!(
        param,
        Param::PauseMs | Param::DelayMs | Param::JumpMs | Param::PartitionMs | Param::WorkMs
    )
}

/// Checks that every design runs in `scenario` and that the scenario has the parameter.
pub fn check(
    designs: &[DesignSpec],
    scenario: &Scenario,
    range: &ParamRange,
) -> Result<(), BadInput> {
    for d in designs {
        crate::input::check_pair(d, scenario)?;
    }
    scenario
        .clone()
        .with_param(range.param, range.values[0])
        .map(|_| ())
        .map_err(BadInput)
}

/// Runs every design at every value over `seeds`, the points across the workers
/// ([`run_cells_fixed`]: a point with fewer seeds left than workers does not leave
/// a core idle until its slowest run ends). Returns each point's cell with its latency
/// histograms (what a shard file carries) and the exit code of all its runs.
pub fn run(
    designs: &[DesignSpec],
    scenario: &Scenario,
    range: &ParamRange,
    seeds: Range<u64>,
    threads: usize,
    bar: &ProgressBar,
) -> Result<(crate::shard::SweepShard, u8), String> {
    let pinned: Vec<Scenario> = range
        .values
        .iter()
        .map(|&value| scenario.clone().with_param(range.param, value))
        .collect::<Result<_, _>>()?;
    let pairs: Vec<(&DesignSpec, &Scenario)> = designs
        .iter()
        .flat_map(|d| pinned.iter().map(move |s| (d, s)))
        .collect();
    let mut cells = run_cells_fixed(&pairs, seeds, threads, true, bar)?.into_iter();
    let mut codes = Vec::new();
    let mut lines = Vec::new();
    for d in designs {
        let mut points = Vec::new();
        for &value in &range.values {
            let fixed = cells.next().expect("a cell for every point");
            codes.push(fixed.exit);
            let latency = fixed.latency.expect("kept for every point");
            let cell = fixed.cell;
            points.push((value, crate::shard::ShardCell { cell, latency }));
        }
        lines.push(crate::shard::SweepShardLine {
            design: d.name.clone(),
            points,
        });
    }
    let shard = crate::shard::SweepShard {
        scenario: scenario.name.to_string(),
        param: range.param.name().to_string(),
        pinned: scenario.param_flags(),
        lease_ms: scenario.workload.lease_ms,
        lines,
    };
    Ok((shard, crate::exit::code_of_parts(codes)))
}

/// The sweep of one shard's (or a whole run's) points over `seeds`.
pub fn of_shard(s: &crate::shard::SweepShard, seeds: &str) -> SweepResult {
    SweepResult {
        scenario: s.scenario.clone(),
        param: s.param.clone(),
        pinned: s.pinned.clone(),
        seeds: seeds.to_string(),
        lease_ms: s.lease_ms,
        lines: s
            .lines
            .iter()
            .map(|l| SweepLine {
                design: l.design.clone(),
                points: l
                    .points
                    .iter()
                    .map(|(value, part)| SweepPoint {
                        value: *value,
                        cell: part.cell.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

impl SweepResult {
    fn param(&self) -> Option<Param> {
        Param::parse(&self.param).ok()
    }

    /// The x of `value` on the plot (a multiple of the lease for durations).
    pub fn x(&self, value: u64) -> f64 {
        match self.param() {
            Some(p) if per_lease(p) && self.lease_ms > 0 => value as f64 / self.lease_ms as f64,
            _ => value as f64,
        }
    }

    /// The x axis's description.
    pub fn x_desc(&self) -> String {
        match self.param() {
            Some(p) if per_lease(p) => {
                format!("{} / lease (lease = {} ms)", self.param, self.lease_ms)
            }
            _ => self.param.clone(),
        }
    }

    /// The plot: unsafe runs per design against the parameter, each line in a band of
    /// its points' 95 % intervals (exact Clopper–Pearson).
    pub fn plot(&self) -> plot::Lines {
        plot::Lines {
            title: format!(
                "{}{}: unsafe runs as {} grows",
                self.scenario,
                self.pinned.replace(" --param ", ", "),
                self.param
            ),
            x_desc: self.x_desc(),
            y_desc: format!("unsafe runs, band: 95% CI (seeds {})", self.seeds),
            series: self
                .lines
                .iter()
                .enumerate()
                .map(|(i, l)| plot::Series {
                    label: l.design.clone(),
                    color: plot::COLORS[i % plot::COLORS.len()],
                    points: l
                        .points
                        .iter()
                        .map(|p| (self.x(p.value), p.unsafe_rate()))
                        .collect(),
                    band: l
                        .points
                        .iter()
                        .filter_map(|p| {
                            p.unsafe_interval()
                                .map(|(lo, hi)| (self.x(p.value), lo, hi))
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// A text table: one row per value, one column per design, `unsafe/runs` (and
    /// `*` where the scenario's fault was not seen in every run) and the rate's 95 %
    /// interval (`3/30 2.1–27%`, `0/20* <14%`).
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let width = self
            .lines
            .iter()
            .map(|l| l.design.len())
            .max()
            .unwrap_or(0)
            .max(16);
        let _ = write!(out, "{:>12} {:>8}", self.param, "x");
        for l in &self.lines {
            let _ = write!(out, "  {:>width$}", l.design);
        }
        out.push('\n');
        let values: Vec<u64> = self
            .lines
            .first()
            .map(|l| l.points.iter().map(|p| p.value).collect())
            .unwrap_or_default();
        for (i, v) in values.iter().enumerate() {
            let _ = write!(out, "{v:>12} {:>8.2}", self.x(*v));
            for l in &self.lines {
                let p = &l.points[i];
                let mark = if p.cell.fault_seen < p.cell.runs {
                    "*"
                } else {
                    ""
                };
                let unsafe_runs = p.cell.classes.get("unsafe").copied().unwrap_or(0);
                let interval = scenarios::stats::Rate::of(unsafe_runs as u64, p.cell.runs)
                    .map(|r| format!(" {}", r.interval()))
                    .unwrap_or_default();
                let text = format!("{unsafe_runs}/{}{mark}{interval}", p.cell.runs);
                let _ = write!(out, "  {text:>width$}");
            }
            out.push('\n');
        }
        out
    }

    /// The first invalid run of each point that has one: design, value, replay.
    pub fn replays(&self) -> Vec<(&str, u64, &str)> {
        self.lines
            .iter()
            .flat_map(|l| {
                l.points.iter().filter_map(move |p| {
                    p.cell
                        .replay
                        .as_deref()
                        .map(|r| (l.design.as_str(), p.value, r))
                })
            })
            .collect()
    }
}

/// The sweeps of merged shard files.
pub fn from_shards(m: &crate::shard::Merged) -> Vec<SweepResult> {
    let seeds = m.sweep_seeds.clone().unwrap_or_default();
    m.sweeps.iter().map(|s| of_shard(s, &seeds)).collect()
}
