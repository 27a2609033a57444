//! `locksim completeness`: how much the main job's adaptive seeds miss, measured.
//!
//! It runs the cells under the adaptive rule (as `locksim` with no arguments does),
//! then a deep fixed-seed run of every cell (`--deep 0..200` by default), and compares
//! each cell's matrix mark. A cell unsafe at depth but not unsafe by default is a
//! **miss**; any other change of mark (say `S` by default, `F` at depth) is counted and
//! named too.
//!
//! The deep run reuses what the default already ran, which changes none of its runs
//! (each seed's run is the same whoever runs it): a cell the default settled at seed
//! `k < B` is unsafe at depth too, so it is not run again; any other cell runs only the
//! seeds of `A..B` past those the default read, and its deep cell is the default's runs
//! in `A..B` plus those.
//!
//! It also prints what each cell cost the default pass: the slowest cells by wall time
//! (their runs, host runs, and how they stopped), which is where the main job's time
//! goes.

use std::ops::Range;
use std::process::ExitCode;
use std::time::Instant;

use scenarios::adaptive::{Rule, Settled};
use scenarios::catalog::Scenario;
use scenarios::sweep::{DesignSpec, RunSummary};

use crate::cells::{AdaptiveCell, cell_of, progress, progress_cells, run_cell_with_latency};
use crate::exit::EXIT_UNKNOWN;
use crate::latency::LatencySummary;
use crate::table::{CellResult, matrix_mark};

/// What `locksim completeness` was asked.
pub struct Args {
    /// The cells.
    pub pairs: Vec<(DesignSpec, Scenario)>,
    /// How many cells there were before sampling.
    pub of: usize,
    /// The sample: every `sample`-th cell of the `of` (1: all of them).
    pub sample: u64,
    /// The default pass's rule.
    pub rule: Rule,
    /// The deep run's seeds (empty: no deep run, the costs only).
    pub deep: Range<u64>,
    /// Worker threads.
    pub threads: usize,
    /// How many of the slowest cells to list.
    pub slowest: usize,
}

/// One cell compared.
struct Compared {
    design: String,
    scenario: String,
    default_mark: String,
    deep: CellResult,
}

