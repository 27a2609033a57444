use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;

use super::{check_guard, guard};
use crate::lock::classify;
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, Wait};

/// redis-py's `Lock.LUA_RELEASE_SCRIPT`, verbatim (byte for byte, indentation included).
pub const REDIS_PY_RELEASE: &str = include_str!("../../scripts/redis_py_release.lua");
/// redis-py's `Lock.LUA_EXTEND_SCRIPT`, verbatim.
pub const REDIS_PY_EXTEND: &str = include_str!("../../scripts/redis_py_extend.lua");
/// redis-py's `Lock.LUA_REACQUIRE_SCRIPT`, verbatim.
pub const REDIS_PY_REACQUIRE: &str = include_str!("../../scripts/redis_py_reacquire.lua");

static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_PY_RELEASE));
static EXTEND: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_PY_EXTEND));
static REACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDIS_PY_REACQUIRE));

/// Which clock `acquire` measures `blocking_timeout` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitClock {
    /// `time.monotonic()`: redis-py 4.0.0 on (commit e6351300, "Use monotonic clock in
    /// Lock").
    Monotonic,
    /// `time.time()`: redis-py up to 3.5.3.
    Wall,
}

/// `redis-py`: a port of redis-py 5.x's `redis.lock.Lock` (pinned: redis-py **5.3.1**,
/// `redis/lock.py`, read at tag `v5.3.1` of github.com/redis/redis-py; the three Lua
/// scripts are byte-identical from 3.5.3 to 8.0).
///
/// What it does, as `Lock.acquire` / `do_acquire` / `release` / `do_release` do:
///
/// - **acquire**: a token (`uuid.uuid1().hex`; here [`crate::Entropy::owner_value`]),
///   then `SET name token NX PX timeout` (`timeout` = the lease). If the key is held
///   and `blocking` (here: a [`Wait::Retry`] budget), compute
///   `next_try_at = monotonic() + sleep` and give up if it is past
///   `stop_trying_at = monotonic() + blocking_timeout` (read once, before the first
///   try); else `time.sleep(sleep)` and try again. `sleep` is the fixed 0.1 s default
///   ([`crate::scale::REDIS_PY_SLEEP`], at the world's scale: 1 ms at the catalog's
///   200 ms lease, which stands for 30 s): no backoff and no jitter, so the budget's
///   backoff fields are unused. [`Wait::TryOnce`] is `blocking=False`: one `SET`.
/// - **release**: `LUA_RELEASE_SCRIPT` (`GET`, compare, `DEL`): `1` is
///   [`Release::Removed`]; `0` raises `LockNotOwnedError` in redis-py, "Cannot release
///   a lock that's no longer owned", whether the key had expired or was another
///   owner's: [`Release::NotRemoved`].
/// - **extend** / **reacquire** ([`RedisPy::extend`], [`RedisPy::reacquire`]): the
///   `LUA_EXTEND_SCRIPT` (add to or replace the `PTTL`) and `LUA_REACQUIRE_SCRIPT`
///   (reset to the lease); `0` is `LockNotOwnedError` (`Ok(false)` here). redis-py runs
///   neither on its own: there is no watchdog.
///
/// A reply that times out or a dropped connection raises in redis-py
/// (`ConnectionError`, `TimeoutError`) out of `acquire`: here [`Acquire::Unknown`], as
/// the `SET` may have taken effect. `thread_local` changes only which thread sees a
/// shared `Lock` object's token; a [`Guard`] carries its own token, as a thread-local
/// one does (the default, `thread_local=True`).
///
/// Known failure: the lease is not checked by anything but the server. A holder paused
/// past `timeout` keeps working after the key expired and another client took it (no
/// fencing token, no validity the caller could check).
///
/// The variant [`RedisPy::v3`] (`redis-py-3`) is redis-py **3.5.3**'s identical
/// algorithm with `blocking_timeout` measured on `time.time()`, the wall clock: a
/// client wall-clock step makes the wait end early (forward) or run on far past its
/// budget (backward).
pub struct RedisPy {
    deps: Deps,
    clock: WaitClock,
}

impl RedisPy {
    /// The user-facing name.
    pub const NAME: &'static str = "redis-py";
    /// The name of the redis-py 3.5.3 variant (wait measured on the wall clock).
    pub const V3_NAME: &'static str = "redis-py-3";
    /// redis-py 5.3.1's `Lock` over `deps.conn`.
    pub fn new(deps: Deps) -> Self {
        Self {
            deps,
            clock: WaitClock::Monotonic,
        }
    }

    /// redis-py 3.5.3's `Lock`: the same, with `blocking_timeout` on the wall clock.
    pub fn v3(deps: Deps) -> Self {
        Self {
            deps,
            clock: WaitClock::Wall,
        }
    }

    /// `Lock.__init__`'s `sleep=0.1`, the pause between tries while blocking, at the
    /// world's scale.
    pub fn sleep(&self) -> Duration {
        self.deps.scale.of(&crate::scale::REDIS_PY_SLEEP)
    }

