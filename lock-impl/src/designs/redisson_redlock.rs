use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::check_guard;
use super::redlock::released;
use super::reentrant_watchdog::{LOCK, UNLOCK, UNLOCK_MESSAGE};
use crate::lock::classify;
use crate::scale::REDISSON_REDLOCK_UNLOCK_POLL;
use crate::{Acquire, AcquireOptions, Conn, Deps, Guard, LockDesign, LockError, Release, Wait};

/// `redisson-redlock`: Redisson's `RedissonRedLock`, i.e. `RedissonMultiLock.tryLock
/// (waitTime, leaseTime)` as the three-Redis-locks article prints it (docs/designs.md,
/// "Where the designs come from"), over `Deps::servers`, followed line
/// for line:
///
/// - `newLeaseTime = 2 × waitTime`: each node is locked with a lease of twice the wait
///   budget (Redisson's lock script: a hash `{owner: count}` with `PEXPIRE`);
/// - `lockWaitTime = max(remainTime / N, 1)` (`RedissonRedLock.calcLockWaitTime`), and
///   each node's `tryLock(min(lockWaitTime, remainTime), newLeaseTime)` retries while
///   the node answers with the holder's TTL, for up to that long;
/// - `failedLocksLimit = N − (N/2 + 1)`: a failed node uses one; once
///   `N − acquired == failedLocksLimit()` the loop stops early; when the limit is
///   spent, every acquired node is unlocked and the loop starts over from the first
///   node with a fresh limit;
/// - a node whose reply timed out (`RedisResponseTimeoutException`) is unlocked at
///   once, since the lock may have been taken;
/// - `remainTime -= elapsed` after every node; at zero or below, unlock what was
///   acquired and fail;
/// - at the end, every acquired node's lock is re-expired to `leaseTime` (`PEXPIRE`).
///
/// `unlock` (`RedissonRedLock.unlockInner`) runs Redisson's unlock script on every
/// node and ignores the nodes that answer "not the owner".
///
/// Where it differs from the spec (redis.io's Redlock, the `redlock` design): **no
/// drift term and no validity check**. Success means a majority of nodes said yes,
/// however long that took; the elapsed time is only charged against the *wait*
/// budget, never against the lease. The lease is re-armed on each node at the end, so
/// a node locked early keeps the lock, but the client's belief starts before the
/// re-expire, so the guard's `valid_until` is the moment the re-expires were sent plus
/// the lease, what a caller of `tryLock(wait, lease)` assumes. But a `PEXPIRE` on a node
/// whose key already expired (its per-node lease is twice the wait, not the lease; a
/// slow node or a pause can outlast it) re-arms nothing, and the client is not told.
///
/// Simplified: a node's `tryLock` polls the held lock every 50 ms at real scale
/// ([`crate::scale::REDISSON_REDLOCK_UNLOCK_POLL`], scaled with the world: 1 ms at the
/// catalog's 200 ms lease, which stands for 30 s; or after the holder's TTL, if
/// shorter) instead of subscribing to the node's unlock channel, so it learns of an
/// unlock up to that much later than Redisson would. Its other times are the caller's
/// (the wait budget, and twice it as each node's lease); the command timeouts and
/// resends are Redisson's connection's, not ported here (see `reentrant-watchdog`).
pub struct RedissonRedlock {
    deps: Deps,
    /// Redisson's connection-manager id; the owner field is `{id}:1` (one thread).
    client_id: String,
    /// Hold counts per key (the lock is reentrant on every node).
    counts: Mutex<BTreeMap<String, u64>>,
}

/// One node's `tryLock` outcome.
enum NodeTry {
    Acquired,
    Failed,
    /// The reply timed out or the connection broke: the lock may have been taken.
    TimedOut,
}

impl RedissonRedlock {
    /// The user-facing name.
    pub const NAME: &'static str = "redisson-redlock";
    /// How often a node's `tryLock` looks again at a held lock, standing in for the
    /// unlock message Redisson would hear on the node's channel, at the world's scale.
    pub fn unlock_poll(&self) -> Duration {
        self.deps.scale.of(&REDISSON_REDLOCK_UNLOCK_POLL)
    }

