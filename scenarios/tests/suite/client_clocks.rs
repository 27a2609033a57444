//! Client wall clocks (issue 26): a design that measures its wait on the wall clock
//! misbehaves when its host's wall clock steps during the wait, and the same design on
//! the monotonic clock does not.
//!
//! `redis-py-3` is redis-py 3.5.3's `Lock`, whose `blocking_timeout` is measured on
//! `time.time()`; `redis-py` is 5.3.1's, the same algorithm on `time.monotonic()` (the
//! fix of redis-py 4.0.0, "Use monotonic clock in Lock"). Eight clients contend for the
//! lock (`no-faults`, 300 ms wait budget, 0.1 s sleeps) while the nemesis steps the
//! wall clock of whichever client is acquiring, a minute forward or a minute back.
//! Every acquire in flight across a step is measured from its invocation to its
//! completion:
//!
//! - a **forward** step makes redis-py 3.5.3 give up at once: its next `next_try_at`
//!   lands a minute past `stop_trying_at`, so it reports "not acquired" with more than
//!   half its budget unspent, which redis-py 5.3.1 never does (a refusal takes two
//!   sleeps, 200 ms of the 300);
//! - a **backward** step makes redis-py 3.5.3 wait on past its budget, polling until it
//!   gets the lock or a minute passes; redis-py 5.3.1 never waits past the budget.

use crate::common;

use scenarios::catalog;
use scenarios::sweep::{DesignSpec, config};
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, FaultPhase, History, OpF, Phase};

const SEEDS: u64 = 8;
const STEP_MS: i64 = 60_000;

fn run(design: &str, delta_ms: i64, seed: u64) -> History {
    let s = catalog::find("no-faults").expect("no-faults scenario");
    let mut cfg = config(&DesignSpec::builtin(design).expect("design"), &s, seed);
    // Steps of the acquiring client's wall clock every 150 ms through the run.
    cfg.plan = FaultPlan {
        faults: (0..10)
            .map(|i| Fault {
                at_ms: 200 + 150 * i,
                kind: FaultKind::ClockJump {
                    target: Target::Acquirer,
                    delta_ms,
                },
            })
            .collect(),
    };
    sim::world::run(&cfg).expect("run completes")
}

/// Acquires in flight across a wall-clock step of their own host: (outcome, length ms).
fn stepped_acquires(h: &History) -> Vec<(Phase, u64)> {
    let steps: Vec<(String, u64)> = h
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault {
                phase: FaultPhase::Start,
                detail,
                ..
            } if detail.contains("wall clock jumps") => Some((e.host.clone(), e.at_us)),
            _ => None,
        })
        .collect();
    let pairs = scenarios::checkers::model::op_pairs(h).expect("a well-formed history");
    pairs
        .iter()
        .filter(|p| p.f == OpF::Acquire)
        .filter_map(|p| {
            let done = p.completion_us?;
            steps
                .iter()
                .any(|(host, t)| *host == p.host && p.invoke_us < *t && *t < done)
                .then(|| (p.outcome, (done - p.invoke_us) / 1_000))
        })
        .collect()
}

fn stepped(design: &str, delta_ms: i64) -> Vec<(Phase, u64)> {
    let mut all = Vec::new();
    for seed in 0..SEEDS {
        let h = run(design, delta_ms, seed);
        all.extend(stepped_acquires(&h));
    }
    assert!(
        all.len() >= 5,
        "{design}: the steps caught too few acquires in flight: {all:?}"
    );
    all
}

fn budget_ms() -> u64 {
    catalog::find("no-faults")
        .expect("no-faults scenario")
        .workload
        .wait_ms
}

#[test]
fn a_forward_step_of_the_client_clock_ends_a_wall_clock_wait_at_once_and_not_a_monotonic_one() {
    let budget = budget_ms();
    assert_eq!(
        budget, 300,
        "the arithmetic below assumes the catalog's budget"
    );
    // Giving up with half the budget unspent: at most one 100 ms sleep taken.
    let gave_up_early = |(o, ms): &&(Phase, u64)| *o == Phase::Fail && *ms < budget / 2;
    // redis-py 5.3.1: a refusal comes only after two 100 ms sleeps.
    let monotonic = stepped("redis-py", STEP_MS);
    let early: Vec<_> = monotonic.iter().filter(gave_up_early).collect();
    assert!(
        early.is_empty(),
        "redis-py gave up before its budget: {early:?}"
    );
    // redis-py 3.5.3: gives up at the first `next_try_at` after the step.
    let wall = stepped("redis-py-3", STEP_MS);
    let early: Vec<_> = wall.iter().filter(gave_up_early).collect();
    assert!(
        !early.is_empty(),
        "redis-py-3 never gave up early across a forward step: {wall:?}"
    );
}

