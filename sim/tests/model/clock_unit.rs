//! `sim::clock`'s own tests (moved from the module): offsets, drift, steps, boot
//! times, and sleeps in true time.

use std::time::Duration;

use sim::clock::{ClockSpec, EPOCH_UNIX_US, HostClock, UPTIME_US, true_now};
use sim::world::STEP;

#[test]
fn a_fast_clock_reads_ahead_and_sleeps_shorter_in_true_time() {
    let fast = ClockSpec {
        offset_ms: 0,
        drift_ppm: 100_000,
    };
    assert_eq!(
        fast.local_elapsed(Duration::from_secs(10)),
        Duration::from_secs(11)
    );
    assert_eq!(
        fast.true_duration(Duration::from_millis(1100)),
        Duration::from_millis(1000)
    );
}

#[test]
fn a_step_moves_the_wall_clock_only_and_a_rate_change_bends_both() {
    let clock = HostClock::new(ClockSpec::default());
    let t = |s: u64| Duration::from_secs(s);
    clock.step(10_000);
    assert_eq!(clock.local_elapsed(t(3)), t(3));
    assert_eq!(clock.unix_us(t(3)), EPOCH_UNIX_US + 13_000_000);
    assert_eq!(clock.wall_offset_us(t(3)), 10_000_000);
    clock.set_drift(t(4), 500_000);
    assert_eq!(clock.local_elapsed(t(6)), t(7));
    assert_eq!(clock.unix_us(t(6)), EPOCH_UNIX_US + 17_000_000);
    assert_eq!(clock.true_time_of(t(6), t(10)), t(8));
    assert_eq!(clock.true_time_of(t(6), t(4)), t(4));
}

#[test]
fn hosts_boot_apart_and_a_reading_maps_back_to_true_time() {
    let t = |s: u64| Duration::from_secs(s);
    let a = HostClock::uptime_for(7, "client-1");
    let b = HostClock::uptime_for(7, "client-2");
    assert_ne!(a, b);
    assert_eq!(a, HostClock::uptime_for(7, "client-1"));
    assert_ne!(a, HostClock::uptime_for(8, "client-1"));
    for u in [a, b] {
        assert!(UPTIME_US.contains(&(u.as_micros() as u64)));
    }
    let clock = HostClock::new(ClockSpec::default()).booted(a);
    assert_eq!(clock.monotonic(t(3)), a + t(3));
    assert_eq!(clock.local_elapsed(t(3)), t(3));
    assert_eq!(clock.unix_us(t(3)), EPOCH_UNIX_US + 3_000_000);
    assert_eq!(clock.true_time_of(t(3), a + t(5)), t(5));
    assert_eq!(clock.true_time_of(t(3), a + t(1)), t(1));
}

/// A sleep of less than the clock's microsecond (an etcd member's next tick, in
/// nanoseconds, just past the step it is in) ends at the next step; it used to be
/// slept as zero, ready at once, and the host spun without time passing.
#[test]
fn a_sleep_shorter_than_a_microsecond_ends_at_the_next_step() {
    let mut sim = turmoil::Builder::new().tick_duration(STEP).build();
    sim.client("host", async {
        let clock = HostClock::new(ClockSpec::default());
        let before = true_now();
        clock.sleep_local(Duration::from_nanos(400), true_now).await;
        let slept = true_now() - before;
        assert!(slept > Duration::ZERO && slept <= STEP, "slept {slept:?}");
        Ok(())
    });
    sim.run().expect("the sleep ends");
}

#[test]
fn offset_moves_the_wall_clock_but_not_elapsed_time() {
    let skewed = ClockSpec {
        offset_ms: -1500,
        drift_ppm: 0,
    };
    assert_eq!(
        skewed.local_elapsed(Duration::from_secs(2)),
        Duration::from_secs(2)
    );
    assert_eq!(
        skewed.unix_us(Duration::from_secs(2)),
        EPOCH_UNIX_US + 500_000
    );
}
