//! `reentrant-watchdog` and `redisson-fenced`: Redisson's `RLock` ([`ReentrantWatchdog`]); the
//! lock attempt is in `attempt`, the client's holds and watchdog in `hold`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::sync::watch;

use super::redisson_retry::Version;
use super::redisson_rw_scripts::{self, RW_NAME};
use super::redisson_sync::{self, Call, ReplicaCount, Synced};
use super::{check_guard, guard};
use crate::lock::classify;
use crate::{Acquire, AcquireOptions, Clock, Deps, Guard, LockDesign, LockError, Release, Wait};

mod attempt;
mod hold;

/// Redisson's lock script (`RedissonLock.tryLockInnerAsync`), verbatim as the lock-service
/// comparison's note prints it: take or re-enter
/// the hash `{owner: count}` and arm the lease (`nil`), or return the holder's `PTTL`.
pub const REDISSON_LOCK: &str = include_str!("../../../scripts/redisson_lock.lua");
/// Redisson's unlock script (`RedissonLock.unlockInnerAsync`), verbatim as the
/// three-Redis-locks article prints it: `nil` if this
/// owner holds nothing, `0` if the count is still above zero (lease re-armed), `1` after
/// `DEL` and `PUBLISH` of the unlock message.
pub const REDISSON_UNLOCK: &str = include_str!("../../../scripts/redisson_unlock.lua");
/// Redisson 3.20.0's renewal script (`renewExpirationAsync`, as "redis之分布式锁详解" prints
/// it): `PEXPIRE` if
/// this owner still holds the lock (`1`), else `0`.
pub const REDISSON_RENEW: &str = include_str!("../../../scripts/redisson_renew.lua");

pub(crate) static LOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_LOCK));
pub(crate) static UNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_UNLOCK));
static RENEW: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDISSON_RENEW));
/// Redisson 3.52.0's `RedissonFencedLock.tryLockInnerAsync` (the `EVAL_LONG_LIST` one that
/// `tryLockAndGetToken` runs), verbatim: the Java literals concatenated, as sent. Take or
/// re-enter the hash, `INCR` the token counter `KEYS[2]`, arm the lease and return
/// `{-1, token}`; else `{pttl, -1}`.
pub const REDISSON_FENCED_LOCK: &str = include_str!("../../../scripts/redisson_fenced_lock.lua");
static FENCED_LOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_FENCED_LOCK));

/// `LockPubSub.UNLOCK_MESSAGE`.
pub(crate) const UNLOCK_MESSAGE: i64 = 0;

