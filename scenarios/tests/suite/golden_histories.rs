//! Every catalog scenario's histories stay byte-identical, for every built-in design
//! that runs in its world, at seeds 0 and 1: a pin for moves of the scenario and fault
//! code that must change nothing a run does. And the project's own regression gate
//! holds on the same runs: every cell over the seeds of `locksim.baseline.json`,
//! judged and compared with the baseline as `locksim gate` compares it
//! (`reports::gate::judge`).
//!
//! Each line of `tests/golden/histories.txt` is `design scenario seed history probe`:
//! the SHA-1 of the history's serde JSON (the form `History::digest` hashes), and of
//! the scenario's probe answer on it. The `catalog` lines pin what a scenario says of
//! itself (description, fault, workload, topology, quantities). A change that is meant
//! to change histories rewrites the file with `LOCKSIM_BLESS=1 cargo test -p scenarios
//! --test suite golden_histories`, and its diff shows which cells moved.
//!
//! The gate's half is what CI ran as `locksim gate` after the tests: the same cells
//! (the baseline's) at the same seeds (0..4, of which the golden pins the first two),
//! so one run of each serves both, and a cell's history is computed once, not twice.
//! A class that got worse fails here with the gate's own Markdown; a change that is
//! meant to rewrites the baseline with `locksim gate --update`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Mutex;

use reports::gate::{Baseline, judge};
use scenarios::catalog::{Scenario, catalog};
use scenarios::params;
use scenarios::sweep::DesignSpec;

const GOLDEN_SEEDS: Range<u64> = 0..2;
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/histories.txt");
const BASELINE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../locksim.baseline.json");

