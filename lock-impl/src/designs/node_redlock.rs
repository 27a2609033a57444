use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::check_guard;
use crate::scale::{NODE_REDLOCK_RETRY_DELAY, NODE_REDLOCK_RETRY_JITTER, REDLOCK_DRIFT_PRECISION};
use crate::{
    Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, TimeScale, Wait,
};

/// node-redlock's `ACQUIRE_SCRIPT` (`src/index.ts`), verbatim.
pub const NODE_REDLOCK_ACQUIRE: &str = include_str!("../../scripts/node_redlock_acquire.lua");
/// node-redlock's `EXTEND_SCRIPT`, verbatim.
pub const NODE_REDLOCK_EXTEND: &str = include_str!("../../scripts/node_redlock_extend.lua");
/// node-redlock's `RELEASE_SCRIPT`, verbatim.
pub const NODE_REDLOCK_RELEASE: &str = include_str!("../../scripts/node_redlock_release.lua");

static ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(NODE_REDLOCK_ACQUIRE));
static EXTEND: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(NODE_REDLOCK_EXTEND));
static RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(NODE_REDLOCK_RELEASE));

/// `node-redlock`: a port of mike-marcacci/node-redlock's `Redlock` (pinned: the
/// published npm release **5.0.0-beta.2**, `src/index.ts` at tag `v5.0.0-beta.2`),
/// over `Deps::servers` (its clients), one resource per lock (`acquire([key], …)`).
///
/// Default settings: `driftFactor` 0.01, `retryCount` 10, `retryDelay` 200 ms,
/// `retryJitter` 100 ms. The two times are read at the world's scale
/// ([`crate::scale::NODE_REDLOCK_RETRY_DELAY`], [`crate::scale::NODE_REDLOCK_RETRY_JITTER`]:
/// the pause is drawn in real milliseconds, 100-300, and then scaled, to 1-2 ms at the
/// catalog's 200 ms lease, which stands for 30 s); the drift's `+ 2` ms is Redis's
/// expiry precision and is kept real ([`crate::scale::REDLOCK_DRIFT_PRECISION`]); the
/// drift factor is a share of the duration. What `acquire` / `_execute` /
/// `_attemptOperation` do:
///
/// - `value = randomBytes(16).toString("hex")` (here [`crate::Entropy::owner_value`]),
///   and **`start = Date.now()`**, the wall clock, read once before the first attempt
///   (5.0.0-beta.2; the unreleased master reads it per attempt since #274, commit
///   5dd9e28, and in `extend` since #276; neither is in a tag);
/// - each attempt sends `ACQUIRE_SCRIPT` (`EVALSHA`, `EVAL` on `NOSCRIPT`: every key
///   absent, then `SET key value PX duration`) to every client at once, and decides
///   **as soon as a quorum** (`floor(n/2)+1`) votes for (reply `== #keys`) or against
///   (any other reply, or an error); the other requests run on in the background
///   ([`crate::Spawner`]);
/// - against: wait `max(0, retryDelay + floor((random*2-1) * retryJitter))` ms and try
///   again, `retryCount + 1` attempts in all; then `RELEASE_SCRIPT` once on every
///   client (`retryCount: 0`, errors ignored) and `ExecutionError`
///   ([`Acquire::NotAcquired`]);
/// - for: `expiration = start + duration - drift`, `drift =
///   round(driftFactor*duration) + 2`, in `Date.now()` milliseconds. **No validity
///   check**: the lock is returned even if `expiration` has passed (only `using()` and
///   `extend` look at it). The guard's `valid_until` is where the client's monotonic
///   clock stands when its wall clock reads `expiration`, as read at the return
///   (`now() + (expiration - Date.now())`, in the past if it already passed).
///
/// [`Wait::TryOnce`] is `retryCount: 0`. [`Wait::Retry`] (node-redlock has no time
/// budget, only a count) is the `retryCount` that spends the budget: at most
/// `budget / retryDelay` retries (the delay at the world's scale), and none started
/// once the budget has passed on the monotonic clock. At real scale an attempt's round
/// trip is nothing beside a 200 ms delay and the two agree; at the catalog's scale the
/// delay is a millisecond or two and the unscaled network is not, so the count alone
/// would wait several budgets. A lock is returned expired only when the retrying
/// outlasts the duration, as at real scale.
///
/// `release`: `RELEASE_SCRIPT` (delete each key holding `value`, return the count)
/// through the same `_execute`, **with the default retries**: a release that finds no
/// quorum (the key expired, or is another's) retries ten times, 200 ± 100 ms apart,
/// then throws `ExecutionError`: [`Release::Unknown`] if any client failed to answer,
/// else [`Release::NotRemoved`]. A quorum for is [`Release::Removed`].
///
/// `extend` ([`NodeRedlock::extend`]): refused if `expiration < Date.now()`, else
/// `EXTEND_SCRIPT` through `_execute` and a new `expiration` from `start`. The
/// `using()` auto-extension is not ported (no locksim workload holds a lock through
/// a routine of unknown length).
///
/// Known failures: Redlock's, plus the wall clock: a client wall-clock step while
/// acquiring moves `expiration` (a backward step during the attempts makes the lock
/// look valid longer than the keys live), and nothing refuses a lock whose
/// `expiration` has already passed: the caller must check it.
pub struct NodeRedlock {
    deps: Deps,
}

