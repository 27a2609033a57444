//! The design × scenario table.

mod common;

use reports::table::{self, CellResult};
use scenarios::checkers::{self, Verdict};

fn cells() -> Vec<CellResult> {
    let h = common::history();
    let verdicts = checkers::check_all(&h);
    let mut bad = CellResult::new("naive", "pause-holder");
    bad.record(
        41,
        &checkers::check_all(&sim_history_without_events(&h)),
        false,
        true,
    );
    bad.record(42, &verdicts, false, true);
    bad.record(43, &verdicts, false, true);
    bad.replay = Some("locksim replay --design naive --scenario pause-holder --seed 42".into());
    let mut good = CellResult::new("fenced-token", "pause-holder");
    good.record(
        1,
        &checkers::check_all(&sim_history_without_events(&h)),
        false,
        true,
    );
    vec![bad, good]
}

fn sim_history_without_events(h: &sim::history::History) -> sim::history::History {
    let mut h = h.clone();
    h.events.clear();
    h
}

#[test]
fn a_cell_counts_invalid_runs_per_checker_and_remembers_the_first_invalid_seed() {
    let c = &cells()[0];
    assert_eq!(c.runs, 3);
    assert_eq!(c.per_checker["mutual-exclusion"], 2);
    assert_eq!(c.per_checker["ownership"], 2);
    assert_eq!(c.per_checker["lost-update"], 0);
    // The fixture records no validity, so its locks count as never expiring: the
    // overlap of beliefs is an overlap of validity too.
    assert_eq!(c.per_checker["validity"], 2);
    assert_eq!(c.per_checker["overrun"], 0);
    // client-4's ok names a value the server never recorded it writing.
    assert_eq!(c.per_checker["belief"], 2);
    // client-5 was refused while the key was absent and no fault was active.
    assert_eq!(c.per_checker["liveness"], 2);
    assert_eq!(c.first_invalid_seed, Some(42));
    assert_eq!(c.invalid(), 10);
}

#[test]
fn the_text_table_has_aligned_columns_for_every_checker() {
    let text = table::render_text(&cells());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for col in [
        "design",
        "scenario",
        "runs",
        "fault",
        "class",
        "unsafe, 95%",
        "mutual-exclusion",
        "lost-update",
        "ownership",
        "liveness",
        "reentrancy",
        "waiter-liveness",
        "token-order",
        "validity",
        "overrun",
        "belief",
        "first invalid seed",
        "replay",
    ] {
        assert!(lines[0].contains(col), "{col} missing: {text}");
    }
    // Every column starts at the same offset in every row: the header and rule agree.
    let starts = |l: &str| -> Vec<usize> {
        l.char_indices()
            .filter(|&(i, c)| c != ' ' && (i == 0 || l.as_bytes()[i - 1] == b' '))
            .map(|(i, _)| i)
            .collect()
    };
    assert_eq!(starts(lines[1]).len(), 21);
    assert!(lines[2].starts_with("naive         pause-holder"), "{text}");
    assert!(
        lines[2].ends_with("42  locksim replay --design naive --scenario pause-holder --seed 42"),
        "{text}"
    );
    assert!(lines[3].ends_with("-  -"), "{text}");
    let runs_end = lines[0].find("runs").unwrap() + 4;
    assert_eq!(&lines[2][runs_end - 1..runs_end], "3");
    assert_eq!(&lines[3][runs_end - 1..runs_end], "1");
}

#[test]
fn the_json_table_round_trips() {
    let cells = cells();
    let json = table::render_json(&cells);
    assert!(json.contains("\"checkers\""));
    assert_eq!(table::cells_from_json(&json).unwrap(), cells);
}

#[test]
fn a_cell_counts_runs_per_safety_class() {
    let c = &cells()[0];
    assert_eq!(c.classes["unsafe"], 2);
    // A run with no events judged nothing: unknown, never safe.
    assert_eq!(c.classes["unknown"], 1);
    assert_eq!(c.classes.values().sum::<usize>(), 3);
    assert_eq!(c.worst_class(), Some(checkers::Safety::Unsafe));
    assert_eq!(c.class_text(), "unsafe 2, unknown 1");
    assert_eq!(cells()[1].class_text(), "unknown 1");
}

