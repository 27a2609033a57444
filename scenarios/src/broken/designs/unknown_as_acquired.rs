//! The broken design `unknown-as-acquired` ([`UnknownAsAcquired`]).

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{compare_and_delete, failed, guard, outcome_unknown, set};

/// `unknown-as-acquired`: `SET NX PX`, and a reply that timed out counts as "OK". The
/// request did reach the server, but the lock may have been held by someone else: the
/// client then believes a lock the server refused it.
pub struct UnknownAsAcquired(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for UnknownAsAcquired {
    fn name(&self) -> &str {
        "broken/unknown-as-acquired"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let owner = self.0.entropy.owner_value();
            let sent = self.0.clock.now();
            match set(&self.0, key, &owner, &["NX", "PX"], o.lease_ms).await {
                Ok(true) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    owner,
                    sent,
                    o.lease_ms,
                ))),
                Ok(false) => Ok(Attempt::Held),
                Err(e) if outcome_unknown(&e) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    owner,
                    sent,
                    o.lease_ms,
                ))),
                Err(e) => Err(failed("SET")(e)),
            }
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}
