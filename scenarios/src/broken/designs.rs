//! The broken designs, each with a doc comment saying what is wrong, and the small
//! helpers every user's lock writes for itself. Only `lock-impl`'s public API is used.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, Wait,
    retry_acquire,
};

// ---- helpers every user's lock writes for itself ----

/// Deletes the key only if it holds `ARGV[1]`.
static COMPARE_AND_DELETE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    )
});

/// A reply that never came (timeout, dropped connection): the command may have run.
fn outcome_unknown(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

fn failed(command: &'static str) -> impl Fn(redis::RedisError) -> LockError {
    move |source| LockError::Redis { command, source }
}

/// A guard valid for the lease from `from`.
fn guard(design: &str, key: &str, owner: String, from: Duration, lease_ms: u64) -> Guard {
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
async fn set(
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
async fn set_attempt(
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

async fn compare_and_delete(deps: &Deps, key: &str, owner: &str) -> Result<Release, LockError> {
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
async fn set_acquire(
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
fn unknown_or<T>(
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
async fn del(deps: &Deps, key: &str) -> Result<Release, LockError> {
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

// ---- the designs ----

/// `constant-owner`: `SET key "locked" NX PX` and a compare-and-delete of `"locked"`.
/// The compare is only as good as the value: with one value for everyone, a holder
/// past its lease deletes the next holder's lock, as a blind `DEL` would.
pub struct ConstantOwner(pub(super) Deps);

#[async_trait]
impl LockDesign for ConstantOwner {
    fn name(&self) -> &str {
        "broken/constant-owner"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            Some("locked"),
            &["NX", "PX"],
            o.lease_ms,
        )
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

/// A lock that differs from `set-nx-px-lua` in one slip of its `SET`: the options it
/// passes and the number it gives as the time to live, computed from the lease in
/// milliseconds. Four of the catalog's bugs are such a slip:
///
/// - `ex-for-px`: `NX EX lease_ms`. The number is right, the unit is not: the server
///   keeps the lock a thousand times longer than the client believes, so a holder
///   that dies leaves it stuck for minutes.
/// - `px-given-seconds`: `NX PX ceil(lease_ms / 1000)`. The lease is kept in seconds
///   in the configuration and handed to `PX`: the server expires the lock after a
///   millisecond or so while the client believes the whole lease.
/// - `xx-for-nx`: `XX PX lease_ms`, a one-letter slip. `XX` sets only an existing key,
///   so a free lock is never taken and every acquire is refused.
/// - `ex-truncated`: `NX EX lease_ms / 1000`, the unit converted by integer division.
///   A lease under a second becomes `EX 0`, which Redis refuses (`ERR invalid expire
///   time in 'set' command`): every acquire ends in an error reply, and a free, wanted
///   lock is never granted.
///
/// Release is `set-nx-px-lua`'s compare-and-delete.
pub struct SetSlip {
    pub(super) name: &'static str,
    pub(super) deps: Deps,
    pub(super) options: &'static [&'static str],
    pub(super) ttl: fn(u64) -> u64,
}

impl SetSlip {
    /// The design `name`, slipping with `options` and `ttl`, as the catalog builds it.
    pub fn boxed(
        name: &'static str,
        deps: Deps,
        options: &'static [&'static str],
        ttl: fn(u64) -> u64,
    ) -> Arc<dyn LockDesign> {
        Arc::new(SetSlip {
            name,
            deps,
            options,
            ttl,
        })
    }
}

#[async_trait]
impl LockDesign for SetSlip {
    fn name(&self) -> &str {
        self.name
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let ttl = (self.ttl)(o.lease_ms);
        set_acquire(self.name, &self.deps, key, o, None, self.options, ttl).await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}

/// `blind-renewal`: `SET NX PX`, and a watchdog that renews every lease/3 with a bare
/// `PEXPIRE key lease`. A holder frozen past its lease wakes up and its watchdog
/// re-arms whatever lock the key now holds: someone else's. Redisson checks
/// `HEXISTS` first for exactly this reason.
pub struct BlindRenewal {
    deps: Deps,
    /// The stop flag of each owner's watchdog.
    watchdogs: Mutex<BTreeMap<String, Arc<AtomicBool>>>,
}

impl BlindRenewal {
    pub(super) fn new(deps: Deps) -> Self {
        Self {
            deps,
            watchdogs: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl LockDesign for BlindRenewal {
    fn name(&self) -> &str {
        "broken/blind-renewal"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
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
        let Acquire::Acquired(mut g) = got else {
            return Ok(got);
        };
        g.valid_until = None; // renewed until released
        let stop = Arc::new(AtomicBool::new(false));
        self.watchdogs
            .lock()
            .expect("watchdog map")
            .insert(g.owner.clone(), stop.clone());
        let deps = self.deps.clone();
        let key = key.to_string();
        let every = Duration::from_millis((o.lease_ms / 3).max(1));
        self.deps.spawner.spawn(Box::pin(async move {
            loop {
                deps.clock.sleep(every).await;
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let _: redis::RedisResult<i64> = redis::cmd("PEXPIRE")
                    .arg(&key)
                    .arg(o.lease_ms)
                    .query_async(&mut deps.conn.clone())
                    .await;
            }
        }));
        Ok(Acquire::Acquired(g))
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        if let Some(stop) = self
            .watchdogs
            .lock()
            .expect("watchdog map")
            .remove(&g.owner)
        {
            stop.store(true, Ordering::SeqCst);
        }
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}

/// `unknown-as-acquired`: `SET NX PX`, and a reply that timed out counts as "OK". The
/// request did reach the server, but the lock may have been held by someone else: the
/// client then believes a lock the server refused it.
pub struct UnknownAsAcquired(pub(super) Deps);

#[async_trait]
impl LockDesign for UnknownAsAcquired {
    fn name(&self) -> &str {
        "broken/unknown-as-acquired"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let owner = self.0.entropy.owner_value();
            let sent = self.0.clock.now();
            match set(&self.0, key, &owner, &["NX", "PX"], o.lease_ms).await {
                Ok(true) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    owner,
                    sent,
                    o.lease_ms,
                ))),
                Ok(false) => Ok(Attempt::Held),
                Err(e) if outcome_unknown(&e) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    owner,
                    sent,
                    o.lease_ms,
                ))),
                Err(e) => Err(failed("SET")(e)),
            }
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

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
    pub(super) fn new(deps: Deps) -> Self {
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

/// `per-client-token`: `SET NX PX` and a fencing token from a counter each client
/// keeps: monotonic per client, meaningless across clients, so two holders present
/// the same token and a storage cannot tell the stale one.
pub struct PerClientToken {
    deps: Deps,
    next: AtomicU64,
}

impl PerClientToken {
    pub(super) fn new(deps: Deps) -> Self {
        Self {
            deps,
            next: AtomicU64::new(1),
        }
    }
}

#[async_trait]
impl LockDesign for PerClientToken {
    fn name(&self) -> &str {
        "broken/per-client-token"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
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
        Ok(match got {
            Acquire::Acquired(mut g) => {
                g.token = Some(self.next.fetch_add(1, Ordering::SeqCst));
                Acquire::Acquired(g)
            }
            other => other,
        })
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}

/// `token-before-lock`: `INCR key:fence` once, then wait for the lock with `SET NX PX`.
/// The token is global but taken at the wrong moment: a waiter that took its token,
/// waited, and won after a later arrival carries a lower token than the holder before
/// it, and a fencing storage turns the new holder away.
pub struct TokenBeforeLock(pub(super) Deps);

#[async_trait]
impl LockDesign for TokenBeforeLock {
    fn name(&self) -> &str {
        "broken/token-before-lock"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let token: u64 = match redis::cmd("INCR")
            .arg(format!("{key}:fence"))
            .query_async(&mut self.0.conn.clone())
            .await
        {
            Ok(t) => t,
            Err(e) => return unknown_or(e, "INCR", Acquire::Unknown),
        };
        let got = set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await?;
        Ok(match got {
            Acquire::Acquired(mut g) => {
                g.token = Some(token);
                Acquire::Acquired(g)
            }
            other => other,
        })
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

/// `waiter-ignores-ttl`: `SET NX PX`; a waiter subscribes to `unlock:{key}` and sleeps
/// until a message (or its whole budget) before trying again; release publishes. The
/// TTL is never consulted, so when the unlock message is lost the waiter sleeps
/// through a free lock.
pub struct WaiterIgnoresTtl(pub(super) Deps);

#[async_trait]
impl LockDesign for WaiterIgnoresTtl {
    fn name(&self) -> &str {
        "broken/waiter-ignores-ttl"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        o.validate()?;
        let deps = &self.0;
        let start = deps.clock.now();
        let budget = match o.wait {
            Wait::TryOnce => Duration::ZERO,
            Wait::Retry { budget_ms, .. } => Duration::from_millis(budget_ms),
        };
        let left = || budget.saturating_sub(deps.clock.now().saturating_sub(start));
        let channel = format!("unlock:{key}");
        loop {
            let owner = deps.entropy.owner_value();
            match set_attempt(
                self.name(),
                deps,
                key,
                owner,
                &["NX", "PX"],
                o.lease_ms,
                o.lease_ms,
            )
            .await?
            {
                Attempt::Acquired(g) => return Ok(Acquire::Acquired(g)),
                Attempt::Unknown(why) => return Ok(Acquire::Unknown(why)),
                Attempt::Held => {}
            }
            if left().is_zero() {
                return Ok(Acquire::NotAcquired);
            }
            let sub = async {
                let mut sub = deps.pubsub.as_ref()?.connect().await.ok()?;
                sub.subscribe(&channel).await.ok()?;
                Some(sub)
            };
            tokio::select! {
                biased;
                () = deps.clock.sleep(left()) => return Ok(Acquire::NotAcquired),
                sub = sub => match sub {
                    Some(mut sub) => {
                        let mut messages = sub.on_message();
                        tokio::select! {
                            biased;
                            _ = messages.next() => {}
                            () = deps.clock.sleep(left()) => {}
                        }
                    }
                    None => deps.clock.sleep(left()).await,
                },
            }
        }
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        let released = compare_and_delete(&self.0, &g.key, &g.owner).await?;
        if released == Release::Removed {
            let _: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                .arg(format!("unlock:{}", g.key))
                .arg("released")
                .query_async(&mut self.0.conn.clone())
                .await;
        }
        Ok(released)
    }
}

/// `validity-from-reply`: `SET NX PX`, with the lease counted from the moment the
/// reply arrived. The server started counting when it ran the command; a reply that
/// took most of the lease to arrive leaves the client believing it has a whole lease
/// left while the next holder already has the lock.
pub struct ValidityFromReply(pub(super) Deps);

#[async_trait]
impl LockDesign for ValidityFromReply {
    fn name(&self) -> &str {
        "broken/validity-from-reply"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let owner = self.0.entropy.owner_value();
            Ok(
                match set_attempt(
                    self.name(),
                    &self.0,
                    key,
                    owner,
                    &["NX", "PX"],
                    o.lease_ms,
                    o.lease_ms,
                )
                .await?
                {
                    Attempt::Acquired(g) => {
                        let now = self.0.clock.now();
                        Attempt::Acquired(guard(self.name(), key, g.owner, now, o.lease_ms))
                    }
                    other => other,
                },
            )
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

/// `wall-clock-validity`: the validity is measured on the wall clock, from a reading
/// taken once before the wait, as node-redlock 5.0.0-beta.2 does (`start = Date.now()`
/// before its retries, `expiration = start + duration - drift`) and as every client
/// that computes its lease on `time.time()`, `Date.now()` or `currentTimeMillis()`
/// does. The guard's validity is where the monotonic clock stands when the wall clock
/// reads `start + lease`: a backward step of the client's wall clock while it waits
/// stretches the validity it believes past the key's expiry on the server.
pub struct WallClockValidity(pub(super) Deps);

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

/// `getset-timestamp`: the recipe Redis's own `SETNX` page used to print. The value is
/// the lock's expiry time (here `expiry|owner`); `SETNX` takes a free lock; a waiter
/// that reads an expired time takes over with `GETSET` and wins if the old value it
/// got back was still expired. Two waiters that both read the expired time both
/// `GETSET`: one wins, and the loser has already overwritten the winner's value. The
/// key has no TTL, and expiry is judged by the clients' clocks.
pub struct GetsetTimestamp(pub(super) Deps);

impl GetsetTimestamp {
    fn expiry(value: &str) -> Option<u64> {
        value.split('|').next()?.parse().ok()
    }

    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.0;
        let sent = deps.clock.now();
        let now_ms = sent.as_millis() as u64;
        let value = format!("{}|{}", now_ms + lease_ms, deps.entropy.owner_value());
        let mut conn = deps.conn.clone();
        match redis::cmd("SETNX")
            .arg(key)
            .arg(&value)
            .query_async::<i64>(&mut conn)
            .await
        {
            Ok(1) => {
                return Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    value,
                    sent,
                    lease_ms,
                )));
            }
            Ok(_) => {}
            Err(e) => return unknown_or(e, "SETNX", Attempt::Unknown),
        }
        let current: Option<String> = match redis::cmd("GET").arg(key).query_async(&mut conn).await
        {
            Ok(v) => v,
            Err(e) => return unknown_or(e, "GET", Attempt::Unknown),
        };
        if current
            .as_deref()
            .and_then(Self::expiry)
            .is_none_or(|exp| exp > now_ms)
        {
            return Ok(Attempt::Held);
        }
        let old: Option<String> = match redis::cmd("GETSET")
            .arg(key)
            .arg(&value)
            .query_async(&mut conn)
            .await
        {
            Ok(v) => v,
            Err(e) => return unknown_or(e, "GETSET", Attempt::Unknown),
        };
        if old
            .as_deref()
            .and_then(Self::expiry)
            .is_none_or(|exp| exp <= now_ms)
        {
            Ok(Attempt::Acquired(guard(
                self.name(),
                key,
                value,
                sent,
                lease_ms,
            )))
        } else {
            Ok(Attempt::Held)
        }
    }
}

#[async_trait]
impl LockDesign for GetsetTimestamp {
    fn name(&self) -> &str {
        "broken/getset-timestamp"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || self.attempt(key, o.lease_ms)).await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        // The recipe: delete only a lock that is still ours and not yet expired.
        let mut conn = self.0.conn.clone();
        let current: Option<String> =
            match redis::cmd("GET").arg(&g.key).query_async(&mut conn).await {
                Ok(v) => v,
                Err(e) => return unknown_or(e, "GET", Release::Unknown),
            };
        if current.as_deref() != Some(g.owner.as_str()) {
            return Ok(Release::HeldByOther);
        }
        del(&self.0, &g.key).await
    }
}

/// Redisson's lock script with the owner id as an argument.
static REENTRANT_LOCK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
           redis.call('hincrby', KEYS[1], ARGV[2], 1)
           redis.call('pexpire', KEYS[1], ARGV[1])
           return nil
         end
         return redis.call('pttl', KEYS[1])",
    )
});

/// Counts one hold down; deletes the key at zero. -1: not ours.
static REENTRANT_UNLOCK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end
         local left = redis.call('hincrby', KEYS[1], ARGV[1], -1)
         if left > 0 then return left end
         redis.call('del', KEYS[1])
         return 0",
    )
});

/// `shared-reentrant-id`: a Redisson-style reentrant hash lock whose owner id is
/// configured as the service's name (`worker:1`), the same in every instance. A lock
/// held by one instance looks like a re-entry to every other, so they all go in.
pub struct SharedReentrantId(pub(super) Deps);

#[async_trait]
impl LockDesign for SharedReentrantId {
    fn name(&self) -> &str {
        "broken/shared-reentrant-id"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let sent = self.0.clock.now();
            match REENTRANT_LOCK
                .key(key)
                .arg(o.lease_ms)
                .arg("worker:1")
                .invoke_async::<Option<i64>>(&mut self.0.conn.clone())
                .await
            {
                Ok(None) => Ok(Attempt::Acquired(guard(
                    self.name(),
                    key,
                    "worker:1".into(),
                    sent,
                    o.lease_ms,
                ))),
                Ok(Some(_)) => Ok(Attempt::Held),
                Err(e) => unknown_or(e, "EVALSHA", Attempt::Unknown),
            }
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        match REENTRANT_UNLOCK
            .key(&g.key)
            .arg(&g.owner)
            .invoke_async::<i64>(&mut self.0.conn.clone())
            .await
        {
            Ok(0) => Ok(Release::Removed),
            Ok(-1) => Ok(Release::NotRemoved),
            Ok(n) => Ok(Release::StillHeld { count: n as u64 }),
            Err(e) => unknown_or(e, "EVALSHA", Release::Unknown),
        }
    }
}

/// `release-falls-back-to-del`: a compare-and-delete, and when it removed nothing a
/// plain `DEL` "to make sure the lock is gone". When the lease ran out and someone
/// else took the lock, that `DEL` removes their lock.
pub struct ReleaseFallsBackToDel(pub(super) Deps);

#[async_trait]
impl LockDesign for ReleaseFallsBackToDel {
    fn name(&self) -> &str {
        "broken/release-falls-back-to-del"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        set_acquire(
            self.name(),
            &self.0,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        let first = compare_and_delete(&self.0, &g.key, &g.owner).await?;
        if first != Release::NotRemoved {
            return Ok(first);
        }
        del(&self.0, &g.key).await
    }
}

/// `check-then-set`: `GET key`, and if it was absent `SET key owner PX lease` without
/// `NX`. Between the check and the set another client can do the same: both believe
/// they hold the lock, and the second `SET` overwrote the first.
pub struct CheckThenSet(pub(super) Deps);

#[async_trait]
impl LockDesign for CheckThenSet {
    fn name(&self) -> &str {
        "broken/check-then-set"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        retry_acquire(&self.0, key, o, || async {
            let current: Option<String> = match redis::cmd("GET")
                .arg(key)
                .query_async(&mut self.0.conn.clone())
                .await
            {
                Ok(v) => v,
                Err(e) => return unknown_or(e, "GET", Attempt::Unknown),
            };
            if current.is_some() {
                return Ok(Attempt::Held);
            }
            let owner = self.0.entropy.owner_value();
            set_attempt(
                self.name(),
                &self.0,
                key,
                owner,
                &["PX"],
                o.lease_ms,
                o.lease_ms,
            )
            .await
        })
        .await
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        compare_and_delete(&self.0, &g.key, &g.owner).await
    }
}

// ---- read-write locks ----

/// An edit of a verbatim script: `from` replaced by `to`, once. The edit is asserted
/// to apply, so a change of the verbatim text cannot silently leave a broken copy
/// correct (`designs::tests` builds every edited script).
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

/// A user's copy of Redisson's `RReadWriteLock` (`redisson-rw`): the scripts of
/// Redisson 3.52.0 as `lock-impl` ships them (`REDISSON_READ_LOCK`, `…_READ_UNLOCK`,
/// `…_WRITE_LOCK`, `…_WRITE_UNLOCK`, `…_READ_RENEW` and `REDISSON_RENEW`, with the
/// same keys and arguments), one of them edited by the bug ([`RwEdit`]), and the
/// watchdog `tryLock(wait, -1)` starts: every lease/3 a read holder runs the read
/// renewal and a write holder `RedissonLock`'s, until the release or a renewal that
/// finds nothing. What the copy leaves out of Redisson: a waiter polls with
/// [`retry_acquire`]'s backoff instead of waiting for the unlock message. The copy
/// with no edit ([`RwEdit::Verbatim`]) is run beside the broken ones on their
/// scenarios and seeds (`scenarios/tests/broken.rs`) and is never caught, so a catch
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_write_edit_applies_to_the_verbatim_script() {
        assert_ne!(
            WRITE_IGNORES_READERS.as_str(),
            lock_impl::designs::REDISSON_WRITE_LOCK
        );
        assert!(WRITE_IGNORES_READERS.contains("if (mode ~= 'write') then"));
        assert_ne!(
            READ_UNLOCK_DELETES_HASH.as_str(),
            lock_impl::designs::REDISSON_READ_UNLOCK
        );
        assert!(!READ_UNLOCK_DELETES_HASH.contains("hlen"));
        assert_ne!(
            READ_RENEWAL_SKIPS_TIMEOUTS.as_str(),
            lock_impl::designs::REDISSON_READ_RENEW
        );
        assert!(!READ_RENEWAL_SKIPS_TIMEOUTS.contains("hlen"));
    }
}
