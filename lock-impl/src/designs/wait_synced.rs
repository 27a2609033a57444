use async_trait::async_trait;

use super::{check_guard, compare_and_delete, set_nx_px};
use crate::lock::{Attempt, classify, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `wait-synced`: `SET key owner NX PX lease`, then `WAIT n timeout` for the master's
/// replicas to acknowledge it; if fewer than `n` did, the lock is released at once
/// (Lua compare-and-delete) and the acquisition fails. `n` is the number of replicas
/// the master lists in `ROLE` when the client asks (asked in the same round trip as
/// the `SET`), as Redisson's `checkLockSyncedSlaves` waits for the replicas its
/// topology knows; the timeout is a quarter of the lease (at least 1 ms).
///
/// What it promises: when it grants, every replica connected at that moment had the
/// lock write, so a failover to any of them keeps the lock. What it does not: `WAIT`
/// is not consensus. A replica that was not connected when the client asked (lagging,
/// partitioned, restarting) is not waited for and can still be promoted without the
/// write; the write stays on the master even when the acquisition is refused (the
/// release can be lost with the master); and with no replica at all it waits for
/// nothing. A pause past the lease breaks it exactly as it breaks `set-nx-px-lua`.
pub struct WaitSynced {
    deps: Deps,
}

impl WaitSynced {
    /// The user-facing name.
    pub const NAME: &'static str = "wait-synced";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// How many replicas the master lists in `ROLE` (0 on a replica or a server that
    /// answers oddly: nothing to wait for that the master knows of).
    async fn replicas(&self) -> Result<Result<u64, String>, LockError> {
        let reply: redis::RedisResult<redis::Value> = redis::cmd("ROLE")
            .query_async(&mut self.deps.conn.clone())
            .await;
        match reply {
            Ok(redis::Value::Array(items)) => Ok(Ok(match items.get(2) {
                Some(redis::Value::Array(replicas)) => replicas.len() as u64,
                _ => 0,
            })),
            Ok(_) => Ok(Ok(0)),
            Err(e) => classify("ROLE", e).map(Err),
        }
    }

    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let replicas = match self.replicas().await? {
            Ok(n) => n,
            Err(why) => return Ok(Attempt::Unknown(why)),
        };
        let guard = match set_nx_px(Self::NAME, &self.deps, key, lease_ms).await? {
            Attempt::Acquired(g) => g,
            other => return Ok(other),
        };
        if replicas == 0 {
            return Ok(Attempt::Acquired(guard));
        }
        let timeout = (lease_ms / 4).max(1);
        let acked: redis::RedisResult<u64> = redis::cmd("WAIT")
            .arg(replicas)
            .arg(timeout)
            .query_async(&mut self.deps.conn.clone())
            .await;
        let acked = match acked {
            Ok(n) => n,
            // The lock may be held on the master without its replicas knowing.
            Err(e) => return classify("WAIT", e).map(Attempt::Unknown),
        };
        if acked >= replicas {
            return Ok(Attempt::Acquired(guard));
        }
        // Not synced: give the lock back; the acquisition failed (or, if the release's
        // outcome is unknown, its outcome is unknown too).
        match compare_and_delete(&self.deps, &guard).await? {
            Release::Unknown(why) => Ok(Attempt::Unknown(format!(
                "WAIT {replicas}: {acked} acknowledged; the release after it: {why}"
            ))),
            _ => Ok(Attempt::Held),
        }
    }
}

#[async_trait]
impl LockDesign for WaitSynced {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.deps, key, options, || {
            self.attempt(key, options.lease_ms)
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        compare_and_delete(&self.deps, guard).await
    }
}
