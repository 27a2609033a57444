//! `locksim report`: a directory of HTML that opens from disk (inline SVG and CSS, no
//! scripts, no network), `summary.md` for a pull request or a README, and
//! `results.json` with everything the pages show (latency histograms in HdrHistogram's
//! V2 deflate form, as hex).
//!
//! Its cells are the main job's: each runs seeds from 0 under the main job's adaptive
//! rule ([`scenarios::adaptive`]), unless `--seeds` gives one fixed range for every cell;
//! the page says which. `index.html` holds:
//! - the comparison by system ([`crate::compare`]), first;
//! - the matrix, one table per world (the designs that lock on one system the same way),
//!   with only the scenarios that run there, grouped by fault class: each cell coloured
//!   by its worst safety class, a failing cell linking to its first violation;
//! - per design, a table of acquire latency p50 / p99 / p99.9 / max in simulated ms;
//! - sweeps: the rate of unsafe runs as a fault grows, one line per design (pause /
//!   lease, network delay / lease, replication lag, clock drift);
//! - the failing cells, each linking to its own page (`cells/DESIGN--SCENARIO.html`):
//!   the first invalid run's evidence, replay and shrink commands, a holder timeline (a
//!   row of the faults, believed holds per client, the server's record of the key,
//!   overlaps and the violation marked) and its sequence diagram.
//!
//! `latency.html` draws each design's latency by percentile. A page per failing cell
//! keeps the index small (a whole report's diagrams are tens of megabytes); `--full`
//! puts every section on the one page, as anchors, and writes a PNG of every plot.
//!
//! Every run of every cell and sweep point goes into one pool of worker threads, so
//! no core idles at the end of a small cell. The output depends only on the seeds and
//! the selection, never on the thread count or the wall clock.
//!
//! [`compute`] runs a report's seeds, or one shard's slice of them, into a shard file's
//! cells and sweep points; [`render`] writes the directory from merged cells, running a
//! failing cell's first invalid run again when its history is not at hand (`report
//! --from`, and the adaptive search, which keeps none), so a report built from shards
//! is the unsharded one, byte for byte.

mod page;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use scenarios::catalog::Scenario;
use scenarios::params::Param;
use scenarios::sweep::{DesignSpec, RunSummary, run_seed};
use serde::{Deserialize, Serialize};

use crate::cells::cell_of;
use crate::input::BadInput;
use crate::latency::LatencySummary;
use crate::plot;
use crate::sweeps::SweepResult;
use crate::table::CellResult;
use page::{Page, summary_md};

/// Marks `results.json` as a locksim report (so a re-run may replace the directory's
/// files, and nothing else).
pub const FORMAT: &str = "locksim-report/1";

/// What to put in the report.
pub struct ReportArgs {
    /// Seeds of every matrix cell: a fixed range, or the main job's adaptive search.
    pub seeds: crate::seeds::Seeds,
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
    /// Everything on one page with a PNG of every plot (the details of each failing
    /// cell inline), instead of a page per failing cell.
    pub full: bool,
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
    /// Every matrix cell, written with its `rates` (every share with its 95 % interval).
    #[serde(serialize_with = "crate::table::serialize_cells")]
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

/// Each sweep point's jobs, by (design, scenario) index.
type PointJobs = BTreeMap<(usize, usize), Range<usize>>;

/// What the runs of a report, or of one shard of it, came to: the shard file's cells
/// and sweeps, and the first invalid run (with its history) of each failing cell.
pub struct Computed {
    /// Cells and sweeps, as a shard file carries them.
    pub file: crate::shard::ShardFile,
    /// Per (design, scenario), the first invalid run with its history.
    pub first_invalid: BTreeMap<(String, String), RunSummary>,
}

/// The sweeps the report runs (of the designs that run each sweep's scenario), each
/// point's scenario pushed on `scenarios`.
fn plan_sweeps(args: &ReportArgs, scenarios: &mut Vec<Scenario>) -> Result<Vec<SweepSpec>, String> {
    let designs = &args.designs;
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
                .filter(|(_, d)| base.applies_to(d.backend, d.masters))
                .map(|(di, _)| (di, point_idx.clone()))
                .collect();
            if !lines.is_empty() {
                sweep_specs.push((base, param, values, lines));
            }
        }
    }
    Ok(sweep_specs)
}

