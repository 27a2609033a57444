//! The test API: what a passing check proves, and what a failing one prints.

use std::process::ExitCode;

use locksim::{Design, Expect, Safety};

/// A user's design (the built-in `set-nx-px-lua` under a name of its own): what
/// failure messages must send back to the user's own `locksim` binary.
fn mine() -> Design {
    locksim::builtin("set-nx-px-lua").named("my-lock")
}

fn panic_text(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).expect_err("the check must fail");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("a text panic")
}

#[test]
fn a_failed_assertion_panics_with_the_seed_evidence_timeline_and_commands_that_reproduce_it() {
    let text = panic_text(|| {
        locksim::check(mine())
            .scenario("gc-pause")
            .seeds(0..4)
            .assert_safe();
    });
    for want in [
        "locksim: my-lock under gc-pause, seeds 0..4: expected every run safe, but at seed 0",
        "fault seen: ",
        "mutual-exclusion: INVALID: ",
        "timeline around the violation",
        "!! ",
        "replay: cargo run --quiet --bin locksim -- replay --design my-lock --scenario gc-pause --seed 0\n",
        "shrink: cargo run --quiet --bin locksim -- shrink --design my-lock --scenario gc-pause --seed 0\n",
        "a `locksim` binary that registers `my-lock`",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // The replay command, run with the design registered under that name, finds the
    // same violation: exit 1.
    let code = locksim::cli::run(
        [
            "locksim",
            "replay",
            "--design",
            "my-lock",
            "--scenario",
            "gc-pause",
            "--seed",
            "0",
        ],
        [mine()],
    );
    assert_eq!(code, ExitCode::from(1));
}

#[test]
fn a_checker_assertion_names_the_checker_in_its_shrink_command() {
    let failure = locksim::check(locksim::builtin("set-nx-px-del"))
        .scenario("gc-pause")
        .seeds(0..10)
        .verify(Expect::CheckerValid("ownership".into()))
        .unwrap_err();
    let run = failure.run().expect("the failing run");
    assert!(run.verdict("ownership").unwrap().is_invalid());
    assert_eq!(
        failure.shrink().unwrap(),
        format!(
            "locksim shrink --design set-nx-px-del --scenario gc-pause --seed {} --checker ownership",
            run.seed
        )
    );
}

#[test]
fn pinned_parameters_and_plan_files_are_part_of_the_replay_command() {
    let dir = std::env::temp_dir().join(format!("locksim-check-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("pause.json");
    std::fs::write(
        &plan,
        r#"{"faults": [{"at_ms": 500, "kind": {"type": "pause", "target": "holder", "duration_ms": 800}}], "workload": {"clients": 2}}"#,
    )
    .unwrap();
    let failure = locksim::check(mine())
        .scenario("gc-pause")
        .param("lease-ms", 300)
        .plan_file(&plan)
        .seeds(0..3)
        .verify(Expect::Safe)
        .unwrap_err();
    let replay = failure.replay().unwrap();
    assert!(
        replay.ends_with(&format!(
            "--scenario gc-pause --seed {} --param lease-ms=300 --plan {}",
            failure.run().unwrap().seed,
            plan.display()
        )),
        "{replay}"
    );
    assert!(
        failure
            .headline()
            .contains(&format!("with plan {}", plan.display()))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pass_in_which_the_scenarios_fault_never_happened_is_refused_as_vacuous() {
    // Pauses shorter than the lease: gc-pause's fault (a pause outlasting the lease)
    // never happens, so "safe" would prove nothing.
    let failure = locksim::check(mine())
        .scenario("gc-pause")
        .param("pause-ms", 50)
        .seeds(0..2)
        .verify(Expect::Safe)
        .unwrap_err();
    assert!(failure.to_string().contains("proves nothing"), "{failure}");
    // Said out loud, it passes.
    locksim::check(mine())
        .scenario("gc-pause")
        .param("pause-ms", 50)
        .seeds(0..2)
        .min_fault_runs(0)
        .assert_safe();
}

#[test]
fn classes_and_known_failures() {
    let runs = locksim::check(locksim::builtin("fenced"))
        .scenario("gc-pause")
        .seeds(0..3)
        .assert_class(Safety::Fenced);
    assert!(runs.count(Safety::Fenced) > 0);
    assert!(runs.fault_runs() > 0);
    let text = panic_text(|| {
        locksim::check(locksim::builtin("fenced"))
            .scenario("no-faults")
            .seeds(0..2)
            .expect_unsafe();
    });
    assert!(
        text.contains("expected some run unsafe, but none of 2 runs was (2 safe"),
        "{text}"
    );
    // What none of 2 runs bounds: 1 − 0.05^(1/2) = 77.6 %.
    assert!(text.contains("unsafe 0/2: rate < 78% at 95%)"), "{text}");
}

#[test]
fn a_failure_message_gives_the_share_of_runs_that_break_it_with_its_95_percent_interval() {
    let failure = locksim::check(mine())
        .scenario("gc-pause")
        .seeds(0..4)
        .verify(Expect::Safe)
        .unwrap_err();
    // "(k of 4 runs break it, <the claim for k of 4>: seeds …)", the claim computed
    // from the count the message itself states.
    let headline = failure.headline();
    let (_, tail) = headline.split_once(" (").expect("a count");
    let k: u64 = tail.split(' ').next().unwrap().parse().expect("a number");
    let claim = locksim::Rate::of(k, 4).unwrap().claim();
    assert!(
        headline.contains(&format!("({k} of 4 runs break it, {claim}: seeds ")),
        "{headline}"
    );
    // The runs a passing check made give the same rates.
    let runs = locksim::check(locksim::builtin("set-nx-px-lua"))
        .scenario("client-crash")
        .seeds(0..3)
        .assert_safe();
    assert_eq!(
        runs.rate(Safety::Unsafe).unwrap().text(),
        "0/3: rate < 64% at 95%"
    );
    assert_eq!(
        runs.rate(Safety::Safe).unwrap().text(),
        "3/3: rate > 36% at 95%"
    );
}

#[test]
fn bad_input_names_what_is_allowed() {
    let err = |c: locksim::Check, e: Expect| c.verify(e).unwrap_err().to_string();
    let c = || locksim::check(mine()).seeds(0..1);
    let e = err(c(), Expect::Safe);
    assert!(e.contains("no scenario") && e.contains("gc-pause"), "{e}");
    let e = err(c().scenario("gc-paws"), Expect::Safe);
    assert!(
        e.contains("unknown scenario 'gc-paws'") && e.contains("gc-pause"),
        "{e}"
    );
    let e = err(
        c().scenario("gc-pause"),
        Expect::CheckerValid("owner".into()),
    );
    assert!(
        e.contains("unknown checker 'owner'") && e.contains("ownership"),
        "{e}"
    );
    let e = err(c().scenario("gc-pause").param("pause", 5), Expect::Safe);
    assert!(
        e.contains("unknown parameter 'pause'") && e.contains("pause-ms"),
        "{e}"
    );
    let e = err(c().scenario("no-faults").param("pause-ms", 5), Expect::Safe);
    assert!(e.contains("no such quantity"), "{e}");
    let e = err(
        locksim::check(locksim::builtin("redlock")).scenario("failover"),
        Expect::Safe,
    );
    assert!(e.contains("does not run design redlock"), "{e}");
    let e = err(
        c().scenario("gc-pause").plan_file("/nonexistent/plan.json"),
        Expect::Safe,
    );
    assert!(
        e.contains("cannot read plan file /nonexistent/plan.json"),
        "{e}"
    );
}

#[test]
fn every_registered_design_is_a_builtin_of_the_facade_with_its_records_system_and_masters() {
    // The facade, the CLI and `locksim list` read the same records (`lock_impl::DESIGNS`).
    for info in locksim::lock_impl::DESIGNS {
        let d = locksim::builtin(info.name);
        assert!(d.is_builtin(), "{}", info.name);
        assert_eq!(d.name(), info.name);
        assert_eq!(
            (d.spec().backend, d.spec().masters),
            (info.backend, info.masters),
            "{}",
            info.name
        );
    }
}

/// `.placed()`: the seeds of a passing check (every run fenced or better) do not cover
/// the moment `fenced × slow-work`
/// breaks at (2 seeds in 100), its placed runs do, and the failure names the
/// placement in its replay command, which finds the same violation.
#[test]
fn a_placed_check_finds_what_its_seeds_miss_and_names_the_placement() {
    let fenced = || locksim::builtin("fenced").named("my-fenced");
    locksim::check(fenced())
        .scenario("slow-work")
        .seeds(0..2)
        .fixed_seeds()
        .assert_class(Safety::Fenced);
    let text = panic_text(|| {
        locksim::check(fenced())
            .scenario("slow-work")
            .seeds(0..2)
            .fixed_seeds()
            .placed()
            .assert_class(Safety::Fenced);
    });
    for want in [
        "but at seed 0 with its fault placed at ",
        "mutual-exclusion: INVALID: ",
        "replay: cargo run --quiet --bin locksim -- replay --design my-fenced --scenario slow-work --seed 0 --place ",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let place = text
        .split(" --place ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a placement")
        .to_string();
    let code = locksim::cli::run(
        [
            "locksim",
            "replay",
            "--design",
            "my-fenced",
            "--scenario",
            "slow-work",
            "--seed",
            "0",
            "--place",
            place.as_str(),
        ],
        [fenced()],
    );
    assert_eq!(code, ExitCode::from(1), "the placed run replays unsafe");
}
