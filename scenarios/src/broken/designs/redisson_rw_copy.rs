//! `write-ignores-readers`, `read-unlock-deletes-hash` and
//! `read-renewal-skips-timeouts`: a user's copy of Redisson's read-write lock with
//! one script edited, and the verbatim copy beside them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

use super::helpers::{guard, unknown_or};

/// An edit of a verbatim script: `from` replaced by `to`, once. The edit is asserted
/// to apply, so a change of the verbatim text cannot silently leave a broken copy
/// correct (the broken catalog's suite, `tests/suite/broken.rs`, builds every edited
/// script).
fn edited(script: &str, from: &str, to: &str) -> String {
    assert!(
        script.matches(from).count() == 1,
        "the verbatim script no longer has exactly one `{from}` to edit"
    );
    script.replacen(from, to, 1)
}

/// `write-ignores-readers`: the write lock's script only looks for another writer.
static WRITE_IGNORES_READERS: LazyLock<String> = LazyLock::new(|| {
    edited(
        lock_impl::designs::REDISSON_WRITE_LOCK,
        "if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write');",
        "if (mode ~= 'write') then redis.call('hset', KEYS[1], 'mode', 'write');",
    )
});

/// `read-unlock-deletes-hash`: the read unlock's check for other holds is gone.
static READ_UNLOCK_DELETES_HASH: LazyLock<String> = LazyLock::new(|| {
    edited(
        lock_impl::designs::REDISSON_READ_UNLOCK,
        "if (redis.call('hlen', KEYS[1]) > 1) then",
        "if false then",
    )
});

/// `read-renewal-skips-timeouts`: the read lock's renewal re-arms the hash only.
static READ_RENEWAL_SKIPS_TIMEOUTS: LazyLock<String> = LazyLock::new(|| {
    edited(
        lock_impl::designs::REDISSON_READ_RENEW,
        "if (redis.call('hlen', KEYS[i]) > 1) then",
        "if false then",
    )
});

/// A running watchdog's stop flag and the lease it renews, ms.
type Watchdog = (Arc<AtomicBool>, u64);

/// Which of Redisson's read-write scripts a [`RedissonRwCopy`] runs edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwEdit {
    /// None: the scripts verbatim (the control, which is not in the catalog).
    Verbatim,
    /// `write-ignores-readers`.
    WriteIgnoresReaders,
    /// `read-unlock-deletes-hash`.
    ReadUnlockDeletesHash,
    /// `read-renewal-skips-timeouts`.
    ReadRenewalSkipsTimeouts,
}

impl RwEdit {
    /// The script this edit changes, verbatim as `lock-impl` ships it, and the edited
    /// copy the broken design runs instead (`None` for [`RwEdit::Verbatim`]).
    pub fn scripts(self) -> Option<(&'static str, &'static str)> {
        use lock_impl::designs::{REDISSON_READ_RENEW, REDISSON_READ_UNLOCK, REDISSON_WRITE_LOCK};
        match self {
            RwEdit::Verbatim => None,
            RwEdit::WriteIgnoresReaders => {
                Some((REDISSON_WRITE_LOCK, WRITE_IGNORES_READERS.as_str()))
            }
            RwEdit::ReadUnlockDeletesHash => {
                Some((REDISSON_READ_UNLOCK, READ_UNLOCK_DELETES_HASH.as_str()))
            }
            RwEdit::ReadRenewalSkipsTimeouts => {
                Some((REDISSON_READ_RENEW, READ_RENEWAL_SKIPS_TIMEOUTS.as_str()))
            }
        }
    }
}

