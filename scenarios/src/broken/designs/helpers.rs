//! The small helpers every user's lock writes for itself, shared by the broken
//! designs.

use std::sync::LazyLock;
use std::time::Duration;

use lock_impl::{Acquire, AcquireOptions, Attempt, Deps, Guard, LockError, Release, retry_acquire};

/// Deletes the key only if it holds `ARGV[1]`.
pub(super) static COMPARE_AND_DELETE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    )
});

/// A reply that never came (timeout, dropped connection): the command may have run.
pub(super) fn outcome_unknown(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

pub(super) fn failed(command: &'static str) -> impl Fn(redis::RedisError) -> LockError {
    move |source| LockError::Redis { command, source }
}

/// A guard valid for the lease from `from`.
pub(super) fn guard(
    design: &str,
    key: &str,
    owner: String,
    from: Duration,
    lease_ms: u64,
) -> Guard {
    Guard {
        design: design.into(),
        key: key.into(),
        owner,
        acquired_at: from,
        valid_until: Some(from + Duration::from_millis(lease_ms)),
        token: None,
    }
}

/// `SET key owner <flags…> <ttl>` (e.g. flags `NX PX`): whether it set the key.
pub(super) async fn set(
    deps: &Deps,
    key: &str,
    owner: &str,
    flags: &[&str],
    ttl: u64,
) -> redis::RedisResult<bool> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(owner);
    for a in flags {
        cmd.arg(*a);
    }
    cmd.arg(ttl);
    let reply: Option<String> = cmd.query_async(&mut deps.conn.clone()).await?;
    Ok(reply.is_some())
}

/// One `SET` attempt that becomes an [`Attempt`] (unknown outcomes stay unknown).
pub(super) async fn set_attempt(
    design: &str,
    deps: &Deps,
    key: &str,
    owner: String,
    flags: &'static [&'static str],
    ttl: u64,
    lease_ms: u64,
) -> Result<Attempt, LockError> {
    let sent = deps.clock.now();
    match set(deps, key, &owner, flags, ttl).await {
        Ok(true) => Ok(Attempt::Acquired(guard(design, key, owner, sent, lease_ms))),
        Ok(false) => Ok(Attempt::Held),
        Err(e) => unknown_or(e, "SET", Attempt::Unknown),
    }
}

pub(super) async fn compare_and_delete(
    deps: &Deps,
    key: &str,
    owner: &str,
) -> Result<Release, LockError> {
    match COMPARE_AND_DELETE
        .key(key)
        .arg(owner)
        .invoke_async::<i64>(&mut deps.conn.clone())
        .await
    {
        Ok(1) => Ok(Release::Removed),
        Ok(_) => Ok(Release::NotRemoved),
        Err(e) => unknown_or(e, "EVALSHA", Release::Unknown),
    }
}

/// Acquires within the wait budget with `SET key <owner> <flags…> <ttl>`: a fresh owner
/// value per attempt, unless `owner` names the one to use.
pub(super) async fn set_acquire(
    design: &str,
    deps: &Deps,
    key: &str,
    o: AcquireOptions,
    owner: Option<&str>,
    flags: &'static [&'static str],
    ttl: u64,
) -> Result<Acquire, LockError> {
    retry_acquire(deps, key, o, || {
        let owner = owner.map_or_else(|| deps.entropy.owner_value(), str::to_string);
        set_attempt(design, deps, key, owner, flags, ttl, o.lease_ms)
    })
    .await
}

/// An error that leaves the outcome unknown becomes `unknown(text)`; any other is the
/// command's failure.
pub(super) fn unknown_or<T>(
    e: redis::RedisError,
    command: &'static str,
    unknown: impl FnOnce(String) -> T,
) -> Result<T, LockError> {
    if outcome_unknown(&e) {
        Ok(unknown(e.to_string()))
    } else {
        Err(failed(command)(e))
    }
}

/// `DEL key`, whoever holds it.
pub(super) async fn del(deps: &Deps, key: &str) -> Result<Release, LockError> {
    match redis::cmd("DEL")
        .arg(key)
        .query_async::<i64>(&mut deps.conn.clone())
        .await
    {
        Ok(1) => Ok(Release::Removed),
        Ok(_) => Ok(Release::NotFound),
        Err(e) => unknown_or(e, "DEL", Release::Unknown),
    }
}