#[test]
fn a_backward_step_of_the_client_clock_stretches_a_wall_clock_wait_past_its_budget_and_not_a_monotonic_one()
 {
    let budget = budget_ms();
    // redis-py 5.3.1: no try starts past the budget; a try is one round trip.
    let monotonic = stepped("redis-py", -STEP_MS);
    let late: Vec<_> = monotonic
        .iter()
        .filter(|(_, ms)| *ms > budget + 50)
        .collect();
    assert!(late.is_empty(), "redis-py waited past its budget: {late:?}");
    let wall = stepped("redis-py-3", -STEP_MS);
    let late: Vec<_> = wall.iter().filter(|(_, ms)| *ms > budget + 50).collect();
    assert!(
        !late.is_empty(),
        "redis-py-3 never waited past its budget across a backward step: {wall:?}"
    );
}

/// The `client-clock-step` scenario: node-redlock 5.0.0-beta.2 measures its lock's
/// expiration on `Date.now()`, so a backward step of the client's wall clock while it
/// waits makes it believe a validity the keys do not have: `validity` (two clients
/// within their believed validity at once) catches it, with the step in its evidence.
/// redsync, the same Redlock on Go's monotonic reading, keeps the promise on the same
/// seeds, and the scenario's probe names the step in the caught run.
#[test]
fn a_backward_client_clock_step_breaks_node_redlocks_validity_and_not_redsyncs() {
    use scenarios::sweep::{first_invalid, sweep};
    let s = catalog::find("client-clock-step").expect("client-clock-step scenario");
    const BOUND: u64 = 30;
    let node = DesignSpec::builtin("node-redlock").expect("design");
    let caught = first_invalid(&node, &s, "validity", 0..BOUND)
        .expect("runs complete")
        .expect("node-redlock breaks validity under a client clock step");
    let evidence = caught
        .verdict("validity")
        .and_then(|v| v.evidence())
        .expect("evidence")
        .summary
        .clone();
    assert!(evidence.contains("clock stepped -"), "{evidence}");
    let seen = caught
        .fault_seen
        .expect("the step happened in the caught run");
    assert!(seen.contains("stepped back"), "{seen}");
    let redsync = DesignSpec::builtin("redsync").expect("design");
    let runs = sweep(&redsync, &s, 0..BOUND, 2, false, &|_, _| {}).expect("runs complete");
    assert_eq!(runs.len() as u64, BOUND);
    for run in &runs {
        let v = run.verdict("validity").expect("validity judged");
        assert!(!v.is_invalid(), "redsync seed {}: {v:?}", run.seed);
    }
}

/// The probe sees no step where there was none.
#[test]
fn the_client_clock_step_probe_is_silent_without_steps() {
    for seed in 0..3 {
        let s = catalog::find("no-faults").expect("no-faults scenario");
        let cfg = config(
            &DesignSpec::builtin("redis-py-3").expect("design"),
            &s,
            seed,
        );
        let h = sim::world::run(&cfg).expect("run completes");
        assert_eq!(
            scenarios::checkers::clock_probes::client_clock_stepped_back_while_acquiring(&h),
            None
        );
    }
}

/// Clients minutes apart (`client-clocks-apart`): a lock whose expiry is a timestamp
/// written by one client's wall clock and judged by another's (the `SETNX`/`GETSET`
/// pattern of redis.io's `SETNX` page) is taken from a live holder, while the same
/// clients on a lock the server expires (`set-nx-px-lua`) keep mutual exclusion.
#[test]
fn clients_minutes_apart_break_a_lock_whose_expiry_is_a_client_timestamp_and_not_a_server_ttl() {
    let run = common::expect_invalid("setnx-getset", "client-clocks-apart", "mutual-exclusion");
    let fault = run.fault_seen.as_deref().unwrap_or_default();
    assert!(fault.contains("ahead of"), "{fault}");
    common::expect_never_invalid(
        "set-nx-px-lua",
        "client-clocks-apart",
        &["mutual-exclusion", "ownership"],
        6,
        6,
    );
    // Without the clock fault the timestamp lock keeps mutual exclusion.
    common::expect_never_invalid("setnx-getset", "no-faults", &["mutual-exclusion"], 6, 0);
}