/// A user's copy of Redisson's `RReadWriteLock` (`redisson-rw`): the scripts of
/// Redisson 3.52.0 as `lock-impl` ships them (`REDISSON_READ_LOCK`, `…_READ_UNLOCK`,
/// `…_WRITE_LOCK`, `…_WRITE_UNLOCK`, `…_READ_RENEW` and `REDISSON_RENEW`, with the
/// same keys and arguments), one of them edited by the bug ([`RwEdit`]), and the
/// watchdog `tryLock(wait, -1)` starts: every lease/3 a read holder runs the read
/// renewal and a write holder `RedissonLock`'s, until the release or a renewal that
/// finds nothing. What the copy leaves out of Redisson: a waiter polls with
/// [`retry_acquire`]'s backoff instead of waiting for the unlock message. The copy
/// with no edit ([`RwEdit::Verbatim`]) is run beside the broken ones on their
/// scenarios and seeds (`scenarios/tests/suite/broken.rs`) and is never caught, so a catch
/// is the edit's doing.
///
/// The bug classes:
///
/// - `write-ignores-readers`: WeiJiadong/redislock at `53cc45f` (a hash with a writer
///   field `w` and one readers' field `r`), `internal/script/wlock.lua`, grants the
///   write lock when the hash has no `w` field, whoever reads. Here: the write script
///   grants when the mode is not `write` (`mode ~= 'write'` for `mode == false`), so a
///   writer walks in on readers and turns the mode to `write` under them.
/// - `read-unlock-deletes-hash`: the same library's `internal/script/runlock.lua`
///   `HDEL`s the one `r` field every reader shares, so the first reader to leave frees
///   the lock for a writer while the others still read; Redisson's own read unlock
///   deleted the whole lock without looking for a write hold of the same thread until
///   issue #891 (redisson/redisson, 2017, "read unlock will delete the whole lock
///   without checking if there is any other write lock"). Here: the read unlock
///   script's "other holds remain" branch is cut (`hlen > 1` → `false`), so every read
///   unlock deletes the hash and publishes the unlock message.
/// - `read-renewal-skips-timeouts`: Redisson 3.5.4 to 3.7.5 (issue #1604, "Lock
///   watchdog does not monitor read locks", fixed in 2018): the watchdog re-armed a
///   read lock's hash but not its holders' `rwlock_timeout` keys, which "disappear
///   before the unlock is called". A reader that leaves then finds no other holder's
///   timeout key alive and deletes the hash under readers still reading, and a writer
///   takes it. Here: the read renewal's loop over the holders' timeout keys is cut
///   (`hlen > 1` → `false`).
pub struct RedissonRwCopy {
    name: &'static str,
    deps: Deps,
    /// Redisson's `getLockName(threadId)`: the client's id and its one task.
    lock_name: String,
    read_lock: redis::Script,
    read_unlock: redis::Script,
    read_renew: redis::Script,
    write_lock: redis::Script,
    write_unlock: redis::Script,
    write_renew: redis::Script,
    /// The stop flag and lease of each hold's watchdog, by key and owner.
    watchdogs: Mutex<BTreeMap<(String, String), Watchdog>>,
}

impl RedissonRwCopy {
    /// The copy with `edit`, named `name`.
    pub fn new(name: &'static str, deps: Deps, edit: RwEdit) -> Self {
        use lock_impl::designs::{
            REDISSON_READ_LOCK, REDISSON_READ_RENEW, REDISSON_READ_UNLOCK, REDISSON_RENEW,
            REDISSON_WRITE_LOCK, REDISSON_WRITE_UNLOCK,
        };
        let pick = |bug: RwEdit, edited: &'static LazyLock<String>, verbatim: &'static str| {
            if edit == bug {
                redis::Script::new(edited.as_str())
            } else {
                redis::Script::new(verbatim)
            }
        };
        let lock_name = format!("{}:1", deps.entropy.owner_value());
        Self {
            name,
            deps,
            lock_name,
            read_lock: redis::Script::new(REDISSON_READ_LOCK),
            read_unlock: pick(
                RwEdit::ReadUnlockDeletesHash,
                &READ_UNLOCK_DELETES_HASH,
                REDISSON_READ_UNLOCK,
            ),
            read_renew: pick(
                RwEdit::ReadRenewalSkipsTimeouts,
                &READ_RENEWAL_SKIPS_TIMEOUTS,
                REDISSON_READ_RENEW,
            ),
            write_lock: pick(
                RwEdit::WriteIgnoresReaders,
                &WRITE_IGNORES_READERS,
                REDISSON_WRITE_LOCK,
            ),
            write_unlock: redis::Script::new(REDISSON_WRITE_UNLOCK),
            write_renew: redis::Script::new(REDISSON_RENEW),
            watchdogs: Mutex::new(BTreeMap::new()),
        }
    }

    /// `name{key}`'s Redisson spelling: `{key}` unless the key has a hash tag.
    fn tagged(key: &str) -> String {
        if key.contains('{') {
            key.to_string()
        } else {
            format!("{{{key}}}")
        }
    }

    async fn attempt(&self, key: &str, lease_ms: u64, write: bool) -> Result<Attempt, LockError> {
        let sent = self.deps.clock.now();
        let mut conn = self.deps.conn.clone();
        let (owner, reply) = if write {
            let owner = format!("{}:write", self.lock_name);
            let reply = self
                .write_lock
                .key(key)
                .arg(lease_ms)
                .arg(&owner)
                .invoke_async::<Option<i64>>(&mut conn)
                .await;
            (owner, reply)
        } else {
            let owner = self.lock_name.clone();
            let reply = self
                .read_lock
                .key(key)
                .key(lock_impl::designs::timeout_prefix(key, &owner))
                .arg(lease_ms)
                .arg(&owner)
                .arg(format!("{owner}:write"))
                .invoke_async::<Option<i64>>(&mut conn)
                .await;
            (owner, reply)
        };
        match reply {
            Ok(None) => {
                let mut g = guard(self.name, key, owner, sent, lease_ms);
                g.valid_until = None; // renewed until released
                self.start_watchdog(&g, lease_ms, write);
                Ok(Attempt::Acquired(g))
            }
            Ok(Some(_)) => Ok(Attempt::Held),
            Err(e) => unknown_or(e, "EVALSHA", Attempt::Unknown),
        }
    }

