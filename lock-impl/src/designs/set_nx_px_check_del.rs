use async_trait::async_trait;

use super::{check_guard, set_nx_px};
use crate::lock::{classify, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `set-nx-px-check-del`: `SET key owner NX PX lease` to acquire; to release, `GET key`,
/// compare with our owner value in the client, then `DEL key`: two commands.
///
/// The commented-out code of "redis之分布式锁详解" (2023), the "unique value check" of
/// Dewu's ticket walk-through, and Wu Dashan's second wrong release (docs/designs.md,
/// "Where the designs come from"). Known
/// failure: the check and the delete are not atomic. If the lease expires after the
/// `GET` said "ours" and another client acquires before the `DEL` arrives, the `DEL`
/// removes the other client's lock (ownership).
pub struct SetNxPxCheckDel {
    deps: Deps,
}

impl SetNxPxCheckDel {
    /// The user-facing name.
    pub const NAME: &'static str = "set-nx-px-check-del";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

#[async_trait]
impl LockDesign for SetNxPxCheckDel {
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
        let mut conn = self.deps.conn.clone();
        let current: Option<String> = match redis::cmd("GET")
            .arg(&guard.key)
            .query_async(&mut conn)
            .await
        {
            Ok(v) => v,
            Err(e) => return classify("GET", e).map(Release::Unknown),
        };
        match current {
            None => return Ok(Release::NotFound),
            Some(v) if v != guard.owner => return Ok(Release::HeldByOther),
            Some(_) => {}
        }
        // The window: between the GET above and this DEL the lease may run out and
        // another client may take the lock. The DEL cannot tell.
        let reply: redis::RedisResult<i64> = redis::cmd("DEL")
            .arg(&guard.key)
            .query_async(&mut conn)
            .await;
        match reply {
            Ok(1) => Ok(Release::Removed),
            Ok(_) => Ok(Release::NotFound),
            Err(e) => classify("DEL", e).map(Release::Unknown),
        }
    }
}
