//! The clock a lock design measures time with.
//!
//! A design never calls `Instant::now` or `SystemTime` itself: the simulator gives each
//! host its own clock (offset, drift, jumps, pauses), and a design must see that clock,
//! not the machine's. Production code passes [`TokioClock`].

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed future that a [`Clock`] returns from `sleep`.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Monotonic time as a lock client sees it.
pub trait Clock: Send + Sync + 'static {
    /// Time since an arbitrary origin fixed for this clock's life. Never goes backwards.
    fn now(&self) -> Duration;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
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

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}