#[test]
fn a_run_that_never_saw_its_fault_is_not_counted_safe() {
    let safe = vec![("mutual-exclusion", Verdict::Valid)];
    let mut c = CellResult::new("d", "s");
    c.record(1, &safe, false, true);
    c.record(2, &safe, false, false);
    assert_eq!(c.fault_seen, 1);
    assert_eq!(c.class_text(), "safe 1, no-fault 1");
    let text = table::render_text(&[c]);
    assert!(text.lines().next().unwrap().contains("fault"), "{text}");
}

#[test]
fn the_class_column_lists_the_worst_class_first() {
    let fenced = vec![
        ("mutual-exclusion", invalid()),
        ("lost-update", Verdict::Valid),
    ];
    let safe = vec![("mutual-exclusion", Verdict::Valid)];
    let mut c = CellResult::new("fenced", "pause-holder");
    c.record(1, &safe, false, true);
    for seed in 2..20 {
        c.record(seed, &fenced, true, true);
    }
    c.record(20, &safe, false, true);
    assert_eq!(c.class_text(), "fenced 18, safe 2");
    let text = table::render_text(&[c]);
    let lines: Vec<&str> = text.lines().collect();
    let col = lines[0].find("class").unwrap();
    assert!(lines[2][col..].starts_with("fenced 18, safe 2  "), "{text}");
}

/// An overlap nothing refused ranks above a stale write the storage refused: a cell
/// with both reads `O`, and its class column lists the overlap first.
#[test]
fn an_unprotected_overlap_ranks_above_a_fenced_run() {
    let mut c = CellResult::new("fenced", "gc-pause");
    c.runs = 20;
    c.classes.insert("fenced".into(), 17);
    c.classes.insert("overlap".into(), 3);
    assert_eq!(c.worst_class(), Some(scenarios::checkers::Safety::Overlap));
    assert_eq!(table::worst_mark(&c), ('O', 3));
    assert_eq!(c.class_text(), "overlap 3, fenced 17");
}

#[test]
fn a_table_written_before_classes_existed_still_reads_and_shows_a_dash() {
    let mut cells = cells();
    let mut json: serde_json::Value = serde_json::from_str(&table::render_json(&cells)).unwrap();
    for cell in json["cells"].as_array_mut().unwrap() {
        cell.as_object_mut().unwrap().remove("classes");
    }
    let old = table::cells_from_json(&json.to_string()).unwrap();
    for c in &mut cells {
        c.classes.clear();
    }
    assert_eq!(old, cells);
    assert_eq!(old[0].class_text(), "-");
    assert_eq!(old[0].worst_class(), None);
}

#[test]
fn the_json_table_includes_the_classes() {
    let json = table::render_json(&cells());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["cells"][0]["classes"]["unsafe"], 2);
    assert_eq!(v["cells"][0]["classes"]["unknown"], 1);
    assert_eq!(v["cells"][0]["fault_seen"], 3);
}

fn invalid() -> Verdict {
    Verdict::Invalid(checkers::Evidence {
        summary: "overlap".into(),
        at_us: 0,
        hosts: vec![],
        owners: vec![],
        first_event: 0,
        events: vec![],
    })
}

