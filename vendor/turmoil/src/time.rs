//! Timers the simulation can see coming (PATCH: wake hints).
//!
//! Tokio keeps a runtime's timers to itself, so a simulation that steps a
//! fixed tick at a time cannot tell an idle stretch from a busy one and must
//! run every host on every tick. The functions here are tokio's own timers
//! that also tell the current host's entry in the simulation when they will
//! fire. [`crate::Sim::idle_until`] reads those hints (with the messages in
//! flight) to say how far the simulation can jump in one
//! [`crate::Sim::step_by`] with the same outcome as stepping tick by tick.
//!
//! A timer's hint lives as long as the timer: dropping a [`Sleep`] (or a
//! [`Timeout`], or a [`WakeHint`]) before it fires takes its hint back, so a
//! timeout that lost its race costs the simulation nothing. A hint left
//! behind by a dropped timer would cost a step and a run of its host at a
//! time when nothing happens (measured on locksim's worlds: one in five of
//! all host runs).
//!
//! Outside a simulation (or outside a host) they are exactly tokio's timers.
//! A timer armed with tokio directly still fires at the right time on its own
//! host, but the simulation cannot see it coming: a jump may pass over it,
//! and whatever it sends then leaves at the end of the jump. Such wakes are
//! counted by [`crate::Sim::unhinted_wakes`].

use std::future::{Future, IntoFuture};
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Duration, Instant};

use crate::world::World;

/// A wake hint held by its owner: it goes when the guard is dropped (or
/// moved with [`WakeHint::reset`]). For a timer armed by code that does not
/// use this module, such as a library's own request timeout, when the caller
/// knows its deadline and when the timer is gone.
#[derive(Debug)]
#[must_use = "the hint goes as soon as the guard is dropped"]
pub struct WakeHint {
    /// The host, deadline and epoch it was added with; `None` outside a
    /// simulation's host.
    held: Option<(IpAddr, Instant, u64)>,
}

impl WakeHint {
    /// Hints that the current host may wake at `deadline` (its runtime's
    /// clock) for as long as the guard lives. Does nothing outside a
    /// simulation's host.
    pub fn new(deadline: Instant) -> Self {
        let mut held = None;
        World::with_current_host_if_set(|host| {
            let epoch = host.wakes.add(deadline);
            held = Some((host.addr, deadline, epoch));
        });
        Self { held }
    }

    /// The deadline hinted, if the guard was made on a simulation's host.
    pub fn deadline(&self) -> Option<Instant> {
        self.held.map(|(_, at, _)| at)
    }

    /// Moves the hint to `deadline`.
    pub fn reset(&mut self, deadline: Instant) {
        if self.held.is_some_and(|(_, at, _)| at == deadline) {
            return;
        }
        self.release();
        *self = Self::new(deadline);
    }

    fn release(&mut self) {
        if let Some((addr, at, epoch)) = self.held.take() {
            World::with_host_if_set(addr, |host| host.wakes.remove(at, epoch));
        }
    }
}

impl Drop for WakeHint {
    fn drop(&mut self) {
        self.release();
    }
}

/// [`tokio::time::Sleep`], hinted to the simulation while it lives.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    sleep: tokio::time::Sleep,
    hint: WakeHint,
}

impl Sleep {
    fn new(sleep: tokio::time::Sleep) -> Self {
        let hint = WakeHint::new(sleep.deadline());
        Self { sleep, hint }
    }

    /// The instant at which it completes.
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Whether its deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        self.sleep.is_elapsed()
    }

    /// [`tokio::time::Sleep::reset`], moving the hint with it.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        // SAFETY: `sleep` is structurally pinned (never moved out of a pinned
        // `Sleep`, no `Unpin` impl); `hint` is not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        this.hint.reset(deadline);
        unsafe { Pin::new_unchecked(&mut this.sleep) }.reset(deadline);
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: as in `reset`.
        unsafe { self.map_unchecked_mut(|s| &mut s.sleep) }.poll(cx)
    }
}

/// [`tokio::time::Timeout`], hinted to the simulation while it lives.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Timeout<F> {
    timeout: tokio::time::Timeout<F>,
    _hint: WakeHint,
}

impl<F> Timeout<F> {
    /// The inner future.
    pub fn get_ref(&self) -> &F {
        self.timeout.get_ref()
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, tokio::time::error::Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `timeout` is structurally pinned, as `Sleep::sleep` is.
        unsafe { self.map_unchecked_mut(|s| &mut s.timeout) }.poll(cx)
    }
}

/// [`tokio::time::sleep`], hinted to the simulation.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::new(tokio::time::sleep(duration))
}

/// [`tokio::time::sleep_until`], hinted to the simulation.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(tokio::time::sleep_until(deadline))
}

/// [`tokio::time::timeout`], hinted to the simulation.
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let hint = match Instant::now().checked_add(duration) {
        Some(deadline) => WakeHint::new(deadline),
        None => WakeHint { held: None },
    };
    Timeout {
        timeout: tokio::time::timeout(duration, future),
        _hint: hint,
    }
}

/// Tells the simulation that the current host may wake at `deadline` (its
/// runtime's clock), until that time has passed: for a timer armed by code
/// that does not use this module when the caller cannot tell when the timer
/// goes (prefer [`WakeHint`] when it can). A hint that turns out to be
/// needless costs an early stop. Does nothing outside a simulation's host.
pub fn hint_wake(deadline: Instant) {
    World::with_current_host_if_set(|host| {
        host.wakes.add(deadline);
    });
}
