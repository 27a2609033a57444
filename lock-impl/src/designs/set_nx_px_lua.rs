use async_trait::async_trait;

use super::{check_guard, compare_and_delete, set_nx_px};
use crate::lock::retry_acquire;
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `set-nx-px-lua`: `SET key owner NX PX lease` to acquire; release with a Lua
/// compare-and-delete (`EVALSHA`, `SCRIPT LOAD` on `NOSCRIPT`), atomic on the server.
///
/// The Redis docs' "Distributed Locks with Redis" single-instance lock: the four-ideas
/// article's idea 4, Wu Dashan's Jedis version and "redis之分布式锁详解" (docs/designs.md,
/// "Where the designs come from"). It never deletes
/// another owner's lock. Known failure, Kleppmann's point: a correct release does not
/// make a lease safe. If the holder is paused past its lease, another client acquires
/// and both believe they hold the lock (mutual exclusion, lost updates) though neither
/// release misbehaves.
pub struct SetNxPxLua {
    deps: Deps,
}

impl SetNxPxLua {
    /// The user-facing name.
    pub const NAME: &'static str = "set-nx-px-lua";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

#[async_trait]
impl LockDesign for SetNxPxLua {
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
        compare_and_delete(&self.deps, guard).await
    }
}
