use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::check_guard;
use super::node_redlock::NodeRedlock;
use crate::scale::{NODE_REDLOCK_EXTENSION_MARGIN, NODE_REDLOCK_EXTENSION_THRESHOLD};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `node-redlock-using`: node-redlock 5.0.0-beta.2's `Redlock.using(resources,
/// duration, settings, routine)` (`src/index.ts` at tag `v5.0.0-beta.2`), the
/// auto-extending lock most node-redlock users hold: [`NodeRedlock`]'s `acquire`, then a
/// timer that extends the lock before it expires, until the routine ends.
///
/// What `using` does:
/// - throws if `automaticExtensionThreshold > duration - 100` ("A lock `duration` must
///   be at least 100ms greater than the `automaticExtensionThreshold` setting");
/// - `lock = await this.acquire(resources, duration, settings)`, then `queue()`:
///   `setTimeout(extend, lock.expiration - Date.now() - automaticExtensionThreshold)`:
///   the delay is computed on the **wall clock** (`expiration` is `Date.now()`
///   milliseconds), the timer then runs on Node's monotonic timers (a delay under 1 ms
///   is 1 ms);
/// - `extend()`: `lock = await lock.extend(duration)` ([`NodeRedlock::extend`]: refused
///   if `expiration < Date.now()`, else `EXTEND_SCRIPT` with the default retries) and
///   `queue()` again; on an error, **if `lock.expiration > Date.now()` it calls
///   `extend()` again at once**, else it sets `signal.error` and aborts the signal, and
///   stops extending;
/// - when the routine ends (here: [`LockDesign::release`]): clear the timer, wait for
///   an extension in flight, `lock.release()`.
///
/// The routine is handed an `AbortSignal` it should check (`if (signal.aborted) throw
/// signal.error`). Here the abort shows as the guard's validity: every extension is
/// reported to [`Deps::observer`] (`renewed`) with its new validity, and after an
/// abort none comes, so a holder past its validity is one the signal told to stop.
/// The workload does not check it, as many routines do not.
///
/// `automaticExtensionThreshold` (500 ms) and the 100 ms margin `using` demands are
/// kept real in every world ([`crate::scale::NODE_REDLOCK_EXTENSION_THRESHOLD`],
/// [`crate::scale::NODE_REDLOCK_EXTENSION_MARGIN`]): the threshold races an
/// extension's round trip to every master, which no world scales (scaled to the
/// catalog's 1/150 it would be 3 ms, under a round trip). Where the duration is under
/// the threshold plus the margin (the catalog's 200 ms lease, where the default
/// throws), a caller must pass a smaller threshold: locksim passes a quarter of the
/// duration (50 ms at 200 ms), and a duration that cannot hold a quarter and the margin
/// (under 134 ms) is refused ([`LockError::LeaseTooShortForWatchdog`]).
///
/// Known failures: the extension timer is a task of the holder's process, frozen by a
/// stop-the-world pause like the holder (past the lease, `extend` finds `expiration`
/// passed and aborts, and the routine works on if it does not look); the delay is read
/// on the wall clock, so a client clock step forward fires the extension late (or a
/// step back early); Redlock's own failures (a master's clock jump, a restart without
/// persistence) as in [`NodeRedlock`].
pub struct NodeRedlockUsing {
    inner: Arc<NodeRedlock>,
    deps: Deps,
    /// The running extension timers, by (key, owner value).
    running: Arc<Mutex<BTreeMap<(String, String), Extension>>>,
}

