//! The broken design `check-then-set` ([`CheckThenSet`]).

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{compare_and_delete, set_attempt, unknown_or};

/// `check-then-set`: `GET key`, and if it was absent `SET key owner PX lease` without
/// `NX`. Between the check and the set another client can do the same: both believe
/// they hold the lock, and the second `SET` overwrote the first.
pub struct CheckThenSet(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for CheckThenSet {
    fn name(&self) -> &str {
        "broken/check-then-set"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let current: Option<String> = match redis::cmd("GET")
                .arg(key)
                .query_async(&mut self.0.conn.clone())
                .await
            {
                Ok(v) => v,
                Err(e) => return unknown_or(e, "GET", Attempt::Unknown),
            };
            if current.is_some() {
                return Ok(Attempt::Held);
            }
            let owner = self.0.entropy.owner_value();
            set_attempt(
                self.name(),
                &self.0,
                key,
                owner,
                &["PX"],
                o.lease_ms,
                o.lease_ms,
            )
            .await
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

// ---- read-write locks ----
