//! Redisson's read-write lock (`redisson-rw`) under a read/write mix: readers share
//! and nobody overlaps a writer without faults; a writer paused past its lease breaks
//! `rw-exclusion`, with the pause seen in the run.

use crate::common;

use common::{SEARCH_BOUND, expect_invalid, scenario};
use scenarios::checkers::{self, model};
use scenarios::sweep::config;
use sim::history::{EventKind, LockMode, OpF, Phase};

const DESIGN: &str = "redisson-rw";

#[test]
fn readers_share_and_nobody_overlaps_a_writer_without_faults() {
    let mut s = scenario("no-faults");
    s.workload.read_share = Some(scenarios::catalog::READ_SHARE);
    let design = common::design(DESIGN);
    let (mut shared_pairs, mut reads, mut writes) = (0, 0, 0);
    for seed in 0..4 {
        let h = sim::world::run(&config(&design, &s, seed)).expect("run completes");
        let verdicts = checkers::check_all(&h);
        for (name, verdict) in &verdicts {
            assert!(verdict.is_valid(), "seed {seed}: {name} is {verdict:?}");
        }
        assert!(
            verdicts.iter().any(|(n, _)| *n == "rw-exclusion"),
            "seed {seed}: a read/write history is judged by rw-exclusion"
        );
        let holds = model::holds(&h).expect("a well-formed history");
        reads += holds.iter().filter(|x| x.is_read()).count();
        writes += holds
            .iter()
            .filter(|x| x.mode == Some(LockMode::Write))
            .count();
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                if a.is_read()
                    && b.is_read()
                    && a.host != b.host
                    && b.start_us < a.end_us
                    && a.start_us < b.end_us
                {
                    shared_pairs += 1;
                }
            }
        }
        // Every acquisition and release records its mode.
        for e in &h.events {
            if let EventKind::Op(op) = &e.kind
                && matches!(op.f, OpF::Acquire | OpF::Release)
            {
                assert!(op.mode.is_some(), "seed {seed}: {op:?} without a mode");
            }
        }
    }
    println!(
        "redisson-rw without faults: {reads} read holds, {writes} write holds, {shared_pairs} overlapping reader pairs"
    );
    assert!(
        reads > 0 && writes > 0,
        "both modes held: {reads} reads, {writes} writes"
    );
    assert!(shared_pairs > 0, "readers never shared the lock");
}

#[test]
fn a_writer_paused_past_its_lease_breaks_rw_exclusion() {
    let run = expect_invalid(DESIGN, "read-write", "rw-exclusion");
    let evidence = run
        .verdict("rw-exclusion")
        .and_then(|v| v.evidence())
        .expect("invalid has evidence");
    assert!(
        evidence.summary.contains("in write mode while"),
        "{}",
        evidence.summary
    );
    assert!(run.fault_seen.is_some());
    assert!(run.seed < SEARCH_BOUND);
}

/// A design with one, exclusive, mode runs the read rounds under that lock, as a
/// service would: every hold is exclusive, the read rounds read without writing, and
/// `rw-exclusion` judges it exactly as `mutual-exclusion` does.
#[test]
fn a_design_without_a_read_mode_takes_its_exclusive_lock_for_the_read_rounds() {
    let s = scenario("read-write");
    let design = common::design("set-nx-px-lua");
    let h = sim::world::run(&config(&design, &s, 0)).expect("run completes");
    let refused = h.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Op(op)
            if op.f == OpF::Acquire
                && (op.mode == Some(LockMode::Read)
                    || op.detail.as_deref().is_some_and(|d| d.contains("has no read mode"))))
    });
    assert!(
        !refused,
        "no read-mode acquisition is asked of an exclusive design"
    );
    let holds = model::holds(&h).expect("a well-formed history");
    assert!(holds.len() > 10 && holds.iter().all(|x| !x.is_read()));
    // Some holds only read: the read rounds ran, under the exclusive lock.
    let writes = h
        .events
        .iter()
        .filter(
            |e| matches!(&e.kind, EventKind::Op(op) if op.f == OpF::Write && op.phase == Phase::Ok),
        )
        .count();
    assert!(
        writes < holds.len(),
        "{writes} writes for {} holds",
        holds.len()
    );
}

/// The same through the `locksim` facade, as a user's suite asks it.
#[test]
fn the_facade_finds_the_paused_writer_by_rw_exclusion() {
    locksim::check(locksim::builtin(DESIGN))
        .scenario("read-write")
        .seeds(0..SEARCH_BOUND)
        .expect_invalid("rw-exclusion");
}

/// Runs `redisson-rw` on `scenario` for seeds 0..10 (the broken catalog's bound):
/// every verdict valid, the probe's witness in every run, and every writer that asked
/// while another host read granted only after that read ended. Returns the writes
/// granted and how many of them had waited for a reader.
fn writers_wait_for_readers(scenario_name: &str) -> (usize, usize) {
    let s = scenario(scenario_name);
    assert!(s.plan(0).faults.is_empty(), "a world without faults");
    let design = common::design(DESIGN);
    let (mut waited, mut writes) = (0, 0);
    for seed in 0..10 {
        let h = sim::world::run(&config(&design, &s, seed)).expect("run completes");
        for (name, verdict) in checkers::check_all(&h) {
            assert!(verdict.is_valid(), "seed {seed}: {name} is {verdict:?}");
        }
        assert!(
            s.probe(&h).is_some(),
            "seed {seed}: the probe found nothing worth judging"
        );
        let holds = model::holds(&h).expect("a well-formed history");
        let pairs = model::op_pairs(&h).expect("a well-formed history");
        for p in &pairs {
            let write = p.f == OpF::Acquire
                && model::op_at(&h, p.invoke).and_then(|op| op.mode) == Some(LockMode::Write);
            let (Phase::Ok, Some(done), true) = (p.outcome, p.completion_us, write) else {
                continue;
            };
            writes += 1;
            let met = holds.iter().filter(|r| {
                r.is_read()
                    && r.host != p.host
                    && r.start_us <= p.invoke_us
                    && p.invoke_us < r.end_us
            });
            let mut any = false;
            for r in met {
                any = true;
                assert!(
                    done >= r.end_us,
                    "seed {seed}: {}'s write granted at {done} us during {}'s read",
                    p.host,
                    r.host
                );
            }
            waited += usize::from(any);
        }
    }
    println!(
        "redisson-rw under {scenario_name}: {writes} writes granted, {waited} after waiting for a reader"
    );
    (writes, waited)
}

/// `read-write-contention`, the broken catalog's world for read-write scripts: the
/// correct design is safe on every seed the catalog sweeps, readers share, and writers
/// wait for readers.
#[test]
fn under_read_write_contention_readers_share_and_writers_wait_for_readers() {
    let (_, waited) = writers_wait_for_readers("read-write-contention");
    assert!(
        waited >= 10,
        "writers waited for readers only {waited} times"
    );
}

/// `read-write-long-work`, the catalog's world for a read lock's renewal: every hold
/// lives three leases on the watchdog, and still nobody overlaps a writer.
#[test]
fn under_read_write_long_work_the_watchdog_keeps_readers_and_writers_apart() {
    let (writes, waited) = writers_wait_for_readers("read-write-long-work");
    assert!(
        writes > 0 && waited > 0,
        "{writes} writes, {waited} after a reader"
    );
}
