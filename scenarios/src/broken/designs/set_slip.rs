//! `ex-for-px`, `px-given-seconds`, `xx-for-nx` and `ex-truncated`: one slip in
//! `set-nx-px-lua`'s `SET` each.

use std::sync::Arc;

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, set_acquire};

/// A lock that differs from `set-nx-px-lua` in one slip of its `SET`: the options it
/// passes and the number it gives as the time to live, computed from the lease in
/// milliseconds. Four of the catalog's bugs are such a slip:
///
/// - `ex-for-px`: `NX EX lease_ms`. The number is right, the unit is not: the server
///   keeps the lock a thousand times longer than the client believes, so a holder
///   that dies leaves it stuck for minutes.
/// - `px-given-seconds`: `NX PX ceil(lease_ms / 1000)`. The lease is kept in seconds
///   in the configuration and handed to `PX`: the server expires the lock after a
///   millisecond or so while the client believes the whole lease.
/// - `xx-for-nx`: `XX PX lease_ms`, a one-letter slip. `XX` sets only an existing key,
///   so a free lock is never taken and every acquire is refused.
/// - `ex-truncated`: `NX EX lease_ms / 1000`, the unit converted by integer division.
///   A lease under a second becomes `EX 0`, which Redis refuses (`ERR invalid expire
///   time in 'set' command`): every acquire ends in an error reply, and a free, wanted
///   lock is never granted.
///
/// Release is `set-nx-px-lua`'s compare-and-delete.
pub struct SetSlip {
    pub(in crate::broken) name: &'static str,
    pub(in crate::broken) deps: Deps,
    pub(in crate::broken) options: &'static [&'static str],
    pub(in crate::broken) ttl: fn(u64) -> u64,
}

impl SetSlip {
    /// The design `name`, slipping with `options` and `ttl`, as the catalog builds it.
    pub fn boxed(
        name: &'static str,
        deps: Deps,
        options: &'static [&'static str],
        ttl: fn(u64) -> u64,
    ) -> Arc<dyn LockDesign> {
        Arc::new(SetSlip {
            name,
            deps,
            options,
            ttl,
        })
    }
}

#[async_trait]
impl LockDesign for SetSlip {
    fn name(&self) -> &str {
        self.name
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let ttl = (self.ttl)(o.lease_ms);
        set_acquire(self.name, &self.deps, key, o, None, self.options, ttl).await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}