    /// A design over `deps.servers`.
    pub fn new(deps: Deps) -> Self {
        let client_id = deps.entropy.owner_value();
        Self {
            deps,
            client_id,
            counts: Mutex::default(),
        }
    }

    /// The hash field this client locks with on every node.
    pub fn owner_field(&self) -> String {
        format!("{}:1", self.client_id)
    }

    /// `failedLocksLimit()`: N − (N/2 + 1).
    fn failed_locks_limit(&self) -> usize {
        let n = self.deps.servers.len();
        n - (n / 2 + 1)
    }

    /// `RLock.tryLock(awaitTime, leaseTime)` on one node.
    async fn try_node(
        &self,
        conn: &Conn,
        key: &str,
        owner: &str,
        await_ms: u64,
        lease_ms: u64,
    ) -> Result<NodeTry, LockError> {
        let clock = &self.deps.clock;
        let start = clock.now();
        loop {
            let reply: redis::RedisResult<Option<i64>> = LOCK
                .key(key)
                .arg(lease_ms)
                .arg(owner)
                .invoke_async(&mut conn.clone())
                .await;
            let ttl = match reply {
                Ok(None) => return Ok(NodeTry::Acquired),
                Ok(Some(ttl)) => ttl,
                Err(e) => {
                    return match classify("EVALSHA", e) {
                        Ok(_) => Ok(NodeTry::TimedOut),
                        // Any other exception: "lockAcquired = false".
                        Err(_) => Ok(NodeTry::Failed),
                    };
                }
            };
            let spent = clock.now().saturating_sub(start).as_millis() as u64;
            if spent >= await_ms {
                return Ok(NodeTry::Failed);
            }
            let left = await_ms - spent;
            // Redisson sleeps until the unlock message or the holder's TTL; without the
            // message, a poll every `unlock_poll` stands in for it.
            let ttl = if ttl >= 0 { ttl as u64 } else { left };
            let poll_ms = self.unlock_poll().as_millis() as u64;
            let pause = ttl.min(poll_ms).clamp(1, left);
            clock.sleep(Duration::from_millis(pause)).await;
        }
    }

    /// `unlockInner`: the unlock script on each node, answers ignored.
    async fn unlock_nodes(&self, nodes: &[usize], key: &str, owner: &str, lease_ms: u64) {
        futures_util::future::join_all(
            nodes
                .iter()
                .map(|&i| self.unlock_node(&self.deps.servers[i], key, owner, lease_ms)),
        )
        .await;
    }

    async fn unlock_node(&self, conn: &Conn, key: &str, owner: &str, lease_ms: u64) -> Option<i64> {
        let reply: redis::RedisResult<Option<i64>> = UNLOCK
            .key(key)
            .key(super::ReentrantWatchdog::channel(key))
            .arg(UNLOCK_MESSAGE)
            .arg(lease_ms.max(1))
            .arg(owner)
            .invoke_async(&mut conn.clone())
            .await;
        match reply {
            // nil: not the owner, as 0 for the outcome below.
            Ok(v) => Some(v.unwrap_or(-1)),
            Err(_) => None,
        }
    }

