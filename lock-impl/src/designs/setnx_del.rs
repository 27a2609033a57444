use async_trait::async_trait;

use super::{blind_del, check_guard, guard, setnx};
use crate::lock::{Attempt, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `setnx-del`: `SETNX key owner` to acquire, `DEL key` to release. No expiry at all.
///
/// The first step of Dewu's ticket walk-through and the four-ideas article's idea 1
/// (docs/designs.md, "Where the designs come from"). Known failure: a client that dies
/// while holding the lock leaves it held forever (a liveness violation; the lease is
/// ignored because the design has none).
pub struct SetnxDel {
    deps: Deps,
}

impl SetnxDel {
    /// The user-facing name.
    pub const NAME: &'static str = "setnx-del";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

#[async_trait]
impl LockDesign for SetnxDel {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let deps = &self.deps;
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sent_at = deps.clock.now();
            Ok(match setnx(deps, key, &owner).await? {
                Ok(true) => Attempt::Acquired(guard(Self::NAME, key, owner, sent_at, None)),
                Ok(false) => Attempt::Held,
                Err(why) => Attempt::Unknown(why),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        blind_del(&self.deps, &guard.key).await
    }
}
