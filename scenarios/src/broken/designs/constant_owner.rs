//! The broken design `constant-owner` ([`ConstantOwner`]).

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, set_acquire};

/// `constant-owner`: `SET key "locked" NX PX` and a compare-and-delete of `"locked"`.
/// The compare is only as good as the value: with one value for everyone, a holder
/// past its lease deletes the next holder's lock, as a blind `DEL` would.
pub struct ConstantOwner(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for ConstantOwner {
    fn name(&self) -> &str {
        "broken/constant-owner"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            Some("locked"),
            &["NX", "PX"],
            o.lease_ms,
        )
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}