#[test]
fn the_matrix_fits_120_columns_with_every_design_and_scenario_and_marks_each_cell() {
    let designs: Vec<&str> = lock_impl::DESIGNS.iter().map(|d| d.name).collect();
    let catalog = scenarios::catalog::catalog();
    let scenario_names: Vec<&str> = catalog.iter().map(|s| s.name).collect();
    let mut cells = Vec::new();
    // setnx-del: unsafe in 2 of 3 runs under the first scenario; safe but stuck under
    // the second; redlock: fenced in all under the first; nothing for the rest.
    let mut c = CellResult::new("setnx-del", scenario_names[0]);
    c.runs = 3;
    c.classes.insert("unsafe".into(), 2);
    c.classes.insert("safe".into(), 1);
    cells.push(c);
    let mut c = CellResult::new("setnx-del", scenario_names[1]);
    c.runs = 3;
    c.classes.insert("safe".into(), 3);
    c.per_checker.insert("liveness".into(), 3);
    cells.push(c);
    let mut c = CellResult::new("redlock", scenario_names[0]);
    c.runs = 3;
    c.classes.insert("fenced".into(), 3);
    cells.push(c);
    let mut c = CellResult::new("redlock", scenario_names[1]);
    c.runs = 3;
    c.classes.insert(table::NO_FAULT.into(), 3);
    cells.push(c);
    let text = table::render_matrix(&cells, &designs, &scenario_names, false);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    // A design's marks, across every panel (a wide catalog is printed in several,
    // each with its own header and a row per design).
    let row = |d: &str| {
        let rows: Vec<String> = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(d))
            .flat_map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(!rows.is_empty(), "no row for {d}: {text}");
        rows
    };
    let panels = text.lines().filter(|l| l.starts_with("design")).count();
    assert_eq!(
        panels,
        scenario_names.len().div_ceil((120 - 26) / 3),
        "as many panels as 120 columns need: {text}"
    );
    assert_eq!(row("setnx-del")[..3], ["U2", "L", "."]);
    assert_eq!(row("redlock")[..2], ["F", "n"]);
    assert_eq!(
        row("fenced").len(),
        scenario_names.len(),
        "a mark per scenario"
    );
    for (i, s) in scenario_names.iter().enumerate() {
        assert!(
            text.contains(&format!("{} {s}", i + 1)),
            "scenario {s} numbered: {text}"
        );
    }
    assert!(!text.contains('\x1b'), "no colour unless asked");
    assert!(
        table::render_matrix(&cells, &designs, &scenario_names, true).contains("\x1b[31;1mU2"),
        "unsafe in red when colour is on"
    );
}

#[test]
fn the_gate_flags_more_bad_runs_a_failing_checker_and_a_slow_p99_and_nothing_else() {
    use reports::gate::{Baseline, compare};
    let mut cell = CellResult::new("d", "s");
    cell.runs = 3;
    cell.classes.insert("fenced".into(), 1);
    cell.classes.insert("safe".into(), 2);
    cell.per_checker.insert("mutual-exclusion".into(), 1);
    cell.latency.count = 10;
    cell.latency.p99_ms = 100.0;
    let baseline = Baseline::from_cells("0..3", std::slice::from_ref(&cell));
    assert_eq!(baseline.cells[0].p99_budget_ms, 125.0);
    assert!(
        compare(&baseline, std::slice::from_ref(&cell))
            .regressions
            .is_empty()
    );

    // The fenced run turned unsafe: a class regression, though the bad-run total is
    // the same.
    let mut worse = cell.clone();
    worse.classes = [("unsafe".to_string(), 1), ("safe".to_string(), 2)].into();
    worse.per_checker.insert("lost-update".into(), 1);
    let cmp = compare(&baseline, &[worse]);
    let whats: Vec<&str> = cmp.regressions.iter().map(|c| c.what.as_str()).collect();
    assert_eq!(whats, ["runs unsafe or worse", "lost-update invalid runs"]);

    // Slower, and better in class: the p99 regression alone.
    let mut slow = cell.clone();
    slow.classes = [("safe".to_string(), 3)].into();
    slow.per_checker.insert("mutual-exclusion".into(), 0);
    slow.latency.p99_ms = 126.0;
    let cmp = compare(&baseline, &[slow]);
    assert_eq!(cmp.regressions.len(), 1, "{:?}", cmp.regressions);
    assert_eq!(cmp.regressions[0].what, "acquire p99 (simulated ms)");
    assert_eq!(cmp.improvements.len(), 2, "{:?}", cmp.improvements);

    // New and missing cells are reported, not failed.
    let other = CellResult::new("d2", "s");
    let cmp = compare(&baseline, &[other]);
    assert!(cmp.regressions.is_empty());
    assert_eq!(cmp.new_cells, ["d2 / s"]);
    assert_eq!(cmp.missing, ["d / s"]);
}

