use std::sync::LazyLock;

use async_trait::async_trait;

use super::{check_guard, compare_and_delete, guard};
use crate::lock::{Attempt, classify, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `SET KEYS[1] owner NX PX lease` and, if it set the key, `INCR KEYS[2]`: the new
/// fencing token, or `nil` if the lock is held.
pub const FENCED_ACQUIRE: &str = include_str!("../../scripts/fenced_acquire.lua");

static ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(FENCED_ACQUIRE));

/// `fenced`: one Lua script takes the lock with `SET key owner NX PX lease` and, only if
/// it did, increments the counter `{key}:fencing-token` and returns it as the guard's
/// token; release is the compare-and-delete of `set-nx-px-lua`.
///
/// Kleppmann's answer ("How to do distributed locking", 2016) to the lease problem of a
/// `SET NX PX` lock (Redisson's `RFencedLock` is the reference). What the token protects: a storage that remembers the highest token
/// it accepted and rejects writes carrying a lower one turns a second holder (a client
/// paused past its lease, whose lock was then taken by another) into a rejected write
/// instead of a lost update.
///
/// Known failure, what it does not protect: a storage that does not check tokens sees
/// the same two holders as with `set-nx-px-lua`. The token says nothing about the lease
/// having expired: a holder past its lease still holds a token and still believes it
/// holds the lock, so only the storage can stop it. The counter lives on the same Redis
/// as the lock: once replicas exist it is replicated asynchronously, and a failover to a
/// replica that missed the last `INCR` hands out a token again (two holders with equal
/// tokens).
pub struct Fenced {
    deps: Deps,
}

impl Fenced {
    /// The user-facing name.
    pub const NAME: &'static str = "fenced";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// The counter key that holds `key`'s last token.
    pub fn token_key(key: &str) -> String {
        format!("{key}:fencing-token")
    }

    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.deps;
        let owner = deps.entropy.owner_value();
        let sent_at = deps.clock.now();
        let reply: redis::RedisResult<Option<u64>> = ACQUIRE
            .key(key)
            .key(Self::token_key(key))
            .arg(&owner)
            .arg(lease_ms)
            .invoke_async(&mut deps.conn.clone())
            .await;
        match reply {
            Ok(Some(token)) => Ok(Attempt::Acquired(Guard {
                token: Some(token),
                ..guard(Self::NAME, key, owner, sent_at, Some(lease_ms))
            })),
            Ok(None) => Ok(Attempt::Held),
            Err(e) => classify("EVALSHA", e).map(Attempt::Unknown),
        }
    }
}

#[async_trait]
impl LockDesign for Fenced {
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
