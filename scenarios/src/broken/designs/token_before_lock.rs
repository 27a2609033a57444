//! The broken design `token-before-lock` ([`TokenBeforeLock`]).

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, set_acquire, unknown_or};

/// `token-before-lock`: `INCR key:fence` once, then wait for the lock with `SET NX PX`.
/// The token is global but taken at the wrong moment: a waiter that took its token,
/// waited, and won after a later arrival carries a lower token than the holder before
/// it, and a fencing storage turns the new holder away.
pub struct TokenBeforeLock(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for TokenBeforeLock {
    fn name(&self) -> &str {
        "broken/token-before-lock"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let token: u64 = match redis::cmd("INCR")
            .arg(format!("{key}:fence"))
            .query_async(&mut self.0.conn.clone())
            .await
        {
            Ok(t) => t,
            Err(e) => return unknown_or(e, "INCR", Acquire::Unknown),
        };
        let got = set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await?;
        Ok(match got {
            Acquire::Acquired(mut g) => {
                g.token = Some(token);
                Acquire::Acquired(g)
            }
            other => other,
        })
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}