    fn name_of(&self) -> &'static str {
        match self.clock {
            WaitClock::Monotonic => Self::NAME,
            WaitClock::Wall => Self::V3_NAME,
        }
    }

    /// `mod_time.monotonic()` (5.x) or `mod_time.time()` (3.5.3).
    fn python_time(&self) -> Duration {
        match self.clock {
            // redis-py 5.3.1 `acquire`: `mod_time.monotonic()`.
            WaitClock::Monotonic => self.deps.clock.now(),
            // redis-py 3.5.3 `acquire`: `mod_time.time()`, the wall clock.
            WaitClock::Wall => self.deps.clock.wall(),
        }
    }

    /// `do_acquire`: `SET name token NX PX timeout`.
    async fn do_acquire(&self, key: &str, token: &str, lease_ms: u64) -> Result<Try, LockError> {
        // The guard's clock readings are the crate's (monotonic) for every design.
        let sent_at = self.deps.clock.now();
        let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms)
            .query_async(&mut self.deps.conn.clone())
            .await;
        match reply {
            Ok(Some(_)) => Ok(Try::Set(sent_at)),
            Ok(None) => Ok(Try::Held),
            Err(e) => classify("SET NX PX", e).map(Try::Unknown),
        }
    }

    /// `Lock.extend(additional_time, replace_ttl)`: `LUA_EXTEND_SCRIPT` with
    /// `additional_ms` and `"1"` (replace the TTL) or `"0"` (add to it). `Ok(false)`
    /// where redis-py raises `LockNotOwnedError`.
    pub async fn extend(
        &self,
        guard: &Guard,
        additional_ms: u64,
        replace_ttl: bool,
    ) -> Result<bool, LockError> {
        check_guard(self.name_of(), guard)?;
        let n: i64 = EXTEND
            .key(&guard.key)
            .arg(&guard.owner)
            .arg(additional_ms)
            .arg(if replace_ttl { "1" } else { "0" })
            .invoke_async(&mut self.deps.conn.clone())
            .await
            .map_err(|source| LockError::Redis {
                command: "EVALSHA",
                source,
            })?;
        Ok(n == 1)
    }

    /// `Lock.reacquire()`: `LUA_REACQUIRE_SCRIPT`, the TTL reset to `lease_ms` (redis-py's
    /// `timeout`). `Ok(false)` where redis-py raises `LockNotOwnedError`.
    pub async fn reacquire(&self, guard: &Guard, lease_ms: u64) -> Result<bool, LockError> {
        check_guard(self.name_of(), guard)?;
        let n: i64 = REACQUIRE
            .key(&guard.key)
            .arg(&guard.owner)
            .arg(lease_ms)
            .invoke_async(&mut self.deps.conn.clone())
            .await
            .map_err(|source| LockError::Redis {
                command: "EVALSHA",
                source,
            })?;
        Ok(n == 1)
    }
}

/// One `do_acquire`'s outcome.
enum Try {
    /// `SET` answered OK; sent at this (monotonic) time.
    Set(Duration),
    Held,
    Unknown(String),
}

#[async_trait]
impl LockDesign for RedisPy {
    fn name(&self) -> &str {
        self.name_of()
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        let sleep = self.sleep();
        let token = self.deps.entropy.owner_value();
        let (blocking, blocking_timeout) = match options.wait {
            Wait::TryOnce => (false, None),
            Wait::Retry { budget_ms, .. } => (true, Some(Duration::from_millis(budget_ms))),
        };
        // `stop_trying_at = mod_time.monotonic() + blocking_timeout` (5.x);
        // `mod_time.time() + blocking_timeout` (3.5.3).
        let stop_trying_at = blocking_timeout.map(|t| self.python_time() + t);
        loop {
            match self.do_acquire(key, &token, options.lease_ms).await? {
                Try::Set(sent_at) => {
                    return Ok(Acquire::Acquired(guard(
                        self.name_of(),
                        key,
                        token,
                        sent_at,
                        Some(options.lease_ms),
                    )));
                }
                Try::Unknown(why) => return Ok(Acquire::Unknown(why)),
                Try::Held => {}
            }
            if !blocking {
                return Ok(Acquire::NotAcquired);
            }
            // `next_try_at = mod_time.monotonic() + sleep` (3.5.3: `mod_time.time()`).
            let next_try_at = self.python_time() + sleep;
            if stop_trying_at.is_some_and(|stop| next_try_at > stop) {
                return Ok(Acquire::NotAcquired);
            }
            // `mod_time.sleep(sleep)`.
            self.deps.clock.sleep(sleep).await;
        }
    }

    /// A waiter's longest pause between tries: `sleep`.
    fn retry_horizon(&self) -> Duration {
        self.sleep()
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.name_of(), guard)?;
        let reply: redis::RedisResult<i64> = RELEASE
            .key(&guard.key)
            .arg(&guard.owner)
            .invoke_async(&mut self.deps.conn.clone())
            .await;
        match reply {
            Ok(1) => Ok(Release::Removed),
            // `LockNotOwnedError`: absent or another owner's, the script cannot say.
            Ok(_) => Ok(Release::NotRemoved),
            Err(e) => classify("EVALSHA", e).map(Release::Unknown),
        }
    }
}
