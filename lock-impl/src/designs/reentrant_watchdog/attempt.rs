//! One lock attempt and the wait around it: `tryLock`'s loop, the lock and unlock
//! script calls, and the fenced lock's reply.

use super::*;

impl ReentrantWatchdog {
    /// `RedissonLock.tryLock(waitTime, leaseTime)`'s loop: one attempt; on failure subscribe, then retry on each
    /// unlock message or once the holder's TTL has passed, until the budget is spent.
    pub(super) async fn try_lock(
        &self,
        key: &str,
        lease: Lease,
        wait_ms: u64,
        task: u64,
        side: Side,
    ) -> Result<Acquire, LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        // A read-write lock has no lock of its own: its exclusive side is the write lock.
        let side = match (self.flavor, side) {
            (Flavor::ReadWrite, Side::Only) => Side::Write,
            (_, side) => side,
        };
        let owner = self.owner_on(task, side);
        let clock = &self.deps.clock;
        let start = self.wait_clock();
        let budget = Duration::from_millis(wait_ms);
        match self.attempt(key, &owner, lease, side).await? {
            Try::Acquired(g) => return Ok(Acquire::Acquired(g)),
            Try::Unknown(why) => return Ok(Acquire::Unknown(why)),
            Try::Held { .. } => {}
        }
        let remaining =
            |_: &Arc<dyn Clock>| budget.saturating_sub(self.wait_clock().saturating_sub(start));
        if remaining(clock).is_zero() {
            return Ok(Acquire::NotAcquired);
        }
        // Subscribe before the next attempt, within the budget; without a subscriber
        // (none configured, or it failed) the waiter sleeps out the holder's TTL.
        let mut subscriber = match &self.deps.pubsub {
            None => None,
            Some(connector) => {
                let channel = self.channel_of(key);
                let subscribe = async {
                    let mut sub = connector.connect().await.ok()?;
                    sub.subscribe(&channel).await.ok()?;
                    Some(sub)
                };
                tokio::select! {
                    biased;
                    sub = subscribe => sub,
                    () = clock.sleep(remaining(clock)) => return Ok(Acquire::NotAcquired),
                }
            }
        };
        loop {
            let ttl_ms = match self.attempt(key, &owner, lease, side).await? {
                Try::Acquired(g) => return Ok(Acquire::Acquired(g)),
                Try::Unknown(why) => return Ok(Acquire::Unknown(why)),
                Try::Held { ttl_ms } => ttl_ms,
            };
            let left = remaining(clock);
            if left.is_zero() {
                return Ok(Acquire::NotAcquired);
            }
            // A key without expiry (TTL -1) gives no deadline: wait out the budget.
            let pause = match u64::try_from(ttl_ms) {
                Ok(ttl) => Duration::from_millis(ttl.max(1)).min(left),
                Err(_) => left,
            };
            match subscriber.as_mut() {
                Some(sub) => {
                    let closed = {
                        let mut messages = sub.on_message();
                        tokio::select! {
                            biased;
                            msg = messages.next() => msg.is_none(),
                            () = clock.sleep(pause) => false,
                        }
                    };
                    if closed {
                        subscriber = None;
                    }
                }
                None => clock.sleep(pause).await,
            }
            if remaining(clock).is_zero() {
                return Ok(Acquire::NotAcquired);
            }
        }
    }

    /// The lock script of `side` for `owner`.
    pub(super) fn lock_call(&self, key: &str, owner: &str, lease: Lease, side: Side) -> Call {
        match side {
            Side::Only if self.flavor == Flavor::Fenced => Call {
                script: &FENCED_LOCK,
                source: REDISSON_FENCED_LOCK,
                keys: vec![key.to_string(), Self::token_key(key)],
                args: vec![lease.ms().to_string(), owner.to_string()],
            },
            Side::Only => Call {
                script: &LOCK,
                source: REDISSON_LOCK,
                keys: vec![key.to_string()],
                args: vec![lease.ms().to_string(), owner.to_string()],
            },
            Side::Read => redisson_rw_scripts::lock_read(key, owner, lease.ms()),
            Side::Write => redisson_rw_scripts::lock_write(key, owner, lease.ms()),
        }
    }

    /// The unlock script for `owner`'s hold on `key`, re-arming `lease_ms` if holds
    /// remain.
    pub(super) fn unlock_call(&self, key: &str, owner: &str, lease_ms: u64) -> Call {
        match self.flavor {
            Flavor::ReadWrite => redisson_rw_scripts::unlock(&self.deps, key, owner, lease_ms),
            Flavor::Lock | Flavor::Fenced => Call {
                script: &UNLOCK,
                source: REDISSON_UNLOCK,
                keys: vec![key.to_string(), Self::channel(key)],
                args: vec![
                    UNLOCK_MESSAGE.to_string(),
                    lease_ms.to_string(),
                    owner.to_string(),
                ],
            },
        }
    }

    /// One acquisition attempt as Redisson's `tryAcquire` makes it: the lock script,
    /// synced ([`redisson_sync`]), and what the version does when no replica
    /// acknowledged it. 3.20's `RLock` (`handleNoSync`): unlock, then fail. 3.52.0's
    /// `RLock` and read-write locks: unlock, and run the attempt again up to
    /// `retryAttempts` times, `retryDelay` apart (`ServiceManager.execute`), then fail.
    /// 3.52.0's fenced lock (`RedissonFencedLock.tryAcquireAsync`, no `handleNoSync`):
    /// fail, the key left on the master to expire (no watchdog: the grant's
    /// continuation does not run). The failure is an unknown outcome: the script ran.
    pub(super) async fn attempt(
        &self,
        key: &str,
        owner: &str,
        lease: Lease,
        side: Side,
    ) -> Result<Try, LockError> {
        let version = self.version();
        let retries = match self.flavor {
            Flavor::ReadWrite => version.retry_attempts(),
            Flavor::Lock | Flavor::Fenced => 0,
        };
        let mut retry = 0;
        loop {
            let why = match self.attempt_once(key, owner, lease, side).await? {
                Ok(done) => return Ok(done),
                Err(why) => why,
            };
            if self.flavor == Flavor::Fenced {
                return Ok(Try::Unknown(format!(
                    "{why}; the lock is left on the master to expire"
                )));
            }
            // `handleNoSync`: the unlock, itself synced; its failure is added to the
            // acquisition's.
            let unlock = self.unlock_call(key, owner, lease.ms().max(1));
            let (reply, _) = redisson_sync::eval::<Option<i64>>(
                &self.deps,
                version,
                version.resends_lock_and_unlock(),
                &self.synced,
                &unlock,
            )
            .await;
            let why = match reply {
                Ok(Synced::Done(_)) => format!("{why}; unlocked"),
                Ok(Synced::NotSynced { replicas, .. }) => format!(
                    "{why}; unlocked, the unlock {}",
                    redisson_sync::not_synced(replicas)
                ),
                Err(e) => format!("{why}; the unlock after it: {}", classify("EVAL", e)?),
            };
            if retry >= retries {
                return Ok(Try::Unknown(why));
            }
            retry += 1;
            let delay = version.retry_delay(retry, self.deps.scale, &*self.deps.entropy);
            self.deps.clock.sleep(delay).await;
        }
    }

    /// One run of the lock script, synced: `Ok` its outcome, `Err` why the sync
    /// failed.
    pub(super) async fn attempt_once(
        &self,
        key: &str,
        owner: &str,
        lease: Lease,
        side: Side,
    ) -> Result<Result<Try, String>, LockError> {
        let version = self.version();
        let call = self.lock_call(key, owner, lease, side);
        // 3.20's `evalWriteAsync` resends; 3.52.0's `syncedEvalNoRetry` does not (but
        // its synced batch does, see `redisson_sync`).
        let resend = version.resends_lock_and_unlock();
        if self.flavor == Flavor::Fenced {
            let (reply, sent_at) =
                redisson_sync::eval::<Vec<i64>>(&self.deps, version, resend, &self.synced, &call)
                    .await;
            let reply = match reply {
                Ok(Synced::Done(reply)) => reply,
                Ok(Synced::NotSynced { replicas, .. }) => {
                    return Ok(Err(redisson_sync::not_synced(replicas)));
                }
                Err(e) => return classify("EVALSHA", e).map(|why| Ok(Try::Unknown(why))),
            };
            return self
                .fenced_reply(key, owner, lease, sent_at, &reply)
                .map(Ok);
        }
        let (reply, sent_at) =
            redisson_sync::eval::<Option<i64>>(&self.deps, version, resend, &self.synced, &call)
                .await;
        match reply {
            Ok(Synced::Done(None)) => {
                self.acquired(key, owner, lease, side);
                Ok(Ok(Try::Acquired(guard(
                    self.name_of(),
                    key,
                    owner.to_string(),
                    sent_at,
                    Some(lease.ms()),
                ))))
            }
            Ok(Synced::Done(Some(ttl_ms))) => Ok(Ok(Try::Held { ttl_ms })),
            Ok(Synced::NotSynced { replicas, .. }) => Ok(Err(redisson_sync::not_synced(replicas))),
            Err(e) => classify("EVALSHA", e).map(|why| Ok(Try::Unknown(why))),
        }
    }

    /// The fenced lock script's reply: `{-1, token}` acquired (Redisson: `ttl == -1`),
    /// else `{pttl, -1}`.
    pub(super) fn fenced_reply(
        &self,
        key: &str,
        owner: &str,
        lease: Lease,
        sent_at: Duration,
        reply: &[i64],
    ) -> Result<Try, LockError> {
        match reply {
            [-1, token] => {
                self.acquired(key, owner, lease, Side::Only);
                Ok(Try::Acquired(Guard {
                    token: u64::try_from(*token).ok(),
                    ..guard(
                        Self::FENCED_NAME,
                        key,
                        owner.to_string(),
                        sent_at,
                        Some(lease.ms()),
                    )
                }))
            }
            [ttl_ms, _] => Ok(Try::Held { ttl_ms: *ttl_ms }),
            other => Err(LockError::Redis {
                command: "EVALSHA",
                source: redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "the fenced lock script replies with two integers",
                    format!("{other:?}"),
                )),
            }),
        }
    }
}
