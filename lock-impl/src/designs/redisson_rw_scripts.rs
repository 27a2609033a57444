//! The read-write lock's side of Redis: Redisson 3.52.0's `RedissonReadLock` and
//! `RedissonWriteLock` scripts (verbatim, under `lock-impl/scripts/`), the key and
//! channel names they use, and each call ([`Call`]). Both the read-write design
//! ([`super::RedissonRw`]) and the lock machinery it runs on
//! ([`super::ReentrantWatchdog`]'s read-write flavour) use them; this file uses
//! neither.

use std::sync::LazyLock;

use super::redisson_sync::Call;
use crate::Deps;

/// The design's user-facing name (`RedissonRw::NAME`).
pub(crate) const RW_NAME: &str = "redisson-rw";

/// `RedissonReadLock.tryLockInnerAsync`, verbatim (the Java literals concatenated, as
/// sent). `KEYS[1]` the lock hash, `KEYS[2]` this holder's timeout-key prefix; `ARGV[1]`
/// lease ms, `ARGV[2]` the holder's lock name, `ARGV[3]` its write lock name. A free lock
/// becomes `mode = read`; a read lock (or a write lock this holder holds) gains one more
/// read hold and one more timeout key `KEYS[2]:<n>`; `nil` when granted, else `PTTL`.
pub const REDISSON_READ_LOCK: &str = include_str!("../../scripts/redisson_read_lock.lua");
/// `RedissonReadLock.unlockInnerAsync`, verbatim: the unlock latch `KEYS[5]`, then one
/// read hold down and its timeout key deleted; while other holds remain the hash lives
/// as long as their longest timeout key (`0`), else it is deleted and the unlock message
/// published (`1`); `nil` if this holder holds nothing.
pub const REDISSON_READ_UNLOCK: &str = include_str!("../../scripts/redisson_read_unlock.lua");
/// `RedissonWriteLock.tryLockInnerAsync`, verbatim: a free lock becomes `mode = write`
/// with this holder's `:write` field; re-entry adds a lease; `nil` when granted, else
/// `PTTL`.
pub const REDISSON_WRITE_LOCK: &str = include_str!("../../scripts/redisson_write_lock.lua");
/// `RedissonWriteLock.unlockInnerAsync`, verbatim: one write hold down; at zero the hash
/// is deleted and the unlock message published, or, if this holder also took read
/// holds, the hash goes back to `mode = read` (`1`); `0` while holds remain; `nil` if
/// the lock is not a write lock of this holder.
pub const REDISSON_WRITE_UNLOCK: &str = include_str!("../../scripts/redisson_write_unlock.lua");
/// `ReadLockTask.renew` (the read lock's watchdog), verbatim: for each `(hash, key
/// prefix)` pair of `KEYS`, if the holder `ARGV[j]` still has a field, re-arm the hash
/// and every holder's timeout keys with `ARGV[1]`; one `1` or `0` per lock.
pub const REDISSON_READ_RENEW: &str = include_str!("../../scripts/redisson_read_renew.lua");

static READ_LOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_READ_LOCK));
static READ_UNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_READ_UNLOCK));
static WRITE_LOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_WRITE_LOCK));
static WRITE_UNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_WRITE_UNLOCK));
static READ_RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_READ_RENEW));

/// `LockPubSub.UNLOCK_MESSAGE`, which the read lock's unlock publishes.
const UNLOCK_MESSAGE: i64 = 0;
/// `LockPubSub.READ_UNLOCK_MESSAGE`, which the write lock's unlock publishes.
const READ_UNLOCK_MESSAGE: i64 = 1;
/// `getSubscribeService().getPublishCommand()` outside sharded Redis Cluster.
const PUBLISH: &str = "publish";
/// The unlock latch's lifetime (`unlockInnerAsync`'s `timeout`):
/// `(timeout + retryDelay.calcDelay(retryAttempts)) * retryAttempts` with Redisson
/// 3.52.0's defaults (`timeout` 3000 ms, `retryAttempts` 4, `EqualJitterDelay(1 s, 2 s)`),
/// the jittered delay taken at its 2 s ceiling so that no randomness is spent on it.
pub const UNLOCK_LATCH_MS: u64 = (3_000 + 2_000) * 4;

/// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name` when the
/// name already carries a hash tag.
fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Redisson's `suffixName(name, suffix)`: `{name}:suffix`, or `name:suffix` when the
/// name already carries a hash tag.
fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The channel of a read-write lock's unlock messages (`getChannelName`:
/// `redisson_rwlock:{key}`).
pub fn channel(key: &str) -> String {
    prefix_name("redisson_rwlock", key)
}

/// `getReadWriteTimeoutNamePrefix`: the prefix of a read holder's timeout keys,
/// `{key}:<lock name>:rwlock_timeout` (the keys are this plus `:<n>`, one per hold).
pub fn timeout_prefix(key: &str, lock_name: &str) -> String {
    format!("{}:rwlock_timeout", suffix_name(key, lock_name))
}

/// `getKeyPrefix`: the timeout prefix cut before `:<lock name>` (`{key}`).
fn key_prefix(key: &str, lock_name: &str) -> String {
    let prefix = timeout_prefix(key, lock_name);
    let cut = format!(":{lock_name}");
    match prefix.split_once(&cut) {
        Some((head, _)) => head.to_string(),
        None => prefix,
    }
}

/// The read lock script for `owner` (`getLockName(threadId)`).
pub(crate) fn lock_read(key: &str, owner: &str, lease_ms: u64) -> Call {
    Call {
        script: &READ_LOCK,
        source: REDISSON_READ_LOCK,
        keys: vec![key.to_string(), timeout_prefix(key, owner)],
        args: vec![
            lease_ms.to_string(),
            owner.to_string(),
            format!("{owner}:write"),
        ],
    }
}

/// The write lock script for `owner` (already `getLockName(threadId):write`).
pub(crate) fn lock_write(key: &str, owner: &str, lease_ms: u64) -> Call {
    Call {
        script: &WRITE_LOCK,
        source: REDISSON_WRITE_LOCK,
        keys: vec![key.to_string()],
        args: vec![lease_ms.to_string(), owner.to_string()],
    }
}

/// The read lock's renewal for one lock: one `1` (renewed) or `0` (the holder holds
/// nothing) per lock, here one.
pub(crate) fn renew_read(key: &str, owner: &str, lease_ms: u64) -> Call {
    Call {
        script: &READ_RENEW,
        source: REDISSON_READ_RENEW,
        keys: vec![key.to_string(), key_prefix(key, owner)],
        args: vec![lease_ms.to_string(), owner.to_string()],
    }
}

/// Whether `owner` is a write lock's field (`…:write`).
pub(crate) fn is_write_owner(owner: &str) -> bool {
    owner.ends_with(":write")
}

/// The unlock of the side `owner` names, with a fresh unlock latch
/// (`redisson_unlock_latch:{key}:<request id>`, the id from [`Deps::entropy`]); the
/// same call, resent, answers as the first did. `lease_ms` is the hold's
/// `internalLockLeaseTime` (the write unlock re-arms it).
pub(crate) fn unlock(deps: &Deps, key: &str, owner: &str, lease_ms: u64) -> Call {
    let latch = format!(
        "{}:{}",
        prefix_name("redisson_unlock_latch", key),
        deps.entropy.owner_value()
    );
    if is_write_owner(owner) {
        Call {
            script: &WRITE_UNLOCK,
            source: REDISSON_WRITE_UNLOCK,
            keys: vec![key.to_string(), channel(key), latch],
            args: vec![
                READ_UNLOCK_MESSAGE.to_string(),
                lease_ms.to_string(),
                owner.to_string(),
                PUBLISH.to_string(),
                UNLOCK_LATCH_MS.to_string(),
            ],
        }
    } else {
        Call {
            script: &READ_UNLOCK,
            source: REDISSON_READ_UNLOCK,
            keys: vec![
                key.to_string(),
                channel(key),
                timeout_prefix(key, owner),
                key_prefix(key, owner),
                latch,
            ],
            args: vec![
                UNLOCK_MESSAGE.to_string(),
                owner.to_string(),
                PUBLISH.to_string(),
                UNLOCK_LATCH_MS.to_string(),
            ],
        }
    }
}
