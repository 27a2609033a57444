//! The `locksim` command as a user meets it: exit codes, error messages, and a replay
//! that reproduces exactly the violation a run reported.

use std::process::Command;

fn locksim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(args)
        .output()
        .expect("run locksim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_design_exits_2_and_lists_the_designs() {
    let (code, _, err) = locksim(&["run", "--design", "nope", "--scenario", "gc-pause"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown design 'nope'"), "{err}");
    assert!(
        err.contains("set-nx-px-lua") && err.contains("setnx-del"),
        "{err}"
    );
}

#[test]
fn an_unknown_scenario_exits_2_and_lists_the_scenarios() {
    let (code, _, err) = locksim(&[
        "replay",
        "--design",
        "fenced",
        "--scenario",
        "gc",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown scenario 'gc'"), "{err}");
    assert!(
        err.contains("gc-pause") && err.contains("no-faults"),
        "{err}"
    );
}

#[test]
fn a_malformed_seed_range_exits_2_and_says_what_is_allowed() {
    for bad in ["5..2", "a..b", "1..", "-3"] {
        let (code, _, err) = locksim(&[
            "run",
            "--design",
            "fenced",
            "--scenario",
            "gc-pause",
            "--seeds",
            bad,
        ]);
        assert_eq!(code, 2, "--seeds {bad}: {err}");
        assert!(
            err.contains("--seeds") && err.contains("A..B"),
            "--seeds {bad}: {err}"
        );
    }
}

#[test]
fn a_run_reports_invalid_mutual_exclusion_and_its_replay_reproduces_it() {
    let (code, out, err) = locksim(&[
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--seeds",
        "0..3",
        "--json",
    ]);
    assert_eq!(code, 1, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    let first = &report["runs"][0];
    let seed = first["seed"].as_u64().expect("seed");
    let verdicts = first["verdicts"].as_array().expect("verdicts");
    let (_, me) = verdicts
        .iter()
        .map(|v| (v[0].as_str().unwrap(), &v[1]))
        .find(|(n, _)| *n == "mutual-exclusion")
        .expect("mutual-exclusion verdict");
    assert_eq!(me["verdict"], "invalid", "{me}");
    // The cell carries its rates as numbers: the unsafe share of its classes' counts.
    let cell = &report["cell"];
    let unsafe_rate = &cell["rates"]["unsafe"];
    assert_eq!(unsafe_rate["runs"], 3, "{cell}");
    assert_eq!(unsafe_rate["count"], cell["classes"]["unsafe"], "{cell}");
    let me_rate = &cell["rates"]["invalid"]["mutual-exclusion"];
    assert_eq!(
        me_rate["count"], cell["per_checker"]["mutual-exclusion"],
        "{cell}"
    );
    let (low, high) = (
        me_rate["low"].as_f64().unwrap(),
        me_rate["high"].as_f64().unwrap(),
    );
    assert!(0.0 <= low && low < high && high <= 1.0, "{me_rate}");
    let replay = first["replay"].as_str().expect("replay command");
    assert_eq!(
        replay,
        format!("locksim replay --design set-nx-px-lua --scenario gc-pause --seed {seed}")
    );

    let args: Vec<&str> = replay.split(' ').skip(1).chain(["--json"]).collect();
    let (code, out, err) = locksim(&args);
    assert_eq!(code, 1, "{err}");
    let replayed: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    let again = replayed["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v[0] == "mutual-exclusion")
        .map(|v| v[1].clone())
        .unwrap();
    assert_eq!(
        &again, me,
        "the replay reproduces exactly the same violation"
    );
}

#[test]
fn a_run_prints_every_rate_with_its_95_percent_interval() {
    let (code, out, err) = locksim(&[
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "client-crash",
        "--seeds",
        "0..3",
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    assert!(out.contains("unsafe, 95%"), "the table's column: {out}");
    assert!(out.contains("rates (95%, exact Clopper–Pearson):"), "{out}");
    // A compare-and-delete release under crashed clients: no unsafe run in three, a
    // one-sided bound (1 − 0.05^(1/3) = 63.2 %).
    assert!(
        out.lines().any(
            |l| l.trim_start().starts_with("unsafe ") && l.ends_with(" 0/3: rate < 64% at 95%")
        ),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("ownership invalid ")
                && l.ends_with(" 0/3: rate < 64% at 95%")),
        "{out}"
    );
}

#[test]
fn a_hand_written_plan_replaces_the_seeds_and_a_malformed_one_is_refused() {
    let dir = std::env::temp_dir().join(format!("locksim-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("pause.json");
    std::fs::write(
        &good,
        r#"{"faults": [{"at_ms": 500, "kind": {"type": "pause", "target": "holder", "duration_ms": 800}}]}"#,
    )
    .unwrap();
    let good = good.to_str().unwrap();
    let (code, out, err) = locksim(&[
        "replay",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "no-faults",
        "--seed",
        "1",
        "--plan",
        good,
    ]);
    assert_eq!(
        code, 1,
        "a pause past the lease breaks set-nx-px-lua: {out}{err}"
    );
    assert!(out.contains("hand-written"), "{out}");
    assert!(
        out.contains(&format!("--plan {good}")),
        "the replay command keeps the plan: {out}"
    );

    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"faults": [{"at_ms": 1, "kind": {"type": "nap"}}]}"#,
    )
    .unwrap();
    let (code, _, err) = locksim(&[
        "run",
        "--design",
        "fenced",
        "--scenario",
        "gc-pause",
        "--plan",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--plan") && err.contains("pause, crash, machine-crash, delay"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shrink_writes_a_minimal_plan_that_replays_and_draws_and_never_overwrites_a_users_file() {
    let dir = std::env::temp_dir().join(format!("locksim-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("min.json");
    let out_s = out.to_str().unwrap();
    let args = [
        "shrink",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "server-restart",
        "--seed",
        "0",
        "--out",
        out_s,
    ];
    let (code, first, err) = locksim(&args);
    assert_eq!(code, 1, "a shrunk counterexample exits 1: {first}{err}");
    assert!(first.contains("after:   1 fault"), "{first}");
    let replay = format!(
        "locksim replay --design set-nx-px-lua --scenario server-restart --seed 0 --plan {out_s}"
    );
    assert!(first.contains(&replay), "{first}");
    let written = std::fs::read_to_string(&out).unwrap();

    // Never over an existing file without --force; with it, the same output.
    let (code, _, err) = locksim(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
    let mut forced = args.to_vec();
    forced.push("--force");
    let (code, again, _) = locksim(&forced);
    assert_eq!(code, 1);
    assert_eq!(first, again, "shrinking is deterministic, byte for byte");
    assert_eq!(written, std::fs::read_to_string(&out).unwrap());

    // Shrinking from the shrunk plan keeps its workload changes.
    let out2 = dir.join("min2.json");
    let (code, _, err) = locksim(&[
        "shrink",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "server-restart",
        "--seed",
        "0",
        "--plan",
        out_s,
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out2).unwrap()).unwrap();
    let once: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(
        again["workload"]["clients"], once["workload"]["clients"],
        "{again} vs {once}"
    );

    // The plan replays the violation, and draws it.
    let svg = dir.join("min.svg");
    let replay_args = [
        "replay",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "server-restart",
        "--seed",
        "0",
        "--plan",
        out_s,
        "--diagram",
        svg.to_str().unwrap(),
    ];
    let (code, shown, err) = locksim(&replay_args);
    assert_eq!(code, 1, "{shown}{err}");
    assert!(shown.contains("mutual-exclusion: INVALID"), "{shown}");
    assert!(reports::diagram::is_ours(
        &std::fs::read_to_string(&svg).unwrap()
    ));
    // Drawing again over its own diagram is fine; over a user's file, or to an
    // unknown format, it is refused.
    assert_eq!(locksim(&replay_args).0, 1);
    let notes = dir.join("notes.svg");
    std::fs::write(&notes, "my notes").unwrap();
    let mut over = replay_args.to_vec();
    let n = over.len();
    over[n - 1] = notes.to_str().unwrap();
    let (code, _, err) = locksim(&over);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes");
    over[n - 1] = "x.png";
    let (code, _, err) = locksim(&over);
    assert_eq!(code, 2);
    assert!(err.contains(".svg") && err.contains(".mmd"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_gate_passes_an_unchanged_lock_and_fails_one_whose_release_went_blind() {
    let dir = std::env::temp_dir().join(format!("locksim-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let baseline = dir.join("baseline.json");
    let path = baseline.to_str().expect("utf-8 path");
    let _ = std::fs::remove_file(&baseline);

    // No baseline yet: bad input, and the message says how to make one.
    let (code, _, err) = locksim(&["gate", "--baseline", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--update"), "{err}");

    let (code, out, err) = locksim(&[
        "gate",
        "--baseline",
        path,
        "--update",
        "--seeds",
        "0..2",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let recorded = std::fs::read_to_string(&baseline).expect("written");
    assert!(recorded.contains("\"p99_budget_ms\""), "{recorded}");

    // Nothing changed: exit 0.
    let (code, out, err) = locksim(&["gate", "--baseline", path]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no regression in 1 cells"), "{out}");

    // The same lock with a release that falls back on a blind DEL, judged against the
    // baseline of the correct one: an ownership regression, exit 1, with a replay.
    std::fs::write(
        &baseline,
        recorded.replace("\"set-nx-px-lua\"", "\"broken/release-falls-back-to-del\""),
    )
    .expect("rewrite");
    let (code, out, err) = locksim(&["gate", "--baseline", path]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(
            "| `broken/release-falls-back-to-del` | `gc-pause` | ownership invalid runs | 0 |"
        ),
        "{out}"
    );
    assert!(
        out.contains("locksim replay --design broken/release-falls-back-to-del"),
        "{out}"
    );

    // A malformed baseline is bad input, named.
    std::fs::write(&baseline, "{\"seeds\": 3}").expect("rewrite");
    let (code, _, err) = locksim(&["gate", "--baseline", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a locksim baseline"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_users_own_binary_can_gate_its_own_design_through_the_library() {
    // What docs/testing-your-lock.md's `lockgate` recipe does, with a design the caller supplies.
    use reports::gate::{GateArgs, gate};
    let mut mine = scenarios::broken::find("check-then-set")
        .expect("catalog")
        .spec();
    mine.name = "my-lock".into();
    let dir = std::env::temp_dir().join(format!("locksim-usergate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let args = |update| GateArgs {
        baseline: dir.join("baseline.json"),
        update,
        seeds: Some(0..1),
        designs: vec!["my-lock".into()],
        scenarios: vec!["no-faults".into()],
        markdown: Some(dir.join("gate.md")),
        threads: 2,
        extra_designs: vec![mine.clone()],
    };
    assert_eq!(
        gate(&args(true)).expect("update"),
        std::process::ExitCode::SUCCESS
    );
    let recorded = std::fs::read_to_string(dir.join("baseline.json")).expect("written");
    assert!(recorded.contains("\"design\": \"my-lock\""), "{recorded}");
    let compare = GateArgs {
        seeds: None,
        ..args(false)
    };
    assert_eq!(
        gate(&compare).expect("gate"),
        std::process::ExitCode::SUCCESS
    );
    let md = std::fs::read_to_string(dir.join("gate.md")).expect("markdown");
    assert!(md.contains("no regression in 1 cells"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn four_shards_merged_are_byte_for_byte_the_unsharded_run() {
    let dir = std::env::temp_dir().join(format!("locksim-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = |name: &str| dir.join(name).to_str().expect("utf-8").to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--design",
            "set-nx-px-del",
            "--scenario",
            "gc-pause",
            "--seeds",
            "0..6",
            "--json",
        ];
        args.extend_from_slice(extra);
        locksim(&args)
    };
    let (code, whole_json, err) = run(&["--out", &file("whole.json")]);
    assert_eq!(code, 1, "{err}");
    for i in 1..=4 {
        let (_, _, err) = run(&[
            "--shard",
            &format!("{i}/4"),
            "--out",
            &file(&format!("s{i}.json")),
        ]);
        assert!(!err.contains("locksim run:"), "{err}");
    }
    let (code_one, one, err) = locksim(&["merge", &file("whole.json"), "--json"]);
    assert_eq!(code_one, 1, "{err}");
    // Shards in any order.
    let (code_four, four, err) = locksim(&[
        "merge",
        &file("s3.json"),
        &file("s1.json"),
        &file("s4.json"),
        &file("s2.json"),
        "--json",
    ]);
    assert_eq!(code_four, code_one, "{err}");
    assert_eq!(one, four, "merged shards differ from the unsharded run");
    // And the merge is the run's own cell.
    let unsharded: serde_json::Value = serde_json::from_str(&whole_json).expect("json");
    let merged: serde_json::Value = serde_json::from_str(&one).expect("json");
    assert_eq!(merged["cells"][0], unsharded["cell"]);

    // A missing shard, a shard of another run, and an existing --out are refused.
    let (code, _, err) = locksim(&["merge", &file("s1.json"), &file("s2.json")]);
    assert_eq!(code, 2);
    assert!(err.contains("every shard 1..=4"), "{err}");
    let (code, _, err) = locksim(&["merge", &file("whole.json"), &file("s2.json")]);
    assert_eq!(code, 2);
    assert!(err.contains("one of 1"), "{err}");
    let (code, _, err) = run(&["--out", &file("whole.json")]);
    assert_eq!(code, 2);
    assert!(err.contains("does not overwrite"), "{err}");
    let (code, _, err) = run(&["--shard", "5/4", "--out", &file("x.json")]);
    assert_eq!(code, 2);
    assert!(err.contains("1 <= I <= N"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_finds_where_a_pause_starts_to_break_the_lock_and_its_replay_pins_the_value() {
    let (code, out, err) = locksim(&[
        "sweep",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--param",
        "pause-ms=50,400",
        "--seeds",
        "0..2",
    ]);
    assert_eq!(code, 1, "some point has invalid runs: {out}{err}");
    let row = |v: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(v))
            .unwrap_or_else(|| panic!("no row for {v}: {out}"))
            .to_string()
    };
    // A quarter-lease pause never outlasts the lease (no fault seen, `*`); two leases
    // break every run.
    assert!(row("50").contains("0/2*"), "{out}");
    assert!(row("400").contains("2/2"), "{out}");
    let replay = out
        .lines()
        .find_map(|l| {
            l.split_once(": locksim replay ")
                .map(|(_, r)| r.to_string())
        })
        .unwrap_or_else(|| panic!("no replay command: {out}"));
    assert!(replay.ends_with("--param pause-ms=400"), "{replay}");
    let args: Vec<&str> = replay.split_whitespace().collect();
    let mut full = vec!["replay"];
    full.extend(&args);
    let (code, out, err) = locksim(&full);
    assert_eq!(code, 1, "the replay reproduces the violation: {out}{err}");
    assert!(out.contains("INVALID") || out.contains("invalid"), "{out}");
}

#[test]
fn a_sweep_parameter_the_scenario_lacks_exits_2() {
    let (code, _, err) = locksim(&[
        "sweep",
        "--scenario",
        "no-faults",
        "--param",
        "pause-ms=50..100:50",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no such quantity") && err.contains("gc-pause"),
        "{err}"
    );
    let (code, _, err) = locksim(&[
        "sweep",
        "--scenario",
        "gc-pause",
        "--param",
        "pause-ms=7..3",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid --param"), "{err}");
}

#[test]
fn a_report_is_the_same_on_one_thread_or_two_and_never_writes_over_foreign_files() {
    let base = std::env::temp_dir().join(format!("locksim-report-det-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let run = |dir: &std::path::Path, threads: &str| {
        locksim(&[
            "report",
            "--seeds",
            "0..1",
            "--no-sweeps",
            "--design",
            "setnx-expire",
            "--scenario",
            "client-crash",
            "--scenario",
            "no-faults",
            "--threads",
            threads,
            "--out",
            dir.to_str().unwrap(),
        ])
    };
    let (a, b) = (base.join("one"), base.join("two"));
    let (code, out, err) = run(&a, "1");
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&b, "2");
    assert_eq!(code, 0, "{out}{err}");
    for f in ["index.html", "results.json", "summary.md"] {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs between one thread and two");
    }
    let md = std::fs::read_to_string(a.join("summary.md")).unwrap();
    assert!(md.contains("| setnx-expire |"), "{md}");
    // Every rate with its interval: one seed per cell bounds nothing much.
    assert!(
        md.contains("## Rates (95% intervals, exact Clopper–Pearson)"),
        "{md}"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("results.json")).unwrap()).unwrap();
    for cell in results["cells"].as_array().unwrap() {
        let u = &cell["rates"]["unsafe"];
        assert_eq!(u["runs"], 1, "{cell}");
        assert_eq!(
            u["count"],
            cell["classes"]["unsafe"].as_u64().unwrap_or(0),
            "{cell}"
        );
        let text = if u["count"] == 0 {
            "unsafe 0/1: rate < 95% at 95%"
        } else {
            "unsafe 1/1: rate > 5.0% at 95%"
        };
        assert!(md.contains(text) || u["count"] == 0, "{text}: {md}");
    }
    if results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["rates"]["unsafe"]["count"] == 0)
    {
        assert!(
            md.contains("cells of 1 run: unsafe rate < 95% at 95%")
                || md.contains("cell of 1 run: unsafe rate < 95% at 95%"),
            "{md}"
        );
    }
    // The legend says what the rows' system promises, and only theirs.
    let html = std::fs::read_to_string(a.join("index.html")).unwrap();
    assert!(
        html.contains("Rates of every cell, with 95% intervals"),
        "no rates table"
    );
    assert!(
        html.contains("unsafe 0/1: rate &lt; 95% at 95%")
            || html.contains("unsafe 1/1: rate &gt; 5.0% at 95%")
    );
    assert!(
        html.contains("Redis: a key with a TTL on one master"),
        "no promise of Redis in the legend"
    );
    assert!(
        !html.contains("ZooKeeper: a lock node"),
        "a system without rows"
    );
    // The lock-service comparison by system, in the page and in summary.md: Redis single's
    // only design is its best (the seed's set-nx-px-lua did not run), a column per
    // fault class that ran.
    assert!(
        html.contains("<h2 id=\"by-system\">"),
        "no comparison by system"
    );
    assert!(
        md.contains("## By system: the lock-service comparison"),
        "{md}"
    );
    assert!(
        md.contains("| system | row | design | no fault | client crash |"),
        "{md}"
    );
    assert!(
        md.contains("| Redis single | best | setnx-expire |"),
        "{md}"
    );
    // Running again over its own report replaces it; over someone's files, refuses.
    let (code, _, err) = run(&a, "2");
    assert_eq!(code, 0, "{err}");
    let foreign = base.join("mine");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "keep me").unwrap();
    let (code, _, err) = run(&foreign, "2");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a locksim report"), "{err}");
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).unwrap(),
        "keep me"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn explore_prints_the_same_grid_twice_and_each_breaking_placement_replays() {
    let dir = std::env::temp_dir().join(format!("locksim-explore-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = |threads: &'static str| {
        vec![
            "explore".to_string(),
            "--design".into(),
            "setnx-expire".into(),
            "--faults".into(),
            "crash".into(),
            "--acquisitions".into(),
            "1".into(),
            "--threads".into(),
            threads.into(),
            "--out".into(),
            dir.display().to_string(),
        ]
    };
    let (a, b) = (args("1"), args("2"));
    let (code, first, err) = locksim(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1, "a placement breaks liveness: {first}{err}");
    let (code, second, _) = locksim(&b.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1);
    assert_eq!(first, second, "explore's output depends only on its input");
    assert!(first.contains("LV liveness"), "{first}");
    let replay = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("locksim replay "))
        .unwrap_or_else(|| panic!("no replay command: {first}"));
    let mut full = vec!["replay"];
    full.extend(replay.split_whitespace());
    let (code, out, err) = locksim(&full);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("liveness: INVALID"), "{out}");
    // A directory of someone else's files is refused.
    let foreign = dir.join("theirs");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("a.txt"), "x").unwrap();
    let mut c = args("2");
    *c.last_mut().unwrap() = foreign.display().to_string();
    let (code, _, err) = locksim(&c.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did not write"), "{err}");
    let (code, _, err) = locksim(&["explore", "--design", "setnx-expire", "--faults", "gc"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("allowed: pause, crash, delay, server-crash"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_report_without_seeds_runs_the_main_jobs_search_and_says_so() {
    let dir = std::env::temp_dir().join(format!("locksim-report-adaptive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = locksim(&[
        "report",
        "--no-sweeps",
        "--design",
        "setnx-expire",
        "--scenario",
        "client-crash",
        "--scenario",
        "no-faults",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // The cell is the one `locksim run` gives under the same adaptive rule.
    let (code, run, err) = locksim(&[
        "run",
        "--design",
        "setnx-expire",
        "--scenario",
        "client-crash",
        "--json",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let run: serde_json::Value = serde_json::from_str(&run).unwrap();
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let cell = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["scenario"] == "client-crash")
        .expect("the cell");
    assert!(cell["settled"].is_object(), "how the cell stopped: {cell}");
    for key in [
        "runs",
        "classes",
        "per_checker",
        "first_invalid_seed",
        "settled",
    ] {
        assert_eq!(cell[key], run["cell"][key], "{key}");
    }
    // The page and summary.md say which seeds ran, and a failing cell has its page.
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for text in [&html, &md] {
        assert!(text.contains("the main job's search"), "{text}");
    }
    if cell["first_invalid_seed"].is_u64() {
        let page = dir.join("cells/setnx-expire--client-crash.html");
        assert!(page.is_file(), "no page for the failing cell");
        assert!(html.contains("href=\"cells/setnx-expire--client-crash.html\""));
    }
    // A fixed range and a budget, or shards of the adaptive search: refused, by name.
    let (code, _, err) = locksim(&["report", "--seeds", "0..1", "--budget", "5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--budget") && err.contains("--seeds"), "{err}");
    let shard = dir.join("shard.json");
    let (code, _, err) = locksim(&["report", "--shard", "1/2", "--out", shard.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--seeds A..B"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_report_from_shards_is_the_unsharded_report_byte_for_byte() {
    let base = std::env::temp_dir().join(format!("locksim-report-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let sel = [
        "--seeds",
        "0..3",
        "--sweep-seeds",
        "0..2",
        "--design",
        "setnx-expire",
        "--scenario",
        "client-crash",
        "--scenario",
        "gc-pause",
    ];
    let p = |name: &str| base.join(name).display().to_string();
    let mut whole = vec!["report"];
    whole.extend(sel);
    let out_whole = p("whole");
    whole.extend(["--out", &out_whole]);
    let (code, out, err) = locksim(&whole);
    assert_eq!(code, 0, "{out}{err}");
    let shards: Vec<String> = (1..=3).map(|i| p(&format!("s{i}.json"))).collect();
    for (i, file) in shards.iter().enumerate() {
        let shard = format!("{}/3", i + 1);
        let mut a = vec!["report"];
        a.extend(sel);
        a.extend(["--shard", &shard, "--out", file]);
        let (code, out, err) = locksim(&a);
        assert_eq!(code, 0, "{out}{err}");
    }
    // Another run never writes over a shard file.
    let mut again = vec!["report"];
    again.extend(sel);
    again.extend(["--shard", "1/3", "--out", &shards[0]]);
    let (code, _, err) = locksim(&again);
    assert_eq!(code, 2, "{err}");
    let out_merged = p("merged");
    let mut from = vec!["report", "--out", &out_merged, "--from"];
    from.extend(shards.iter().map(String::as_str));
    let (code, out, err) = locksim(&from);
    assert_eq!(code, 0, "{out}{err}");
    for f in ["index.html", "results.json", "summary.md"] {
        let (a, b) = (
            std::fs::read(base.join("whole").join(f)).unwrap(),
            std::fs::read(base.join("merged").join(f)).unwrap(),
        );
        assert!(
            a == b,
            "{f}: the merged report differs from the unsharded one"
        );
    }
    let results = std::fs::read_to_string(base.join("merged").join("results.json")).unwrap();
    assert!(
        results.contains("\"param\": \"drift-ppm\""),
        "the sweeps came through"
    );
    // A missing shard is refused.
    let mut short = vec!["report", "--out", &out_merged, "--from"];
    short.extend(shards[..2].iter().map(String::as_str));
    let (code, _, err) = locksim(&short);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("every shard 1..=3"), "{err}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn sweep_shards_merge_into_the_unsharded_sweep() {
    let base = std::env::temp_dir().join(format!("locksim-sweep-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let sel = [
        "sweep",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--param",
        "pause-ms=100,400",
        "--seeds",
        "0..3",
        "--json",
    ];
    let (_, whole, err) = locksim(&sel);
    let whole: serde_json::Value =
        serde_json::from_str(&whole).unwrap_or_else(|e| panic!("{e}: {err}"));
    let files: Vec<String> = (1..=2)
        .map(|i| base.join(format!("s{i}.json")).display().to_string())
        .collect();
    for (i, f) in files.iter().enumerate() {
        let shard = format!("{}/2", i + 1);
        let mut a = sel.to_vec();
        a.extend(["--shard", &shard, "--out", f]);
        locksim(&a);
    }
    let (code, merged, err) = locksim(&["merge", &files[0], &files[1], "--json"]);
    assert_eq!(code, 1, "{err}");
    // The merged output is the (empty) cell list, then the sweep.
    let sweep_text = &merged[merged
        .find("{\n  \"scenario\"")
        .expect("a sweep in the output")..];
    let merged: serde_json::Value = serde_json::from_str(sweep_text).unwrap();
    assert_eq!(merged, whole);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_run_without_seeds_stops_an_unsafe_cell_at_its_first_violation() {
    let (code, out, err) = locksim(&[
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--json",
    ]);
    assert_eq!(code, 1, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    let cell = &report["cell"];
    assert_eq!(cell["settled"]["by"], "violation", "{cell}");
    assert_eq!(cell["settled"]["seed"], 0, "{cell}");
    assert_eq!(cell["runs"], 1, "nothing after the first violation: {cell}");
    assert_eq!(report["seeds"], "0..1");
}

#[test]
fn a_run_without_seeds_or_budget_bounds_a_safe_cell_with_sixty_clean_runs() {
    // Without a budget a safe cell runs its 60 clean runs; under the main job's budget
    // (below) it stops sooner, its bound marked weak.
    let (code, out, err) = run_safe_cell(&["--budget", "none"]);
    assert!(code == 0 || code == 1, "{out}{err}");
    assert!(out.contains("60 clean runs, no budget)"), "{out}");
    assert!(
        out.contains("adaptive seeds stopped the cell: 60 clean runs: unsafe rate < 4.9% at 95%"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("unsafe ")
                && l.ends_with(" 0/60: rate < 4.9% at 95%")),
        "{out}"
    );
}

/// `locksim run` on a cheap cell that has no unsafe run (`set-nx-px-lua × no-faults`),
/// adaptive seeds, with `extra` arguments.
fn run_safe_cell(extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "no-faults",
    ];
    args.extend_from_slice(extra);
    locksim(&args)
}

#[test]
fn the_default_budget_stops_a_safe_cell_with_a_weak_bound_and_says_so() {
    let (code, out, err) = run_safe_cell(&[]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("adaptive seeds stopped the cell: "))
        .unwrap_or_else(|| panic!("{out}"));
    // `N of 60 clean runs (budget spent): unsafe rate < X% at 95%`, with N below 60.
    let clean: u64 = line["adaptive seeds stopped the cell: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((1..60).contains(&clean), "{line}");
    assert!(
        out.contains(&format!(
            "clean runs, within {} host runs)",
            scenarios::adaptive::BUDGET_HOST_RUNS
        )),
        "the header names the budget: {out}"
    );
    assert!(
        line.contains(" of 60 clean runs (budget spent): unsafe rate < "),
        "{line}"
    );
}

#[test]
fn a_budget_is_a_positive_number_or_none_and_only_for_adaptive_seeds() {
    for (code, out, err) in [
        locksim(&["--budget", "lots"]),
        locksim(&["--budget", "0"]),
        run_safe_cell(&["--budget", "5x"]),
    ] {
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains("invalid --budget") && err.contains("or `none`"),
            "{err}"
        );
    }
    let (code, out, err) = locksim(&["--budget", "1000", "--seeds", "0..2"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--budget") && err.contains("--seeds"), "{err}");
    let (code, out, err) = locksim(&[
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--real",
        "--budget",
        "1000",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--budget") && err.contains("--real"), "{err}");
}

#[test]
fn a_main_job_shard_refuses_an_existing_out_before_it_runs_a_cell() {
    let dir = std::env::temp_dir().join(format!("locksim-shard-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("s1.json");
    std::fs::write(&out, "a user's file\n").expect("write");
    let (code, stdout, err) = locksim(&["--shard", "1/2", "--out", out.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("does not overwrite"), "{err}");
    // Refused before the header that starts the run: nothing ran.
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&out).expect("read"),
        "a user's file\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_cells_adaptive_seeds_cannot_be_sharded_and_say_to_give_a_range() {
    let (code, _, err) = locksim(&[
        "run",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--shard",
        "1/2",
        "--out",
        "/nonexistent/x.json",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--shard") && err.contains("--seeds A..B") && err.contains("split its cells"),
        "{err}"
    );
}

#[test]
fn completeness_names_no_miss_on_a_cell_the_default_settles_and_refuses_a_bad_budget() {
    let (code, out, err) = locksim(&[
        "completeness",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--deep",
        "0..5",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("completeness: 1 cells; 0 classed differently by the default than by seeds 0..5: 0 misses"),
        "{out}"
    );
    assert!(
        out.contains("set-nx-px-lua × gc-pause: unsafe at seed 0"),
        "{out}"
    );
    let (code, _, err) = locksim(&["completeness", "--budget", "lots"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid --budget 'lots'"), "{err}");
}

#[test]
fn an_adaptive_run_says_what_its_cell_cost_in_host_runs_and_a_fixed_range_does_not() {
    let adaptive = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--design",
            "set-nx-px-lua",
            "--scenario",
            "gc-pause",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = locksim(&args);
        assert_eq!(code, 1, "{err}");
        let report: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
        report["cell"].clone()
    };
    let cell = adaptive(&[]);
    let host_runs = cell["host_runs"].as_u64().expect("host runs: {cell}");
    assert!(host_runs > 1_000, "a whole world's host runs: {cell}");
    // The same on every thread count: it counts the kept runs' host runs.
    assert_eq!(
        adaptive(&["--threads", "1"])["host_runs"],
        cell["host_runs"]
    );
    assert!(adaptive(&["--seeds", "0..1"]).get("host_runs").is_none());
}

#[test]
fn completeness_on_a_sample_runs_every_kth_cell_and_refuses_a_zero_sample() {
    let (code, out, err) = locksim(&[
        "completeness",
        "--design",
        "set-nx-px-lua",
        "--scenario",
        "gc-pause",
        "--scenario",
        "read-write",
        "--scenario",
        "clock-jump",
        "--sample",
        "2",
        "--deep",
        "0..3",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("a sample, one cell in 2 in catalog order: 2 of 3 cells"),
        "{out}"
    );
    assert!(out.contains("completeness: 2 cells;"), "{out}");
    let (code, _, err) = locksim(&["completeness", "--sample", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sample"), "{err}");
}
