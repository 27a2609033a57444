//! The broken design `release-falls-back-to-del` ([`ReleaseFallsBackToDel`]).

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, del, set_acquire};

/// `release-falls-back-to-del`: a compare-and-delete, and when it removed nothing a
/// plain `DEL` "to make sure the lock is gone". When the lease ran out and someone
/// else took the lock, that `DEL` removes their lock.
pub struct ReleaseFallsBackToDel(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for ReleaseFallsBackToDel {
    fn name(&self) -> &str {
        "broken/release-falls-back-to-del"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        let first = compare_and_delete(&self.0, &g.key, &g.owner).await?;
        if first != Release::NotRemoved {
            return Ok(first);
        }
        del(&self.0, &g.key).await
    }
}
