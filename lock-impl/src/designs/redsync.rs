use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use super::check_guard;
use crate::scale::{REDSYNC_MAX_RETRY_DELAY, REDSYNC_MIN_RETRY_DELAY};
use crate::{Acquire, AcquireOptions, Conn, Deps, Guard, LockDesign, LockError, Release, Wait};

/// go-redsync's `deleteScript` (`scripts.go`), verbatim: its SHA-1 is the
/// `e950836e…` redsync hard-codes.
pub const REDSYNC_DELETE: &str = include_str!("../../scripts/redsync_delete.lua");
/// go-redsync's `touchScript`, verbatim (`d75bb8b5…`).
pub const REDSYNC_TOUCH: &str = include_str!("../../scripts/redsync_touch.lua");
/// go-redsync's `touchWithSetNXScript` (`WithSetNXOnExtend`), verbatim (`b6b55c43…`).
pub const REDSYNC_TOUCH_SETNX: &str = include_str!("../../scripts/redsync_touch_setnx.lua");

static DELETE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDSYNC_DELETE));
static TOUCH: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDSYNC_TOUCH));
static TOUCH_SETNX: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDSYNC_TOUCH_SETNX));

/// `redsync`: a port of go-redsync's `Mutex` (pinned: github.com/go-redsync/redsync
/// **v4.17.0**, `mutex.go`, `redsync.go`, `scripts.go`; adapter
/// `redis/goredis/v9/goredis.go`), Redlock over `Deps::servers` (redsync's pools).
///
/// `NewMutex`'s defaults: `expiry` (here the lease), `tries` 32, `delayFunc`
/// `rand.Intn(250-50)+50` ms (here from [`crate::Entropy::below`], drawn in real
/// milliseconds and then put at the world's scale: [`crate::scale::REDSYNC_MIN_RETRY_DELAY`],
/// [`crate::scale::REDSYNC_MAX_RETRY_DELAY`]; 1 ms at the catalog's 200 ms lease, which
/// stands for 30 s), `driftFactor` 0.01, `quorum` `len(pools)/2+1`, `failFast` and
/// `shuffle` off. The 32 tries are a count and stay 32 at every scale; the drift factor
/// and `timeoutFactor` are shares of the expiry and scale with it. `lockContext`:
///
/// - `genValue` once per `Lock` (16 random bytes, base64; here
///   [`crate::Entropy::owner_value`]), the same value for every try;
/// - each try after the first waits `delayFunc(i)`, or returns `ErrFailed` if the
///   context is done first;
/// - `start := time.Now()`; `SETNX name value expiry` (go-redis: `SET NX PX`) on every
///   pool **concurrently** (`actOnPoolsAsync`, one goroutine per pool), waiting for
///   all of them (`failFast` off);
/// - `now := time.Now()`; `until := now + expiry - now.Sub(start) - expiry*driftFactor`
///   (no `+2 ms`: redsync removed it in 2019, "Remove unnecessary delay", f80c13a);
///   acquired if `n >= quorum && now.Before(until)`; the guard's `valid_until` is
///   `until`. Go's `time.Now()` carries a monotonic reading, and `Sub`/`Before`
///   between two such readings use it: [`crate::Clock::now`].
/// - otherwise `deleteScript` on every pool concurrently, and the next try.
///
/// [`Wait::TryOnce`] is `TryLock` (one try). [`Wait::Retry`] is `LockContext` with a
/// context whose deadline is the budget: up to 32 tries, ending early once the
/// deadline passes during a delay. Failing every try is [`Acquire::NotAcquired`]
/// (`ErrFailed`, `ErrTaken` or the last pool error): redsync unlocks on every pool
/// before it returns, and its caller does not enter.
///
/// Per-command timeouts: `lockContext` gives each try a context of
/// `expiry*timeoutFactor` (0.05), but go-redis v9 applies a context's deadline to the
/// socket only with `ContextTimeoutEnabled` (off by default): the deadline bounds
/// getting a pooled connection, and a reply is waited for up to the client's read
/// timeout. Here that is the connection's response timeout.
///
/// `Unlock`: `deleteScript` on every pool concurrently (`1`: deleted; `-1`: absent,
/// `ErrLockAlreadyExpired`; `0`: another value); `true` once `n >= quorum`
/// ([`Release::Removed`]). Otherwise: [`Release::Unknown`] if a pool gave an error
/// (it may still hold the key), [`Release::NotFound`] if every pool said `-1`,
/// [`Release::HeldByOther`] if one said `0`, else [`Release::NotRemoved`]
/// (deleted on fewer than a quorum).
///
/// `Extend` ([`Redsync::extend`]) runs `touchScript`, or `touchWithSetNXScript` under
/// `WithSetNXOnExtend` (which re-creates the key on a pool that lost it, e.g. a
/// restarted master), and computes a new `until` as the acquisition does. redsync
/// never extends on its own, so no locksim workload exercises it.
///
/// Known failures: those of Redlock (a pause past `until`, a master's clock jump, a
/// master restarting without persistence), and nothing checks `until` for the caller:
/// `Until()` is there to read, the critical section does not.
pub struct Redsync {
    deps: Deps,
}