/// `reentrant-watchdog`: Redisson 3.20's `RLock`. The lock is a hash
/// `{client-id:task: count}`; Lua scripts take, re-enter, renew and release it; a
/// watchdog renews the lease every lease/3 while the holder lives; waiters subscribe to
/// `redisson_lock__channel:{key}` and retry on an unlock message or when the holder's
/// TTL runs out.
///
/// Sources (docs/designs.md, "Where the designs come from"): Redisson 3.20.0's
/// `RedissonLock` (`lock()`: lock script, `scheduleExpirationRenewal`, `renewExpiration`
/// every `internalLockLeaseTime / 3`, renewal script), read line by line in
/// "redis之分布式锁详解"; the lock-service comparison's note (the lock and unlock scripts
/// with their arguments and return codes, the pub/sub unlock message); the three-Redis-
/// locks article (`tryLock(wait, lease)` with pub/sub waiting, the unlock script). The owner field is
/// one client id per design instance (Redisson's connection-manager UUID) plus a task id
/// (Redisson's thread id); [`LockDesign`] uses task [`Self::DEFAULT_TASK`].
///
/// [`LockDesign::acquire`] is `tryLock(wait budget, leaseTime = -1)` with the watchdog
/// lease (`internalLockLeaseTime`, Redisson's `lockWatchdogTimeout`) set to
/// `options.lease_ms`: after a first acquisition a watchdog, started with
/// [`Deps::spawner`], renews the lease every lease/3 on [`Deps::clock`] until the hold
/// count drops to zero or the renewal finds the lock gone. [`Self::acquire_with_lease`]
/// is `tryLock(wait, lease)` with an explicit lease and no watchdog.
///
/// **Retry layers** (Redisson **3.20**, [`super::redisson_retry`]): every script (lock,
/// unlock, renewal) goes through `evalWriteAsync` and is resent after a lost reply up
/// to `retryAttempts` (3) times, `retryInterval` (1.5 s, scaled with the world) apart,
/// so a lock script whose first run went through re-enters on the resend; the
/// watchdog stops at a renewal that still failed after its resends
/// (`renewExpiration`: "Can't update lock … expiration"). A cut shorter than the
/// resends (about 16.5 s at real scale: four 3 s reply timeouts and three 1.5 s
/// pauses) is survived; a longer one ends the watchdog and the lease runs out.
///
/// **Synced writes** (3.20's `evalWriteAsync`, `checkLockSyncedSlaves` on by default;
/// [`super::redisson_sync`]): in Sentinel mode the lock, unlock and renewal scripts go
/// out pipelined with `WAIT <connected_slaves> 1000` (1 s scaled with the world), and a
/// call that no replica acknowledged fails ("None of slaves were synced"). A failed
/// acquisition is unlocked at once (`handleNoSync`) and not tried again (`tryLock`
/// throws): [`Acquire::Unknown`]. A failed renewal stops the watchdog as a failed one
/// does; a failed unlock is [`Release::Unknown`]. A single-server configuration (a
/// connection that follows no Sentinel-named master) and a master with no replica
/// send the bare script.
///
/// Known failure: the watchdog only helps a holder that is slow but alive *and* can reach
/// Redis. A stop-the-world pause freezes the watchdog with its holder: past the lease the
/// lock expires, another client takes it, and the paused holder resumes believing it
/// still holds it (two holders; no fencing). Conversely a holder that is alive but stuck
/// (a hung critical section) keeps the lock forever, since the watchdog renews it.
///
/// # `redisson-fenced` ([`ReentrantWatchdog::fenced`])
///
/// Redisson's `RFencedLock` (pinned: Redisson **3.52.0**,
/// `redisson/src/main/java/org/redisson/RedissonFencedLock.java` at tag
/// `redisson-3.52.0`; `RedissonObject.prefixName`): `RedissonLock` with its own lock
/// script ([`REDISSON_FENCED_LOCK`]), which `INCR`s the counter
/// `redisson_lock_token:{key}` on every grant (re-entries too) and returns the new value
/// as the fencing token ([`Guard::token`]). [`LockDesign::acquire`] is
/// `tryLockAndGetToken(wait, -1)`: the watchdog lease and renewal as above (the fenced
/// lock inherits `scheduleExpirationRenewal`), the pub/sub wait as above, with the wait
/// budget accounted on **`System.currentTimeMillis()`**, the wall clock, as
/// `tryLockAndGetTokenAsync` does (`time.addAndGet(-el)` with `el` a difference of two
/// `currentTimeMillis` readings): a backward step of the client's clock lengthens the
/// wait, a forward one ends it early. Release is `RedissonLock`'s unlock, as above (the
/// script this crate ports is Redisson 3.20's; 3.52 adds an unlock-latch key that makes a
/// retried unlock idempotent, not ported: 3.52.0 never resends an unlock).
///
/// **Retry layers differ from `reentrant-watchdog`'s, on purpose** (the pinned
/// versions differ; [`super::redisson_retry`]): at 3.52.0 the lock and unlock scripts
/// are sent once (`syncedEvalNoRetry`); the renewal is resent up to `retryAttempts` (4)
/// times, `EqualJitterDelay(1 s, 2 s)` apart; and a renewal that still failed does not
/// stop the watchdog (`RenewalTask.run`, since 3.44.0, schedules the next one), so the
/// lease lapses only if the holder stays cut off until it runs out.
///
/// **Synced writes** at 3.52.0 (`syncedEvalNoRetry` / `syncedEval`, `SyncMode.WAIT`;
/// [`super::redisson_sync`]): as above, with the master's replica count cached per
/// client from its first synced call (`MasterSlaveEntry.availableSlaves`, read again
/// only after a `WAIT` answered another count), and the batch resent after a lost
/// reply (the executor's retries; `noRetry` holds only for a single server). A fenced
/// acquisition no replica acknowledged fails with the key left on the master to expire
/// (`RedissonFencedLock.tryAcquireAsync` has no `handleNoSync`) and is not tried again;
/// a failed unlock is [`Release::Unknown`] (3.52.0's `unlockAsync` runs it again, with
/// an unlock latch this port's 3.20 unlock script lacks: not ported); a failed renewal
/// is followed by the next, as a failed one is. A client whose first call found the
/// master without replicas caches 0 and never waits.
///
/// Known failure: the token protects only a storage that checks it; the counter lives on
/// the lock's master, so a failover to a replica that missed an `INCR` reissues a token.
pub struct ReentrantWatchdog {
    deps: Deps,
    flavor: Flavor,
    client_id: String,
    holds: Arc<Mutex<BTreeMap<(String, String), Hold>>>,
    /// The master's replica count as 3.52.0 caches it ([`redisson_sync`]).
    synced: ReplicaCount,
}