    /// `renewExpiration`: every lease/3, the side's renewal script, until the release
    /// stops it or a renewal finds the holder gone (or fails).
    fn start_watchdog(&self, g: &Guard, lease_ms: u64, write: bool) {
        let stop = Arc::new(AtomicBool::new(false));
        self.watchdogs
            .lock()
            .expect("watchdog map")
            .insert((g.key.clone(), g.owner.clone()), (stop.clone(), lease_ms));
        let deps = self.deps.clone();
        let (key, owner) = (g.key.clone(), g.owner.clone());
        let script = if write {
            self.write_renew.clone()
        } else {
            self.read_renew.clone()
        };
        let every = Duration::from_millis((lease_ms / 3).max(1));
        self.deps.spawner.spawn(Box::pin(async move {
            loop {
                deps.clock.sleep(every).await;
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let mut conn = deps.conn.clone();
                let renewed = if write {
                    script
                        .key(&key)
                        .arg(lease_ms)
                        .arg(&owner)
                        .invoke_async::<i64>(&mut conn)
                        .await
                } else {
                    script
                        .key(&key)
                        .key(Self::tagged(&key))
                        .arg(lease_ms)
                        .arg(&owner)
                        .invoke_async::<Vec<i64>>(&mut conn)
                        .await
                        .map(|r| r.first().copied().unwrap_or(0))
                };
                if !matches!(renewed, Ok(1)) {
                    return;
                }
            }
        }));
    }
}

#[async_trait]
impl LockDesign for RedissonRwCopy {
    fn name(&self) -> &str {
        self.name
    }
    /// The write lock.
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.deps, key, o, || self.attempt(key, o.lease_ms, true)).await
    }
    fn has_read_mode(&self) -> bool {
        true
    }
    async fn acquire_read(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.deps, key, o, || self.attempt(key, o.lease_ms, false)).await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        // Like Redisson, the release ends the hold's watchdog whatever the reply.
        let dog = self
            .watchdogs
            .lock()
            .expect("watchdog map")
            .remove(&(g.key.clone(), g.owner.clone()));
        let lease_ms = dog.map_or(1, |(stop, lease_ms)| {
            stop.store(true, Ordering::SeqCst);
            lease_ms
        });
        let key = g.key.as_str();
        let channel = format!("redisson_rwlock:{}", Self::tagged(key));
        let latch = format!(
            "redisson_unlock_latch:{}:{}",
            Self::tagged(key),
            self.deps.entropy.owner_value()
        );
        let mut conn = self.deps.conn.clone();
        let reply = if g.owner.ends_with(":write") {
            self.write_unlock
                .key(key)
                .key(&channel)
                .key(&latch)
                .arg(1) // READ_UNLOCK_MESSAGE
                .arg(lease_ms)
                .arg(&g.owner)
                .arg("publish")
                .arg(lock_impl::designs::UNLOCK_LATCH_MS)
                .invoke_async::<Option<i64>>(&mut conn)
                .await
        } else {
            self.read_unlock
                .key(key)
                .key(&channel)
                .key(lock_impl::designs::timeout_prefix(key, &g.owner))
                .key(Self::tagged(key))
                .key(&latch)
                .arg(0) // UNLOCK_MESSAGE
                .arg(&g.owner)
                .arg("publish")
                .arg(lock_impl::designs::UNLOCK_LATCH_MS)
                .invoke_async::<Option<i64>>(&mut conn)
                .await
        };
        match reply {
            // Not this holder's (any more): Redisson throws IllegalMonitorStateException.
            Ok(None) => Ok(Release::NotRemoved),
            // A read unlock's `0`: this reader is out, other holds keep the hash; a
            // write unlock's `0`: a re-entrant hold remains (never, without nesting).
            Ok(Some(0)) if !g.owner.ends_with(":write") => Ok(Release::Removed),
            Ok(Some(0)) => Ok(Release::StillHeld { count: 1 }),
            Ok(Some(_)) => Ok(Release::Removed),
            Err(e) => unknown_or(e, "EVALSHA", Release::Unknown),
        }
    }
}