/// NTP slewing a holder's clock (issue 26: "NTP slew"): chrony corrects at up to
/// 83,333 ppm and on Linux the monotonic clock slews too, so a holder's lease timers
/// run 8.3 % slow. Careful holders (`client-clock-slew`: they work 0.93 lease and write
/// only with validity left) then write after their key expired, on one master and on
/// five (Redlock's drift allowance is 1 % + 2 ms). The same seeds with ntpd's 500 ppm
/// slew never break (and the probe does not count a slew that slow as the fault: it
/// cannot cost a careful holder its margin), and neither does a lock that a watchdog
/// renews.
#[test]
fn a_chrony_slew_of_the_holders_clock_breaks_careful_lease_locks_and_ntpds_does_not() {
    let scenario = catalog::find("client-clock-slew").expect("client-clock-slew scenario");
    let ntpd = scenario
        .clone()
        .with_param(scenarios::params::Param::DriftPpm, 500)
        .expect("drift-ppm pins the slew rate");
    for design in ["set-nx-px-lua", "redlock"] {
        let spec = DesignSpec::builtin(design).expect("design");
        let mut broken = 0;
        for seed in 0..SEEDS {
            let run = scenarios::sweep::run_seed(&spec, &scenario, seed, false).expect("run");
            let fault = run.fault_seen.as_deref().unwrap_or_default();
            assert!(
                fault.contains("8.33 % slow"),
                "{design} seed {seed}: {fault:?}"
            );
            broken += usize::from(
                run.is_invalid()
                    && run
                        .verdict("mutual-exclusion")
                        .is_some_and(|v| v.is_invalid()),
            );
            let calm = scenarios::sweep::run_seed(&spec, &ntpd, seed, false).expect("run");
            // At 500 ppm a hold of 0.93 lease loses under a millisecond: far less than
            // the 1/40 lease careful holders keep in hand, so the probe refuses it as a
            // witness (the slew happened, but could not matter).
            assert_eq!(
                calm.fault_seen, None,
                "{design} seed {seed} at 500 ppm: a slew that cannot matter is no witness"
            );
            assert_eq!(
                calm.safety(),
                scenarios::checkers::Safety::Safe,
                "{design} seed {seed} under ntpd's slew: {:?}",
                calm.verdicts
            );
        }
        assert!(
            broken >= 2,
            "{design}: chrony's slew broke mutual exclusion in {broken} of {SEEDS} seeds"
        );
    }
    common::expect_never_invalid(
        "reentrant-watchdog",
        "client-clock-slew",
        &["mutual-exclusion", "lost-update"],
        4,
        4,
    );
}

/// `--param drift-ppm=0` asks for a slew that never ends: refused with the fault's own
/// rule (as a plan file's `rate_ppm: 0` is), not clamped to 1 ppm and run as if it were
/// the fault; and a 1 ppm slew, which cannot cost a holder anything that matters, is no
/// witness of the fault.
#[test]
fn a_slew_rate_of_zero_is_refused_and_a_slew_too_slow_to_matter_is_not_the_fault() {
    let scenario = catalog::find("client-clock-slew").expect("client-clock-slew scenario");
    let e = scenario
        .clone()
        .with_param(scenarios::params::Param::DriftPpm, 0)
        .expect_err("a zero slew rate is refused");
    assert!(
        e.contains("--param drift-ppm=0") && e.contains("rate_ppm") && e.contains("1 to 1000000"),
        "{e}"
    );
    let crawl = scenario
        .with_param(scenarios::params::Param::DriftPpm, 1)
        .expect("1 ppm is a rate");
    let spec = DesignSpec::builtin("redis-py").expect("design");
    for seed in 0..2 {
        let run = scenarios::sweep::run_seed(&spec, &crawl, seed, false).expect("run");
        assert_eq!(run.fault_seen, None, "seed {seed}: {:?}", run.fault_seen);
    }
}

/// A slew ends where a step would have: the clock's offset from true time changes by
/// the correction, at the rate asked, and the slew's rate comes off again after.
#[test]
fn a_slew_corrects_the_clock_by_its_delta_and_then_runs_true() {
    let s = catalog::find("no-faults").expect("no-faults scenario");
    let mut cfg = config(
        &DesignSpec::builtin("set-nx-px-lua").expect("design"),
        &s,
        0,
    );
    cfg.plan = FaultPlan {
        faults: vec![Fault {
            at_ms: 100,
            kind: FaultKind::ClockSlew {
                target: Target::Host("client-2".into()),
                delta_ms: -150,
                rate_ppm: 83_333,
            },
        }],
    };
    let h = sim::world::run(&cfg).expect("run completes");
    let clock: Vec<(u64, i64, i64)> = h
        .events
        .iter()
        .filter(|e| e.host == "client-2")
        .filter_map(|e| match e.kind {
            EventKind::Clock {
                wall_offset_us,
                drift_ppm,
                ..
            } => Some((e.at_us, wall_offset_us, drift_ppm)),
            _ => None,
        })
        .collect();
    assert_eq!(clock.len(), 2, "{clock:?}");
    let (start, end) = (clock[0], clock[1]);
    assert_eq!(start.2, -83_333, "slewing back runs slow: {clock:?}");
    assert_eq!(end.2, 0, "then true again: {clock:?}");
    // 150 ms at 83,333 ppm takes 1.8 s (the nemesis acts at the next millisecond).
    assert!(
        (1_800_000..=1_801_000).contains(&(end.0 - start.0)),
        "{clock:?}"
    );
    let corrected = start.1 - end.1;
    assert!(
        (149_900..=150_100).contains(&corrected),
        "the offset moved by {corrected} µs: {clock:?}"
    );
}