/// What this instance knows about one owner field's hold on one key.
struct Hold {
    /// Acquisitions not yet released, as this instance counted them.
    count: u64,
    /// The lease of the latest acquisition (Redisson's `internalLockLeaseTime`), re-armed
    /// by a release that leaves the count above zero.
    lease_ms: u64,
    /// The running watchdog, if this hold has one.
    watchdog: Option<Watchdog>,
}

/// A handle on a running watchdog: a stop signal, whether the task still runs, and its
/// turn: the watchdog holds it from checking the stop signal until its renewal's reply,
/// and a release takes it to send the stop, so no renewal is still on its way when a
/// release returns (one could otherwise land on the next hold of the same owner and
/// re-arm it with this hold's lease).
struct Watchdog {
    stop: watch::Sender<bool>,
    alive: Arc<AtomicBool>,
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl Watchdog {
    /// Stops the watchdog once no renewal of its is in flight.
    async fn stop(self) {
        let _turn = self.turn.lock().await;
        let _ = self.stop.send(true);
    }
}

impl Watchdog {
    fn running(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

/// Clears the `alive` flag when the watchdog task ends or is dropped (a crashed host's
/// tasks are dropped without running to the end).
struct AliveFlag(Arc<AtomicBool>);

impl Drop for AliveFlag {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Which Redisson lock an instance ports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `RLock` (`reentrant-watchdog`).
    Lock,
    /// `RFencedLock` (`redisson-fenced`).
    Fenced,
    /// `RReadWriteLock` (`redisson-rw`, see [`super::RedissonRw`]): each call says which
    /// of its two locks it takes ([`Side`]).
    ReadWrite,
}

/// The lock one call takes: the flavor's only lock, or one side of a read-write lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Side {
    /// The `RLock` / `RFencedLock` itself.
    Only,
    /// `RedissonReadLock`.
    Read,
    /// `RedissonWriteLock`.
    Write,
}

/// The lease mode of one acquisition.
#[derive(Clone, Copy)]
enum Lease {
    /// `leaseTime = -1`: the lock script arms this lease and a watchdog renews it.
    Watchdog(u64),
    /// An explicit lease; no watchdog.
    Fixed(u64),
}

impl Lease {
    fn ms(self) -> u64 {
        match self {
            Lease::Watchdog(ms) | Lease::Fixed(ms) => ms,
        }
    }
}

/// One attempt's outcome.
enum Try {
    Acquired(Guard),
    Held { ttl_ms: i64 },
    Unknown(String),
}

impl ReentrantWatchdog {
    /// The user-facing name.
    pub const NAME: &'static str = "reentrant-watchdog";
    /// The name of the `RFencedLock` port.
    pub const FENCED_NAME: &'static str = "redisson-fenced";
    /// The task id [`LockDesign`] calls use.
    pub const DEFAULT_TASK: u64 = 1;
    /// Redisson's default `lockWatchdogTimeout`, used by [`Self::lock_waiting`].
    pub const DEFAULT_WATCHDOG_LEASE_MS: u64 = 30_000;
    /// The smallest watchdog lease: the watchdog renews every lease/3 ms.
    pub const MIN_WATCHDOG_LEASE_MS: u64 = 3;

