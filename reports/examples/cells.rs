//! Where the main job's time goes: runs every cell of the catalog on one seed, one cell
//! at a time, and prints each cell's CPU time (the world, then the checkers), the
//! totals by scenario and by design, and the cells most expensive first:
//! `cargo run --release --example cells -- [seed] [design] [scenario]` (with a design
//! or a scenario, only those whose name contains it). `LOCKSIM_CELLS_TICK=1` steps
//! every run tick by tick, as the stepping suite does
//! (`scenarios/tests/suite/stepping.rs`), to see what that suite's runs cost.
//!
//! CPU time, not wall time, so the figures hold on a machine shared with builds.
use std::collections::BTreeMap;

/// The `locksim` binary's allocator, so the figures are the main job's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use scenarios::catalog;
use scenarios::sweep::{DesignSpec, config, summarize};

/// This process's CPU time, in seconds.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

struct Row {
    design: &'static str,
    scenario: &'static str,
    ran_ms: f64,
    judged_ms: f64,
    stats: sim::history::RunStats,
    /// Whether this seed's run was unsafe (it would settle its cell in the main job).
    unsafe_run: bool,
}

fn main() {
    let seed: u64 = match std::env::args().nth(1) {
        None => 0,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("seed: expected a number, got {s:?}");
            std::process::exit(2);
        }),
    };
    // An optional second argument keeps only the designs whose name contains it.
    let only = std::env::args().nth(2).unwrap_or_default();
    // And an optional third the scenarios whose name contains it.
    let only_scenario = std::env::args().nth(3).unwrap_or_default();
    let tick = std::env::var_os("LOCKSIM_CELLS_TICK").is_some();
    let mut rows = Vec::new();
    for d in lock_impl::DESIGNS
        .iter()
        .filter(|d| d.name.contains(only.as_str()))
    {
        let design = DesignSpec::from_info(d);
        for s in catalog::catalog()
            .into_iter()
            .filter(|s| s.applies_to(design.backend, design.masters))
            .filter(|s| s.name.contains(only_scenario.as_str()))
        {
            let mut cfg = config(&design, &s, seed);
            if tick {
                cfg.stepping = sim::world::Stepping::Tick;
            }
            let start = cpu_now();
            let h = sim::world::run(&cfg).expect("run");
            let ran = cpu_now();
            let summary = summarize(&s, &h);
            let judged = cpu_now();
            rows.push(Row {
                design: d.name,
                scenario: s.name,
                ran_ms: (ran - start) * 1e3,
                judged_ms: (judged - ran) * 1e3,
                stats: h.stats.clone(),
                unsafe_run: summary.safety() == scenarios::checkers::Safety::Unsafe,
            });
        }
    }
    let total: f64 = rows.iter().map(|r| r.ran_ms + r.judged_ms).sum();
    let judged: f64 = rows.iter().map(|r| r.judged_ms).sum();
    let host_runs: u64 = rows.iter().map(|r| r.stats.host_runs).sum();
    println!(
        "seed {seed}: {} cells, {:.2} s CPU ({:.2} s of it judging), {host_runs} host runs, {:.2} µs per host run",
        rows.len(),
        total / 1e3,
        judged / 1e3,
        (total - judged) * 1e3 / host_runs.max(1) as f64
    );
    // What the main job's adaptive rule would cost if this seed's cost were every
    // seed's: a cell unsafe here stops after it, any other runs 60 (a rough upper
    // bound: a cell unsafe at a later seed stops earlier).
    let clean = scenarios::adaptive::CLEAN_RUNS as f64;
    let settled = rows.iter().filter(|r| r.unsafe_run).count();
    let estimate: f64 = rows
        .iter()
        .map(|r| (r.ran_ms + r.judged_ms) * if r.unsafe_run { 1.0 } else { clean })
        .sum();
    println!(
        "adaptive main job, estimated from this seed: {settled} cells unsafe here (one run), {} at up to {clean} runs: {:.0} s CPU",
        rows.len() - settled,
        estimate / 1e3
    );
    for (what, key) in [
        (
            "scenario",
            (|r: &Row| r.scenario) as fn(&Row) -> &'static str,
        ),
        ("design", |r: &Row| r.design),
    ] {
        let mut by: BTreeMap<&str, f64> = BTreeMap::new();
        for r in &rows {
            *by.entry(key(r)).or_default() += r.ran_ms + r.judged_ms;
        }
        let mut by: Vec<_> = by.into_iter().collect();
        by.sort_by(|a, b| b.1.total_cmp(&a.1));
        println!("\nby {what}:");
        for (name, ms) in by {
            println!("{ms:9.1} ms {:5.1} %  {name}", ms / total * 100.0);
        }
    }
    rows.sort_by(|a, b| (b.ran_ms + b.judged_ms).total_cmp(&(a.ran_ms + a.judged_ms)));
    println!("\ncells:");
    for r in &rows {
        println!(
            "{:9.1} ms (judging {:5.1}) {} {} × {}  {:?}",
            r.ran_ms + r.judged_ms,
            r.judged_ms,
            if r.unsafe_run { "U" } else { "-" },
            r.design,
            r.scenario,
            r.stats
        );
    }
}