#[test]
fn the_lines_under_the_matrix_fit_120_columns_too() {
    let text = reports::commands::matrix_footer(135, 234);
    assert!(text.starts_with("135 of 234 cells"), "{text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

/// `locksim list`'s time-scale table names every constant of the one clock scale, with
/// its real value and its value in the catalog's world, and the README describes the
/// rule the table follows.
#[test]
fn time_scale_table_lists_every_constant_with_its_real_and_catalog_value() {
    use lock_impl::scale::{CONSTANTS, SERVER_STARTS, TimeScale};
    let table = reports::commands::time_scale_table();
    let catalog = TimeScale::for_lease(200);
    assert!(table.contains("1/150 of real time"), "{table}");
    for c in CONSTANTS.iter().chain(SERVER_STARTS) {
        let line = table
            .lines()
            .find(|l| l.contains(c.name))
            .unwrap_or_else(|| panic!("{} missing from:\n{table}", c.name));
        assert!(
            line.contains(&format!("real {:>6} ms", c.real_ms))
                && line.contains(&format!("catalog {:>4} ms", catalog.ms_of(c)))
                && line.contains(c.source),
            "{line}"
        );
    }
    let readme = include_str!("../../README.md");
    assert!(readme.contains("One clock scale per world") && readme.contains("time_scale_table"));
}

/// A cell with `unsafe_runs` unsafe runs and the rest safe, out of `runs`; the
/// mutual-exclusion checker invalid in the unsafe ones.
fn counted(runs: u64, unsafe_runs: usize) -> CellResult {
    let mut c = CellResult::new("d", "s");
    c.runs = runs;
    c.fault_seen = runs;
    if unsafe_runs > 0 {
        c.classes.insert("unsafe".into(), unsafe_runs);
    }
    if runs as usize > unsafe_runs {
        c.classes.insert("safe".into(), runs as usize - unsafe_runs);
    }
    c.per_checker.insert("mutual-exclusion".into(), unsafe_runs);
    c.per_checker.insert("liveness".into(), 0);
    c
}

#[test]
fn a_cells_unsafe_share_comes_with_its_95_percent_interval_on_known_counts() {
    assert_eq!(
        counted(30, 3).unsafe_text(),
        "unsafe 3/30, 10%, 95% CI 2.1–27%"
    );
    assert_eq!(
        counted(60, 0).unsafe_text(),
        "unsafe 0/60: rate < 4.9% at 95%"
    );
    assert_eq!(
        counted(30, 30).unsafe_text(),
        "unsafe 30/30: rate > 90% at 95%"
    );
    assert_eq!(
        counted(1, 1).unsafe_text(),
        "unsafe 1/1: rate > 5.0% at 95%"
    );
    assert_eq!(
        counted(0, 0).unsafe_text(),
        "unsafe 0/0: no runs, no interval"
    );
    assert_eq!(counted(0, 0).unsafe_rate(), None);
    // A table written before classes existed has nothing to count.
    let mut old = counted(30, 3);
    old.classes.clear();
    assert_eq!(old.unsafe_rate(), None);
    assert_eq!(
        old.unsafe_text(),
        "unsafe: no classes recorded, no interval"
    );
    let r = counted(30, 3).unsafe_rate().unwrap();
    assert!((r.low - 0.021_117).abs() < 1e-6 && (r.high - 0.265_288).abs() < 1e-6);
}

#[test]
fn the_detail_table_shows_the_unsafe_share_with_its_interval() {
    let text = table::render_text(&[counted(30, 3), counted(60, 0), counted(0, 0)]);
    let lines: Vec<&str> = text.lines().collect();
    let col = lines[0].find("unsafe, 95%").unwrap();
    assert!(lines[2][col..].starts_with("3/30 2.1–27%"), "{text}");
    assert!(lines[3][col..].starts_with("0/60 <4.9%"), "{text}");
    assert!(lines[4][col..].starts_with("- "), "{text}");
}

#[test]
fn the_json_table_carries_every_rate_as_numbers() {
    let json = table::render_json(&[counted(30, 3), counted(60, 0), counted(0, 0)]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rates = &v["cells"][0]["rates"];
    assert_eq!(rates["method"], "clopper-pearson");
    assert_eq!(rates["confidence"], 0.95);
    let u = &rates["unsafe"];
    assert_eq!(
        (u["count"].as_u64(), u["runs"].as_u64()),
        (Some(3), Some(30))
    );
    assert_eq!(u["bound"], "two-sided");
    assert!((u["share"].as_f64().unwrap() - 0.1).abs() < 1e-12);
    assert!((u["low"].as_f64().unwrap() - 0.021_117).abs() < 1e-6);
    assert!((u["high"].as_f64().unwrap() - 0.265_288).abs() < 1e-6);
    let me = &rates["invalid"]["mutual-exclusion"];
    assert_eq!(
        (me["count"].as_u64(), me["runs"].as_u64()),
        (Some(3), Some(30))
    );
    let live = &rates["invalid"]["liveness"];
    assert_eq!(live["bound"], "upper");
    assert!((live["high"].as_f64().unwrap() - 0.095_034).abs() < 1e-6);
    let clean = &v["cells"][1]["rates"]["unsafe"];
    assert_eq!(clean["bound"], "upper");
    assert!((clean["high"].as_f64().unwrap() - 0.048_703).abs() < 1e-6);
    // No runs, no interval.
    assert!(v["cells"][2]["rates"]["unsafe"].is_null());
    // The rates are derived: the table still reads back to the same cells.
    assert_eq!(
        table::cells_from_json(&json).unwrap(),
        vec![counted(30, 3), counted(60, 0), counted(0, 0)]
    );
}

#[test]
fn a_sweeps_plot_draws_each_points_interval_as_a_band_and_its_table_prints_it() {
    use reports::sweeps::{SweepLine, SweepPoint, SweepResult};
    let sweep = SweepResult {
        scenario: "gc-pause".into(),
        param: "pause-ms".into(),
        pinned: String::new(),
        seeds: "0..30".into(),
        lease_ms: 200,
        lines: vec![SweepLine {
            design: "d".into(),
            points: vec![
                SweepPoint {
                    value: 100,
                    cell: counted(30, 0),
                },
                SweepPoint {
                    value: 400,
                    cell: counted(30, 3),
                },
            ],
        }],
    };
    let plot = sweep.plot();
    let band = &plot.series[0].band;
    assert_eq!(band.len(), 2);
    assert_eq!((band[0].0, band[0].1), (0.5, 0.0));
    assert!((band[0].2 - 0.095_034).abs() < 1e-6, "{band:?}");
    assert!((band[1].1 - 0.021_117).abs() < 1e-6 && (band[1].2 - 0.265_288).abs() < 1e-6);
    let text = sweep.render_text();
    assert!(text.contains("0/30 <9.6%"), "{text}");
    assert!(text.contains("3/30 2.1–27%"), "{text}");
    let json = serde_json::to_value(&sweep).unwrap();
    let u = &json["lines"][0]["points"][1]["cell"]["rates"]["unsafe"];
    assert_eq!(u["count"], 3);
}

/// The main job's adaptive cells: an unsafe one shows the seed of its first violation,
/// a bounded one its mark, a weak bound a `~`; the matrix stays within 120 columns and
/// says what the marks mean, and the detail table says how each cell stopped.
#[test]
fn adaptive_cells_show_their_first_violation_seed_and_mark_a_weak_bound() {
    use scenarios::adaptive::{Settled, Weak};
    let designs: Vec<&str> = lock_impl::DESIGNS.iter().map(|d| d.name).collect();
    let catalog = scenarios::catalog::catalog();
    let names: Vec<&str> = catalog.iter().map(|s| s.name).collect();
    let mut unsafe_at_17 = counted(18, 1);
    unsafe_at_17.design = "setnx-del".into();
    unsafe_at_17.scenario = names[0].into();
    unsafe_at_17.settled = Some(Settled::Violation {
        seed: 17,
        place: None,
    });
    let mut safe = counted(60, 0);
    safe.design = "setnx-del".into();
    safe.scenario = names[1].into();
    safe.settled = Some(Settled::Bounded {
        clean: 60,
        wanted: 60,
        upper: Some(0.0487),
        weak: None,
        placed: None,
    });
    let mut weak = counted(23, 0);
    weak.design = "setnx-del".into();
    weak.scenario = names[2].into();
    weak.settled = Some(Settled::Bounded {
        clean: 23,
        wanted: 60,
        upper: Some(0.122),
        weak: Some(Weak::Budget),
        placed: None,
    });
    assert_eq!(table::matrix_mark(&unsafe_at_17).1, "U17");
    assert_eq!(table::matrix_mark(&safe).1, "S");
    assert_eq!(table::matrix_mark(&weak).1, "S~");
    // A placed fault's violation, and a cell whose every placement ran clean.
    let mut placed = counted(3, 1);
    placed.settled = Some(Settled::Violation {
        seed: 0,
        place: Some(scenarios::catalog::Placement::At(311)),
    });
    assert_eq!(table::matrix_mark(&placed).1, "Up");
    let mut covered = counted(5, 0);
    covered.settled = Some(Settled::Bounded {
        clean: 5,
        wanted: 60,
        upper: Some(0.45),
        weak: Some(Weak::Budget),
        placed: Some(scenarios::adaptive::Cover {
            tried: 4,
            of: 4,
            broke: Vec::new(),
        }),
    });
    assert_eq!(table::matrix_mark(&covered).1, "Sp~");
    covered.settled = Some(Settled::Bounded {
        clean: 5,
        wanted: 60,
        upper: Some(0.45),
        weak: Some(Weak::Budget),
        placed: Some(scenarios::adaptive::Cover {
            tried: 4,
            of: 9,
            broke: Vec::new(),
        }),
    });
    assert_eq!(
        table::matrix_mark(&covered).1,
        "S~",
        "a spread of placements is no cover"
    );
    let cells = vec![unsafe_at_17, safe, weak];
    let text = table::render_matrix(&cells, &designs, &names, false);
    for line in text.lines() {
        assert!(line.chars().count() <= 120, "{line}");
    }
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("setnx-del"))
        .expect("a row")
        .split_whitespace()
        .skip(1)
        .collect();
    assert_eq!(row[..4], ["U17", "S", "S~", "."]);
    assert!(
        text.contains("first unsafe run (U7: at seed 7) or 60 clean runs"),
        "{text}"
    );
    assert!(text.contains("<4.9% at 95%"), "{text}");
    let detail = table::render_text(&cells);
    assert!(detail.contains("stopped"), "{detail}");
    assert!(detail.contains("unsafe at seed 17"), "{detail}");
    assert!(
        detail.contains("60 clean runs: unsafe rate < 4.9% at 95%"),
        "{detail}"
    );
    assert!(
        detail.contains("23 of 60 clean runs (budget spent): unsafe rate < 13% at 95%"),
        "{detail}"
    );
    // And the JSON says which, as data, and reads back.
    let json: serde_json::Value = serde_json::from_str(&table::render_json(&cells)).expect("json");
    assert_eq!(json["cells"][0]["settled"]["by"], "violation");
    assert_eq!(json["cells"][0]["settled"]["seed"], 17);
    assert_eq!(json["cells"][2]["settled"]["by"], "bounded");
    assert_eq!(json["cells"][2]["settled"]["clean"], 23);
    assert_eq!(json["cells"][2]["settled"]["weak"], "budget");
    let back = table::cells_from_json(&table::render_json(&cells)).expect("reads back");
    assert_eq!(back, cells);
    let footer = reports::commands::adaptive_footer(&cells);
    assert!(
        footer.starts_with("1 cells settled by an unsafe run, 1 bounded by 60 clean runs"),
        "{footer}"
    );
    assert!(footer.contains("~ setnx-del × "), "{footer}");
}

/// A table over fixed seeds (`--seeds A..B`) prints as it did: no `stopped` column.
#[test]
fn a_fixed_seed_table_has_no_stopped_column() {
    let detail = table::render_text(&[counted(10, 2)]);
    assert!(!detail.contains("stopped"), "{detail}");
    assert_eq!(table::matrix_mark(&counted(10, 2)).1, "U2");
}