    /// `RedissonMultiLock.tryLock(waitTime, leaseTime)`: the client-clock time the
    /// re-expires were sent if acquired, `None` if not.
    async fn try_lock(
        &self,
        key: &str,
        wait_ms: u64,
        lease_ms: u64,
    ) -> Result<Option<Duration>, LockError> {
        let clock = &self.deps.clock;
        let owner = self.owner_field();
        let n = self.deps.servers.len();
        // A zero wait is Redisson's "try once" (`waitTime == -1`): no time accounting,
        // one try per node, and the per-node lease is the lease (`newLeaseTime =
        // waitTime * 2` would be negative; later Redisson versions use the lease).
        let once = wait_ms == 0;
        let new_lease_ms = if once { lease_ms } else { wait_ms * 2 };
        let mut time = clock.now();
        let mut remain_ms = wait_ms as i64;
        // RedissonRedLock.calcLockWaitTime: Math.max(remainTime / locks.size(), 1).
        let lock_wait_ms = (remain_ms / n as i64).max(1);
        let mut failed_locks_limit = self.failed_locks_limit();
        let mut acquired: Vec<usize> = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let await_ms = if once {
                0
            } else {
                lock_wait_ms.min(remain_ms).max(0) as u64
            };
            let outcome = self
                .try_node(&self.deps.servers[i], key, &owner, await_ms, new_lease_ms)
                .await?;
            let lock_acquired = match outcome {
                NodeTry::Acquired => true,
                NodeTry::Failed => false,
                NodeTry::TimedOut => {
                    self.unlock_nodes(&[i], key, &owner, new_lease_ms).await;
                    false
                }
            };
            if lock_acquired {
                acquired.push(i);
            } else {
                if n - acquired.len() == self.failed_locks_limit() {
                    break;
                }
                if failed_locks_limit == 0 {
                    self.unlock_nodes(&acquired, key, &owner, new_lease_ms)
                        .await;
                    if once {
                        return Ok(None);
                    }
                    failed_locks_limit = self.failed_locks_limit();
                    acquired.clear();
                    // Reset the iterator to the first node.
                    i = 0;
                    remain_ms -= clock.now().saturating_sub(time).as_millis() as i64;
                    time = clock.now();
                    if remain_ms <= 0 {
                        return Ok(None);
                    }
                    continue;
                } else {
                    failed_locks_limit -= 1;
                }
            }
            if !once {
                remain_ms -= clock.now().saturating_sub(time).as_millis() as i64;
                time = clock.now();
                if remain_ms <= 0 {
                    self.unlock_nodes(&acquired, key, &owner, new_lease_ms)
                        .await;
                    return Ok(None);
                }
            }
            i += 1;
        }
        // Re-expire every acquired lock to the lease.
        let re_expired_at = clock.now();
        futures_util::future::join_all(acquired.iter().map(|&i| {
            let mut conn = self.deps.servers[i].clone();
            async move {
                let _: redis::RedisResult<i64> = redis::cmd("PEXPIRE")
                    .arg(key)
                    .arg(lease_ms)
                    .query_async(&mut conn)
                    .await;
            }
        }))
        .await;
        Ok(Some(re_expired_at))
    }
}

#[async_trait]
impl LockDesign for RedissonRedlock {
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
        let wait_ms = match options.wait {
            Wait::TryOnce => 0,
            Wait::Retry { budget_ms, .. } => budget_ms,
        };
        let start = self.deps.clock.now();
        let Some(re_expired_at) = self.try_lock(key, wait_ms, options.lease_ms).await? else {
            return Ok(Acquire::NotAcquired);
        };
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_string())
            .or_default() += 1;
        Ok(Acquire::Acquired(Guard {
            design: Self::NAME.to_string(),
            key: key.to_string(),
            owner: self.owner_field(),
            acquired_at: start,
            valid_until: Some(re_expired_at + Duration::from_millis(options.lease_ms)),
            token: None,
        }))
    }

    /// A waiter's longest pause between looks at a held node lock.
    fn retry_horizon(&self) -> Duration {
        self.unlock_poll()
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        // The unlock script re-arms a re-entered lock with this lease.
        let lease_ms = guard.valid_until.map_or(1, |u| {
            u.saturating_sub(guard.acquired_at).as_millis() as u64
        });
        let outcomes: Vec<Option<i64>> = futures_util::future::join_all(
            self.deps
                .servers
                .iter()
                .map(|c| self.unlock_node(c, &guard.key, &guard.owner, lease_ms)),
        )
        .await;
        let left = {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            let c = counts.entry(guard.key.clone()).or_default();
            *c = c.saturating_sub(1);
            let left = *c;
            if left == 0 {
                counts.remove(&guard.key);
            }
            left
        };
        if left > 0 && outcomes.contains(&Some(0)) {
            return Ok(Release::StillHeld { count: left });
        }
        let deleted: Vec<Option<bool>> = outcomes.iter().map(|o| o.map(|v| v == 1)).collect();
        Ok(released(&deleted))
    }
}
