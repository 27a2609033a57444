//! `scenarios::checkers::rw_exclusion`'s unit tests, moved here from the module: the `scenarios`
//! library has no unit-test harness, which would compile it a second time.

use sim::history::{Event, EventKind, History, LockMode, Op, OpF, Phase};

use scenarios::checkers::rw_exclusion::*;
use scenarios::checkers::{Checker, MutualExclusion, Safety, Verdict, safety};

const MS: u64 = 1_000;

/// A history of holds `(host, mode, from ms, to ms)`: an acquire invoked and ok at
/// `from`, a release invoked at `to` and ok a millisecond later.
fn history(holds: &[(&str, Option<LockMode>, u64, u64)]) -> History {
    let mut events = Vec::new();
    let op = |op, f, phase, owner: &str, mode| {
        EventKind::Op(Op {
            op,
            f,
            phase,
            key: Some("lock".into()),
            owner: (phase != Phase::Invoke || f == OpF::Release).then(|| owner.into()),
            value: None,
            token: None,
            valid_until_us: None,
            detail: None,
            mode,
        })
    };
    for (i, (host, mode, from, to)) in holds.iter().enumerate() {
        let (a, r) = (2 * i as u64 + 1, 2 * i as u64 + 2);
        let owner = format!("{host}-owner");
        for (at, kind) in [
            (*from, op(a, OpF::Acquire, Phase::Invoke, &owner, *mode)),
            (*from, op(a, OpF::Acquire, Phase::Ok, &owner, *mode)),
            (*to, op(r, OpF::Release, Phase::Invoke, &owner, *mode)),
            (to + 1, op(r, OpF::Release, Phase::Ok, &owner, *mode)),
        ] {
            events.push(Event {
                at_us: at * MS,
                host: (*host).into(),
                kind,
            });
        }
    }
    events.sort_by_key(|e| e.at_us);
    History {
        events,
        ..crate::common::blank_history(1, 3)
    }
}

const R: Option<LockMode> = Some(LockMode::Read);
const W: Option<LockMode> = Some(LockMode::Write);

#[test]
fn a_writer_overlapping_a_reader_is_invalid_and_names_both() {
    let h = history(&[("client-1", R, 100, 500), ("client-2", W, 300, 700)]);
    let verdict = RwExclusion.check(&h);
    let evidence = verdict.evidence().expect("a writer overlapped a reader");
    assert_eq!(evidence.hosts, vec!["client-2", "client-1"], "writer first");
    assert!(
        evidence
            .summary
            .contains("in write mode while client-1 held it in read mode"),
        "{}",
        evidence.summary
    );
    assert_eq!(evidence.at_us, 300 * MS);
    // mutual-exclusion sees the same breach; the class counts it as overlap.
    assert!(MutualExclusion.check(&h).is_invalid());
    let verdicts = [(NAME, verdict)];
    assert_eq!(safety(&verdicts, false), Safety::Unsafe);
}

#[test]
fn a_reader_let_in_while_a_writer_holds_is_invalid() {
    // The reader comes and goes inside the writer's hold.
    let h = history(&[("client-1", W, 100, 500), ("client-2", R, 200, 300)]);
    let evidence = RwExclusion
        .check(&h)
        .evidence()
        .cloned()
        .expect("a reader inside a write hold");
    assert_eq!(evidence.hosts, vec!["client-1", "client-2"], "writer first");
    assert!(
        evidence
            .summary
            .contains("client-1 held lock lock in write mode while client-2 held it in read mode"),
        "{}",
        evidence.summary
    );
    assert_eq!(evidence.at_us, 200 * MS);
}

#[test]
fn the_contention_probe_needs_shared_readers_and_a_writer_meeting_one() {
    use scenarios::checkers::probes::readers_shared_and_a_writer_met_a_reader as probe;
    // Two readers share; client-3 asks for the write lock at 300 (inside both
    // reads) and holds it from 600, after they left.
    let mut waited = history(&[
        ("client-1", R, 100, 500),
        ("client-2", R, 200, 600),
        ("client-3", W, 600, 700),
    ]);
    let ask = waited
        .events
        .iter()
        .position(|e| {
            e.host == "client-3"
                && matches!(&e.kind, EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Invoke)
        })
        .expect("client-3's acquire");
    waited.events[ask].at_us = 300 * MS;
    waited.events.sort_by_key(|e| e.at_us);
    let w = probe(&waited).expect("a witness");
    assert!(
        w.contains("client-1 and client-2 read lock together from 0.200 s"),
        "{w}"
    );
    assert!(
        w.contains("client-3 asked for the write lock at 0.300 s while client-1 read it (granted at 0.600 s, after that read ended)"),
        "{w}"
    );
    // A writer let in beside a reader is a witness too (the checker judges it).
    let beside = history(&[
        ("client-1", R, 100, 500),
        ("client-2", R, 200, 600),
        ("client-3", W, 300, 400),
    ]);
    assert!(
        probe(&beside)
            .expect("a witness")
            .contains("during that read")
    );
    // Readers that never met, or shared readers no writer met: nothing to judge.
    let apart = history(&[("client-1", R, 100, 200), ("client-2", W, 300, 700)]);
    assert_eq!(probe(&apart), None);
    let unmet = history(&[
        ("client-1", R, 100, 500),
        ("client-2", R, 200, 600),
        ("client-3", W, 700, 800),
    ]);
    assert_eq!(probe(&unmet), None);
}