    /// A design over `deps`, with a client id from `deps.entropy`.
    pub fn new(deps: Deps) -> Self {
        let client_id = deps.entropy.owner_value();
        Self {
            deps,
            flavor: Flavor::Lock,
            client_id,
            holds: Arc::new(Mutex::new(BTreeMap::new())),
            synced: ReplicaCount::default(),
        }
    }

    /// `redisson-fenced`: Redisson 3.52.0's `RFencedLock` over `deps` (see the type's
    /// doc).
    pub fn fenced(deps: Deps) -> Self {
        Self {
            flavor: Flavor::Fenced,
            ..Self::new(deps)
        }
    }

    /// The machinery of `redisson-rw` (see [`super::RedissonRw`]).
    pub(crate) fn read_write(deps: Deps) -> Self {
        Self {
            flavor: Flavor::ReadWrite,
            ..Self::new(deps)
        }
    }

    /// The Redisson version whose retry layers this instance follows
    /// ([`super::redisson_retry`]): 3.20 for the `RLock` port, 3.52.0 for
    /// the fenced and read-write locks.
    pub fn version(&self) -> Version {
        match self.flavor {
            Flavor::Lock => Version::V3_20,
            Flavor::Fenced | Flavor::ReadWrite => Version::V3_52,
        }
    }

    fn name_of(&self) -> &'static str {
        match self.flavor {
            Flavor::Lock => Self::NAME,
            Flavor::Fenced => Self::FENCED_NAME,
            Flavor::ReadWrite => RW_NAME,
        }
    }

    /// The fencing token counter of `key` (`prefixName("redisson_lock_token", key)`).
    pub fn token_key(key: &str) -> String {
        if key.contains('{') {
            format!("redisson_lock_token:{key}")
        } else {
            format!("redisson_lock_token:{{{key}}}")
        }
    }

    /// The clock the wait budget is accounted on: the monotonic one for the RLock port;
    /// for the fenced lock, `System.currentTimeMillis()`, the wall clock, as Redisson's
    /// `tryLockAndGetTokenAsync` reads it.
    fn wait_clock(&self) -> Duration {
        if self.flavor == Flavor::Fenced {
            self.deps.clock.wall()
        } else {
            self.deps.clock.now()
        }
    }

    /// This instance's client id (Redisson's connection-manager UUID).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The hash field for `task`: `{client id}:{task}` (Redisson's `getLockName`).
    pub fn owner_field(&self, task: u64) -> String {
        format!("{}:{task}", self.client_id)
    }

    /// The channel unlock messages for `key` are published on (Redisson's
    /// `getChannelName`).
    pub fn channel(key: &str) -> String {
        format!("redisson_lock__channel:{{{key}}}")
    }

    /// The channel this instance's waiters listen on.
    fn channel_of(&self, key: &str) -> String {
        match self.flavor {
            Flavor::ReadWrite => redisson_rw_scripts::channel(key),
            Flavor::Lock | Flavor::Fenced => Self::channel(key),
        }
    }

    /// The hash field an acquisition of `task` on `side` holds: a write lock's is
    /// `getLockName(threadId) + ":write"` (`RedissonWriteLock.getLockName`).
    fn owner_on(&self, task: u64, side: Side) -> String {
        match side {
            Side::Write => format!("{}:write", self.owner_field(task)),
            Side::Only | Side::Read => self.owner_field(task),
        }
    }

