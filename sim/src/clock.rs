//! Per-host clocks: true simulated time plus an offset and a drift.
//!
//! turmoil has one clock for the whole simulation; real machines disagree. Each
//! simulated host reads `true + offset + drift × true`: the Redis model expires keys by
//! its host's reading (as Redis does by its wall clock), and a lock client measures its
//! lease by its own. Clock jumps come with a later issue; the shape leaves room for
//! them (a jump is a change of offset at a time).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Unix time, in microseconds, at which every simulation starts: 2026-01-01T00:00:00Z.
/// A fixed epoch keeps `TIME` replies and expiry deadlines identical between runs.
pub const EPOCH_UNIX_US: u64 = 1_767_225_600_000_000;

/// How one host's clock deviates from true time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSpec {
    /// Constant offset from true time, in milliseconds (wall clock only).
    pub offset_ms: i64,
    /// Rate error in parts per million: +1000 runs 0.1 % fast.
    pub drift_ppm: i64,
}

/// True simulated time since the run started (zero outside a simulation).
pub fn true_now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

impl ClockSpec {
    /// Elapsed time as this host's monotonic clock reads it at true time `t`.
    pub fn local_elapsed(&self, t: Duration) -> Duration {
        let us = t.as_micros() as i128;
        let local = us + us * i128::from(self.drift_ppm) / 1_000_000;
        Duration::from_micros(local.max(0) as u64)
    }

    /// The host's wall clock in unix microseconds at true time `t`.
    pub fn unix_us(&self, t: Duration) -> u64 {
        let local = self.local_elapsed(t).as_micros() as i128;
        let wall = i128::from(EPOCH_UNIX_US) + local + i128::from(self.offset_ms) * 1000;
        wall.max(0) as u64
    }

    /// True time that passes while this host's clock advances by `local`.
    pub fn true_duration(&self, local: Duration) -> Duration {
        let us = local.as_micros() as i128;
        let rate = 1_000_000 + i128::from(self.drift_ppm);
        if rate <= 0 {
            return Duration::MAX;
        }
        // Round up so a sleep never ends early on the host's own clock.
        Duration::from_micros(((us * 1_000_000 + rate - 1) / rate) as u64)
    }
}

/// The Redis host's wall clock, as the engine reads it for expiry and `TIME`.
impl crate::redis::server::ServerClock for ClockSpec {
    fn now_us(&self) -> u64 {
        self.unix_us(true_now())
    }
}

/// A client host's clock as `lock_impl` sees it: monotonic, drifting with its host.
#[derive(Debug, Clone, Copy)]
pub struct SimClock {
    spec: ClockSpec,
}

impl SimClock {
    /// The clock of a host with `spec`.
    pub fn new(spec: ClockSpec) -> Self {
        Self { spec }
    }
}

impl lock_impl::Clock for SimClock {
    fn now(&self) -> Duration {
        self.spec.local_elapsed(true_now())
    }

    fn sleep(&self, duration: Duration) -> lock_impl::Sleep {
        // tokio's timer is turmoil's simulated time, which is true time.
        Box::pin(tokio::time::sleep(self.spec.true_duration(duration)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
