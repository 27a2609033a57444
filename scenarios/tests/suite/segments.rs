//! The segmented stock of Dewu's article (`segmented-stock`): five stock segments, each under its own lock
//! key, judged segment by segment. A lock that breaks under a holder's pause loses a
//! segment's sales and oversells the stock; a fencing storage keeps each segment's
//! arithmetic exact even though every segment's tokens count on their own; and two
//! clients holding two different segments at once is what segmenting is for, not a
//! violation.

use crate::common;

use scenarios::catalog;
use scenarios::checkers::{self, Checker, MutualExclusion, segments};
use scenarios::sweep::{DesignSpec, config};
use sim::faults::FaultPlan;
use sim::history::{EventKind, OpF, Phase, StorageEvent};

#[test]
fn a_lock_broken_by_a_pause_loses_a_segments_sales_and_the_evidence_names_the_segment() {
    let run = common::expect_invalid("set-nx-px-lua", "segmented-stock", "lost-update");
    let evidence = run
        .verdict("lost-update")
        .and_then(|v| v.evidence())
        .expect("evidence");
    assert!(
        evidence.summary.starts_with("segment ") && evidence.summary.contains("lock:stock:"),
        "{}",
        evidence.summary
    );
    assert!(
        evidence
            .summary
            .contains("sales were accepted of a stock of 500 over 5 segments"),
        "{}",
        evidence.summary
    );
}

#[test]
fn a_fencing_storage_keeps_every_segment_exact_though_each_segment_counts_its_own_tokens() {
    // Mutual exclusion breaks in belief (the pause), but each segment's storage mark
    // refuses the stale holder: `fenced`, not `unsafe`, and no token is judged out of
    // order although segment 0's tokens and segment 1's run side by side.
    common::expect_invalid("fenced", "segmented-stock", "mutual-exclusion");
    common::expect_never_invalid(
        "fenced",
        "segmented-stock",
        &["lost-update", "token-order"],
        3,
        3,
    );
}

#[test]
fn holders_of_different_segments_at_once_are_no_violation_and_every_segment_is_judged() {
    let s = catalog::find("segmented-stock").expect("scenario");
    let mut cfg = config(
        &DesignSpec::builtin("set-nx-px-lua").expect("design"),
        &s,
        0,
    );
    cfg.plan = FaultPlan { faults: vec![] };
    let h = sim::world::run(&cfg).expect("run completes");
    assert_eq!(h.params.segments, Some(5));
    // Different segments' holds overlap in time (that is the throughput segmenting
    // buys) ...
    let holds = checkers::model::holds(&h).expect("holds");
    let overlapping = holds.iter().enumerate().any(|(i, a)| {
        holds[i + 1..].iter().any(|b| {
            a.key != b.key && a.host != b.host && a.start_us < b.end_us && b.start_us < a.end_us
        })
    });
    assert!(overlapping, "no two segments were held at once");
    // ... and without faults every checker of safety is valid.
    for (name, verdict) in checkers::check_all(&h) {
        if [
            "mutual-exclusion",
            "lost-update",
            "ownership",
            "token-order",
        ]
        .contains(&name)
        {
            assert!(verdict.is_valid(), "{name}: {verdict:?}");
        }
    }
    // Each segment's view holds its own sales, and they add up to the whole run's.
    let views = segments::split(&h).expect("a segmented history");
    assert_eq!(views.len(), 5);
    let sales = |h: &sim::history::History| {
        h.events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Storage(StorageEvent::Write { accepted: true, .. })
                )
            })
            .count()
    };
    assert!(views.iter().all(|v| sales(&v.history) > 0));
    assert_eq!(
        views.iter().map(|v| sales(&v.history)).sum::<usize>(),
        sales(&h)
    );
    // A segment's view is an unsegmented run of its own key.
    for v in &views {
        assert_eq!(v.history.params.key, format!("lock:stock:{}", v.segment));
        assert!(
            v.history
                .ops()
                .all(|(_, op)| op.key.as_deref().is_none_or(|k| k == v.key))
        );
    }
}

#[test]
fn evidence_found_in_a_segment_points_at_the_whole_historys_events() {
    let s = catalog::find("segmented-stock").expect("scenario");
    let cfg = config(
        &DesignSpec::builtin("set-nx-px-lua").expect("design"),
        &s,
        0,
    );
    let h = sim::world::run(&cfg).expect("run completes");
    let verdicts = checkers::check_all(&h);
    let (_, me) = verdicts
        .iter()
        .find(|(n, _)| *n == "mutual-exclusion")
        .expect("judged");
    let e = me
        .evidence()
        .expect("set-nx-px-lua breaks under the pauses at seed 0");
    // The first event is the second holder's acquire ok, on the segment the summary
    // names, in the whole history.
    let EventKind::Op(op) = &h.events[e.first_event].kind else {
        panic!(
            "first event is not an operation: {:?}",
            h.events[e.first_event]
        );
    };
    assert_eq!((op.f, op.phase), (OpF::Acquire, Phase::Ok));
    let key = op.key.clone().expect("a segment's key");
    assert!(
        e.summary.contains(&format!("(lock {key})")),
        "{}",
        e.summary
    );
    // Judged on the whole history, mutual exclusion still tells the segments' keys
    // apart (overlaps are per key) and finds the same pair.
    assert_eq!(
        MutualExclusion.check(&h).evidence().map(|w| w.at_us),
        Some(e.at_us)
    );
}

#[test]
fn a_segmented_workload_names_its_bad_knobs() {
    let bad = |w: sim::world::Workload| match w.validate() {
        Err(e) => e.to_string(),
        Ok(()) => panic!("accepted {w:?}"),
    };
    let base = catalog::find("segmented-stock").expect("scenario").workload;
    let one = bad(sim::world::Workload {
        segments: Some(1),
        ..base.clone()
    });
    assert!(
        one.contains("workload.segments=1") && one.contains("2 to 64"),
        "{one}"
    );
    let thin = bad(sim::world::Workload {
        initial_stock: 3,
        ..base.clone()
    });
    assert!(thin.contains("workload.initial_stock=3"), "{thin}");
    let mixed = bad(sim::world::Workload {
        read_share: Some(50),
        ..base
    });
    assert!(mixed.contains("workload.read_share"), "{mixed}");
}
