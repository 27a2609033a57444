//! `locksim report`: one self-contained HTML page (inline SVG and CSS, no scripts, no
//! network), `summary.md` for a pull request or a README, `results.json` with
//! everything the page shows (latency histograms in HdrHistogram's V2 deflate form, as
//! hex), and a PNG copy of every plot.
//!
//! The page holds:
//! - the comparison matrix, designs × scenarios, each cell coloured by its worst
//!   safety class with its counts and fault-seen count, linking to the cell's section;
//! - per design, acquire latency by percentile (ok, fail, info) and a table of
//!   p50 / p99 / p99.9 / max in simulated ms;
//! - sweeps: the rate of unsafe runs as a fault grows, one line per design (pause /
//!   lease, network delay / lease, replication lag, clock drift);
//! - per failing cell, the first invalid run: its evidence, replay and shrink commands,
//!   a holder timeline (a row of the faults, believed holds per client, the server's
//!   record of the key, overlaps and the violation marked) and its sequence diagram.
//!
//! Every run of every cell and sweep point goes into one pool of worker threads, so
//! no core idles at the end of a small cell. The output depends only on the seeds and
//! the selection, never on the thread count or the wall clock.
//!
//! [`compute`] runs a report's seeds, or one shard's slice of them, into a shard file's
//! cells and sweep points; [`render`] writes the directory from merged cells, running a
//! failing cell's first invalid run again when its history is not at hand (`report
//! --from`), so a report built from shards is the unsharded one, byte for byte.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use plotters::style::RGBColor;
use scenarios::catalog::Scenario;
use scenarios::checkers::{self, model};
use scenarios::params::Param;
use scenarios::sweep::{DesignSpec, RunSummary, run_seed};
use serde::{Deserialize, Serialize};
use sim::history::{EventKind, History, ServerEvent};

use crate::commands::{BadInput, cell_of, shrink_command};
use crate::latency::LatencySummary;
use crate::plot::{self, Bar, Series};
use crate::sweeps::SweepResult;
use crate::table::{CellResult, matrix_mark};

/// Marks `results.json` as a locksim report (so a re-run may replace the directory's
/// files, and nothing else).
pub const FORMAT: &str = "locksim-report/1";

/// What to put in the report.
pub struct ReportArgs {
    /// Seeds of every matrix cell.
    pub seeds: Range<u64>,
    /// Seeds of every sweep point.
    pub sweep_seeds: Range<u64>,
    /// Designs (rows).
    pub designs: Vec<DesignSpec>,
    /// Scenarios (columns).
    pub scenarios: Vec<Scenario>,
    /// Run the sweeps.
    pub sweeps: bool,
    /// The output directory.
    pub out: PathBuf,
    /// Worker threads.
    pub threads: usize,
    /// Show a progress bar.
    pub progress: bool,
}

/// One design's acquire latency over every cell it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesignLatency {
    /// The design.
    pub design: String,
    /// Its histograms.
    pub latency: LatencySummary,
}

/// What `results.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// [`FORMAT`].
    pub format: String,
    /// The matrix's seeds.
    pub seeds: String,
    /// The sweeps' seeds.
    pub sweep_seeds: String,
    /// Designs, in row order.
    pub designs: Vec<String>,
    /// Scenarios, in column order.
    pub scenarios: Vec<String>,
    /// Every matrix cell.
    pub cells: Vec<CellResult>,
    /// Per design, acquire latency over all its cells.
    pub latency: Vec<DesignLatency>,
    /// The sweeps.
    pub sweeps: Vec<SweepResult>,
}

/// A sweep the report runs: the scenario, quantities pinned for every point, the swept
/// parameter and its values.
type PlannedSweep = (&'static str, Vec<(Param, u64)>, Param, Vec<u64>);

/// The sweeps a report runs (durations as multiples of the lease).
fn sweep_plan(lease_ms: u64) -> Vec<PlannedSweep> {
    let times = |fs: &[f64]| -> Vec<u64> {
        fs.iter()
            .map(|f| ((lease_ms as f64) * f).round().max(1.0) as u64)
            .collect()
    };
    vec![
        (
            "gc-pause",
            Vec::new(),
            Param::PauseMs,
            times(&[0.25, 0.5, 1.0, 2.0, 5.0]),
        ),
        (
            "network-delay",
            Vec::new(),
            Param::DelayMs,
            times(&[0.5, 1.0, 1.5, 2.0]),
        ),
        ("failover", Vec::new(), Param::LagMs, vec![1, 5, 20, 50]),
        // clock-drift's own critical sections last the whole lease and overrun it
        // with no drift at all; at 85 % of the lease only a fast clock breaks them.
        (
            "clock-drift",
            vec![(Param::WorkMs, lease_ms * 85 / 100)],
            Param::DriftPpm,
            vec![0, 100_000, 150_000, 200_000, 300_000],
        ),
    ]
}

/// Checks `--out`: a new or empty directory, or one holding an earlier locksim report
/// (whose files are replaced); never a directory of someone else's files.
pub fn check_out(dir: &Path) -> Result<(), BadInput> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(BadInput(format!(
            "--out {} exists and is not a directory; choose a new directory",
            dir.display()
        )));
    }
    let empty = std::fs::read_dir(dir)
        .map_err(|e| BadInput(format!("cannot read --out {}: {e}", dir.display())))?
        .next()
        .is_none();
    if empty {
        return Ok(());
    }
    let ours = std::fs::read_to_string(dir.join("results.json"))
        .ok()
        .is_some_and(|t| t.contains(&format!("\"format\": \"{FORMAT}\"")));
    if ours {
        Ok(())
    } else {
        Err(BadInput(format!(
            "--out {} holds files that are not a locksim report; choose a new or empty directory",
            dir.display()
        )))
    }
}

