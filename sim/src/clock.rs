//! Per-host clocks: true simulated time seen through an offset, a rate and steps.
//!
//! turmoil has one clock for the whole simulation; real machines disagree. Each
//! simulated host has a [`HostClock`], a schedule over true time: it starts from a
//! [`ClockSpec`] (offset and drift), and the nemesis can later *step* its wall clock
//! (an NTP step, an operator's `date -s`) or change its *rate* (an oscillator that
//! runs fast or slow). Two readings come out of it:
//!
//! - the **wall clock** (unix time), which the Redis model expires keys by, as Redis
//!   does by its own wall clock: a forward step expires keys early in true time;
//! - the **monotonic clock**, which a lock client measures leases and sleeps with: rate
//!   changes apply to it (a fast oscillator is real), steps never do
//!   (`CLOCK_MONOTONIC` does not jump). Like `CLOCK_MONOTONIC` it counts from the
//!   host's boot, and every host booted at its own moment ([`HostClock::booted`]): two
//!   hosts' monotonic readings are unrelated numbers, so a design that compares one
//!   host's reading with another's (stores it on a server, say) cannot pass by the
//!   accident of every clock starting at zero.

use std::sync::{Arc, Mutex};
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

/// The machine's monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds: the one time
/// base of a real run (`locksim run --real`), whose parent and client processes all
/// read it, so that their events make one timeline.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Monotonic time since `epoch_ns` (a [`monotonic_ns`] reading): a real run's true time.
pub fn real_since(epoch_ns: u64) -> Duration {
    Duration::from_nanos(monotonic_ns().saturating_sub(epoch_ns))
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
        let true_us = (us * 1_000_000 + rate - 1) / rate;
        // A validity of ages (a wrapped subtraction) saturates rather than wrapping.
        Duration::from_micros(u64::try_from(true_us).unwrap_or(u64::MAX))
    }
}

/// The Redis host's wall clock, as the engine reads it for expiry and `TIME`.
impl crate::redis::server::ServerClock for ClockSpec {
    fn now_us(&self) -> u64 {
        self.unix_us(true_now())
    }
}

/// One linear piece of a clock's schedule: from true time `since_us` on, the
/// monotonic clock advances at `1 + drift_ppm / 10⁶` from `local_us`, and the wall
/// clock reads `EPOCH + monotonic + step_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    since_us: i128,
    local_us: i128,
    drift_ppm: i64,
    step_us: i64,
}

impl Piece {
    fn local_at(&self, true_us: i128) -> i128 {
        let dt = (true_us - self.since_us).max(0);
        self.local_us + dt + dt * i128::from(self.drift_ppm) / 1_000_000
    }
}

/// A host's clock as a schedule over true time (see the module doc). Cheap to clone:
/// clones share the schedule, so the nemesis changes the clock the host reads.
#[derive(Debug, Clone)]
pub struct HostClock {
    piece: Arc<Mutex<Piece>>,
    /// The monotonic clock's reading at true time zero: the host's uptime when the run
    /// began.
    boot: Duration,
}

/// The least and the most a host has been up when a run begins: a minute to sixty
/// days, drawn per host from the run's seed ([`HostClock::uptime_for`]).
pub const UPTIME_US: std::ops::RangeInclusive<u64> = 60_000_000..=60 * 86_400_000_000;

impl HostClock {
    /// A clock that starts as `spec` says at true time zero.
    pub fn new(spec: ClockSpec) -> Self {
        Self {
            piece: Arc::new(Mutex::new(Piece {
                since_us: 0,
                local_us: 0,
                drift_ppm: spec.drift_ppm,
                step_us: spec.offset_ms * 1000,
            })),
            boot: Duration::ZERO,
        }
    }

    /// This clock with its monotonic reading starting at `uptime` at true time zero
    /// (the wall clock is unchanged).
    pub fn booted(mut self, uptime: Duration) -> Self {
        self.boot = uptime;
        self
    }

    /// The uptime at the run's start of the host named `host` in the run of `seed`:
    /// drawn from [`UPTIME_US`], the same for the same seed and name, different from
    /// host to host.
    pub fn uptime_for(seed: u64, host: &str) -> Duration {
        let draw = crate::seed::sub_seed(seed, crate::seed::stream::host(host));
        let span = UPTIME_US.end() - UPTIME_US.start() + 1;
        Duration::from_micros(UPTIME_US.start() + draw % span)
    }

    /// The monotonic clock as the host reads it at true time `t`: its uptime at the
    /// run's start plus [`local_elapsed`](Self::local_elapsed).
    pub fn monotonic(&self, t: Duration) -> Duration {
        self.boot + self.local_elapsed(t)
    }

