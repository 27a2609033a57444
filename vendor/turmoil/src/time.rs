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
//! Outside a simulation (or outside a host) they are exactly tokio's timers.
//! A timer armed with tokio directly still fires at the right time on its own
//! host, but the simulation cannot see it coming: a jump may pass over it,
//! and whatever it sends then leaves at the end of the jump. Such wakes are
//! counted by [`crate::Sim::unhinted_wakes`].

use std::future::IntoFuture;

use tokio::time::{Duration, Instant, Sleep, Timeout};

use crate::world::World;

/// [`tokio::time::sleep`], hinted to the simulation.
pub fn sleep(duration: Duration) -> Sleep {
    let sleep = tokio::time::sleep(duration);
    hint_wake(sleep.deadline());
    sleep
}

/// [`tokio::time::sleep_until`], hinted to the simulation.
pub fn sleep_until(deadline: Instant) -> Sleep {
    hint_wake(deadline);
    tokio::time::sleep_until(deadline)
}

/// [`tokio::time::timeout`], hinted to the simulation.
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    if let Some(deadline) = Instant::now().checked_add(duration) {
        hint_wake(deadline);
    }
    tokio::time::timeout(duration, future)
}

/// Tells the simulation that the current host may wake at `deadline` (its
/// runtime's clock): for a timer armed by code that does not use this module,
/// such as a library's own request timeout, when the caller knows its
/// deadline. A hint that turns out to be needless costs only an early stop.
/// Does nothing outside a simulation's host.
pub fn hint_wake(deadline: Instant) {
    World::with_current_host_if_set(|host| {
        host.wakes.push(std::cmp::Reverse(deadline));
    });
}
