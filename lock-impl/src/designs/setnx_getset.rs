use std::time::Duration;

use async_trait::async_trait;

use super::{check_guard, setnx};
use crate::lock::{Attempt, classify, retry_acquire};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

/// `setnx-getset`: the lock of the `SETNX` command page's "Design pattern: Locking with
/// `SETNX`" and its "Handling deadlocks" section (redis.io, `commands/setnx.md`; the
/// same text in Redis 1.x-2.x's `doc/SetnxCommand.html`), which the page keeps because
/// "certain existing implementations link to this page as a reference" (ServiceStack's
/// `RedisLock`, several Java and Ruby gems).
///
/// - Acquire: `SETNX key <Unix time + lock timeout + 1>` (here in milliseconds). On `0`,
///   `GET key`: if that timestamp is still in the future, the lock is held; if it has
///   passed, the holder is presumed dead, and the client sends
///   `GETSET key <Unix time + lock timeout + 1>`: if the old value it gets back is
///   still a passed timestamp, the lock is its; if not, another client got there
///   first (the page accepts that this overwrote its timestamp by a little).
/// - Release: "a client holding a lock should always check the timeout didn't expire
///   before unlocking the key with `DEL`": `DEL key` only if the client's own wall
///   clock has not yet reached its timestamp.
///
/// The value written is the timestamp followed by `:` and the client's owner value: the
/// page writes the bare timestamp, and nothing in the algorithm reads past the number,
/// but two holders in the same millisecond must not leave the same value behind (the
/// history tells holders apart by the value the server holds).
///
/// The key has no server-side expiry: the timestamps in it *are* the lease, written by
/// one client's **wall clock** and judged by every other client's. Known failure:
/// clients whose wall clocks disagree by more than the lease take a live lock from its
/// holder (two holders), and a client whose clock stepped back holds a dead holder's
/// lock for longer. Also a holder paused past its timestamp keeps working while a
/// waiter took over (no fencing), and its late `DEL` is skipped only by its own clock.
pub struct SetnxGetset {
    deps: Deps,
}

impl SetnxGetset {
    /// The user-facing name.
    pub const NAME: &'static str = "setnx-getset";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// Unix time in milliseconds on this host's wall clock (the page's "current Unix
    /// time"; its ports read `time()`, `System.currentTimeMillis()`,
    /// `DateTime.UtcNow`).
    fn unix_ms(&self) -> u64 {
        u64::try_from(self.deps.clock.wall().as_millis()).unwrap_or(u64::MAX)
    }

    /// The guard for a lock whose key now holds `stamp` (wall ms), taken at monotonic
    /// `sent_at`: the client believes it holds the lock until its wall clock reaches
    /// `stamp`, i.e. for `stamp - now` more on its monotonic clock as read now.
    fn guard(&self, key: &str, value: String, stamp: u64, sent_at: Duration) -> Guard {
        let left = Duration::from_millis(stamp.saturating_sub(self.unix_ms()));
        Guard {
            design: Self::NAME.to_string(),
            key: key.to_string(),
            owner: value,
            acquired_at: sent_at,
            valid_until: Some(self.deps.clock.now() + left),
            token: None,
        }
    }

    /// One attempt: `SETNX`, then `GET` and `GETSET` if the timestamp has passed.
    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.deps;
        let sent_at = deps.clock.now();
        let owner = deps.entropy.owner_value();
        let stamp = self.unix_ms().saturating_add(lease_ms + 1);
        let value = format!("{stamp}:{owner}");
        match setnx(deps, key, &value).await? {
            Ok(true) => return Ok(Attempt::Acquired(self.guard(key, value, stamp, sent_at))),
            Ok(false) => {}
            Err(why) => return Ok(Attempt::Unknown(why)),
        }
        let current: redis::RedisResult<Option<String>> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut deps.conn.clone())
            .await;
        let current = match current {
            // Released between the two commands: try again from `SETNX`.
            Ok(None) => return Ok(Attempt::Held),
            Ok(Some(v)) => v,
            // SETNX wrote nothing, so a `GET` lost on the way leaves us holding
            // nothing: count it as held and retry within the budget (an error reply
            // other than a lost connection ends the acquire).
            Err(e) => {
                classify("GET", e)?;
                return Ok(Attempt::Held);
            }
        };
        // A value that is not a timestamp (another design's key) never expires here.
        let Some(current) = timestamp(&current) else {
            return Ok(Attempt::Held);
        };
        let now = self.unix_ms();
        if current > now {
            return Ok(Attempt::Held);
        }
        let sent_at = deps.clock.now();
        let stamp = now.saturating_add(lease_ms + 1);
        let value = format!("{stamp}:{owner}");
        let old: redis::RedisResult<Option<String>> = redis::cmd("GETSET")
            .arg(key)
            .arg(&value)
            .query_async(&mut deps.conn.clone())
            .await;
        match old {
            // The key vanished in between: our GETSET created it, the lock is ours.
            Ok(None) => Ok(Attempt::Acquired(self.guard(key, value, stamp, sent_at))),
            Ok(Some(old)) => match timestamp(&old) {
                Some(old) if old <= self.unix_ms() => {
                    Ok(Attempt::Acquired(self.guard(key, value, stamp, sent_at)))
                }
                // Another client's GETSET came first; ours only moved its timestamp.
                _ => Ok(Attempt::Held),
            },
            // GETSET may have written our timestamp: the outcome is unknown.
            Err(e) => classify("GETSET", e).map(Attempt::Unknown),
        }
    }
}

#[async_trait]
impl LockDesign for SetnxGetset {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let lease_ms = options.lease_ms;
        retry_acquire(&self.deps, key, options, || self.attempt(key, lease_ms)).await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        // The page: check the timeout did not expire before `DEL`, on our wall clock.
        let stamp = timestamp(&guard.owner).unwrap_or(0);
        if self.unix_ms() >= stamp {
            return Ok(Release::NotRemoved);
        }
        super::blind_del(&self.deps, &guard.key).await
    }
}

/// The timestamp a lock value starts with (`<unix ms>:<owner>`, or a bare number).
pub fn timestamp(value: &str) -> Option<u64> {
    value.split(':').next()?.parse().ok()
}