impl Redsync {
    /// The user-facing name.
    pub const NAME: &'static str = "redsync";
    /// `NewMutex`'s default `tries`.
    pub const TRIES: usize = 32;
    /// `NewMutex`'s default `driftFactor`.
    pub const DRIFT_FACTOR: f64 = 0.01;

    /// redsync v4.17.0's `Mutex` over `deps.servers`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// `quorum: len(r.pools)/2 + 1`.
    pub fn quorum(&self) -> usize {
        self.deps.servers.len() / 2 + 1
    }

    /// `time.Duration(int64(float64(m.expiry)*m.driftFactor))`: in nanoseconds,
    /// truncated.
    pub fn drift(expiry: Duration) -> Duration {
        Duration::from_nanos((expiry.as_nanos() as f64 * Self::DRIFT_FACTOR) as u64)
    }

    /// `delayFunc`: `rand.Intn(maxRetryDelayMilliSec-minRetryDelayMilliSec) +
    /// minRetryDelayMilliSec` milliseconds, drawn as redsync draws it and put at the
    /// world's scale.
    fn delay(&self) -> Duration {
        let (min, max) = (
            REDSYNC_MIN_RETRY_DELAY.real_ms,
            REDSYNC_MAX_RETRY_DELAY.real_ms,
        );
        let drawn = self.deps.entropy.below(max - min) + min;
        self.deps.scale.of_drawn(&REDSYNC_MIN_RETRY_DELAY, drawn)
    }

    /// `until := now.Add(m.expiry - now.Sub(start) - drift)`, if `now.Before(until)`.
    fn until(start: Duration, now: Duration, expiry: Duration) -> Option<Duration> {
        let elapsed = now.saturating_sub(start);
        let validity = expiry
            .checked_sub(elapsed)?
            .checked_sub(Self::drift(expiry))?;
        (!validity.is_zero()).then(|| now + validity)
    }

    /// `Mutex.ExtendContext`: the touch script (`touchWithSetNXScript` if
    /// `set_nx_on_extend`, redsync's `WithSetNXOnExtend`) with `expiry` on every pool
    /// concurrently; with a quorum, the new guard (its `valid_until` the new `until`);
    /// `Ok(None)` where redsync returns `false` (`ErrExtendFailed` or fewer than a
    /// quorum).
    pub async fn extend(
        &self,
        guard: &Guard,
        expiry_ms: u64,
        set_nx_on_extend: bool,
    ) -> Result<Option<Guard>, LockError> {
        check_guard(Self::NAME, guard)?;
        let script: &redis::Script = if set_nx_on_extend {
            &TOUCH_SETNX
        } else {
            &TOUCH
        };
        // `start := time.Now()` (monotonic reading).
        let start = self.deps.clock.now();
        let n = join_all(self.deps.servers.iter().map(|conn| async move {
            let reply: redis::RedisResult<i64> = script
                .key(&guard.key)
                .arg(&guard.owner)
                .arg(expiry_ms)
                .invoke_async(&mut conn.clone())
                .await;
            matches!(reply, Ok(s) if s != 0)
        }))
        .await
        .into_iter()
        .filter(|ok| *ok)
        .count();
        if n < self.quorum() {
            return Ok(None);
        }
        let now = self.deps.clock.now();
        Ok(
            Self::until(start, now, Duration::from_millis(expiry_ms)).map(|until| Guard {
                valid_until: Some(until),
                ..guard.clone()
            }),
        )
    }
}