    /// `tryLock(wait, lease)`: acquire `key` for `task` with an explicit lease and no
    /// watchdog, waiting up to `wait_ms` (zero: try once) for unlock messages.
    pub async fn acquire_with_lease(
        &self,
        key: &str,
        lease_ms: u64,
        wait_ms: u64,
        task: u64,
    ) -> Result<Acquire, LockError> {
        if lease_ms == 0 || lease_ms > i64::MAX as u64 {
            return Err(LockError::InvalidLease {
                lease_ms: lease_ms.min(i64::MAX as u64) as i64,
            });
        }
        self.try_lock(key, Lease::Fixed(lease_ms), wait_ms, task, Side::Only)
            .await
    }

    /// `tryLock(wait, -1)`: acquire `key` for `task` with a watchdog that renews
    /// `watchdog_lease_ms` every third of it, waiting up to `wait_ms` (zero: try once).
    pub async fn acquire_with_watchdog(
        &self,
        key: &str,
        watchdog_lease_ms: u64,
        wait_ms: u64,
        task: u64,
    ) -> Result<Acquire, LockError> {
        let side = if self.flavor == Flavor::ReadWrite {
            Side::Write
        } else {
            Side::Only
        };
        self.watchdog_side(key, watchdog_lease_ms, wait_ms, task, side)
            .await
    }

    /// [`Self::acquire_with_watchdog`] on one `side` (a read-write lock's read or write
    /// lock).
    pub(crate) async fn watchdog_side(
        &self,
        key: &str,
        watchdog_lease_ms: u64,
        wait_ms: u64,
        task: u64,
        side: Side,
    ) -> Result<Acquire, LockError> {
        if watchdog_lease_ms < Self::MIN_WATCHDOG_LEASE_MS {
            return Err(LockError::LeaseTooShortForWatchdog {
                lease_ms: watchdog_lease_ms,
                min_ms: Self::MIN_WATCHDOG_LEASE_MS,
            });
        }
        if watchdog_lease_ms > i64::MAX as u64 {
            return Err(LockError::InvalidLease { lease_ms: i64::MAX });
        }
        self.try_lock(key, Lease::Watchdog(watchdog_lease_ms), wait_ms, task, side)
            .await
    }

    /// A blocking `lock()` bounded by `wait_ms`, with Redisson's default watchdog lease
    /// (30 s). A waiting call needs a budget: `wait_ms == 0` is
    /// [`LockError::InvalidWait`].
    pub async fn lock_waiting(
        &self,
        key: &str,
        wait_ms: u64,
        task: u64,
    ) -> Result<Acquire, LockError> {
        if wait_ms == 0 || wait_ms > i64::MAX as u64 {
            return Err(LockError::InvalidWait {
                wait_ms: wait_ms.min(i64::MAX as u64) as i64,
            });
        }
        self.acquire_with_watchdog(key, Self::DEFAULT_WATCHDOG_LEASE_MS, wait_ms, task)
            .await
    }

    /// The hold count this instance has counted for `key` and `task` (0 if none).
    pub fn hold_count(&self, key: &str, task: u64) -> u64 {
        self.holds()
            .get(&(key.to_string(), self.owner_field(task)))
            .map_or(0, |h| h.count)
    }

    /// Whether a watchdog for `key` and `task` is running.
    pub fn watchdog_running(&self, key: &str, task: u64) -> bool {
        self.holds()
            .get(&(key.to_string(), self.owner_field(task)))
            .and_then(|h| h.watchdog.as_ref())
            .is_some_and(Watchdog::running)
    }

    /// Whether a watchdog for `task`'s read (`write == false`) or write hold on `key`
    /// is running (`redisson-rw`).
    pub(crate) fn side_watchdog_running(&self, key: &str, task: u64, write: bool) -> bool {
        let side = if write { Side::Write } else { Side::Read };
        self.holds()
            .get(&(key.to_string(), self.owner_on(task, side)))
            .and_then(|h| h.watchdog.as_ref())
            .is_some_and(Watchdog::running)
    }

