//! The broken design `wall-clock-validity` ([`WallClockValidity`]).

use std::time::Duration;

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{compare_and_delete, set_attempt};

/// `wall-clock-validity`: the validity is measured on the wall clock, from a reading
/// taken once before the wait, as node-redlock 5.0.0-beta.2 does (`start = Date.now()`
/// before its retries, `expiration = start + duration - drift`) and as every client
/// that computes its lease on `time.time()`, `Date.now()` or `currentTimeMillis()`
/// does. The guard's validity is where the monotonic clock stands when the wall clock
/// reads `start + lease`: a backward step of the client's wall clock while it waits
/// stretches the validity it believes past the key's expiry on the server.
pub struct WallClockValidity(pub(in crate::broken) Deps);

#[async_trait]
impl LockDesign for WallClockValidity {
    fn name(&self) -> &str {
        "broken/wall-clock-validity"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        // The bug: the wall clock, read once before the wait.
        let start_wall = self.0.clock.wall();
        let acquired = retry_acquire(&self.0, key, o, || async {
            let owner = self.0.entropy.owner_value();
            set_attempt(
                self.name(),
                &self.0,
                key,
                owner,
                &["NX", "PX"],
                o.lease_ms,
                o.lease_ms,
            )
            .await
        })
        .await?;
        Ok(match acquired {
            Acquire::Acquired(g) => {
                let expiration = start_wall + Duration::from_millis(o.lease_ms);
                let now = self.0.clock.now();
                let wall = self.0.clock.wall();
                let valid_until = if expiration >= wall {
                    now + (expiration - wall)
                } else {
                    now.saturating_sub(wall - expiration)
                };
                Acquire::Acquired(Guard {
                    valid_until: Some(valid_until),
                    ..g
                })
            }
            other => other,
        })
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}
