//! `explore` finds the narrow windows at seed 0: a crash between `SETNX` and `PEXPIRE`
//! is the only crash placement that leaves `setnx-expire`'s lock stuck, and a pause
//! between `GET` and `DEL` is where `set-nx-px-check-del` releases someone else's lock.
//! And it is deterministic: the thread count changes nothing.

use scenarios::catalog::find;
use scenarios::explore::{Exploration, Params, Row, Sort, explore};
use scenarios::sweep::DesignSpec;

fn run(design: &str, sorts: &[Sort], threads: usize) -> Exploration {
    explore(
        &DesignSpec::builtin(design).unwrap(),
        &find("no-faults").unwrap(),
        &Params {
            sorts: sorts.to_vec(),
            acquisitions: 1,
            threads,
            ..Params::default()
        },
    )
    .unwrap()
}

fn label(e: &Exploration, i: Option<usize>) -> &str {
    i.map_or("", |i| e.steps[i].label.as_str())
}

fn breaks(r: &Row, checker: &str) -> bool {
    r.outcomes
        .iter()
        .any(|o| o.broken.iter().any(|b| b == checker))
}

#[test]
fn the_only_crash_that_sticks_setnx_expire_lands_between_setnx_and_pexpire() {
    let e = run("setnx-expire", &[Sort::Crash], 2);
    assert!(e.baseline_invalid.is_empty(), "{:?}", e.baseline_invalid);
    let breaking: Vec<&Row> = e
        .rows
        .iter()
        .filter(|r| r.outcomes.iter().any(|o| !o.broken.is_empty()))
        .collect();
    assert!(!breaking.is_empty(), "no crash placement broke anything");
    for r in &breaking {
        assert!(
            label(&e, r.after).contains("ran SETNX") && label(&e, r.before).contains("ran PEXPIRE"),
            "a crash at {} ms (after '{}', before '{}') broke {:?}",
            r.at_ms,
            label(&e, r.after),
            label(&e, r.before),
            r.outcomes
        );
        for o in &r.outcomes {
            assert_eq!(o.broken, vec!["liveness".to_string()], "at {} ms", r.at_ms);
        }
    }
}

#[test]
fn a_pause_between_get_and_del_makes_check_then_del_release_someone_elses_lock() {
    let e = run("set-nx-px-check-del", &[Sort::Pause], 2);
    let get_sent = e
        .steps
        .iter()
        .find(|s| s.label.ends_with("release invoke"))
        .expect("a release")
        .at_us
        / 1_000;
    let del_ran = e
        .steps
        .iter()
        .find(|s| s.label.contains("ran DEL"))
        .expect("a DEL")
        .at_us
        / 1_000;
    let owning: Vec<&Row> = e.rows.iter().filter(|r| breaks(r, "ownership")).collect();
    assert!(!owning.is_empty(), "no pause broke ownership");
    for r in &owning {
        assert!(
            get_sent < r.at_ms && r.at_ms < del_ran,
            "a pause at {} ms (after '{}') broke ownership outside GET..DEL ({get_sent}..{del_ran} ms)",
            r.at_ms,
            label(&e, r.after)
        );
    }
    assert!(
        owning
            .iter()
            .any(|r| label(&e, r.after).contains("ran GET")
                && label(&e, r.before).contains("ran DEL")),
        "no ownership-breaking row sits between GET and DEL"
    );
}

#[test]
fn explore_gives_the_same_grid_on_one_thread_or_two() {
    let (a, b) = (
        run("set-nx-px-lua", &[Sort::ServerCrash], 1),
        run("set-nx-px-lua", &[Sort::ServerCrash], 2),
    );
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert!(a.rows.len() > 4 && a.runs == a.rows.len() * a.columns.len());
}