    fn holds(&self) -> MutexGuard<'_, BTreeMap<(String, String), Hold>> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl LockDesign for ReentrantWatchdog {
    fn name(&self) -> &str {
        self.name_of()
    }

    /// The longest pause Redisson's executor takes before an attempt after a lost
    /// reply or a connection it could not get (the retry delay, at the world's scale).
    /// A waiter otherwise hears the unlock message, or sleeps no longer than the
    /// holder's TTL.
    fn retry_horizon(&self) -> Duration {
        self.version().longest_retry_delay(self.deps.scale)
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        options.validate()?;
        let wait_ms = match options.wait {
            Wait::TryOnce => 0,
            Wait::Retry { budget_ms, .. } => budget_ms,
        };
        self.acquire_with_watchdog(key, options.lease_ms, wait_ms, Self::DEFAULT_TASK)
            .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.name_of(), guard)?;
        let id = (guard.key.clone(), guard.owner.clone());
        let lease_ms = self
            .holds()
            .get(&id)
            .map(|h| h.lease_ms)
            .unwrap_or_else(|| {
                guard
                    .valid_until
                    .map_or(Self::DEFAULT_WATCHDOG_LEASE_MS, |u| {
                        u.saturating_sub(guard.acquired_at).as_millis() as u64
                    })
            });
        let version = self.version();
        let call = self.unlock_call(&guard.key, &guard.owner, lease_ms.max(1));
        // 3.52.0's `unlockAsync` runs the unlock again after a failed sync, up to
        // `retryAttempts` times, `retryDelay` apart (`ServiceManager.execute`), with the
        // same unlock latch, so a run after the first answers as the first did. The
        // fenced lock's unlock here is 3.20's script, which has no latch: it is not run
        // again (see the type's doc). 3.20 fails the unlock at once.
        let retries = match self.flavor {
            Flavor::ReadWrite => version.retry_attempts(),
            Flavor::Lock | Flavor::Fenced => 0,
        };
        let mut retry = 0;
        let reply = loop {
            let (reply, _) = redisson_sync::eval::<Option<i64>>(
                &self.deps,
                version,
                version.resends_lock_and_unlock(),
                &self.synced,
                &call,
            )
            .await;
            match reply {
                Ok(Synced::NotSynced { replicas, .. }) if retry >= retries => {
                    // The unlock ran on the master; a replica promoted now may still
                    // hold the lock. Its hold ends here for the client.
                    self.released(&guard.key, &guard.owner, None).await;
                    return Ok(Release::Unknown(redisson_sync::not_synced(replicas)));
                }
                Ok(Synced::NotSynced { .. }) => {
                    retry += 1;
                    let delay = version.retry_delay(retry, self.deps.scale, &*self.deps.entropy);
                    self.deps.clock.sleep(delay).await;
                }
                Ok(Synced::Done(reply)) => break Ok(reply),
                Err(e) => break Err(e),
            }
        };
        match reply {
            Ok(None) => {
                self.released(&guard.key, &guard.owner, Some(false)).await;
                Err(LockError::NotOwner {
                    key: guard.key.clone(),
                    owner: guard.owner.clone(),
                })
            }
            Ok(Some(0)) => {
                let count = self.released(&guard.key, &guard.owner, Some(true)).await;
                // A read unlock also answers `0` when this reader's last hold ended
                // while other holders keep the hash: its hold is over.
                if count == 0
                    && self.flavor == Flavor::ReadWrite
                    && !redisson_rw_scripts::is_write_owner(&guard.owner)
                {
                    return Ok(Release::Removed);
                }
                Ok(Release::StillHeld { count })
            }
            Ok(Some(_)) => {
                self.released(&guard.key, &guard.owner, Some(false)).await;
                Ok(Release::Removed)
            }
            Err(e) => {
                // Like Redisson, the release ends this acquisition's share of the
                // watchdog whatever the reply.
                self.released(&guard.key, &guard.owner, None).await;
                classify("EVALSHA", e).map(Release::Unknown)
            }
        }
    }
}