struct Job {
    design: usize,
    scenario: usize,
    seed: u64,
    keep: Keep,
}

/// Which histories a job keeps past its judgement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Always (a first violation run again for its timeline).
    Always,
    /// If the run is invalid (a matrix run: it may be its cell's first violation).
    IfInvalid,
    /// Never (a sweep point: only counted).
    Never,
}

/// Runs every job on `threads` workers; results in job order.
fn pool(
    designs: &[DesignSpec],
    scenarios: &[Scenario],
    jobs: &[Job],
    threads: usize,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<(RunSummary, LatencySummary)>, String> {
    let next = AtomicUsize::new(0);
    type Slot = Option<Result<(RunSummary, LatencySummary), String>>;
    let out: Mutex<Vec<Slot>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let (d, sc) = (&designs[job.design], &scenarios[job.scenario]);
                    let r = run_seed(d, sc, job.seed, true)
                        .map(|mut summary| {
                            let latency = summary
                                .history
                                .as_ref()
                                .and_then(|h| LatencySummary::from_history(h).ok())
                                .unwrap_or_default();
                            // An invalid run's history may become its cell's
                            // timeline; the others go at once.
                            let keep = match job.keep {
                                Keep::Always => true,
                                Keep::IfInvalid => summary.is_invalid(),
                                Keep::Never => false,
                            };
                            if !keep {
                                summary.history = None;
                            }
                            (summary, latency)
                        })
                        .map_err(|e| format!("{} / {}: {e}", d.name, sc.name));
                    bar.inc(1);
                    out.lock().expect("poisoned")[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .expect("poisoned")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// A sweep to run: its scenario, parameter and values, and per design (by index) the
/// index of each value's scenario among the jobs' scenarios.
type SweepSpec = (Scenario, Param, Vec<u64>, Vec<(usize, Vec<usize>)>);

/// What the runs of a report, or of one shard of it, came to: the shard file's cells
/// and sweeps, and the first invalid run (with its history) of each failing cell.
pub struct Computed {
    /// Cells and sweeps, as a shard file carries them.
    pub file: crate::shard::ShardFile,
    /// Per (design, scenario), the first invalid run with its history.
    pub first_invalid: BTreeMap<(String, String), RunSummary>,
}

/// Runs `shard`'s slice of the report's seeds (both ranges split the same way).
pub fn compute(args: &ReportArgs, shard: crate::shard::Shard) -> Result<Computed, String> {
    let designs = &args.designs;
    let seeds = shard.seeds_of(&args.seeds);
    let sweep_seeds = shard.seeds_of(&args.sweep_seeds);
    // Every scenario a job runs: the matrix's columns, then each sweep point's.
    let mut scenarios: Vec<Scenario> = args.scenarios.clone();
    let mut cells: Vec<(usize, usize)> = Vec::new();
    for (di, d) in designs.iter().enumerate() {
        for (si, s) in args.scenarios.iter().enumerate() {
            if s.applies_to(d.masters) {
                cells.push((di, si));
            }
        }
    }
    let mut sweep_specs: Vec<SweepSpec> = Vec::new();
    if args.sweeps {
        let lease = scenarios::catalog::find("gc-pause")
            .map(|s| s.workload.lease_ms)
            .unwrap_or(200);
        for (name, pins, param, values) in sweep_plan(lease) {
            let Ok(mut base) = scenarios::catalog::find(name) else {
                continue;
            };
            for (p, v) in pins {
                base = base.with_param(p, v)?;
            }
            let mut point_idx = Vec::new();
            for &v in &values {
                scenarios.push(base.clone().with_param(param, v)?);
                point_idx.push(scenarios.len() - 1);
            }
            let lines: Vec<(usize, Vec<usize>)> = designs
                .iter()
                .enumerate()
                .filter(|(_, d)| base.applies_to(d.masters))
                .map(|(di, _)| (di, point_idx.clone()))
                .collect();
            if !lines.is_empty() {
                sweep_specs.push((base, param, values, lines));
            }
        }
    }
    let mut jobs = Vec::new();
    let mut cell_jobs: Vec<Range<usize>> = Vec::new();
    for &(di, si) in &cells {
        let start = jobs.len();
        for seed in seeds.clone() {
            jobs.push(Job {
                design: di,
                scenario: si,
                seed,
                keep: Keep::IfInvalid,
            });
        }
        cell_jobs.push(start..jobs.len());
    }
    let mut point_jobs: BTreeMap<(usize, usize), Range<usize>> = BTreeMap::new();
    for (_, _, _, lines) in &sweep_specs {
        for (di, idxs) in lines {
            for &si in idxs {
                let start = jobs.len();
                for seed in sweep_seeds.clone() {
                    jobs.push(Job {
                        design: *di,
                        scenario: si,
                        seed,
                        keep: Keep::Never,
                    });
                }
                point_jobs.insert((*di, si), start..jobs.len());
            }
        }
    }
    let bar = crate::commands::progress(jobs.len() as u64, args.progress);
    bar.set_message("matrix and sweeps");
    let mut results = pool(designs, &scenarios, &jobs, args.threads, &bar)?;
    bar.finish_and_clear();

    let part_of =
        |results: &[(RunSummary, LatencySummary)], di: usize, si: usize, r: &Range<usize>| {
            let mut latency = LatencySummary::default();
            let runs: Vec<RunSummary> = results[r.clone()]
                .iter()
                .map(|(s, l)| {
                    latency.merge(l);
                    RunSummary {
                        history: None,
                        ..s.clone()
                    }
                })
                .collect();
            let cell = cell_of(&designs[di], &scenarios[si], &runs, &latency);
            crate::shard::ShardCell { cell, latency }
        };
    let mut matrix = Vec::new();
    for (k, &(di, si)) in cells.iter().enumerate() {
        matrix.push(part_of(&results, di, si, &cell_jobs[k]));
    }
    let mut sweeps = Vec::new();
    for (base, param, values, lines) in &sweep_specs {
        let lines = lines
            .iter()
            .map(|(di, idxs)| crate::shard::SweepShardLine {
                design: designs[*di].name.clone(),
                points: idxs
                    .iter()
                    .zip(values)
                    .map(|(si, v)| (*v, part_of(&results, *di, *si, &point_jobs[&(*di, *si)])))
                    .collect(),
            })
            .collect();
        sweeps.push(crate::shard::SweepShard {
            scenario: base.name.to_string(),
            param: param.name().to_string(),
            pinned: base.param_flags(),
            lease_ms: base.workload.lease_ms,
            lines,
        });
    }
    // The first invalid run of each failing cell, with its history (the pool kept the
    // histories of invalid runs; the rest are dropped with `results`).
    let mut first_invalid = BTreeMap::new();
    for (k, (&(di, si), part)) in cells.iter().zip(&matrix).enumerate() {
        if let Some(seed) = part.cell.first_invalid_seed
            && let Some((r, _)) = results[cell_jobs[k].clone()]
                .iter_mut()
                .find(|(r, _)| r.seed == seed)
        {
            let history = r.history.take();
            first_invalid.insert(
                (designs[di].name.clone(), scenarios[si].name.to_string()),
                RunSummary {
                    history,
                    ..r.clone()
                },
            );
        }
    }
    drop(results);
    Ok(Computed {
        file: crate::shard::ShardFile {
            seeds: format!("{}..{}", args.seeds.start, args.seeds.end),
            shard: shard.to_string(),
            cells: matrix,
            sweep_seeds: args
                .sweeps
                .then(|| format!("{}..{}", args.sweep_seeds.start, args.sweep_seeds.end)),
            sweeps,
        },
        first_invalid,
    })
}

/// Builds the report; returns the results and the HTML page's path.
pub fn build(args: &ReportArgs) -> Result<(Results, PathBuf), String> {
    plot::init_font()?;
    let mut computed = compute(args, crate::shard::Shard::WHOLE)?;
    let merged = crate::shard::merge_all(&[("report".into(), computed.file.clone())])?;
    render(
        &merged,
        &args.designs,
        &args.scenarios,
        &mut computed.first_invalid,
        &args.out,
        args.threads,
        args.progress,
    )
}

/// Writes the report of merged cells and sweeps into `out`. The first invalid run of a
/// failing cell comes from `first_invalid`, or is run again (runs are deterministic).
pub fn render(
    merged: &crate::shard::Merged,
    designs: &[DesignSpec],
    scenarios: &[Scenario],
    first_invalid: &mut BTreeMap<(String, String), RunSummary>,
    out: &Path,
    threads: usize,
    progress: bool,
) -> Result<(Results, PathBuf), String> {
    plot::init_font()?;
    let di_of = |name: &str| designs.iter().position(|d| d.name == name);
    let si_of = |name: &str| scenarios.iter().position(|s| s.name == name);
    let mut per_design: Vec<LatencySummary> =
        designs.iter().map(|_| LatencySummary::default()).collect();
    for part in &merged.cells {
        if let Some(di) = di_of(&part.cell.design) {
            per_design[di].merge(&part.latency);
        }
    }
    // Failing cells whose first invalid run is not at hand: run it again.
    let mut missing = Vec::new();
    for part in &merged.cells {
        let key = (part.cell.design.clone(), part.cell.scenario.clone());
        if let Some(seed) = part.cell.first_invalid_seed
            && !first_invalid.contains_key(&key)
        {
            let (Some(di), Some(si)) = (di_of(&key.0), si_of(&key.1)) else {
                return Err(format!("unknown cell {} / {}", key.0, key.1));
            };
            missing.push(Job {
                design: di,
                scenario: si,
                seed,
                keep: Keep::Always,
            });
        }
    }
    if !missing.is_empty() {
        let bar = crate::commands::progress(missing.len() as u64, progress);
        bar.set_message("first violations");
        let rerun = pool(designs, scenarios, &missing, threads, &bar)?;
        bar.finish_and_clear();
        for (job, (summary, _)) in missing.iter().zip(rerun) {
            first_invalid.insert(
                (
                    designs[job.design].name.clone(),
                    scenarios[job.scenario].name.to_string(),
                ),
                summary,
            );
        }
    }
    let results = Results {
        format: FORMAT.into(),
        seeds: merged.seeds.clone(),
        sweep_seeds: merged.sweep_seeds.clone().unwrap_or_default(),
        designs: designs.iter().map(|d| d.name.clone()).collect(),
        scenarios: scenarios.iter().map(|s| s.name.to_string()).collect(),
        cells: merged.cells.iter().map(|c| c.cell.clone()).collect(),
        latency: designs
            .iter()
            .zip(per_design)
            .map(|(d, latency)| DesignLatency {
                design: d.name.clone(),
                latency,
            })
            .collect(),
        sweeps: crate::sweeps::from_shards(merged),
    };
    let mut failing = Vec::new();
    for c in &results.cells {
        if let (Some(seed), Some(di), Some(si)) =
            (c.first_invalid_seed, di_of(&c.design), si_of(&c.scenario))
            && let Some(summary) = first_invalid.get(&(c.design.clone(), c.scenario.clone()))
        {
            failing.push((di, si, seed, summary));
        }
    }

    std::fs::create_dir_all(out.join("png"))
        .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    // An earlier report's plots (`check_out` let only a report's directory through):
    // a cell that no longer fails must not leave its timeline behind.
    if let Ok(entries) = std::fs::read_dir(out.join("png")) {
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "png") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let mut page = Page::default();
    page.header(&results);
    page.matrix(&results);
    page.latency(&results, out)?;
    page.sweeps(&results, out)?;
    let mut cell_sections = Vec::new();
    for (di, si, seed, summary) in failing {
        let (d, s) = (&designs[di], &scenarios[si]);
        let history = summary.history.as_ref().ok_or("a re-run kept no history")?;
        cell_sections.push(page.cell(d, s, seed, summary, history, out)?);
    }
    page.footer();
    let html_path = out.join("index.html");
    std::fs::write(&html_path, &page.html)
        .map_err(|e| format!("cannot write {}: {e}", html_path.display()))?;
    let json = serde_json::to_string_pretty(&results).expect("serializable");
    std::fs::write(out.join("results.json"), json + "\n")
        .map_err(|e| format!("cannot write results.json: {e}"))?;
    std::fs::write(out.join("summary.md"), summary_md(&results, &cell_sections))
        .map_err(|e| format!("cannot write summary.md: {e}"))?;
    Ok((results, html_path))
}

/// One row of the latency table: design, outcome, count, p50, p99, p99.9, max (ms).
type LatencyRow<'a> = (&'a str, &'static str, u64, f64, f64, f64, f64);

/// The latency table's rows: per design, each outcome that has samples.
fn latency_rows(r: &Results) -> Vec<LatencyRow<'_>> {
    let mut rows = Vec::new();
    for dl in &r.latency {
        for (name, h) in [
            ("ok", &dl.latency.ok_us),
            ("fail", &dl.latency.fail_us),
            ("info", &dl.latency.info_us),
        ] {
            if h.is_empty() {
                continue;
            }
            let q = |x: f64| h.value_at_quantile(x) as f64 / 1_000.0;
            rows.push((
                dl.design.as_str(),
                name,
                h.len(),
                q(0.5),
                q(0.99),
                q(0.999),
                h.max() as f64 / 1_000.0,
            ));
        }
    }
    rows
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A file-name-safe, anchor-safe form of a name (`broken/x` → `broken-x`).
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn cell_anchor(design: &str, scenario: &str) -> String {
    format!("cell-{}--{}", slug(design), slug(scenario))
}

/// The colour class of a matrix mark.
fn mark_class(mark: char) -> &'static str {
    match mark {
        'U' => "m-unsafe",
        'F' => "m-fenced",
        '?' => "m-unknown",
        'L' => "m-liveness",
        'S' => "m-safe",
        'n' => "m-nofault",
        _ => "m-none",
    }
}

const CSS: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:24px}h2{font-size:20px;margin-top:36px;border-bottom:1px solid #ccc}h3{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 5px;text-align:center}
th.row{text-align:left;white-space:nowrap}
.matrix th.col{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:normal}
.matrix td a{color:inherit;text-decoration:none;display:block}
.m-unsafe{background:#e45756;color:#fff}.m-fenced{background:#f2a541}.m-unknown{background:#9d9d9d;color:#fff}
.m-liveness{background:#b279a2;color:#fff}.m-safe{background:#7fc97f}.m-nofault{background:#fdf0a6}.m-none{background:#f4f4f4;color:#aaa}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}pre{background:#f6f6f6;padding:8px;overflow-x:auto}
.plots{display:flex;flex-wrap:wrap;gap:8px}.plot{margin:8px 0}.plot svg{max-width:100%;height:auto;border:1px solid #eee}
.legend span{display:inline-block;padding:2px 6px;margin-right:6px;font-size:12px}
.diagram svg{max-width:100%;height:auto}
.small{font-size:12px;color:#555}
";

#[derive(Default)]
struct Page {
    html: String,
}

/// What a failing cell contributed (for `summary.md`).
struct CellNote {
    design: String,
    scenario: String,
    checker: String,
    summary: String,
    replay: String,
}

impl Page {
    fn header(&mut self, r: &Results) {
        let _ = write!(
            self.html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"generator\" content=\"locksim {}\">\
             <title>locksim report</title><style>{CSS}</style></head><body>\n\
             <h1>locksim report</h1>\n<p class=\"small\">{} designs × {} scenarios, seeds {} \
             ({}). Every run is deterministic: each command below replays it. \
             Times are simulated.</p>\n<p class=\"small\"><a href=\"#matrix\">matrix</a> · \
             <a href=\"#latency\">latency</a> · <a href=\"#sweeps\">sweeps</a> · \
             <a href=\"#cells\">first violations</a></p>\n",
            env!("CARGO_PKG_VERSION"),
            r.designs.len(),
            r.scenarios.len(),
            esc(&r.seeds),
            if r.sweeps.is_empty() {
                "no sweeps".to_string()
            } else {
                format!("sweeps: seeds {}", esc(&r.sweep_seeds))
            },
        );
    }

    fn matrix(&mut self, r: &Results) {
        self.html.push_str(
            "<h2 id=\"matrix\">Comparison matrix</h2>\n<p class=\"legend\">\
             <span class=\"m-unsafe\">U unsafe: harm at the storage or server</span>\
             <span class=\"m-fenced\">F fenced: holds overlapped, the stale holder was refused</span>\
             <span class=\"m-unknown\">? unknown</span>\
             <span class=\"m-liveness\">L stuck or starved (liveness)</span>\
             <span class=\"m-safe\">S safe, fault seen</span>\
             <span class=\"m-nofault\">n fault never happened: no evidence</span></p>\n\
             <p class=\"small\">A number after the mark counts the runs in that class when not all \
             were; the line below counts the runs that saw the scenario's fault. Failing cells \
             link to their first violation.</p>\n<table class=\"matrix\"><tr><th></th>",
        );
        for s in &r.scenarios {
            let _ = write!(self.html, "<th class=\"col\">{}</th>", esc(s));
        }
        self.html.push_str("</tr>\n");
        for d in &r.designs {
            let _ = write!(self.html, "<tr><th class=\"row\">{}</th>", esc(d));
            for s in &r.scenarios {
                let Some(c) = r.cells.iter().find(|c| &c.design == d && &c.scenario == s) else {
                    self.html.push_str(
                        "<td class=\"m-none\" title=\"does not run in this world\">·</td>",
                    );
                    continue;
                };
                let (mark, text) = matrix_mark(c);
                let title = format!(
                    "{d} / {s}: {} runs; {}; fault seen in {}",
                    c.runs,
                    c.classes
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    c.fault_seen
                );
                let inner = format!(
                    "{}<br><span class=\"small\">{}/{}</span>",
                    esc(&text),
                    c.fault_seen,
                    c.runs
                );
                if c.first_invalid_seed.is_some() {
                    let _ = write!(
                        self.html,
                        "<td class=\"{}\" title=\"{}\"><a href=\"#{}\">{inner}</a></td>",
                        mark_class(mark),
                        esc(&title),
                        cell_anchor(d, s)
                    );
                } else {
                    let _ = write!(
                        self.html,
                        "<td class=\"{}\" title=\"{}\">{inner}</td>",
                        mark_class(mark),
                        esc(&title)
                    );
                }
            }
            self.html.push_str("</tr>\n");
        }
        self.html.push_str("</table>\n");
    }

    fn plot(&mut self, name: &str, p: &impl plot::Draw, out: &Path) -> Result<(), String> {
        let png = out.join("png").join(format!("{name}.png"));
        let svg = plot::render(p, Some(&png))?;
        // Drop the XML declaration, if any, for inline use.
        let svg = svg.trim_start_matches(|c| c != '<');
        let svg = match svg.strip_prefix("<?xml") {
            Some(rest) => rest.split_once("?>").map_or(rest, |(_, r)| r),
            None => svg,
        };
        let _ = writeln!(
            self.html,
            "<div class=\"plot\" id=\"plot-{}\">{}<div class=\"small\">PNG: <a href=\"png/{}.png\">png/{}.png</a></div></div>",
            esc(name),
            svg.trim(),
            esc(name),
            esc(name)
        );
        Ok(())
    }

    fn latency(&mut self, r: &Results, out: &Path) -> Result<(), String> {
        self.html.push_str(
            "<h2 id=\"latency\">Acquire latency</h2>\n<p class=\"small\">Per design, over every \
             cell it ran: time from invoking an acquire to its outcome, by percentile \
             (HdrHistogram's plot: the x axis is 1 / (1 − quantile) on a log scale). ok: got the \
             lock; fail: refused; info: outcome unknown (timed out).</p>\n\
             <table><tr><th>design</th><th>outcome</th><th>count</th><th>p50 ms</th><th>p99 ms</th>\
             <th>p99.9 ms</th><th>max ms</th></tr>\n",
        );
        for (design, name, n, p50, p99, p999, max) in latency_rows(r) {
            let _ = writeln!(
                self.html,
                "<tr><th class=\"row\">{}</th><td>{name}</td><td>{n}</td><td>{p50:.1}</td><td>{p99:.1}</td><td>{p999:.1}</td><td>{max:.1}</td></tr>",
                esc(design)
            );
        }
        self.html.push_str("</table>\n");
        self.html.push_str("<div class=\"plots\">\n");
        for dl in &r.latency {
            let series: Vec<Series> = [
                ("ok", &dl.latency.ok_us, plot::COLORS[2]),
                ("fail", &dl.latency.fail_us, plot::COLORS[1]),
                ("info", &dl.latency.info_us, plot::COLORS[3]),
            ]
            .into_iter()
            .filter(|(_, h, _)| !h.is_empty())
            .map(|(n, h, color)| Series {
                label: format!("{n} ({})", h.len()),
                color,
                points: plot::percentile_points(h),
            })
            .collect();
            self.plot(
                &format!("latency-{}", slug(&dl.design)),
                &plot::Percentiles {
                    title: format!("{}: acquire latency by percentile", dl.design),
                    series,
                },
                out,
            )?;
        }
        self.html.push_str("</div>\n");
        Ok(())
    }

    fn sweeps(&mut self, r: &Results, out: &Path) -> Result<(), String> {
        if r.sweeps.is_empty() {
            return Ok(());
        }
        self.html.push_str(
            "<h2 id=\"sweeps\">Sweeps</h2>\n<p class=\"small\">The share of unsafe runs as one \
             quantity of a scenario grows, every other draw of each seed unchanged. Lines that \
             coincide are listed in the table under each plot; `*` marks a point where the \
             scenario's fault did not happen in every run.</p>\n",
        );
        for s in &r.sweeps {
            let name = format!("sweep-{}-{}", slug(&s.scenario), slug(&s.param));
            let _ = writeln!(
                self.html,
                "<h3 id=\"{name}\">{} × {}</h3>",
                esc(&s.scenario),
                esc(&s.param)
            );
            self.plot(&name, &s.plot(), out)?;
            self.html.push_str("<table><tr><th>design</th>");
            if let Some(l) = s.lines.first() {
                for p in &l.points {
                    let _ = write!(self.html, "<th>{}={}</th>", esc(&s.param), p.value);
                }
            }
            self.html.push_str("</tr>\n");
            for l in &s.lines {
                let _ = write!(self.html, "<tr><th class=\"row\">{}</th>", esc(&l.design));
                for p in &l.points {
                    let u = p.cell.classes.get("unsafe").copied().unwrap_or(0);
                    let class = if u > 0 { "m-unsafe" } else { "m-safe" };
                    let star = if p.cell.fault_seen < p.cell.runs {
                        "*"
                    } else {
                        ""
                    };
                    let title = p.cell.replay.clone().unwrap_or_default();
                    let _ = write!(
                        self.html,
                        "<td class=\"{class}\" title=\"{}\">{u}/{}{star}</td>",
                        esc(&title),
                        p.cell.runs
                    );
                }
                self.html.push_str("</tr>\n");
            }
            self.html.push_str("</table>\n");
            let cmd = format!(
                "locksim sweep --scenario {}{} --param {}={} --seeds {}",
                s.scenario,
                s.pinned,
                s.param,
                s.lines
                    .first()
                    .map(|l| l
                        .points
                        .iter()
                        .map(|p| p.value.to_string())
                        .collect::<Vec<_>>()
                        .join(","))
                    .unwrap_or_default(),
                s.seeds
            );
            let _ = writeln!(
                self.html,
                "<p class=\"small\">Re-run: <code>{}</code></p>",
                esc(&cmd)
            );
        }
        Ok(())
    }

    fn cell(
        &mut self,
        d: &DesignSpec,
        s: &Scenario,
        seed: u64,
        summary: &RunSummary,
        history: &History,
        out: &Path,
    ) -> Result<CellNote, String> {
        if !self.html.contains("<h2 id=\"cells\">") {
            self.html.push_str(
                "<h2 id=\"cells\">First violations</h2>\n<p class=\"small\">For each failing cell, \
                 its first invalid run: the holder timeline (who believed it held the lock, what \
                 the server recorded, the faults) and the run's sequence diagram around the \
                 violation.</p>\n",
            );
        }
        let (checker, evidence) = summary
            .verdicts
            .iter()
            .filter_map(|(n, v)| v.evidence().map(|e| (n.clone(), e.clone())))
            .min_by_key(|(_, e)| e.at_us)
            .ok_or("a failing cell's first invalid run has no evidence")?;
        let anchor = cell_anchor(&d.name, s.name);
        let replay = crate::commands::replay_for(d, s, seed);
        let _ = writeln!(
            self.html,
            "<h3 id=\"{anchor}\">{} / {} (seed {seed})</h3>\n<p><b>{}</b>: {}</p>\n\
             <p class=\"small\">Replay: <code>{}</code><br>Shrink to a minimal run: <code>{}</code><br>\
             Diagram: <code>{} --diagram {}.svg</code></p>",
            esc(&d.name),
            esc(s.name),
            esc(&checker),
            esc(&evidence.summary),
            esc(&replay),
            esc(&shrink_command(&d.name, s, seed)),
            esc(&replay),
            esc(&anchor),
        );
        let others: Vec<String> = summary
            .verdicts
            .iter()
            .filter(|(n, v)| v.is_invalid() && *n != checker)
            .map(|(n, _)| n.clone())
            .collect();
        if !others.is_empty() {
            let _ = writeln!(
                self.html,
                "<p class=\"small\">Also invalid in this run: {}</p>",
                esc(&others.join(", "))
            );
        }
        let diagram = crate::diagram::build(history, &summary.verdicts, false);
        self.plot(
            &anchor,
            &holder_timeline(
                history,
                &diagram,
                &evidence,
                &format!("{} / {}", d.name, s.name),
            ),
            out,
        )?;
        let svg = crate::diagram::svg(&diagram);
        let _ = writeln!(
            self.html,
            "<details class=\"diagram\"><summary>Sequence diagram</summary>{}</details>",
            svg.trim()
        );
        Ok(CellNote {
            design: d.name.clone(),
            scenario: s.name.to_string(),
            checker,
            summary: evidence.summary,
            replay,
        })
    }

    fn footer(&mut self) {
        self.html.push_str(
            "<p class=\"small\">Generated by locksim. results.json holds every figure on this page; \
             summary.md the matrix in Markdown.</p>\n</body></html>\n",
        );
    }
}

/// The holder timeline of a run around its first violation: a row per client the
/// diagram shows (bars: believed holds), a row per server (bars: who the key's value
/// belonged to, by the server's own record), faults shaded on their host's row, every
/// overlap of two clients' holds in red, and the violation as a line.
fn holder_timeline(
    h: &History,
    d: &crate::diagram::Diagram,
    evidence: &checkers::Evidence,
    title: &str,
) -> plot::Timeline {
    let ms = |us: u64| us as f64 / 1_000.0;
    let clients: Vec<String> = d
        .lanes
        .iter()
        .filter(|l| l.starts_with("client"))
        .cloned()
        .collect();
    let servers: Vec<String> = d
        .lanes
        .iter()
        .filter(|l| l.starts_with("redis"))
        .cloned()
        .collect();
    // Row 0: the faults in the window; then a row per client; then a row per server.
    let mut rows: Vec<String> = vec!["faults".to_string()];
    rows.extend(clients.iter().map(|c| format!("{c} believes")));
    rows.extend(servers.iter().map(|s| format!("{s} key holder")));
    let color_of = |host: &str| {
        let i = clients
            .iter()
            .position(|c| c == host)
            .unwrap_or(clients.len());
        plot::COLORS[i % plot::COLORS.len()]
    };
    let mut bars = Vec::new();
    let holds = model::holds(h).unwrap_or_default();
    for hold in &holds {
        if let Some(row) = clients.iter().position(|c| *c == hold.host) {
            bars.push(Bar {
                row: row + 1,
                from_ms: ms(hold.start_us),
                to_ms: ms(hold.end_us),
                color: color_of(&hold.host),
                alpha: 0.8,
                label: String::new(),
            });
        }
    }
    // The server's record: from a write of the key to its removal or the next write.
    let key = evidence_key(h);
    for (si, server) in servers.iter().enumerate() {
        let row = 1 + clients.len() + si;
        let mut open: Option<(u64, String)> = None;
        for e in &h.events {
            if &e.host != server {
                continue;
            }
            let EventKind::Server(ev) = &e.kind else {
                continue;
            };
            match ev {
                ServerEvent::Written { by, key: k, .. } if Some(k) == key.as_ref() => {
                    if let Some((from, who)) = open.take() {
                        bars.push(record_bar(row, ms(from), ms(e.at_us), &who, color_of(&who)));
                    }
                    open = Some((e.at_us, by.clone()));
                }
                ServerEvent::Removed { key: k, .. } if Some(k) == key.as_ref() => {
                    if let Some((from, who)) = open.take() {
                        bars.push(record_bar(row, ms(from), ms(e.at_us), &who, color_of(&who)));
                    }
                }
                _ => {}
            }
        }
        if let Some((from, who)) = open {
            bars.push(record_bar(
                row,
                ms(from),
                ms(h.end_us),
                &who,
                color_of(&who),
            ));
        }
    }
    // Faults in the window, on the faults row, named with their host.
    for w in model::fault_windows(h) {
        if w.end_us < d.start_us || w.start_us > d.end_us {
            continue;
        }
        let kind = h
            .plan
            .faults
            .get(w.fault)
            .map_or("fault", |f| fault_name(&f.kind));
        bars.push(Bar {
            row: 0,
            from_ms: ms(w.start_us),
            to_ms: ms(w.end_us.max(w.start_us + 2_000)),
            color: RGBColor(90, 90, 90),
            alpha: 0.35,
            label: format!("{kind} {}", w.host),
        });
    }
    // Overlaps of two shown clients' holds, on both rows.
    let shown: Vec<&model::Hold> = holds.iter().filter(|h| clients.contains(&h.host)).collect();
    for (i, a) in shown.iter().enumerate() {
        for b in &shown[i + 1..] {
            if a.host == b.host {
                continue;
            }
            let (from, to) = (a.start_us.max(b.start_us), a.end_us.min(b.end_us));
            if from >= to {
                continue;
            }
            for host in [&a.host, &b.host] {
                if let Some(row) = clients.iter().position(|c| c == host) {
                    bars.push(Bar {
                        row: row + 1,
                        from_ms: ms(from),
                        to_ms: ms(to),
                        color: RGBColor(220, 0, 0),
                        alpha: 0.55,
                        label: String::new(),
                    });
                }
            }
        }
    }
    plot::Timeline {
        title: format!("{title}: believed holds, the server's record, faults (red: overlap)"),
        rows,
        from_ms: ms(d.start_us),
        to_ms: ms(d.end_us),
        bars,
        marks: vec![(ms(evidence.at_us), RGBColor(200, 0, 0), "violation".into())],
    }
}

/// A fault kind's short name.
fn fault_name(k: &sim::faults::FaultKind) -> &'static str {
    use sim::faults::FaultKind::*;
    match k {
        Pause { .. } => "pause",
        PauseBeforeWrite { .. } => "pause before write",
        Crash { .. } => "crash",
        MachineCrash { .. } => "machine crash",
        Delay { .. } => "delay",
        DropPushes { .. } => "drop pub/sub",
        Partition { .. } => "partition",
        ClockJump { .. } => "clock jump",
        ClockDrift { .. } => "clock drift",
        _ => "fault",
    }
}

fn record_bar(row: usize, from: f64, to: f64, who: &str, color: RGBColor) -> Bar {
    Bar {
        row,
        from_ms: from,
        to_ms: to,
        color,
        alpha: 0.45,
        label: who.to_string(),
    }
}

/// The lock key of a history (the key of its first acquire).
fn evidence_key(h: &History) -> Option<String> {
    h.ops()
        .filter(|(_, op)| op.f == sim::history::OpF::Acquire)
        .find_map(|(_, op)| op.key.clone())
}

/// `summary.md`: the matrix, the latency table, the sweeps and the first violations.
fn summary_md(r: &Results, cells: &[CellNote]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# locksim report\n\n{} designs × {} scenarios, seeds {} (sweeps: seeds {}). \
         U unsafe, F fenced, ? unknown, L liveness, S safe, n fault never happened, · does not run; \
         a number counts the runs in that class when not all were.\n",
        r.designs.len(),
        r.scenarios.len(),
        r.seeds,
        r.sweep_seeds
    );
    o.push_str("| design |");
    for (i, _) in r.scenarios.iter().enumerate() {
        let _ = write!(o, " {} |", i + 1);
    }
    o.push_str("\n|---|");
    for _ in &r.scenarios {
        o.push_str("---|");
    }
    o.push('\n');
    for d in &r.designs {
        let _ = write!(o, "| {d} |");
        for s in &r.scenarios {
            let text = r
                .cells
                .iter()
                .find(|c| &c.design == d && &c.scenario == s)
                .map_or("·".to_string(), |c| matrix_mark(c).1);
            let _ = write!(o, " {text} |");
        }
        o.push('\n');
    }
    o.push_str("\nScenarios: ");
    o.push_str(
        &r.scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{} {s}", i + 1))
            .collect::<Vec<_>>()
            .join(", "),
    );
    o.push_str("\n\n## Acquire latency (simulated ms)\n\n| design | outcome | count | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
    for (design, name, n, p50, p99, p999, max) in latency_rows(r) {
        let _ = writeln!(
            o,
            "| {design} | {name} | {n} | {p50:.1} | {p99:.1} | {p999:.1} | {max:.1} |"
        );
    }
    for s in &r.sweeps {
        let _ = writeln!(
            o,
            "\n## Sweep: {} × {} (unsafe runs / runs, seeds {})\n",
            s.scenario, s.param, s.seeds
        );
        o.push_str("| design |");
        if let Some(l) = s.lines.first() {
            for p in &l.points {
                let _ = write!(o, " {} |", p.value);
            }
            o.push_str("\n|---|");
            for _ in &l.points {
                o.push_str("---|");
            }
        }
        o.push('\n');
        for l in &s.lines {
            let _ = write!(o, "| {} |", l.design);
            for p in &l.points {
                let _ = write!(
                    o,
                    " {}/{} |",
                    p.cell.classes.get("unsafe").copied().unwrap_or(0),
                    p.cell.runs
                );
            }
            o.push('\n');
        }
    }
    if !cells.is_empty() {
        o.push_str("\n## First violations\n\n");
        for c in cells {
            let _ = writeln!(
                o,
                "- **{} / {}** — {}: {}  \n  `{}`",
                c.design, c.scenario, c.checker, c.summary, c.replay
            );
        }
    }
    o
}

/// `locksim report --shard I/N --out FILE`: runs the slice and writes the shard file.
pub fn write_shard(args: &ReportArgs, shard: crate::shard::Shard) -> Result<ExitCode, BadInput> {
    if args.out.exists() {
        return Err(BadInput(format!(
            "{} exists; locksim does not overwrite it (remove it or pick another --out)",
            args.out.display()
        )));
    }
    let computed = compute(args, shard).map_err(BadInput)?;
    crate::shard::write_file(&args.out, &computed.file)?;
    println!(
        "locksim report: shard {shard} written to {} (build the report with `locksim report --from` and every shard's file)",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `locksim report --from FILES… --out DIR`: merges the shards and writes the report,
/// running each failing cell's first invalid run again for its timeline.
pub fn from_shards(paths: &[PathBuf], out: &Path, threads: usize) -> Result<ExitCode, BadInput> {
    let files = crate::shard::read_files(paths)?;
    let merged = crate::shard::merge_all(&files).map_err(BadInput)?;
    let mut designs: Vec<DesignSpec> = Vec::new();
    let mut scenarios: Vec<Scenario> = Vec::new();
    for c in &merged.cells {
        if !designs.iter().any(|d| d.name == c.cell.design) {
            designs.push(crate::commands::design(&c.cell.design)?);
        }
        if !scenarios.iter().any(|s| s.name == c.cell.scenario) {
            scenarios.push(crate::commands::scenario(&c.cell.scenario)?);
        }
    }
    let order: Vec<&str> = scenarios::catalog::catalog()
        .iter()
        .map(|s| s.name)
        .collect();
    scenarios.sort_by_key(|s| order.iter().position(|o| *o == s.name));
    match render(
        &merged,
        &designs,
        &scenarios,
        &mut BTreeMap::new(),
        out,
        threads,
        true,
    ) {
        Ok((results, page)) => {
            println!(
                "locksim report: merged {} shard files; wrote {} ({} cells)",
                files.len(),
                page.display(),
                results.cells.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("locksim report: {e}");
            Ok(ExitCode::from(crate::commands::EXIT_UNKNOWN))
        }
    }
}