/// One client's vote (`ClientExecutionResult`).
enum Vote {
    For,
    /// `ResourceLockedError`: the script answered with another count.
    Locked,
    /// The request failed (an error reply, a timeout, a broken connection): node-redlock
    /// counts any error as a vote against.
    Failed(String),
}

/// `_attemptOperation`'s outcome: the decision and the votes that made it.
struct Decision {
    for_quorum: bool,
    against: Vec<Vote>,
}

impl NodeRedlock {
    /// The user-facing name.
    pub const NAME: &'static str = "node-redlock";
    /// `defaultSettings.driftFactor`.
    pub const DRIFT_FACTOR: f64 = 0.01;
    /// `defaultSettings.retryCount`.
    pub const RETRY_COUNT: u64 = 10;

    /// node-redlock 5.0.0-beta.2 over `deps.servers`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// `Math.round(driftFactor * duration) + 2`, ms: the `+ 2` (Redis's expiry
    /// precision) is kept real at every scale.
    pub fn drift_ms(duration_ms: u64) -> u64 {
        (Self::DRIFT_FACTOR * duration_ms as f64).round() as u64
            + TimeScale::REAL.ms_of(&REDLOCK_DRIFT_PRECISION)
    }

    /// `retryDelay` at the world's scale.
    pub fn retry_delay(&self) -> Duration {
        self.deps.scale.of(&NODE_REDLOCK_RETRY_DELAY)
    }

    /// The longest pause between two attempts, `retryDelay + retryJitter`, at the
    /// world's scale.
    pub fn longest_retry_pause(&self) -> Duration {
        self.deps.scale.of_drawn(
            &NODE_REDLOCK_RETRY_DELAY,
            NODE_REDLOCK_RETRY_DELAY.real_ms + NODE_REDLOCK_RETRY_JITTER.real_ms,
        )
    }

    /// `Date.now()`: whole milliseconds of the client's wall clock.
    pub(crate) fn date_now(&self) -> i128 {
        // node-redlock reads `Date.now()`, the wall clock (time since the Unix epoch).
        self.deps.clock.wall().as_millis() as i128
    }

