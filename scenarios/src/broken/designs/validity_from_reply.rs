//! The broken design `validity-from-reply` ([`ValidityFromReply`]).

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{compare_and_delete, guard, set_attempt};

/// `validity-from-reply`: `SET NX PX`, with the lease counted from the moment the
/// reply arrived. The server started counting when it ran the command; a reply that
/// took most of the lease to arrive leaves the client believing it has a whole lease
/// left while the next holder already has the lock.
pub struct ValidityFromReply(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for ValidityFromReply {
    fn name(&self) -> &str {
        "broken/validity-from-reply"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let owner = self.0.entropy.owner_value();
            Ok(
                match set_attempt(
                    self.name(),
                    &self.0,
                    key,
                    owner,
                    &["NX", "PX"],
                    o.lease_ms,
                    o.lease_ms,
                )
                .await?
                {
                    Attempt::Acquired(g) => {
                        let now = self.0.clock.now();
                        Attempt::Acquired(guard(self.name(), key, g.owner, now, o.lease_ms))
                    }
                    other => other,
                },
            )
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}