fn sha1(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// What every scenario says of itself, one line each.
fn catalog_lines() -> Vec<String> {
    catalog()
        .iter()
        .map(|s| {
            let quantities: Vec<&str> = params::ALL
                .into_iter()
                .filter(|p| s.has_param(*p))
                .map(params::Param::name)
                .collect();
            let said = format!(
                "{}\n{}\n{:?}\n{}\n{}",
                s.description,
                s.fault_about,
                s.topology(),
                serde_json::to_string(&s.workload).expect("a workload serializes"),
                quantities.join(",")
            );
            format!("catalog {} {}", s.name, sha1(said.as_bytes()))
        })
        .collect()
}

/// The cells: every built-in design in every scenario of its world (catalog, then
/// design order: the golden file's order), then any other cell the baseline has.
/// Returns the cells and how many of them are the catalog's.
fn cells(baseline: &Baseline) -> (Vec<(DesignSpec, Scenario)>, usize) {
    let mut cells: Vec<(DesignSpec, Scenario)> = Vec::new();
    for s in catalog() {
        for d in lock_impl::DESIGNS
            .iter()
            .filter(|d| s.applies_to(d.backend, d.masters))
        {
            let spec = DesignSpec::builtin(d.name).expect("built-in design");
            cells.push((spec, s.clone()));
        }
    }
    let builtin = cells.len();
    for b in &baseline.cells {
        if !cells
            .iter()
            .any(|(d, s)| d.name == b.design && s.name == b.scenario)
        {
            let spec =
                reports::input::design(&b.design).unwrap_or_else(|e| panic!("{BASELINE}: {}", e.0));
            let s = reports::input::scenario(&b.scenario)
                .unwrap_or_else(|e| panic!("{BASELINE}: {}", e.0));
            cells.push((spec, s));
        }
    }
    (cells, builtin)
}

/// One golden line: the run's history and probe, hashed.
fn golden_line(design: &str, s: &Scenario, seed: u64, history: &sim::history::History) -> String {
    let json = serde_json::to_vec(history).expect("a history serializes");
    let probe = serde_json::to_vec(&s.probe(history)).expect("a probe serializes");
    format!(
        "{design} {} {seed} {} {}",
        s.name,
        sha1(&json),
        sha1(&probe)
    )
}

#[test]
fn every_scenario_gives_the_committed_histories_and_no_cell_is_worse_than_the_baseline() {
    let baseline = Baseline::parse(&std::fs::read_to_string(BASELINE).expect(BASELINE))
        .unwrap_or_else(|e| panic!("{BASELINE}: {e}"));
    let seeds = reports::input::parse_seeds(&baseline.seeds)
        .unwrap_or_else(|e| panic!("{BASELINE}: seeds: {}", e.0));
    assert!(
        seeds.start == GOLDEN_SEEDS.start && seeds.end >= GOLDEN_SEEDS.end,
        "the baseline's seeds ({}) must cover the golden seeds {GOLDEN_SEEDS:?}: one run serves both",
        baseline.seeds
    );
    let (cells, builtin) = cells(&baseline);

    // Every cell over the baseline's seeds, one run each, cells shared out over the
    // cores; each run's history hashed for the golden file as it ends.
    let golden: Mutex<BTreeMap<(usize, u64), String>> = Mutex::new(BTreeMap::new());
    let results: Vec<Mutex<Option<reports::table::CellResult>>> =
        cells.iter().map(|_| Mutex::new(None)).collect();
    let next = Mutex::new(0usize);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let bar = reports::cells::progress(0, false);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = {
                        let mut next = next.lock().unwrap();
                        let i = *next;
                        *next += 1;
                        i
                    };
                    let Some((spec, s)) = cells.get(i) else {
                        return;
                    };
                    let observe =
                        |history: &sim::history::History, run: &scenarios::sweep::RunSummary| {
                            // Jumping saw every timer (the stepping suite compares the
                            // golden digests with its tick-by-tick runs).
                            assert_eq!(
                                history.stats.unhinted_wakes, 0,
                                "design={} scenario={} seed={}: a timer was not hinted",
                                spec.name, s.name, run.seed
                            );
                            if i < builtin && GOLDEN_SEEDS.contains(&run.seed) {
                                let line = golden_line(&spec.name, s, run.seed, history);
                                golden.lock().unwrap().insert((i, run.seed), line);
                            }
                        };
                    let (cell, _, _) = reports::cells::run_cell_observed(
                        spec,
                        s,
                        seeds.clone(),
                        1,
                        &bar,
                        &observe,
                    )
                    .unwrap_or_else(|e| panic!("design={} scenario={}: {e}", spec.name, s.name));
                    *results[i].lock().unwrap() = Some(cell);
                }
            });
        }
    });
    let results: Vec<reports::table::CellResult> = results
        .into_iter()
        .map(|c| c.into_inner().unwrap().expect("every cell ran"))
        .collect();

    // The golden half: the catalog's cells (the built-in designs', the only ones
    // hashed), in catalog, design and seed order.
    let mut text = String::new();
    for line in catalog_lines()
        .into_iter()
        .chain(golden.into_inner().unwrap().into_values())
    {
        writeln!(text, "{line}").unwrap();
    }
    let bless = std::env::var_os("LOCKSIM_BLESS").is_some();
    if bless {
        std::fs::create_dir_all(std::path::Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, &text).expect("write the golden file");
    }

    // The gate's half: a verdict that got worse says so whatever the histories.
    let (cmp, gate) = judge(&baseline, &results);
    println!("{gate}");
    assert!(
        cmp.regressions.is_empty() && cmp.missing.is_empty(),
        "the project's gate fails on locksim.baseline.json (if that is meant, rewrite it with \
         `locksim gate --update`):\n{gate}\nmissing cells: {:?}",
        cmp.missing
    );
    assert_eq!(
        cmp.compared,
        baseline.cells.len(),
        "every baseline cell was compared"
    );
    if bless {
        return;
    }

    let golden = std::fs::read_to_string(GOLDEN).expect(
        "tests/golden/histories.txt (write it with LOCKSIM_BLESS=1 cargo test -p scenarios --test suite golden_histories)",
    );
    let want: Vec<&str> = golden.lines().collect();
    let got: Vec<&str> = text.lines().collect();
    let moved: Vec<String> = got
        .iter()
        .filter(|l| !want.contains(l))
        .map(|l| format!("  now: {l}"))
        .chain(
            want.iter()
                .filter(|l| !got.contains(l))
                .map(|l| format!("  was: {l}")),
        )
        .collect();
    assert!(
        moved.is_empty() && want.len() == got.len(),
        "{} of {} lines moved from tests/golden/histories.txt (if that is meant, rewrite it with \
         LOCKSIM_BLESS=1 cargo test -p scenarios --test suite golden_histories):\n{}",
        moved.len(),
        want.len(),
        moved.join("\n")
    );
    assert_eq!(got, want, "the same lines, in another order");
}