/// A running extension timer: its stop signal, and its turn, held from the check of the
/// stop signal until its extension's reply, so a release never races an extension.
struct Extension {
    stop: watch::Sender<bool>,
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl NodeRedlockUsing {
    /// The user-facing name.
    pub const NAME: &'static str = "node-redlock-using";

    /// `using` over `deps.servers`.
    pub fn new(deps: Deps) -> Self {
        NodeRedlockUsing {
            inner: Arc::new(NodeRedlock::new(deps.clone())),
            deps,
            running: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// The `automaticExtensionThreshold` used for `duration_ms` at the world's scale,
    /// or the error `using` throws (see the type's doc): the default where the
    /// duration holds it and the margin, else a quarter of the duration.
    pub fn threshold_ms(&self, duration_ms: u64) -> Result<u64, LockError> {
        let scale = self.deps.scale;
        let threshold = scale.ms_of(&NODE_REDLOCK_EXTENSION_THRESHOLD);
        let margin = scale.ms_of(&NODE_REDLOCK_EXTENSION_MARGIN);
        // The least duration whose quarter is within the margin: `d / 4 <= d - margin`.
        let min_ms = (margin * 4).div_ceil(3);
        // `if (settings.automaticExtensionThreshold > duration - 100) throw`.
        if duration_ms > margin && threshold <= duration_ms - margin {
            Ok(threshold)
        } else if duration_ms >= min_ms {
            Ok(duration_ms / 4)
        } else {
            Err(LockError::LeaseTooShortForWatchdog {
                lease_ms: duration_ms,
                min_ms,
            })
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Extension>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `queue()` and `extend()`, until stopped or aborted.
async fn extend_loop(
    inner: Arc<NodeRedlock>,
    deps: Deps,
    mut lock: Guard,
    mut expiration: i128,
    (duration_ms, threshold_ms): (u64, u64),
    mut stop: watch::Receiver<bool>,
    turn: Arc<tokio::sync::Mutex<()>>,
) {
    loop {
        // `setTimeout(..., lock.expiration - Date.now() - threshold)`: a delay under
        // 1 ms (negative included) is 1 ms.
        let delay = (expiration - inner.date_now() - threshold_ms as i128).max(1);
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
            () = deps.clock.sleep(Duration::from_millis(delay as u64)) => {}
        }
        let _turn = turn.lock().await;
        if *stop.borrow() {
            return;
        }
        // `extend()`: again at once after an error while `expiration` has not passed.
        loop {
            // `lock.extend(duration)`: refused once `expiration < Date.now()`.
            let extended = if expiration < inner.date_now() {
                None
            } else {
                inner.extend_unchecked(&lock, duration_ms).await
            };
            match extended {
                Some((g, e)) => {
                    lock = g;
                    expiration = e;
                    if let (Some(observer), Some(until)) = (&deps.observer, lock.valid_until) {
                        observer.renewed(&lock.key, &lock.owner, until);
                    }
                    break;
                }
                None if expiration > inner.date_now() => continue,
                // `controller.abort()`: no more extensions.
                None => return,
            }
        }
    }
}

#[async_trait]
impl LockDesign for NodeRedlockUsing {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        // Bad input first, as `node-redlock` checks it: an empty key, then the options.
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        let duration = options.lease_ms;
        let threshold = self.threshold_ms(duration)?;
        let (outcome, expiration) = self.inner.acquire_with_expiration(key, options).await?;
        let (Acquire::Acquired(guard), Some(expiration)) = (outcome, expiration) else {
            return Ok(Acquire::NotAcquired);
        };
        let guard = Guard {
            design: Self::NAME.to_string(),
            ..guard
        };
        let (stop, stopped) = watch::channel(false);
        let turn = Arc::new(tokio::sync::Mutex::new(()));
        self.running().insert(
            (guard.key.clone(), guard.owner.clone()),
            Extension {
                stop,
                turn: turn.clone(),
            },
        );
        self.deps.spawner.spawn(Box::pin(extend_loop(
            self.inner.clone(),
            self.deps.clone(),
            Guard {
                design: NodeRedlock::NAME.to_string(),
                ..guard.clone()
            },
            expiration,
            (duration, threshold),
            stopped,
            turn,
        )));
        Ok(Acquire::Acquired(guard))
    }

    /// A waiter's longest pause between attempts: `node-redlock`'s.
    fn retry_horizon(&self) -> Duration {
        self.inner.longest_retry_pause()
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        // `finally`: clear the timer and wait for an extension in flight.
        let extension = self
            .running()
            .remove(&(guard.key.clone(), guard.owner.clone()));
        if let Some(extension) = extension {
            let _turn = extension.turn.lock().await;
            let _ = extension.stop.send(true);
        }
        // `lock.release()`: the same value on every client, whatever extension ran.
        self.inner
            .release(&Guard {
                design: NodeRedlock::NAME.to_string(),
                ..guard.clone()
            })
            .await
    }
}
