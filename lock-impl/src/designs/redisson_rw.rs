//! `redisson-rw`: Redisson's `RReadWriteLock`.

use async_trait::async_trait;

use super::redisson_rw_scripts::RW_NAME;
pub use super::redisson_rw_scripts::{
    REDISSON_READ_LOCK, REDISSON_READ_RENEW, REDISSON_READ_UNLOCK, REDISSON_WRITE_LOCK,
    REDISSON_WRITE_UNLOCK, UNLOCK_LATCH_MS, timeout_prefix,
};
use super::reentrant_watchdog::{ReentrantWatchdog, Side};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, Wait};

/// `redisson-rw`: Redisson's `RReadWriteLock` (`RedissonReadWriteLock`, its
/// `RedissonReadLock` and `RedissonWriteLock`), pinned: Redisson **3.52.0**,
/// `redisson/src/main/java/org/redisson/RedissonReadLock.java`, `RedissonWriteLock.java`
/// and `renewal/ReadLockTask.java` at tag `redisson-3.52.0` (unchanged in 4.x but for
/// the timeout's type); the five scripts are under `lock-impl/scripts/redisson_read_*.lua`
/// and `redisson_write_*.lua`, verbatim.
///
/// Both locks live in one hash `key`: `mode` (`read` or `write`) and one count per
/// holder; a write holder's field is its lock name plus `:write`. Each read hold also
/// has a timeout key `{key}:<lock name>:rwlock_timeout:<n>` with the lease, and the
/// hash lives as long as the longest of them once a reader leaves; readers share, a
/// writer excludes everyone but its own re-entrant reads. Waiters subscribe to
/// `redisson_rwlock:{key}`, as `RedissonLock.tryLock` does (the same wait loop as
/// `reentrant-watchdog`). The watchdog is `RedissonLock`'s: every lease/3 while the
/// holder holds; a read holder renews with `ReadLockTask`'s script (the hash and every
/// holder's timeout keys), a write holder as an `RLock` does under its `:write` field.
///
/// **Mode.** [`LockDesign::acquire`] takes the **write** lock (the exclusive one, so
/// every scenario that judges mutual exclusion judges it); [`LockDesign::acquire_read`]
/// (and [`Self::acquire_read`]) the read lock, both `tryLock(wait, -1)` with the
/// watchdog lease set to `options.lease_ms`. [`LockDesign::release`] unlocks the side
/// the guard's owner names (`…:write` for a write hold).
///
/// **Retry layers** (3.52.0, [`super::redisson_retry`]): the lock and unlock scripts
/// are sent once (`syncedEvalNoRetry`), the renewal is resent after a lost reply up to
/// `retryAttempts` (4) times, `EqualJitterDelay(1 s, 2 s)` apart (scaled with the
/// world), and a renewal that still failed does not stop the watchdog
/// (`RenewalTask.run` schedules the next one); as `redisson-fenced`, and unlike
/// `reentrant-watchdog` (3.20: the watchdog stops).
///
/// **Synced writes** (3.52.0's `syncedEvalNoRetry` / `syncedEval`, `checkLockSyncedSlaves`;
/// [`super::redisson_sync`]): in Sentinel mode each script goes out pipelined with
/// `WAIT <replicas> 1000` (scaled), the replica count cached per client from its first
/// call. An acquisition no replica acknowledged is unlocked (`handleNoSync`) and tried
/// again up to `retryAttempts` (4) times, `retryDelay` apart (`RedissonLock.tryAcquire`
/// through `ServiceManager.execute`), then fails ([`crate::Acquire::Unknown`]); an unlock
/// is run again as often, with the same unlock latch, so a second run answers as the
/// first; a failed renewal is followed by the next.
///
/// Not ported: the `DEL` of `redisson_unlock_latch:{key}:<client id>` that Redisson
/// sends, unawaited, after each unlock (it names the client's id, not the unlock's
/// request id, so it never deletes the latch just set; 3.52.0 never resends an unlock,
/// so the latch never answers one). The read renewal is sent per lock, not in
/// `lockWatchdogBatchSize` batches.
///
/// Known failure: the RLock's. A stop-the-world pause freezes the holder's watchdog:
/// past the lease the hash (or, for a reader, its timeout key) expires, a writer takes
/// the lock while the paused holder still believes it holds it; nothing fences the
/// storage.
pub struct RedissonRw {
    inner: ReentrantWatchdog,
}

impl RedissonRw {
    /// The user-facing name.
    pub const NAME: &'static str = RW_NAME;

    /// A design over `deps`, with a client id from `deps.entropy`.
    pub fn new(deps: Deps) -> Self {
        Self {
            inner: ReentrantWatchdog::read_write(deps),
        }
    }

    /// This instance's client id (Redisson's connection-manager UUID).
    pub fn client_id(&self) -> &str {
        self.inner.client_id()
    }

    /// `readLock().tryLock(wait, -1)` for `task`, with a watchdog renewing
    /// `watchdog_lease_ms` every third of it, waiting up to `wait_ms` (zero: try once).
    pub async fn read_with_watchdog(
        &self,
        key: &str,
        watchdog_lease_ms: u64,
        wait_ms: u64,
        task: u64,
    ) -> Result<Acquire, LockError> {
        self.inner
            .watchdog_side(key, watchdog_lease_ms, wait_ms, task, Side::Read)
            .await
    }

    /// `writeLock().tryLock(wait, -1)` for `task` (see [`Self::read_with_watchdog`]).
    pub async fn write_with_watchdog(
        &self,
        key: &str,
        watchdog_lease_ms: u64,
        wait_ms: u64,
        task: u64,
    ) -> Result<Acquire, LockError> {
        self.inner
            .watchdog_side(key, watchdog_lease_ms, wait_ms, task, Side::Write)
            .await
    }

    /// Whether a watchdog for `task`'s hold on `key` (read or write side) is running.
    pub fn watchdog_running(&self, key: &str, task: u64, write: bool) -> bool {
        self.inner.side_watchdog_running(key, task, write)
    }
}

fn wait_ms(options: AcquireOptions) -> u64 {
    match options.wait {
        Wait::TryOnce => 0,
        Wait::Retry { budget_ms, .. } => budget_ms,
    }
}

#[async_trait]
impl LockDesign for RedissonRw {
    fn name(&self) -> &str {
        Self::NAME
    }

    /// The write lock.
    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        options.validate()?;
        self.write_with_watchdog(
            key,
            options.lease_ms,
            wait_ms(options),
            ReentrantWatchdog::DEFAULT_TASK,
        )
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        self.inner.release(guard).await
    }

    /// As `reentrant-watchdog`'s: the longest retry delay (Redisson 3.52.0's 2 s, at
    /// the world's scale).
    fn retry_horizon(&self) -> std::time::Duration {
        self.inner.retry_horizon()
    }

    /// The read lock.
    fn has_read_mode(&self) -> bool {
        true
    }

    async fn acquire_read(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        options.validate()?;
        self.read_with_watchdog(
            key,
            options.lease_ms,
            wait_ms(options),
            ReentrantWatchdog::DEFAULT_TASK,
        )
        .await
    }
}
