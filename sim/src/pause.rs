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

    /// Freeze the host until true time `until`. Pauses compose: a host paused until
    /// `t1` and paused again until `t2` resumes at the later of the two.
    pub fn pause_until(&self, until: Duration) {
        let mut current = self.until.lock().expect("pause gate poisoned");
        *current = Some(current.map_or(until, |c| c.max(until)));
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

impl PauseGate {
    /// Wraps an I/O stream so that it neither reads nor writes while the gate is closed:
    /// for connections whose driver task is spawned by a library (the `redis` crate's
    /// `PubSub` spawns its own), so no byte of a paused host moves.
    pub fn wrap_io<S>(&self, stream: S) -> GatedIo<S> {
        GatedIo {
            inner: stream,
            gate: self.clone(),
            wake_at: None,
        }
    }

    /// `Pending` (with a timer armed for the pause's end) while paused.
    fn poll_open(
        &self,
        wake_at: &mut Option<Pin<Box<turmoil::time::Sleep>>>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if let Some(end) = self.paused_until() {
            let remaining = end.saturating_sub(true_now());
            let deadline = tokio::time::Instant::now() + remaining;
            let sleep = wake_at.get_or_insert_with(|| Box::pin(turmoil::time::sleep(remaining)));
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        *wake_at = None;
        Poll::Ready(())
    }
}

/// An I/O stream that freezes with its host (see [`PauseGate::wrap_io`]).
pub struct GatedIo<S> {
    inner: S,
    gate: PauseGate,
    wake_at: Option<Pin<Box<turmoil::time::Sleep>>>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for GatedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.gate.poll_open(&mut this.wake_at, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for GatedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.gate.poll_open(&mut this.wake_at, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.gate.poll_open(&mut this.wake_at, cx).is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A future that is not polled while its host is paused.
pub struct Pausable<F> {
    inner: Pin<Box<F>>,
    gate: PauseGate,
    wake_at: Option<Pin<Box<turmoil::time::Sleep>>>,
}

impl<F: Future> Future for Pausable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // While paused, sleep until the pause ends; the inner future's own wake-ups are
        // ignored meanwhile (it is polled again when this timer fires).
        let this = &mut *self;
        if this.gate.poll_open(&mut this.wake_at, cx).is_pending() {
            return Poll::Pending;
        }
        this.inner.as_mut().poll(cx)
    }
}