    /// `Math.max(0, retryDelay + Math.floor((Math.random() * 2 - 1) * retryJitter))`:
    /// `Math.random()` drawn in millionths, the pause drawn in real milliseconds and
    /// then put at the world's scale.
    fn retry_pause(&self) -> Duration {
        let random = self.deps.entropy.below(1_000_000) as f64 / 1_000_000.0;
        let ms = NODE_REDLOCK_RETRY_DELAY.real_ms as f64
            + ((random * 2.0 - 1.0) * NODE_REDLOCK_RETRY_JITTER.real_ms as f64).floor();
        self.deps
            .scale
            .of_drawn(&NODE_REDLOCK_RETRY_DELAY, ms.max(0.0) as u64)
    }

    /// `_attemptOperation`: `script` on every client at once, decided at the first
    /// quorum for or against; the rest finish in the background.
    async fn attempt_operation(
        &self,
        script: &'static redis::Script,
        key: &str,
        args: &[String],
    ) -> Decision {
        let mut pending: FuturesUnordered<_> = self
            .deps
            .servers
            .iter()
            .map(|conn| {
                let mut conn = conn.clone();
                let mut invocation = script.key(key);
                for a in args {
                    invocation.arg(a);
                }
                async move {
                    let reply: redis::RedisResult<i64> = invocation.invoke_async(&mut conn).await;
                    match reply {
                        // `result !== keys.length`: one resource.
                        Ok(1) => Vote::For,
                        Ok(_) => Vote::Locked,
                        Err(e) => Vote::Failed(format!("EVALSHA: {e}")),
                    }
                }
            })
            .collect();
        let quorum = self.deps.servers.len() / 2 + 1;
        let (mut votes_for, mut against) = (0usize, Vec::new());
        while let Some(vote) = pending.next().await {
            match vote {
                Vote::For => votes_for += 1,
                other => against.push(other),
            }
            if votes_for == quorum || against.len() == quorum {
                break;
            }
        }
        if !pending.is_empty() {
            self.deps.spawner.spawn(Box::pin(
                async move { while pending.next().await.is_some() {} },
            ));
        }
        Decision {
            for_quorum: votes_for >= quorum,
            against,
        }
    }

    /// `_execute`: attempts until a quorum for, `retry_count + 1` in all; the last
    /// decision. With `until` (a wait budget's end on the monotonic clock), no retry
    /// starts once it has passed: the budget's `retryCount` is the retries that fit in
    /// it, attempts included (see the module doc).
    async fn execute(
        &self,
        script: &'static redis::Script,
        key: &str,
        args: &[String],
        retry_count: u64,
        until: Option<Duration>,
    ) -> Decision {
        let max_attempts = retry_count + 1;
        let mut attempts = 0;
        loop {
            let decision = self.attempt_operation(script, key, args).await;
            attempts += 1;
            if decision.for_quorum
                || attempts >= max_attempts
                || until.is_some_and(|u| self.deps.clock.now() >= u)
            {
                return decision;
            }
            self.deps.clock.sleep(self.retry_pause()).await;
        }
    }

    /// The guard's `valid_until` for `expiration` (wall ms): the monotonic instant at
    /// which the wall clock, as read now, reads `expiration`; in the past if it has
    /// already passed (a lock returned expired), never before the clock's origin.
    fn valid_until(&self, expiration_ms: i128) -> Duration {
        let now = self.deps.clock.now().as_millis() as i128;
        let at = now + (expiration_ms - self.date_now());
        Duration::from_millis(at.max(0) as u64)
    }

    /// `Redlock.extend(lock, duration)`: `Ok(None)` where node-redlock throws
    /// `ExecutionError` (the lock's `expiration` already passed on `Date.now()`, or no
    /// quorum for `EXTEND_SCRIPT` within the default retries); else the replacement
    /// lock's guard, its `valid_until` from the new `expiration`.
    pub async fn extend(
        &self,
        guard: &Guard,
        duration_ms: u64,
    ) -> Result<Option<Guard>, LockError> {
        check_guard(Self::NAME, guard)?;
        // `if (existing.expiration < Date.now())`: the guard's validity is where its
        // expiration stands.
        if guard
            .remaining(self.deps.clock.now())
            .is_some_and(|r| r.is_zero())
        {
            return Ok(None);
        }
        Ok(self
            .extend_unchecked(guard, duration_ms)
            .await
            .map(|(g, _)| g))
    }