/// A cell's seeds' jobs, and each sweep point's: the jobs, each cell's range of them
/// (in `cells`' order), and each point's range by (design, scenario).
fn jobs_of(
    cells: &[(usize, usize)],
    seeds: &Range<u64>,
    sweep_specs: &[SweepSpec],
    sweep_seeds: &Range<u64>,
) -> (Vec<Job>, Vec<Range<usize>>, PointJobs) {
    let mut jobs = Vec::new();
    let mut cell_jobs: Vec<Range<usize>> = Vec::new();
    for &(di, si) in cells {
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
    let mut point_jobs: PointJobs = BTreeMap::new();
    for (_, _, _, lines) in sweep_specs {
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
    (jobs, cell_jobs, point_jobs)
}

/// Runs `shard`'s slice of the report's seeds (both ranges split the same way).
pub fn compute(args: &ReportArgs, shard: crate::shard::Shard) -> Result<Computed, String> {
    let designs = &args.designs;
    // A fixed range splits by seeds; the adaptive search runs each cell whole (the CLI
    // refuses `--shard` without `--seeds`).
    let (seeds, rule) = match &args.seeds {
        crate::seeds::Seeds::Fixed(range) => (shard.seeds_of(range), None),
        crate::seeds::Seeds::Adaptive(rule) => {
            if shard != crate::shard::Shard::WHOLE {
                return Err("--shard splits a fixed seed range: give --seeds A..B".into());
            }
            (0..0, Some(*rule))
        }
    };
    let sweep_seeds = shard.seeds_of(&args.sweep_seeds);
    // Every scenario a job runs: the matrix's columns, then each sweep point's.
    let mut scenarios: Vec<Scenario> = args.scenarios.clone();
    let mut cells: Vec<(usize, usize)> = Vec::new();
    for (di, d) in designs.iter().enumerate() {
        for (si, s) in args.scenarios.iter().enumerate() {
            if s.applies_to(d.backend, d.masters) {
                cells.push((di, si));
            }
        }
    }
    let sweep_specs = plan_sweeps(args, &mut scenarios)?;
    let (jobs, cell_jobs, point_jobs) = jobs_of(&cells, &seeds, &sweep_specs, &sweep_seeds);
    // The main job's search: each cell from seed 0 until its rule stops it.
    let adaptive = match rule {
        Some(rule) => {
            let pairs: Vec<(&DesignSpec, &Scenario)> = cells
                .iter()
                .map(|&(di, si)| (&designs[di], &scenarios[si]))
                .collect();
            let bar = crate::cells::progress_cells(pairs.len() as u64, args.progress);
            bar.set_message("matrix (the main job's adaptive seeds)");
            let run = crate::cells::run_cells_adaptive(&pairs, rule, 0, args.threads, &bar);
            bar.finish_and_clear();
            Some(run?)
        }
        None => None,
    };
    let bar = crate::cells::progress(jobs.len() as u64, args.progress);
    bar.set_message(if adaptive.is_some() {
        "sweeps"
    } else {
        "matrix and sweeps"
    });
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
    match &adaptive {
        Some(run) => matrix.extend(run.iter().map(|c| crate::shard::ShardCell {
            cell: c.cell.clone(),
            latency: c.latency.clone(),
        })),
        None => {
            for (k, &(di, si)) in cells.iter().enumerate() {
                matrix.push(part_of(&results, di, si, &cell_jobs[k]));
            }
        }
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
    // (The adaptive search keeps no history: `render` runs those seeds again.)
    let mut first_invalid = BTreeMap::new();
    for (k, (&(di, si), part)) in cells.iter().zip(&matrix).enumerate() {
        if adaptive.is_some() {
            break;
        }
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
            seeds: match &args.seeds {
                crate::seeds::Seeds::Fixed(r) => format!("{}..{}", r.start, r.end),
                adaptive => adaptive.describe(),
            },
            shard: shard.to_string(),
            split: crate::shard::Split::Seeds,
            of_cells: None,
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
    let merged = match args.seeds {
        // One shard's merge is the cells as they are (a fixed range: what `--from`
        // gives, byte for byte).
        crate::seeds::Seeds::Fixed(_) => {
            crate::shard::merge_all(&[("report".into(), computed.file.clone())])?
        }
        // The adaptive cells keep how each one stopped, which a merge of seed slices
        // has no use for and drops.
        crate::seeds::Seeds::Adaptive(_) => crate::shard::Merged {
            seeds: computed.file.seeds.clone(),
            cells: computed.file.cells.clone(),
            sweep_seeds: computed.file.sweep_seeds.clone(),
            sweeps: computed.file.sweeps.clone(),
        },
    };
    render(
        &merged,
        &args.designs,
        &args.scenarios,
        &mut computed.first_invalid,
        Out {
            dir: &args.out,
            full: args.full,
        },
        args.threads,
        args.progress,
    )
}

/// Where and how a report is written.
#[derive(Clone, Copy)]
pub struct Out<'a> {
    /// The directory.
    pub dir: &'a Path,
    /// Everything on one page, with a PNG of every plot (`--full`).
    pub full: bool,
}

/// Writes the report of merged cells and sweeps into `out`. The first invalid run of a
/// failing cell comes from `first_invalid`, or is run again (runs are deterministic).
pub fn render(
    merged: &crate::shard::Merged,
    designs: &[DesignSpec],
    scenarios: &[Scenario],
    first_invalid: &mut BTreeMap<(String, String), RunSummary>,
    out: Out<'_>,
    threads: usize,
    progress: bool,
) -> Result<(Results, PathBuf), String> {
    let Out { dir: out, full } = out;
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
        let bar = crate::cells::progress(missing.len() as u64, progress);
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

    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    // An earlier report's plots and pages (`check_out` let only a report's directory
    // through): a cell that no longer fails must not leave its page behind.
    for (dir, ext) in [("png", "png"), ("cells", "html")] {
        if let Ok(entries) = std::fs::read_dir(out.join(dir)) {
            for e in entries.flatten() {
                if e.path().extension().is_some_and(|x| x == ext) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    let _ = std::fs::remove_file(out.join("latency.html"));
    if full {
        std::fs::create_dir_all(out.join("png"))
            .map_err(|e| format!("cannot create {}: {e}", out.join("png").display()))?;
    }
    let mut page = Page {
        full,
        ..Page::default()
    };
    page.header(&results);
    page.comparison(&results);
    page.matrix(&results, designs, scenarios);
    page.latency(&results, out)?;
    page.sweeps(&results, out)?;
    if !full {
        let mut plots = Page::default();
        plots.sub_header("Acquire latency by percentile", &results, true);
        plots.latency_plots(&results, out)?;
        plots.sub_footer();
        write(&out.join("latency.html"), &plots.html)?;
        if !failing.is_empty() {
            std::fs::create_dir_all(out.join("cells"))
                .map_err(|e| format!("cannot create {}: {e}", out.join("cells").display()))?;
        }
    }
    let mut cell_sections = Vec::new();
    for (di, si, seed, summary) in failing {
        let (d, s) = (&designs[di], &scenarios[si]);
        let history = summary.history.as_ref().ok_or("a re-run kept no history")?;
        if full {
            cell_sections.push(page.cell(d, s, seed, summary, history, out)?);
        } else {
            let mut own = Page {
                root: "../",
                ..Page::default()
            };
            own.sub_header(&format!("{} / {}", d.name, s.name), &results, false);
            cell_sections.push(own.cell(d, s, seed, summary, history, out)?);
            own.sub_footer();
            write(&out.join(page::cell_page_path(&d.name, s.name)), &own.html)?;
        }
    }
    if !full {
        page.violations(&cell_sections);
    }
    page.footer();
    let html_path = out.join("index.html");
    write(&html_path, &page.html)?;
    let json = serde_json::to_string_pretty(&results).expect("serializable");
    std::fs::write(out.join("results.json"), json + "\n")
        .map_err(|e| format!("cannot write results.json: {e}"))?;
    std::fs::write(out.join("summary.md"), summary_md(&results, &cell_sections))
        .map_err(|e| format!("cannot write summary.md: {e}"))?;
    Ok((results, html_path))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
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
pub fn from_shards(
    paths: &[PathBuf],
    out: &Path,
    threads: usize,
    full: bool,
) -> Result<ExitCode, BadInput> {
    let files = crate::shard::read_files(paths)?;
    let merged = crate::shard::merge_all(&files).map_err(BadInput)?;
    let mut designs: Vec<DesignSpec> = Vec::new();
    let mut scenarios: Vec<Scenario> = Vec::new();
    for c in &merged.cells {
        if !designs.iter().any(|d| d.name == c.cell.design) {
            designs.push(crate::input::design(&c.cell.design)?);
        }
        if !scenarios.iter().any(|s| s.name == c.cell.scenario) {
            scenarios.push(crate::input::scenario(&c.cell.scenario)?);
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
        Out { dir: out, full },
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
            Ok(ExitCode::from(crate::exit::EXIT_UNKNOWN))
        }
    }
}
