//! The broken design `getset-timestamp` ([`GetsetTimestamp`]).

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{del, guard, unknown_or};

/// `getset-timestamp`: the recipe Redis's own `SETNX` page used to print. The value is
/// the lock's expiry time (here `expiry|owner`); `SETNX` takes a free lock; a waiter
/// that reads an expired time takes over with `GETSET` and wins if the old value it
/// got back was still expired. Two waiters that both read the expired time both
/// `GETSET`: one wins, and the loser has already overwritten the winner's value. The
/// key has no TTL, and expiry is judged by the clients' clocks.
pub struct GetsetTimestamp(pub(in crate::broken) Deps);

impl GetsetTimestamp {
    fn expiry(value: &str) -> Option<u64> {
        value.split('|').next()?.parse().ok()
    }

    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.0;
        let sent = deps.clock.now();
        let now_ms = sent.as_millis() as u64;
        let value = format!("{}|{}", now_ms + lease_ms, deps.entropy.owner_value());
        let mut conn = deps.conn.clone();
        match redis::cmd("SETNX")
            .arg(key)
            .arg(&value)
            .query_async::<i64>(&mut conn)
            .await
        {
            Ok(1) => {
                return Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    value,
                    sent,
                    lease_ms,
                )));
            }
            Ok(_) => {}
            Err(e) => return unknown_or(e, "SETNX", Attempt::Unknown),
        }
        let current: Option<String> = match redis::cmd("GET").arg(key).query_async(&mut conn).await
        {
            Ok(v) => v,
            Err(e) => return unknown_or(e, "GET", Attempt::Unknown),
        };
        if current
            .as_deref()
            .and_then(Self::expiry)
            .is_none_or(|exp| exp > now_ms)
        {
            return Ok(Attempt::Held);
        }
        let old: Option<String> = match redis::cmd("GETSET")
            .arg(key)
            .arg(&value)
            .query_async(&mut conn)
            .await
        {
            Ok(v) => v,
            Err(e) => return unknown_or(e, "GETSET", Attempt::Unknown),
        };
        if old
            .as_deref()
            .and_then(Self::expiry)
            .is_none_or(|exp| exp <= now_ms)
        {
            Ok(Attempt::Acquired(guard(
                self.name(),
                key,
                value,
                sent,
                lease_ms,
            )))
        } else {
            Ok(Attempt::Held)
        }
    }
}

#[async_trait]
impl LockDesign for GetsetTimestamp {
    fn name(&self) -> &str {
        "broken/getset-timestamp"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || self.attempt(key, o.lease_ms)).await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        // The recipe: delete only a lock that is still ours and not yet expired.
        let mut conn = self.0.conn.clone();
        let current: Option<String> =
            match redis::cmd("GET").arg(&g.key).query_async(&mut conn).await {
                Ok(v) => v,
                Err(e) => return unknown_or(e, "GET", Release::Unknown),
            };
        if current.as_deref() != Some(g.owner.as_str()) {
            return Ok(Release::HeldByOther);
        }
        del(&self.0, &g.key).await
    }
}
