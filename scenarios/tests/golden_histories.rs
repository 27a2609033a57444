//! Every catalog scenario's histories stay byte-identical, for every built-in design
//! that runs in its world, at seeds 0 and 1: a pin for moves of the scenario and fault
//! code that must change nothing a run does.
//!
//! Each line of `tests/golden/histories.txt` is `design scenario seed history probe`:
//! the SHA-1 of the history's serde JSON (the form `History::digest` hashes), and of
//! the scenario's probe answer on it. The `catalog` lines pin what a scenario says of
//! itself (description, fault, workload, topology, quantities). A change that is meant
//! to change histories rewrites the file with `LOCKSIM_BLESS=1 cargo test -p scenarios
//! --test golden_histories`, and its diff shows which cells moved.

use std::fmt::Write as _;
use std::sync::Mutex;

use scenarios::catalog::catalog;
use scenarios::params;
use scenarios::sweep::{DesignSpec, config};

const SEEDS: [u64; 2] = [0, 1];
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/histories.txt");

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

/// One line per design, scenario and seed, in catalog, design and seed order.
fn history_lines() -> Vec<String> {
    let mut cells = Vec::new();
    for s in catalog() {
        for d in lock_impl::DESIGNS
            .iter()
            .filter(|d| s.applies_to(d.backend, d.masters))
        {
            for seed in SEEDS {
                cells.push((d.name, s.clone(), seed));
            }
        }
    }
    let lines: Vec<Mutex<Option<String>>> = cells.iter().map(|_| Mutex::new(None)).collect();
    let next = Mutex::new(0usize);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
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
                    let Some((design, s, seed)) = cells.get(i) else {
                        return;
                    };
                    let spec = DesignSpec::builtin(design).expect("built-in design");
                    let history = sim::world::run(&config(&spec, s, *seed)).expect("run");
                    // Jumping saw every timer (the stepping suite compares these
                    // digests with its tick-by-tick runs).
                    assert_eq!(
                        history.stats.unhinted_wakes, 0,
                        "design={design} scenario={} seed={seed}: a timer was not hinted",
                        s.name
                    );
                    let json = serde_json::to_vec(&history).expect("a history serializes");
                    let probe = serde_json::to_vec(&s.probe(&history)).expect("a probe serializes");
                    *lines[i].lock().unwrap() = Some(format!(
                        "{design} {} {seed} {} {}",
                        s.name,
                        sha1(&json),
                        sha1(&probe)
                    ));
                }
            });
        }
    });
    lines
        .into_iter()
        .map(|l| l.into_inner().unwrap().expect("every cell ran"))
        .collect()
}

#[test]
fn every_scenario_gives_the_committed_histories_for_every_design() {
    let mut text = String::new();
    for line in catalog_lines().into_iter().chain(history_lines()) {
        writeln!(text, "{line}").unwrap();
    }
    if std::env::var_os("LOCKSIM_BLESS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, &text).expect("write the golden file");
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN).expect(
        "tests/golden/histories.txt (write it with LOCKSIM_BLESS=1 cargo test -p scenarios --test golden_histories)",
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
         LOCKSIM_BLESS=1 cargo test -p scenarios --test golden_histories):\n{}",
        moved.len(),
        want.len(),
        moved.join("\n")
    );
    assert_eq!(got, want, "the same lines, in another order");
}
