use async_trait::async_trait;

use super::{blind_del, check_guard, set_nx_px};
use crate::lock::retry_acquire;
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `set-nx-px-del`: `SET key owner NX PX lease` to acquire (atomic), `DEL key` to release.
///
/// The four-ideas article's idea 3 and Dewu's ticket walk-through (docs/designs.md,
/// "Where the designs come from"). Known failure: if the holder's lease expires (a GC
/// pause, slow work, a delayed reply) and another client takes the lock, the first
/// client's blind `DEL` removes the *other* client's lock (an ownership violation),
/// letting a third in beside the second (mutual exclusion).
pub struct SetNxPxDel {
    deps: Deps,
}

impl SetNxPxDel {
    /// The user-facing name.
    pub const NAME: &'static str = "set-nx-px-del";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

#[async_trait]
impl LockDesign for SetNxPxDel {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let deps = &self.deps;
        retry_acquire(deps, key, options, || {
            set_nx_px(Self::NAME, deps, key, options.lease_ms)
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        blind_del(&self.deps, &guard.key).await
    }
}
