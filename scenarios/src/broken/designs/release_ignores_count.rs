//! The broken design `release-ignores-count` ([`ReleaseIgnoresCount`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, guard, set_acquire};

/// `release-ignores-count`: reentrancy counted on the client (a nested acquire of a
/// key this client holds just bumps the count), but every release runs the
/// compare-and-delete, so the first nested release frees the lock under the outer
/// holds.
pub struct ReleaseIgnoresCount {
    deps: Deps,
    /// key → (owner, hold count).
    held: Mutex<BTreeMap<String, (String, u64)>>,
}

impl ReleaseIgnoresCount {
    pub(in crate::broken) fn new(deps: Deps) -> Self {
        Self {
            deps,
            held: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl LockDesign for ReleaseIgnoresCount {
    fn name(&self) -> &str {
        "broken/release-ignores-count"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let nested = {
            let mut held = self.held.lock().expect("hold map");
            held.get_mut(key).map(|(owner, count)| {
                *count += 1;
                owner.clone()
            })
        };
        if let Some(owner) = nested {
            return Ok(Acquire::Acquired(guard(
                self.name(),
                key,
                owner,
                self.deps.clock.now(),
                o.lease_ms,
            )));
        }
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
        if let Acquire::Acquired(g) = &got {
            self.held
                .lock()
                .expect("hold map")
                .insert(key.to_string(), (g.owner.clone(), 1));
        }
        Ok(got)
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        {
            let mut held = self.held.lock().expect("hold map");
            if let Some((_, count)) = held.get_mut(&g.key) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&g.key);
                }
            }
        }
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}
