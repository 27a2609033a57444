//! proptest strategies: a generated schedule finds a known failure and shrinks it to a
//! minimal plan whose printed replay command reproduces it.

#[path = "../examples/shrink_a_schedule.rs"]
mod example;

use std::process::ExitCode;

use locksim::proptest::prelude::*;
use locksim::proptest::strategy::ValueTree;
use locksim::proptest::test_runner::TestRunner;
use locksim::strategy::{FaultSort, fault_plans, plans};
use locksim::{Design, FaultKind, Target};

/// Runs a printed `locksim …` command in this process, with `designs` registered.
fn run_printed(command: &str, designs: Vec<Design>) -> ExitCode {
    let words: Vec<&str> = command.split_whitespace().collect();
    let args = words
        .iter()
        .position(|w| *w == "replay" || *w == "shrink")
        .expect("a subcommand");
    let argv = std::iter::once("locksim").chain(words[args..].iter().copied());
    locksim::cli::run(argv, designs)
}

fn assert_minimal(plan: &locksim::PlanFile, lease_ms: u64) {
    assert_eq!(plan.faults.len(), 1, "shrunk to one fault: {plan:?}");
    match &plan.faults[0].kind {
        FaultKind::Pause { duration_ms, .. } => assert!(
            *duration_ms > lease_ms / 2,
            "a pause too short to matter survived shrinking: {plan:?}"
        ),
        FaultKind::SlowWork { .. } => {}
        other => panic!("a fault the strategy was not asked for: {other:?}"),
    }
    let clients = plan.workload.get("clients").and_then(|v| v.as_u64());
    assert!(
        clients.is_some_and(|c| c < 8),
        "fewer clients than the scenario's eight: {plan:?}"
    );
}

#[test]
fn a_generated_schedule_finds_set_nx_px_dels_foreign_delete_and_shrinks_it_to_one_fault() {
    let (plan, failure) = example::find_and_shrink(
        locksim::builtin("set-nx-px-del"),
        "gc-pause",
        "ownership",
        32,
    )
    .expect("a plain DEL release is caught within 32 generated schedules");
    assert_minimal(&plan, 200);
    let text = failure.to_string();
    assert!(text.contains("ownership: INVALID"), "{text}");
    assert!(
        text.contains("\"faults\""),
        "the plan file is printed: {text}"
    );
    let file = failure.plan_file().expect("the plan was written");
    let written = std::fs::read_to_string(file).expect("the plan file exists");
    assert_eq!(written, plan.to_json());
    // The printed command reproduces it: exit 1, some verdict invalid.
    let replay = failure.replay().expect("a replay command");
    assert!(
        replay.starts_with(
            "locksim replay --design set-nx-px-del --scenario gc-pause --seed 0 --plan "
        ),
        "{replay}"
    );
    assert_eq!(run_printed(replay, vec![]), ExitCode::from(1));
}

#[test]
fn a_users_lock_with_the_same_bug_is_caught_and_its_replay_runs_it_by_its_registered_name() {
    let design = || Design::new("del-release", example::DelRelease::new);
    let (plan, failure) = example::find_and_shrink(design(), "gc-pause", "ownership", 32)
        .expect("del-release is caught within 32 generated schedules");
    assert_minimal(&plan, 200);
    let replay = failure.replay().expect("a replay command");
    assert!(
        replay.starts_with("cargo run --quiet --bin locksim -- replay --design del-release "),
        "{replay}"
    );
    assert_eq!(run_printed(replay, vec![design()]), ExitCode::from(1));
}

#[test]
fn generated_plans_aim_only_at_hosts_the_world_has() {
    let mut runner = TestRunner::deterministic();
    let strategy = plans("gc-pause").sorts(&locksim::strategy::FaultSort::ALL);
    let scenario = locksim::catalog::find("gc-pause").unwrap();
    for _ in 0..200 {
        let plan = strategy.new_tree(&mut runner).unwrap().current();
        // apply() refuses a plan that names a missing host or a bad workload.
        locksim::planfile::apply(scenario.clone(), &plan.to_json(), "generated")
            .unwrap_or_else(|e| panic!("{e}\n{}", plan.to_json()));
        assert!(plan.faults.len() <= 4);
    }
    // A Redlock world: server faults aim at the lock's server, never at `redis`.
    let strategy = fault_plans("gc-pause")
        .sorts(&[FaultSort::ServerPause])
        .masters(5);
    for _ in 0..50 {
        let plan = strategy.new_tree(&mut runner).unwrap().current();
        for f in &plan.faults {
            let FaultKind::Pause { target, .. } = &f.kind else {
                panic!("{f:?}")
            };
            assert_eq!(*target, Target::LockServer);
        }
    }
}
