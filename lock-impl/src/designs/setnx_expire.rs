use async_trait::async_trait;

use super::{blind_del, check_guard, guard, setnx};
use crate::lock::{Attempt, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `setnx-expire`: `SETNX key owner`, then `PEXPIRE key lease` as a second command;
/// `DEL key` to release.
///
/// The four-ideas article's idea 2, Dewu's ticket walk-through and the lock-service
/// comparison's `SETNX` + `EXPIRE` row (docs/designs.md, "Where the designs come from").
/// Known failure: the two commands are not atomic, so a
/// client that dies between them leaves a lock without expiry, held forever (liveness).
/// Also inherits the blind `DEL` of [`super::SetnxDel`].
pub struct SetnxExpire {
    deps: Deps,
}

impl SetnxExpire {
    /// The user-facing name.
    pub const NAME: &'static str = "setnx-expire";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

#[async_trait]
impl LockDesign for SetnxExpire {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let deps = &self.deps;
        let lease_ms = options.lease_ms;
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sent_at = deps.clock.now();
            match setnx(deps, key, &owner).await? {
                Ok(true) => {}
                Ok(false) => return Ok(Attempt::Held),
                Err(why) => return Ok(Attempt::Unknown(why)),
            }
            let reply: redis::RedisResult<i64> = redis::cmd("PEXPIRE")
                .arg(key)
                .arg(lease_ms)
                .query_async(&mut deps.conn.clone())
                .await;
            Ok(match reply {
                // Our key got its expiry; the lease runs from the PEXPIRE, which is no
                // earlier than the SETNX we measure from.
                Ok(_) => Attempt::Acquired(guard(Self::NAME, key, owner, sent_at, Some(lease_ms))),
                // SETNX succeeded, so whatever PEXPIRE met (a timeout, a broken
                // connection, or an error reply such as NOPERM, BUSY or READONLY), the
                // key is ours and may have no expiry: the outcome is unknown, never a
                // clean failure.
                Err(e) => Attempt::Unknown(format!("PEXPIRE after a successful SETNX: {e}")),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        blind_del(&self.deps, &guard.key).await
    }
}