    fn piece(&self) -> Piece {
        *self.piece.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The monotonic clock (elapsed since the run's start) at true time `t`, on the
    /// schedule as it stands (a later rate change is not foreseen).
    pub fn local_elapsed(&self, t: Duration) -> Duration {
        Duration::from_micros(self.piece().local_at(t.as_micros() as i128).max(0) as u64)
    }

    /// The wall clock in unix microseconds at true time `t`.
    pub fn unix_us(&self, t: Duration) -> u64 {
        let p = self.piece();
        let wall =
            i128::from(EPOCH_UNIX_US) + p.local_at(t.as_micros() as i128) + i128::from(p.step_us);
        wall.max(0) as u64
    }

    /// How far the wall clock is from true time at `t` (positive: ahead), in µs.
    pub fn wall_offset_us(&self, t: Duration) -> i64 {
        self.unix_us(t) as i64 - EPOCH_UNIX_US as i64 - t.as_micros() as i64
    }

    /// The current rate error, in parts per million.
    pub fn drift_ppm(&self) -> i64 {
        self.piece().drift_ppm
    }

    /// Steps the wall clock by `delta_ms` (the monotonic clock does not move).
    pub fn step(&self, delta_ms: i64) {
        let mut p = self.piece.lock().unwrap_or_else(|e| e.into_inner());
        p.step_us += delta_ms * 1000;
    }

    /// From true time `now` on, the clock runs at `drift_ppm`.
    pub fn set_drift(&self, now: Duration, drift_ppm: i64) {
        let mut p = self.piece.lock().unwrap_or_else(|e| e.into_inner());
        let t = now.as_micros() as i128;
        *p = Piece {
            since_us: t,
            local_us: p.local_at(t),
            drift_ppm,
            step_us: p.step_us,
        };
    }

    /// True time that passes while this clock's monotonic reading advances by `local`
    /// at the current rate (rounded up, so a sleep never ends early on the host's own
    /// clock).
    pub fn true_duration(&self, local: Duration) -> Duration {
        ClockSpec {
            offset_ms: 0,
            drift_ppm: self.drift_ppm(),
        }
        .true_duration(local)
    }

    /// The true time at which the monotonic clock reads `local` (a reading of
    /// [`monotonic`](Self::monotonic), uptime included), if the current rate holds from
    /// `now` on (what a client's belief "valid until" means in true time).
    pub fn true_time_of(&self, now: Duration, local: Duration) -> Duration {
        let here = self.monotonic(now);
        match local.checked_sub(here) {
            Some(ahead) => now.saturating_add(self.true_duration(ahead)),
            None => {
                // Already past: count back at the current rate.
                let behind = here - local;
                now.saturating_sub(self.true_duration(behind))
            }
        }
    }
}

impl HostClock {
    /// A future that completes once `duration` has passed on this clock, true time read
    /// from `true_now` (a simulation's, or a real run's) and slept on the runtime's
    /// timer (which runs on true time). A rate change during the sleep is honoured:
    /// it sleeps again for whatever the host's own clock still has to go.
    pub fn sleep_local(&self, duration: Duration, true_now: fn() -> Duration) -> lock_impl::Sleep {
        let clock = self.clone();
        Box::pin(async move {
            let until = clock.local_elapsed(true_now()) + duration;
            loop {
                let now = clock.local_elapsed(true_now());
                let Some(left) = until.checked_sub(now).filter(|d| !d.is_zero()) else {
                    return;
                };
                // This clock counts whole microseconds: less than one left (a duration
                // given in nanoseconds) is slept as one, never as none (which is ready
                // at once, and the loop would spin without time passing).
                turmoil::time::sleep(clock.true_duration(left).max(Duration::from_micros(1))).await;
            }
        })
    }
}

/// The Redis host's wall clock, as the engine reads it for expiry and `TIME`.
impl crate::redis::server::ServerClock for HostClock {
    fn now_us(&self) -> u64 {
        self.unix_us(true_now())
    }
}

/// A client host's clock as `lock_impl` sees it: the monotonic reading follows its
/// host's rate (steps of the host's wall clock do not reach it); the wall reading is
/// the host's wall clock, steps included.
#[derive(Debug, Clone)]
pub struct SimClock {
    clock: HostClock,
}

impl SimClock {
    /// The monotonic side of `clock`.
    pub fn new(clock: HostClock) -> Self {
        Self { clock }
    }
}

impl lock_impl::Clock for SimClock {
    fn now(&self) -> Duration {
        self.clock.monotonic(true_now())
    }

    fn wall(&self) -> Duration {
        Duration::from_micros(self.clock.unix_us(true_now()))
    }

    fn sleep(&self, duration: Duration) -> lock_impl::Sleep {
        // tokio's timer is turmoil's simulated time, which is true time.
        self.clock.sleep_local(duration, true_now)
    }
}

/// The clock of a server model whose host has no [`HostClock`] (a model on a real
/// loopback port, a test's bare model): its runtime's time since it was made
/// (turmoil's in a simulation, tokio's outside one), hinted sleeps.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeClock(tokio::time::Instant);

impl RuntimeClock {
    /// Reads zero now.
    pub fn new() -> Self {
        RuntimeClock(tokio::time::Instant::now())
    }
}

impl Default for RuntimeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl lock_impl::Clock for RuntimeClock {
    fn now(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.0)
    }

    fn wall(&self) -> Duration {
        lock_impl::Clock::now(self)
    }

    fn sleep(&self, duration: Duration) -> lock_impl::Sleep {
        Box::pin(turmoil::time::sleep(duration))
    }
}
