//! The same seed gives a byte-identical history.

use crate::common;

use common::{design, scenario};
use scenarios::sweep::config;

/// Every design, run twice in one process under one of seven faults (taken in turn:
/// the next one not yet taken that applies to the design, else the next that applies), gives the same history byte for byte;
/// every one of the seven is taken. Each cell's histories of seeds 0 and 1 are pinned
/// across processes and machines by the golden suite (`golden_histories.rs`), so this
/// test is what catches a run that reads state a run before it in the same process
/// left behind. (It ran every design under all seven: 100 s of a two-core CI run for
/// what one each shows.)
#[test]
fn one_seed_run_twice_gives_the_same_history_for_every_design() {
    let faults = [
        "gc-pause",
        "client-crash",
        "server-restart",
        "server-pause",
        "partition",
        "clock-jump",
        "redlock-clock-jump",
    ]
    .map(scenario);
    let mut taken = vec![false; faults.len()];
    for (i, d) in lock_impl::DESIGNS.iter().enumerate() {
        let applies = |k: &usize| faults[*k].applies_to(d.backend, d.masters);
        let turn = (0..faults.len()).map(|j| (i + j) % faults.len());
        let Some(k) = turn
            .clone()
            .filter(|k| !taken[*k])
            .find(applies)
            .or_else(|| turn.clone().find(applies))
        else {
            panic!("none of the seven faults applies to {}", d.name);
        };
        taken[k] = true;
        let s = &faults[k];
        let cfg = config(&design(d.name), s, 7);
        let a = sim::world::run(&cfg).expect("run");
        let b = sim::world::run(&cfg).expect("run");
        assert_eq!(
            a.digest(),
            b.digest(),
            "design={} scenario={}",
            d.name,
            s.name
        );
        let json = serde_json::to_vec(&a).unwrap();
        assert_eq!(
            json,
            serde_json::to_vec(&b).unwrap(),
            "design={} scenario={}",
            d.name,
            s.name
        );
        // And its JSON (a real run's `history.json`, a report's) reads back as the same
        // history: no event writes a key twice (the storage's and the servers' records
        // once wrote their own `type` beside the event's). The run's cost counters are
        // not part of the JSON.
        let back: sim::history::History = serde_json::from_slice(&json).unwrap_or_else(|e| {
            panic!(
                "design={} scenario={}: its history's JSON does not read back: {e}",
                d.name, s.name
            )
        });
        assert!(
            back.events == a.events && serde_json::to_vec(&back).unwrap() == json,
            "design={} scenario={}: read back differs",
            d.name,
            s.name
        );
        assert!(a.events.len() > 100, "the run did something");
    }
    let skipped: Vec<&str> = faults
        .iter()
        .zip(&taken)
        .filter(|(_, t)| !**t)
        .map(|(s, _)| s.name)
        .collect();
    assert!(skipped.is_empty(), "no design ran under {skipped:?}");
}

#[test]
fn different_seeds_give_different_histories() {
    let s = scenario("no-faults");
    let d = design("set-nx-px-lua");
    let a = sim::world::run(&config(&d, &s, 1)).expect("run");
    let b = sim::world::run(&config(&d, &s, 2)).expect("run");
    assert_ne!(a.digest(), b.digest());
}

/// Cells swept together (`sweep_cells`: the catalog table's and the gate's fixed
/// seeds, the workers moving on to the next cell's seeds as soon as one has none left)
/// give each cell exactly what a sweep of that cell alone gives, on one thread: the
/// same seeds in order, the same histories, the same verdicts; and `on_done` names
/// each run's own cell.
#[test]
fn cells_swept_together_are_each_what_a_sweep_of_that_cell_alone_gives() {
    use scenarios::sweep::{sweep, sweep_cells};
    use std::sync::Mutex;
    let cells = [
        (design("set-nx-px-lua"), scenario("gc-pause")),
        (design("setnx-del"), scenario("client-crash")),
        (design("zk-curator"), scenario("no-faults")),
    ];
    let refs: Vec<_> = cells.iter().map(|(d, s)| (d, s)).collect();
    let seen: Mutex<Vec<(usize, u64, u64)>> = Mutex::new(Vec::new());
    let together = sweep_cells(&refs, 3..6, 2, false, &|cell, history, summary| {
        assert_eq!(history.digest(), summary.digest);
        seen.lock()
            .unwrap()
            .push((cell, history.seed, summary.digest));
    })
    .expect("sweep the cells");
    assert_eq!(together.len(), cells.len());
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen.len(), 9, "every run of every cell seen once");
    for (i, (d, s)) in cells.iter().enumerate() {
        let alone = sweep(d, s, 3..6, 1, false, &|_, _| {}).expect("sweep one cell");
        let key = |runs: &[scenarios::sweep::RunSummary]| -> Vec<(u64, u64, String)> {
            runs.iter()
                .map(|r| (r.seed, r.digest, format!("{:?}", r.verdicts)))
                .collect()
        };
        assert_eq!(key(&together[i]), key(&alone), "{} × {}", d.name, s.name);
        let mine: Vec<(u64, u64)> = seen
            .iter()
            .filter(|(c, _, _)| *c == i)
            .map(|&(_, seed, digest)| (seed, digest))
            .collect();
        let expected: Vec<(u64, u64)> = alone.iter().map(|r| (r.seed, r.digest)).collect();
        assert_eq!(
            mine, expected,
            "on_done named {} × {}'s runs",
            d.name, s.name
        );
    }
    // The three cells' histories differ: the check above compares something.
    let firsts: std::collections::BTreeSet<u64> =
        together.iter().map(|runs| runs[0].digest).collect();
    assert_eq!(firsts.len(), 3);
}
