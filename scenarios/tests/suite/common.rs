//! Shared by the scenario suites: seed bounds and assertions with replay commands.
#![allow(dead_code)]

use scenarios::catalog::{Scenario, find};
use scenarios::sweep::{DesignSpec, RunSummary, first_invalid, replay_command, sweep};

/// The classic designs that trust one Redis master, each known for its own failure:
/// the set the server-fault suites check by name. A chosen set, not the registry
/// (`lock_impl::designs_on` lists every design of a system): later single-master designs
/// have suites of their own, and `wait-synced` waits for replicas.
pub const SINGLE_MASTER_DESIGNS: [&str; 7] = [
    "setnx-del",
    "setnx-expire",
    "set-nx-px-del",
    "set-nx-px-check-del",
    "set-nx-px-lua",
    "reentrant-watchdog",
    "fenced",
];

/// A seed count from environment variable `var` (a suite's "full sweep" knob), else
/// `default`.
#[allow(dead_code)]
pub fn seeds_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many seeds a suite may search for a predicted violation.
pub const SEARCH_BOUND: u64 = 60;

pub fn scenario(name: &str) -> Scenario {
    find(name).expect("catalog scenario")
}

pub fn design(name: &str) -> DesignSpec {
    DesignSpec::builtin(name).expect("built-in design")
}

/// Asserts that `checker` finds `design` Invalid under `scenario` within the search
/// bound, and that the scenario's fault happened in that run.
pub fn expect_invalid(design_name: &str, scenario_name: &str, checker: &str) -> RunSummary {
    let s = scenario(scenario_name);
    let found =
        first_invalid(&design(design_name), &s, checker, 0..SEARCH_BOUND).expect("runs complete");
    let Some(run) = found else {
        panic!(
            "{design_name} under {scenario_name} was never Invalid on {checker} in seeds 0..{SEARCH_BOUND}"
        );
    };
    let evidence = run
        .verdict(checker)
        .and_then(|v| v.evidence())
        .expect("invalid has evidence");
    println!(
        "{design_name} / {scenario_name}: {checker} Invalid at seed {}: {}\n  replay: {}",
        run.seed,
        evidence.summary,
        replay_command(design_name, scenario_name, run.seed)
    );
    assert!(
        run.fault_seen.is_some(),
        "the violation at seed {} happened without the scenario's fault ({}); replay: {}",
        run.seed,
        s.fault_about,
        replay_command(design_name, scenario_name, run.seed)
    );
    run
}

/// Asserts that `checker` never finds `design` Invalid under `scenario` over `seeds`
/// seeds, and that the scenario's fault did happen in at least `min_faulted` of them.
pub fn expect_never_invalid(
    design_name: &str,
    scenario_name: &str,
    checkers: &[&str],
    seeds: u64,
    min_faulted: usize,
) {
    let s = scenario(scenario_name);
    let runs =
        sweep(&design(design_name), &s, 0..seeds, 2, false, &|_, _| {}).expect("runs complete");
    for run in &runs {
        for checker in checkers {
            let verdict = run.verdict(checker).expect("checker ran");
            assert!(
                verdict.is_valid(),
                "{design_name} under {scenario_name} seed {}: {checker} is {verdict:?}; replay: {}",
                run.seed,
                replay_command(design_name, scenario_name, run.seed)
            );
        }
    }
    let faulted = runs.iter().filter(|r| r.fault_seen.is_some()).count();
    assert!(
        faulted >= min_faulted,
        "{design_name} under {scenario_name}: the fault ({}) happened in only {faulted} of {seeds} runs",
        s.fault_about
    );
}

/// Asserts that every built-in design that runs in `s`'s world is Valid on every
/// checker for every seed of `seeds` under `s`, with more than 10 acquisitions per run,
/// and (if `contended`) that the scenario's probe saw the lock contended.
pub fn assert_every_design_valid(s: &Scenario, seeds: std::ops::Range<u64>, contended: bool) {
    assert_designs_valid(s, seeds, contended, |_| true);
}

/// [`assert_every_design_valid`] for the designs `which` selects.
pub fn assert_designs_valid(
    s: &Scenario,
    seeds: std::ops::Range<u64>,
    contended: bool,
    which: impl Fn(&lock_impl::DesignInfo) -> bool,
) {
    for d in lock_impl::DESIGNS
        .iter()
        .filter(|d| s.applies_to(d.backend, d.masters) && which(d))
    {
        let runs =
            sweep(&design(d.name), s, seeds.clone(), 2, false, &|_, _| {}).expect("runs complete");
        assert_eq!(runs.len() as u64, seeds.end - seeds.start);
        for run in &runs {
            for (checker, verdict) in &run.verdicts {
                assert!(
                    verdict.is_valid(),
                    "{} seed {}: {checker} is {verdict:?}; replay: {}",
                    d.name,
                    run.seed,
                    replay_command(d.name, s.name, run.seed)
                );
            }
            assert!(
                !contended || run.fault_seen.is_some(),
                "{} seed {}: the lock was never contended",
                d.name,
                run.seed
            );
            assert!(
                run.acquisitions > 10,
                "{} seed {}: too few acquisitions",
                d.name,
                run.seed
            );
        }
    }
}

/// Every run of `design_name` under `scenario_name` over `seeds`, histories kept, on
/// two threads.
pub fn runs(
    design_name: &str,
    scenario_name: &str,
    seeds: std::ops::Range<u64>,
) -> Vec<RunSummary> {
    sweep(
        &design(design_name),
        &scenario(scenario_name),
        seeds,
        2,
        true,
        &|_, _| {},
    )
    .expect("runs complete")
}

/// An Invalid verdict with placeholder evidence, for tests of the class rules.
pub fn invalid_verdict() -> scenarios::checkers::Verdict {
    scenarios::checkers::Verdict::Invalid(scenarios::checkers::Evidence {
        summary: "x".into(),
        at_us: 0,
        hosts: vec![],
        owners: vec![],
        first_event: 0,
        events: vec![],
    })
}

/// A history with no events yet, for a checker's test to fill in: a one-master world of
/// `clients` clients (key `lock`, lease 1 s, liveness bound 2 s, a stock of 10, the
/// servers' records kept), no faults, ending at 10 s.
pub fn blank_history(seed: u64, clients: u32) -> sim::history::History {
    sim::history::History {
        seed,
        design: "design".into(),
        scenario: "scenario".into(),
        params: sim::history::RunParams {
            key: "lock".into(),
            lease_ms: 1_000,
            liveness_bound_ms: 2_000,
            initial_stock: 10,
            clients,
            masters: 1,
            segments: None,
            server_records: true,
        },
        plan: sim::faults::FaultPlan::default(),
        events: Vec::new(),
        end_us: 10_000_000,
        stats: Default::default(),
    }
}