#[test]
fn the_long_work_probe_also_needs_a_read_hold_longer_than_the_lease() {
    use scenarios::checkers::probes::long_reads_shared_and_a_writer_met_a_reader as probe;
    // The lease is 1,000 ms: client-1 reads for 1,400 ms, client-2 shares, and
    // client-3's writer is let in beside them (the probe does not judge).
    let long = history(&[
        ("client-1", R, 100, 1_500),
        ("client-2", R, 200, 600),
        ("client-3", W, 300, 400),
    ]);
    let w = probe(&long).expect("a witness");
    assert!(
        w.starts_with("client-1 read lock for 1400 ms from 0.100 s (lease 1000 ms); "),
        "{w}"
    );
    let short = history(&[
        ("client-1", R, 100, 900),
        ("client-2", R, 200, 600),
        ("client-3", W, 300, 400),
    ]);
    assert_eq!(probe(&short), None, "no read outlasted the lease");
}

#[test]
fn two_writers_overlapping_are_invalid() {
    let h = history(&[
        ("client-1", R, 0, 50),
        ("client-2", W, 100, 500),
        ("client-3", W, 300, 700),
    ]);
    assert!(RwExclusion.check(&h).is_invalid());
}

#[test]
fn overlapping_readers_are_valid_and_so_for_mutual_exclusion() {
    let h = history(&[
        ("client-1", R, 100, 500),
        ("client-2", R, 200, 600),
        ("client-3", R, 300, 400),
        ("client-1", W, 700, 800),
        ("client-2", R, 900, 950),
    ]);
    assert_eq!(RwExclusion.check(&h), Verdict::Valid);
    assert_eq!(MutualExclusion.check(&h), Verdict::Valid);
}

#[test]
fn a_reader_after_a_writer_released_is_valid() {
    let h = history(&[("client-1", W, 100, 500), ("client-2", R, 500, 900)]);
    assert_eq!(RwExclusion.check(&h), Verdict::Valid);
}

#[test]
fn without_read_holds_it_is_mutual_exclusions_judgement() {
    // All writes (a design without a read mode refused every read).
    let overlapping = history(&[("client-1", W, 100, 500), ("client-2", W, 300, 700)]);
    let verdict = RwExclusion.check(&overlapping);
    assert!(verdict.is_invalid());
    assert_eq!(
        verdict.evidence().map(|e| (e.at_us, e.hosts.clone())),
        MutualExclusion
            .check(&overlapping)
            .evidence()
            .map(|e| (e.at_us, e.hosts.clone()))
    );
    let apart = history(&[("client-1", W, 100, 200), ("client-2", W, 300, 700)]);
    assert_eq!(RwExclusion.check(&apart), Verdict::Valid);
    assert_eq!(MutualExclusion.check(&apart), Verdict::Valid);
    let nobody = history(&[]);
    assert!(
        RwExclusion.check(&nobody).is_unknown(),
        "never a vacuous valid"
    );
}

#[test]
fn a_history_without_modes_gets_no_rw_exclusion_verdict() {
    // Before modes existed: overlapping exclusive holds. Only the standard
    // checkers judge it; with modes, rw-exclusion joins them.
    let plain = history(&[("client-1", None, 100, 500), ("client-2", None, 300, 700)]);
    assert!(!applies(&plain));
    let names: Vec<&str> = scenarios::checkers::check_all(&plain)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, scenarios::checkers::names());
    let mixed = history(&[("client-1", R, 100, 500), ("client-2", W, 300, 700)]);
    assert!(applies(&mixed));
    let verdicts = scenarios::checkers::check_all(&mixed);
    assert!(
        verdicts.iter().any(|(n, v)| *n == NAME && v.is_invalid()),
        "{verdicts:?}"
    );
}