/// `Mutex.acquire` on one pool: `SET name value NX PX expiry`; `true` if set.
async fn acquire_on(conn: &Conn, key: &str, value: &str, expiry_ms: u64) -> bool {
    let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("NX")
        .arg("PX")
        .arg(expiry_ms)
        .query_async(&mut conn.clone())
        .await;
    matches!(reply, Ok(Some(_)))
}

/// `Mutex.release` on one pool: the delete script's status, or the error.
async fn release_on(conn: &Conn, key: &str, value: &str) -> Result<i64, redis::RedisError> {
    DELETE
        .key(key)
        .arg(value)
        .invoke_async(&mut conn.clone())
        .await
}

/// `actOnPoolsAsync(release)`: every pool at once, all answers.
async fn release_all(deps: &Deps, key: &str, value: &str) -> Vec<Result<i64, redis::RedisError>> {
    join_all(deps.servers.iter().map(|c| release_on(c, key, value))).await
}

#[async_trait]
impl LockDesign for Redsync {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        if self.deps.servers.is_empty() {
            return Err(LockError::NoServers);
        }
        let deps = &self.deps;
        let expiry = Duration::from_millis(options.lease_ms);
        // TryLock: one try. LockContext(ctx with the budget as deadline): `m.tries`.
        let (tries, deadline) = match options.wait {
            Wait::TryOnce => (1, None),
            Wait::Retry { budget_ms, .. } => (
                Self::TRIES,
                // `context.WithTimeout`: a Go timer, on the monotonic clock.
                Some(deps.clock.now() + Duration::from_millis(budget_ms)),
            ),
        };
        let value = deps.entropy.owner_value();
        for i in 0..tries {
            if i != 0 {
                let delay = self.delay();
                if let Some(deadline) = deadline {
                    let left = deadline.saturating_sub(deps.clock.now());
                    if left < delay {
                        // `case <-ctx.Done(): return ErrFailed`.
                        deps.clock.sleep(left).await;
                        return Ok(Acquire::NotAcquired);
                    }
                }
                deps.clock.sleep(delay).await;
            }
            // `start := time.Now()`: Go's monotonic reading.
            let start = deps.clock.now();
            let n = join_all(
                deps.servers
                    .iter()
                    .map(|c| acquire_on(c, key, &value, options.lease_ms)),
            )
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
            // `now := time.Now()`.
            let now = deps.clock.now();
            if let Some(until) = Self::until(start, now, expiry)
                && n >= self.quorum()
            {
                return Ok(Acquire::Acquired(Guard {
                    design: Self::NAME.to_string(),
                    key: key.to_string(),
                    owner: value,
                    acquired_at: start,
                    valid_until: Some(until),
                    token: None,
                }));
            }
            release_all(deps, key, &value).await;
        }
        Ok(Acquire::NotAcquired)
    }

    /// A waiter's longest pause between tries: `delayFunc`'s upper bound, at the
    /// world's scale.
    fn retry_horizon(&self) -> Duration {
        self.deps.scale.of(&REDSYNC_MAX_RETRY_DELAY)
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        let replies = release_all(&self.deps, &guard.key, &guard.owner).await;
        let total = replies.len();
        let mut statuses = Vec::with_capacity(total);
        // `actOnPoolsAsync` joins every pool's error and counts it as not released,
        // whatever the error: the pool's state is unknown to the client.
        let mut unknown = Vec::new();
        for r in replies {
            match r {
                Ok(s) => statuses.push(s),
                Err(e) => unknown.push(e.to_string()),
            }
        }
        // `status != 0` counts, `-1` is `ErrLockAlreadyExpired` (not counted).
        let deleted = statuses.iter().filter(|s| **s != 0 && **s != -1).count();
        if deleted >= self.quorum() {
            return Ok(Release::Removed);
        }
        Ok(if !unknown.is_empty() {
            Release::Unknown(format!(
                "{} of {} pools did not answer the unlock: {}",
                unknown.len(),
                total,
                unknown.join("; ")
            ))
        } else if statuses.iter().all(|s| *s == -1) {
            Release::NotFound
        } else if statuses.contains(&0) {
            Release::HeldByOther
        } else {
            Release::NotRemoved
        })
    }
}
