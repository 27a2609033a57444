//! The built-in designs, one module each, and the commands they share.

mod etcd;
mod fenced;
mod mongo;
mod mysql;
mod node_redlock;
mod node_redlock_using;
mod redis_py;
mod redisson_redlock;
mod redisson_retry;
mod redisson_rw;
mod redisson_rw_scripts;
mod redisson_sync;
mod redlock;
mod redsync;
mod reentrant_watchdog;
pub(crate) mod registry;
mod set_nx_px_check_del;
mod set_nx_px_del;
mod set_nx_px_lua;
mod setnx_del;
mod setnx_expire;
mod setnx_getset;
mod wait_synced;
mod zk_curator;

/// What `lock-impl-tests`' unit tests (`tests/units`) reach inside the designs' private
/// modules. Not an API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod internals {
    pub use super::redisson_retry::Version as RedissonVersion;
    pub use super::setnx_getset::timestamp as setnx_getset_timestamp;
    pub use super::zk_curator::fix_for_sorting;
    use crate::zk::{ZkClient, ZkError};

    /// [`super::ZkCurator`]'s current ZooKeeper handle.
    pub fn zk_curator_handle(c: &super::ZkCurator) -> Result<ZkClient, ZkError> {
        c.handle()
    }

    /// Runs `op` with [`super::ZkCurator`]'s retry loop (Curator's `RetryLoop`).
    pub async fn zk_curator_retrying<T, F, Fut>(c: &super::ZkCurator, op: F) -> Result<T, ZkError>
    where
        F: FnMut(ZkClient) -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, ZkError>> + Send,
        T: Send,
    {
        c.retrying(op).await
    }
}

pub use etcd::EtcdMutex;
pub use fenced::{FENCED_ACQUIRE, Fenced};
pub use mongo::{MONGO_LOCKS_COLLECTION, MongoFindAndModify};
pub use mysql::{
    MYSQL_FENCES_TABLE, MYSQL_LEASES_TABLE, MYSQL_LOCK_ROWS_TABLE, MYSQL_LOCKS_TABLE, MySqlExpiry,
    MySqlForUpdate, MySqlGetLock, MySqlUniqueIndex, get_lock_owner,
};
pub use node_redlock::{
    NODE_REDLOCK_ACQUIRE, NODE_REDLOCK_EXTEND, NODE_REDLOCK_RELEASE, NodeRedlock,
};
pub use node_redlock_using::NodeRedlockUsing;
pub use redis_py::{REDIS_PY_EXTEND, REDIS_PY_REACQUIRE, REDIS_PY_RELEASE, RedisPy};
pub use redisson_redlock::RedissonRedlock;
pub use redisson_retry::Version as RedissonVersion;
pub use redisson_rw::{
    REDISSON_READ_LOCK, REDISSON_READ_RENEW, REDISSON_READ_UNLOCK, REDISSON_WRITE_LOCK,
    REDISSON_WRITE_UNLOCK, RedissonRw, UNLOCK_LATCH_MS, timeout_prefix,
};
pub use redisson_sync::NOT_SYNCED as REDISSON_NOT_SYNCED;
pub use redlock::Redlock;
pub use redsync::{REDSYNC_DELETE, REDSYNC_TOUCH, REDSYNC_TOUCH_SETNX, Redsync};
pub use reentrant_watchdog::{
    REDISSON_FENCED_LOCK, REDISSON_LOCK, REDISSON_RENEW, REDISSON_UNLOCK, ReentrantWatchdog,
};
pub use set_nx_px_check_del::SetNxPxCheckDel;
pub use set_nx_px_del::SetNxPxDel;
pub use set_nx_px_lua::SetNxPxLua;
pub use setnx_del::SetnxDel;
pub use setnx_expire::SetnxExpire;
pub use setnx_getset::SetnxGetset;
pub use wait_synced::WaitSynced;
pub use zk_curator::{ZK_LOCK_ROOT, ZkCurator};

use std::time::Duration;

use crate::lock::{Attempt, classify};
use crate::{Deps, Guard, LockError, Release};