/// `locksim completeness`.
pub fn run(args: &Args) -> ExitCode {
    let pairs: Vec<(&DesignSpec, &Scenario)> = args.pairs.iter().map(|(d, s)| (d, s)).collect();
    if args.sample > 1 {
        println!(
            "locksim completeness: a sample, one cell in {} in catalog order: {} of {} cells",
            args.sample,
            pairs.len(),
            args.of
        );
    }
    println!(
        "locksim completeness: {} cells, default: adaptive seeds ({} clean runs, {} unknown, budget {}); deep: seeds {}..{}; {} threads",
        pairs.len(),
        args.rule.clean,
        args.rule.unknown,
        args.rule
            .budget
            .map_or_else(|| "none".into(), |b| format!("{b} host runs")),
        args.deep.start,
        args.deep.end,
        args.threads
    );
    let started = Instant::now();
    let bar = progress_cells(pairs.len() as u64, true);
    let cells = match crate::cells::run_cells_adaptive(&pairs, args.rule, 0, args.threads, &bar) {
        Ok(c) => c,
        Err(e) => {
            bar.finish_and_clear();
            eprintln!("locksim completeness: {e}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    bar.finish_and_clear();
    let default_wall = started.elapsed();
    let runs: u64 = cells.iter().map(|c| c.cell.runs).sum();
    let violations = cells
        .iter()
        .filter(|c| matches!(c.cell.settled, Some(Settled::Violation { .. })))
        .count();
    let weak = cells
        .iter()
        .filter(|c| c.cell.settled.as_ref().is_some_and(Settled::is_weak))
        .count();
    println!(
        "default pass: {:.1} s wall, {runs} runs; {violations} cells settled by an unsafe run, {} bounded, {weak} of them weak",
        default_wall.as_secs_f64(),
        cells.len() - violations
    );
    print!("{}", slowest(&cells, args.slowest));
    if args.deep.is_empty() {
        return ExitCode::SUCCESS;
    }

    // The deep run: only what the default did not already run.
    let started = Instant::now();
    let todo: u64 = cells
        .iter()
        .map(|c| deep_seeds(c, &args.deep).map_or(0, |r| r.end - r.start))
        .sum();
    let bar = progress(todo, true);
    let mut compared = Vec::new();
    for (c, (design, scenario)) in cells.iter().zip(&pairs) {
        let (_, default_mark) = matrix_mark(&c.cell);
        let kept: Vec<RunSummary> = c
            .runs
            .iter()
            .filter(|r| args.deep.contains(&r.seed))
            .cloned()
            .collect();
        let mut runs = kept;
        let mut latency = LatencySummary::default();
        if let Some(more) = deep_seeds(c, &args.deep) {
            bar.set_message(format!("{} / {}", design.name, scenario.name));
            match run_cell_with_latency(design, scenario, more, args.threads, &bar) {
                Ok((_, extra, l)) => {
                    runs.extend(extra);
                    latency = l;
                }
                Err(e) => {
                    bar.finish_and_clear();
                    eprintln!(
                        "locksim completeness: {} / {}: {e}",
                        design.name, scenario.name
                    );
                    return ExitCode::from(EXIT_UNKNOWN);
                }
            }
        }
        runs.sort_by_key(|r| r.seed);
        compared.push(Compared {
            design: design.name.clone(),
            scenario: scenario.name.to_string(),
            default_mark,
            deep: cell_of(design, scenario, &runs, &latency),
        });
    }
    bar.finish_and_clear();
    println!(
        "deep pass: {:.1} s wall, {todo} runs past the default's",
        started.elapsed().as_secs_f64()
    );
    print!("{}", verdict(&compared, &args.deep));
    ExitCode::SUCCESS
}

/// The seeds of `deep` the default pass did not run for cell `c`: none if an unsafe
/// run inside `deep` settled it (it is unsafe at depth too), else those past its last.
fn deep_seeds(c: &AdaptiveCell, deep: &Range<u64>) -> Option<Range<u64>> {
    if let Some(Settled::Violation { seed, place }) = c.cell.settled
        && (place.is_some() || deep.contains(&seed))
    {
        return None;
    }
    let from = deep.start.max(c.cell.runs);
    (from < deep.end).then_some(from..deep.end)
}

/// The slowest `n` cells of the default pass, by wall time.
fn slowest(cells: &[AdaptiveCell], n: usize) -> String {
    let total: f64 = cells.iter().map(|c| c.wall.as_secs_f64()).sum();
    let mut order: Vec<&AdaptiveCell> = cells.iter().collect();
    order.sort_by_key(|c| std::cmp::Reverse(c.wall));
    let mut out = format!(
        "cells by wall time (their runs' time on their threads, {total:.1} s in all; the {} slowest):\n",
        n.min(cells.len())
    );
    for c in order.into_iter().take(n) {
        out.push_str(&format!(
            "  {:>6.1} s {:>5.1}%  {:>3} runs {:>11} host runs  {} × {}: {}\n",
            c.wall.as_secs_f64(),
            100.0 * c.wall.as_secs_f64() / total.max(f64::MIN_POSITIVE),
            c.cell.runs,
            c.cost,
            c.cell.design,
            c.cell.scenario,
            c.cell
                .settled
                .as_ref()
                .map_or_else(String::new, Settled::text)
        ));
    }
    out
}

/// The comparison: misses (unsafe at depth, not by default), other changed marks, and
/// the figure.
fn verdict(compared: &[Compared], deep: &Range<u64>) -> String {
    let is_unsafe = |m: &str| m.starts_with(['U', 'u']);
    let mut misses = Vec::new();
    let mut other = Vec::new();
    for c in compared {
        let (deep_mark, _) = matrix_mark(&c.deep);
        let default_mark = c.default_mark.chars().next().unwrap_or('-');
        if deep_mark == default_mark {
            continue;
        }
        let deep_text = format!(
            "{} ({}, first invalid seed {})",
            deep_mark,
            c.deep.class_text(),
            c.deep
                .first_invalid_seed
                .map_or_else(|| "-".into(), |s| s.to_string())
        );
        let line = format!(
            "  {} × {}: default {}, deep {}\n",
            c.design, c.scenario, c.default_mark, deep_text
        );
        if is_unsafe(&deep_mark.to_string()) && !is_unsafe(&c.default_mark) {
            misses.push(line);
        } else {
            other.push(line);
        }
    }
    let mut out = format!(
        "completeness: {} cells; {} classed differently by the default than by seeds {}..{}: {} misses (unsafe at depth, not by default), {} other changes of mark\n",
        compared.len(),
        misses.len() + other.len(),
        deep.start,
        deep.end,
        misses.len(),
        other.len()
    );
    if !misses.is_empty() {
        out.push_str("misses:\n");
        out.extend(misses);
    }
    if !other.is_empty() {
        out.push_str("other changes (the mark's letter, default against deep):\n");
        out.extend(other);
    }
    out
}
