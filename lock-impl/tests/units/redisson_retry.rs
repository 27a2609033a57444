//! The tests of `lock-impl/src/designs/redisson_retry.rs` (once its `#[cfg(test)]` module).

use lock_impl::designs::internals::RedissonVersion as Version;
use lock_impl::{SeededEntropy, TimeScale};
use std::time::Duration;

#[test]
fn redisson_3_52_delays_grow_from_half_a_second_to_at_most_two_with_equal_jitter() {
    let e = SeededEntropy::new(7, "t");
    for _ in 0..50 {
        let d0 = Version::V3_52
            .retry_delay(0, TimeScale::REAL, &e)
            .as_millis();
        assert!((500..=1_000).contains(&d0), "{d0}");
        for attempt in 1..6 {
            let d = Version::V3_52
                .retry_delay(attempt, TimeScale::REAL, &e)
                .as_millis();
            assert!((1_000..=2_000).contains(&d), "{d}");
        }
    }
}

#[test]
fn redisson_3_20_resends_three_times_a_second_and_a_half_apart_scaled_with_the_world() {
    let e = SeededEntropy::new(7, "t");
    assert_eq!(Version::V3_20.retry_attempts(), 3);
    assert_eq!(
        Version::V3_20.retry_delay(2, TimeScale::REAL, &e),
        Duration::from_millis(1_500)
    );
    assert_eq!(
        Version::V3_20.retry_delay(0, TimeScale::for_lease(200), &e),
        Duration::from_millis(10)
    );
    assert_eq!(
        Version::V3_52.longest_retry_delay(TimeScale::for_lease(200)),
        Duration::from_millis(13)
    );
}

#[test]
fn only_3_20_resends_lock_and_unlock_and_only_3_52_renews_after_a_failure() {
    assert!(Version::V3_20.resends_lock_and_unlock());
    assert!(!Version::V3_52.resends_lock_and_unlock());
    assert!(!Version::V3_20.watchdog_survives_failed_renewal());
    assert!(Version::V3_52.watchdog_survives_failed_renewal());
}
