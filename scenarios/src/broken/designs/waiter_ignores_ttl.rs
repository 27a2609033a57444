//! The broken design `waiter-ignores-ttl` ([`WaiterIgnoresTtl`]).

use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, Wait,
};

use super::helpers::{compare_and_delete, set_attempt};

/// `waiter-ignores-ttl`: `SET NX PX`; a waiter subscribes to `unlock:{key}` and sleeps
/// until a message (or its whole budget) before trying again; release publishes. The
/// TTL is never consulted, so when the unlock message is lost the waiter sleeps
/// through a free lock.
pub struct WaiterIgnoresTtl(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for WaiterIgnoresTtl {
    fn name(&self) -> &str {
        "broken/waiter-ignores-ttl"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        o.validate()?;
        let deps = &self.0;
        let start = deps.clock.now();
        let budget = match o.wait {
            Wait::TryOnce => Duration::ZERO,
            Wait::Retry { budget_ms, .. } => Duration::from_millis(budget_ms),
        };
        let left = || budget.saturating_sub(deps.clock.now().saturating_sub(start));
        let channel = format!("unlock:{key}");
        loop {
            let owner = deps.entropy.owner_value();
            match set_attempt(
                self.name(),
                deps,
                key,
                owner,
                &["NX", "PX"],
                o.lease_ms,
                o.lease_ms,
            )
            .await?
            {
                Attempt::Acquired(g) => return Ok(Acquire::Acquired(g)),
                Attempt::Unknown(why) => return Ok(Acquire::Unknown(why)),
                Attempt::Held => {}
            }
            if left().is_zero() {
                return Ok(Acquire::NotAcquired);
            }
            let sub = async {
                let mut sub = deps.pubsub.as_ref()?.connect().await.ok()?;
                sub.subscribe(&channel).await.ok()?;
                Some(sub)
            };
            tokio::select! {
                biased;
                () = deps.clock.sleep(left()) => return Ok(Acquire::NotAcquired),
                sub = sub => match sub {
                    Some(mut sub) => {
                        let mut messages = sub.on_message();
                        tokio::select! {
                            biased;
                            _ = messages.next() => {}
                            () = deps.clock.sleep(left()) => {}
                        }
                    }
                    None => deps.clock.sleep(left()).await,
                },
            }
        }
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        let released = compare_and_delete(&self.0, &g.key, &g.owner).await?;
        if released == Release::Removed {
            let _: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                .arg(format!("unlock:{}", g.key))
                .arg("released")
                .query_async(&mut self.0.conn.clone())
                .await;
        }
        Ok(released)
    }
}
