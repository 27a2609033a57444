//! `shared-reentrant-id`: a Redisson-style reentrant hash lock whose owner id every
//! instance shares.

use std::sync::LazyLock;

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{guard, unknown_or};

/// Redisson's lock script with the owner id as an argument.
static REENTRANT_LOCK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
           redis.call('hincrby', KEYS[1], ARGV[2], 1)
           redis.call('pexpire', KEYS[1], ARGV[1])
           return nil
         end
         return redis.call('pttl', KEYS[1])",
    )
});

/// Counts one hold down; deletes the key at zero. -1: not ours.
static REENTRANT_UNLOCK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end
         local left = redis.call('hincrby', KEYS[1], ARGV[1], -1)
         if left > 0 then return left end
         redis.call('del', KEYS[1])
         return 0",
    )
});

/// `shared-reentrant-id`: a Redisson-style reentrant hash lock whose owner id is
/// configured as the service's name (`worker:1`), the same in every instance. A lock
/// held by one instance looks like a re-entry to every other, so they all go in.
pub struct SharedReentrantId(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for SharedReentrantId {
    fn name(&self) -> &str {
        "broken/shared-reentrant-id"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let sent = self.0.clock.now();
            match REENTRANT_LOCK
                .key(key)
                .arg(o.lease_ms)
                .arg("worker:1")
                .invoke_async::<Option<i64>>(&mut self.0.conn.clone())
                .await
            {
                Ok(None) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    "worker:1".into(),
                    sent,
                    o.lease_ms,
                ))),
                Ok(Some(_)) => Ok(Attempt::Held),
                Err(e) => unknown_or(e, "EVALSHA", Attempt::Unknown),
            }
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        match REENTRANT_UNLOCK
            .key(&g.key)
            .arg(&g.owner)
            .invoke_async::<i64>(&mut self.0.conn.clone())
            .await
        {
            Ok(0) => Ok(Release::Removed),
            Ok(-1) => Ok(Release::NotRemoved),
            Ok(n) => Ok(Release::StillHeld { count: n as u64 }),
            Err(e) => unknown_or(e, "EVALSHA", Release::Unknown),
        }
    }
}
