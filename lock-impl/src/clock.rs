//! The clock a lock design measures time with.
//!
//! A design never calls `Instant::now` or `SystemTime` itself: the simulator gives each
//! host its own clock (offset, drift, jumps, pauses), and a design must see that clock,
//! not the machine's. Production code passes [`TokioClock`].
//!
//! A clock has two readings, as a real host has: [`Clock::now`], monotonic
//! (`CLOCK_MONOTONIC`, Rust's `Instant`, Go's monotonic reading, Java's `nanoTime`),
//! which drifts with the host's oscillator but never steps; and [`Clock::wall`], the
//! wall clock (`SystemTime`, Python's `time.time()`, JavaScript's `Date.now()`, Java's
//! `currentTimeMillis`), which NTP or an operator can step forwards or backwards and
//! which differs between hosts. A port of a client that measures a wait or a lease on
//! the wall clock reads `wall`, so a clock step reaches it as it reaches the original.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed future that a [`Clock`] returns from `sleep`.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Time as a lock client sees it: monotonic ([`Clock::now`]) and wall ([`Clock::wall`]).
pub trait Clock: Send + Sync + 'static {
    /// Time since an arbitrary origin fixed for this clock's life. Never goes backwards.
    fn now(&self) -> Duration;
    /// The wall clock: time since the Unix epoch as this host believes it. May step
    /// backwards or forwards at any moment; two hosts' readings differ.
    fn wall(&self) -> Duration;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
}

/// `f`'s output, or `None` if `timeout` passes on `clock` first: a client's request or
/// dial timeout, measured on its host's monotonic clock (so a simulation that jumps in
/// time sees it, and a paused host's timeout waits with it).
pub(crate) async fn within<T>(
    clock: &dyn Clock,
    timeout: Duration,
    f: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        r = f => Some(r),
        _ = clock.sleep(timeout) => None,
    }
}

/// Tokio's monotonic clock: real time in production, virtual time under
/// `tokio::time::pause` or turmoil.
#[derive(Debug, Clone)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        tokio::time::Instant::now().duration_since(self.origin)
    }

    fn wall(&self) -> Duration {
        // Before 1970 only on a broken host: read as the epoch itself.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}