/// Refuses a guard issued by another design: releasing it with this design's command
/// would test a lock nobody ships.
pub(crate) fn check_guard(design: &str, guard: &Guard) -> Result<(), LockError> {
    if guard.design != design {
        return Err(LockError::ForeignGuard {
            key: guard.key.clone(),
            issued_by: guard.design.clone(),
            released_by: design.to_string(),
        });
    }
    if guard.key.is_empty() {
        return Err(LockError::EmptyKey);
    }
    Ok(())
}

/// A guard for an acquisition sent at client time `sent_at`.
pub(crate) fn guard(
    design: &str,
    key: &str,
    owner: String,
    sent_at: Duration,
    lease_ms: Option<u64>,
) -> Guard {
    Guard {
        design: design.to_string(),
        key: key.to_string(),
        owner,
        acquired_at: sent_at,
        valid_until: lease_ms.map(|ms| sent_at + Duration::from_millis(ms)),
        token: None,
    }
}

/// `SET key owner NX PX lease`: one atomic command that takes the lock and arms its
/// expiry (the Redis `SET` page's `NX`/`PX`; the four-ideas article's idea 3, named in
/// docs/designs.md, "Where the designs come from").
pub(crate) async fn set_nx_px(
    design: &str,
    deps: &Deps,
    key: &str,
    lease_ms: u64,
) -> Result<Attempt, LockError> {
    let owner = deps.entropy.owner_value();
    let sent_at = deps.clock.now();
    let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
        .arg(key)
        .arg(&owner)
        .arg("NX")
        .arg("PX")
        .arg(lease_ms)
        .query_async(&mut deps.conn.clone())
        .await;
    match reply {
        Ok(Some(_ok)) => Ok(Attempt::Acquired(guard(
            design,
            key,
            owner,
            sent_at,
            Some(lease_ms),
        ))),
        Ok(None) => Ok(Attempt::Held),
        Err(e) => classify("SET NX PX", e).map(Attempt::Unknown),
    }
}

/// `SETNX key owner`: `true` if the key was set.
pub(crate) async fn setnx(
    deps: &Deps,
    key: &str,
    owner: &str,
) -> Result<Result<bool, String>, LockError> {
    let reply: redis::RedisResult<i64> = redis::cmd("SETNX")
        .arg(key)
        .arg(owner)
        .query_async(&mut deps.conn.clone())
        .await;
    match reply {
        Ok(n) => Ok(Ok(n == 1)),
        Err(e) => classify("SETNX", e).map(Err),
    }
}

/// The compare-and-delete script of the Redis docs' "Distributed Locks with Redis" page
/// (as the four-ideas and three-Redis-locks articles print it), verbatim.
pub const COMPARE_AND_DELETE: &str = include_str!("../../scripts/compare_and_delete.lua");

pub(crate) static COMPARE_AND_DELETE_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(COMPARE_AND_DELETE));

/// Release by the Lua compare-and-delete (`EVALSHA`, `SCRIPT LOAD` on `NOSCRIPT`): the
/// server deletes the key only if it still holds our owner value, atomically.
pub(crate) async fn compare_and_delete(deps: &Deps, guard: &Guard) -> Result<Release, LockError> {
    let reply: redis::RedisResult<i64> = COMPARE_AND_DELETE_SCRIPT
        .key(&guard.key)
        .arg(&guard.owner)
        .invoke_async(&mut deps.conn.clone())
        .await;
    match reply {
        Ok(1) => Ok(Release::Removed),
        Ok(_) => Ok(Release::NotRemoved),
        Err(e) => classify("EVALSHA", e).map(Release::Unknown),
    }
}

/// `DEL key`, whoever holds it: the release of the four-ideas article and of Dewu's
/// ticket walk-through before they add the owner check (docs/designs.md, "Where the
/// designs come from").
pub(crate) async fn blind_del(deps: &Deps, key: &str) -> Result<Release, LockError> {
    let reply: redis::RedisResult<i64> = redis::cmd("DEL")
        .arg(key)
        .query_async(&mut deps.conn.clone())
        .await;
    match reply {
        Ok(1) => Ok(Release::Removed),
        Ok(_) => Ok(Release::NotFound),
        Err(e) => classify("DEL", e).map(Release::Unknown),
    }
}
