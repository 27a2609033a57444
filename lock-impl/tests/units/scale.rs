//! The tests of `lock-impl/src/scale.rs` (once its `#[cfg(test)]` module).

use lock_impl::scale::*;
use std::time::Duration;

#[test]
fn the_catalogs_lease_runs_at_a_hundred_and_fiftieth_of_real_time() {
    let s = TimeScale::for_lease(200);
    assert_eq!(s.ms(30_000), 200);
    assert_eq!(s.ms(1_000), 6);
    assert_eq!(s.ms(15_000), 100);
    assert_eq!(s.of(&ZK_HOST_LIST_TURN), Duration::from_millis(6));
    assert_eq!(
        s.describe(),
        "1/150 of real time (200 ms stand for 30000 ms)"
    );
}

#[test]
fn a_scaled_constant_never_vanishes_and_zero_stays_zero() {
    let s = TimeScale::for_lease(1);
    assert_eq!(s.ms(100), 1);
    assert_eq!(s.ms(0), 0);
}

#[test]
fn real_time_and_a_thirty_second_lease_change_nothing() {
    for s in [
        TimeScale::REAL,
        TimeScale::for_lease(30_000),
        TimeScale::for_lease(0),
    ] {
        assert!(s.is_real());
        assert_eq!(s.ms(1_234), 1_234);
    }
    assert_eq!(TimeScale::default(), TimeScale::REAL);
}

#[test]
fn a_constant_kept_real_ignores_the_scale() {
    let c = Constant {
        name: "x",
        source: "y",
        real_ms: 500,
        scaling: Scaling::KeptReal { why: "z" },
    };
    assert_eq!(TimeScale::for_lease(200).ms_of(&c), 500);
}

#[test]
fn a_drawn_pause_is_scaled_after_the_draw_and_follows_its_constant() {
    let s = TimeScale::for_lease(200);
    // redsync's 50..250 ms draw: 1 ms at 1/150, whatever was drawn.
    assert_eq!(
        s.of_drawn(&REDSYNC_MIN_RETRY_DELAY, 50),
        Duration::from_millis(1)
    );
    assert_eq!(
        s.of_drawn(&REDSYNC_MIN_RETRY_DELAY, 249),
        Duration::from_millis(1)
    );
    // node-redlock's 100..300 ms: 1-2 ms.
    assert_eq!(
        s.of_drawn(&NODE_REDLOCK_RETRY_DELAY, 300),
        Duration::from_millis(2)
    );
    assert_eq!(
        TimeScale::REAL.of_drawn(&NODE_REDLOCK_RETRY_DELAY, 137),
        Duration::from_millis(137)
    );
    // Kept real stays real.
    assert_eq!(
        s.of_drawn(&REDLOCK_DRIFT_PRECISION, 2),
        Duration::from_millis(2)
    );
}

#[test]
fn the_redis_clients_constants_at_the_catalogs_scale() {
    let s = TimeScale::for_lease(200);
    assert_eq!(s.ms_of(&REDIS_PY_SLEEP), 1);
    // Kept real: they race an extension's round trip.
    assert_eq!(s.ms_of(&NODE_REDLOCK_EXTENSION_THRESHOLD), 500);
    assert_eq!(s.ms_of(&NODE_REDLOCK_EXTENSION_MARGIN), 100);
    assert_eq!(s.ms_of(&REDISSON_REDLOCK_UNLOCK_POLL), 1);
    assert_eq!(s.ms_of(&REDLOCK_INSTANCE_TIMEOUT_MIN), 20);
    assert_eq!(s.ms_of(&REDLOCK_INSTANCE_TIMEOUT_MAX), 50);
}

#[test]
fn every_listed_constant_says_where_it_comes_from() {
    for c in CONSTANTS.iter().chain(SERVER_STARTS) {
        assert!(
            !c.name.is_empty() && !c.source.is_empty() && c.real_ms > 0,
            "{c:?}"
        );
    }
}
