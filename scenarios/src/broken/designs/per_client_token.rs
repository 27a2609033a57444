//! The broken design `per-client-token` ([`PerClientToken`]).

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, set_acquire};

/// `per-client-token`: `SET NX PX` and a fencing token from a counter each client
/// keeps: monotonic per client, meaningless across clients, so two holders present
/// the same token and a storage cannot tell the stale one.
pub struct PerClientToken {
    deps: Deps,
    next: AtomicU64,
}

impl PerClientToken {
    pub(in crate::broken) fn new(deps: Deps) -> Self {
        Self {
            deps,
            next: AtomicU64::new(1),
        }
    }
}

#[async_trait]
impl LockDesign for PerClientToken {
    fn name(&self) -> &str {
        "broken/per-client-token"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let got = set_acquire(
            self.name(),
            &self.deps,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await?;
        Ok(match got {
            Acquire::Acquired(mut g) => {
                g.token = Some(self.next.fetch_add(1, Ordering::SeqCst));
                Acquire::Acquired(g)
            }
            other => other,
        })
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}