    /// `extend` once its expiration check passed: `EXTEND_SCRIPT` through `_execute`;
    /// the replacement guard and its `expiration` (wall ms), or `None` without a
    /// quorum.
    pub(crate) async fn extend_unchecked(
        &self,
        guard: &Guard,
        duration_ms: u64,
    ) -> Option<(Guard, i128)> {
        // 5.0.0-beta.2: `const start = Date.now()` before `_execute`.
        let start = self.date_now();
        let decision = self
            .execute(
                &EXTEND,
                &guard.key,
                &[guard.owner.clone(), duration_ms.to_string()],
                Self::RETRY_COUNT,
                None,
            )
            .await;
        if !decision.for_quorum {
            return None;
        }
        let expiration = start + duration_ms as i128 - Self::drift_ms(duration_ms) as i128;
        Some((
            Guard {
                valid_until: Some(self.valid_until(expiration)),
                ..guard.clone()
            },
            expiration,
        ))
    }

    /// `acquire`, with the lock's `expiration` (wall ms) when it was taken.
    pub(crate) async fn acquire_with_expiration(
        &self,
        key: &str,
        options: AcquireOptions,
    ) -> Result<(Acquire, Option<i128>), LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        if self.deps.servers.is_empty() {
            // `new Redlock([])` throws: "Redlock must be instantiated with at least one
            // redis client."
            return Err(LockError::NoServers);
        }
        let (retry_count, until) = match options.wait {
            Wait::TryOnce => (0, None),
            Wait::Retry { budget_ms, .. } => (
                budget_ms / self.retry_delay().as_millis().max(1) as u64,
                Some(self.deps.clock.now() + Duration::from_millis(budget_ms)),
            ),
        };
        let duration = options.lease_ms;
        let value = self.deps.entropy.owner_value();
        // 5.0.0-beta.2: `const start = Date.now()`, the wall clock, once.
        let start = self.date_now();
        let acquired_at = self.deps.clock.now();
        let decision = self
            .execute(
                &ACQUIRE,
                key,
                &[value.clone(), duration.to_string()],
                retry_count,
                until,
            )
            .await;
        if !decision.for_quorum {
            // Release any partial lock state, one attempt, errors ignored.
            self.execute(&RELEASE, key, std::slice::from_ref(&value), 0, None)
                .await;
            return Ok((Acquire::NotAcquired, None));
        }
        let expiration = start + duration as i128 - Self::drift_ms(duration) as i128;
        Ok((
            Acquire::Acquired(Guard {
                design: Self::NAME.to_string(),
                key: key.to_string(),
                owner: value,
                acquired_at,
                valid_until: Some(self.valid_until(expiration)),
                token: None,
            }),
            Some(expiration),
        ))
    }
}

#[async_trait]
impl LockDesign for NodeRedlock {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        Ok(self.acquire_with_expiration(key, options).await?.0)
    }

    /// A waiter's longest pause between attempts: `retryDelay + retryJitter`.
    fn retry_horizon(&self) -> Duration {
        self.longest_retry_pause()
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        let decision = self
            .execute(
                &RELEASE,
                &guard.key,
                std::slice::from_ref(&guard.owner),
                Self::RETRY_COUNT,
                None,
            )
            .await;
        if decision.for_quorum {
            return Ok(Release::Removed);
        }
        let unknown: Vec<String> = decision
            .against
            .into_iter()
            .filter_map(|vote| match vote {
                Vote::Failed(why) => Some(why),
                _ => None,
            })
            .collect();
        Ok(if unknown.is_empty() {
            Release::NotRemoved
        } else {
            Release::Unknown(format!(
                "ExecutionError: no quorum to release; {}",
                unknown.join("; ")
            ))
        })
    }
}
