//! Stop-the-world pauses.
//!
//! turmoil cannot pause a host, so a client host runs every task it owns (workload,
//! connection driver, watchdog) inside [`Pausable`]. While the host's [`PauseGate`] is
//! closed, no such task is polled: timers that fire meanwhile are seen only after the
//! pause, and replies stay queued in the socket until the connection driver runs again.
//! That is what a JVM stop-the-world GC does to Redisson: nothing of the process runs,
//! the kernel keeps receiving.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::true_now;

/// A host's pause switch, shared by its tasks and the nemesis.
#[derive(Debug, Clone, Default)]
pub struct PauseGate {
    until: Arc<Mutex<Option<Duration>>>,
}

impl PauseGate {
    /// A gate that is open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Freeze the host until true time `until`.
    pub fn pause_until(&self, until: Duration) {
        *self.until.lock().expect("pause gate poisoned") = Some(until);
    }

    /// The true time the current pause ends, if the host is paused now.
    pub fn paused_until(&self) -> Option<Duration> {
        let mut until = self.until.lock().expect("pause gate poisoned");
        match *until {
            Some(end) if end > true_now() => Some(end),
            Some(_) => {
                *until = None;
                None
            }
            None => None,
        }
    }

    /// Run `future` so that it freezes while this gate is closed.
    pub fn wrap<F: Future>(&self, future: F) -> Pausable<F> {
        Pausable {
            inner: Box::pin(future),
            gate: self.clone(),
            wake_at: None,
        }
    }
}

/// A future that is not polled while its host is paused.
pub struct Pausable<F> {
    inner: Pin<Box<F>>,
    gate: PauseGate,
    wake_at: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<F: Future> Future for Pausable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if let Some(end) = self.gate.paused_until() {
            // Sleep until the pause ends; the inner future's own wake-ups are ignored
            // meanwhile (it is polled again when this timer fires).
            let remaining = end.saturating_sub(true_now());
            let sleep = self
                .wake_at
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(remaining)));
            let deadline = tokio::time::Instant::now() + remaining;
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        self.wake_at = None;
        self.inner.as_mut().poll(cx)
    }
}
