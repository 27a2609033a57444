use std::time::Duration;

use async_trait::async_trait;

use super::{COMPARE_AND_DELETE_SCRIPT, check_guard};
use crate::lock::retry_acquire;
use crate::scale::{
    REDLOCK_DRIFT_PRECISION, REDLOCK_INSTANCE_TIMEOUT_MAX, REDLOCK_INSTANCE_TIMEOUT_MIN,
};
use crate::{
    Acquire, AcquireOptions, Attempt, Conn, Deps, Guard, LockDesign, LockError, Release, TimeScale,
};

/// `redlock`: antirez's Redlock, as redis.io's distributed-lock page specifies it, over
/// `Deps::servers` (N independent masters, 5 in locksim's world; no replication).
///
/// The algorithm's five steps, as the page gives them (and the 2023 article and the
/// three-Redis-locks article reprint them; docs/designs.md, "Where the designs come
/// from"). One acquisition:
///
/// 1. read the client's clock (`start`) and draw one random owner value;
/// 2. `SET key owner NX PX lease` on every master **in turn**, each with a timeout
///    small compared with the lease ([`Redlock::instance_timeout`]), so a dead master
///    costs milliseconds, not the lease; a master that does not answer in time counts
///    as not acquired;
/// 3. `elapsed` = clock now − `start`; validity = lease − elapsed − drift, with
///    drift = lease × 0.01 + 2 ms (the page's clock-drift allowance; the 1 % is a share
///    of the lease, the 2 ms Redis's expiry precision, kept real at every scale:
///    [`crate::scale::REDLOCK_DRIFT_PRECISION`]);
/// 4. the lock is acquired only with a majority (N/2 + 1) **and** a positive validity;
///    the guard's `valid_until` is then `now + validity`;
/// 5. otherwise unlock on **all** masters (even those that said no: a reply may have
///    been lost) and retry after a random delay within the wait budget (the page gives
///    no value: the caller's backoff, [`crate::retry_acquire`], already in the world's
///    time).
///
/// The per-master timeout races a master's round trip, not the lease, and no world
/// scales its network: it is kept real ([`crate::scale::REDLOCK_INSTANCE_TIMEOUT_MIN`],
/// [`crate::scale::REDLOCK_INSTANCE_TIMEOUT_MAX`]).
///
/// Release runs the compare-and-delete script on every master, each with the same
/// per-instance timeout, one connection per master.
///
/// Known failures (Kleppmann's critique, antirez's reply): the validity assumes every
/// master's clock advances at the rate the drift allows. A master whose wall clock
/// *jumps* forward expires the key early and another client can gather a majority
/// including it while the first is still within its validity; a master that restarts
/// without persistence forgets the lock (antirez: `appendfsync always`, or stay down
/// a lease); a client paused after the validity check overruns it (no algorithm can
/// help: only fencing can, and N independent counters give no monotonic token).
pub struct Redlock {
    deps: Deps,
    unsigned_validity: bool,
}

impl Redlock {
    /// The user-facing name.
    pub const NAME: &'static str = "redlock";
    /// The name of the unsigned-validity variant.
    pub const UNSIGNED_NAME: &'static str = "redlock-unsigned-validity";

    /// The spec's algorithm over `deps.servers`.
    pub fn new(deps: Deps) -> Self {
        Self {
            deps,
            unsigned_validity: false,
        }
    }

    /// `redlock-unsigned-validity`: the spec, except that the validity is computed in
    /// unsigned arithmetic, `lease.wrapping_sub(elapsed).wrapping_sub(drift)`.
    ///
    /// A class of bug found in real Redlock clients written with unsigned integers:
    /// when the acquisition took longer than the lease (a pause, a slow master), the
    /// subtraction wraps to a huge number instead of going negative, "validity > 0"
    /// holds, and the client believes it holds for ages a lock whose keys have
    /// already expired everywhere. The spec's `redlock` refuses that acquisition.
    pub fn unsigned_validity(deps: Deps) -> Self {
        Self {
            deps,
            unsigned_validity: true,
        }
    }

    /// Masters needed: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.deps.servers.len() / 2 + 1
    }

    /// The spec's drift allowance: lease × 0.01 + 2 ms (the 2 ms kept real).
    pub fn drift(lease_ms: u64) -> Duration {
        Duration::from_millis(lease_ms / 100 + TimeScale::REAL.ms_of(&REDLOCK_DRIFT_PRECISION))
    }

    /// How long to wait for one master: a tenth of the lease, between 20 and 50 ms (the
    /// page suggests 5-50 ms for a 10 s lease; 20 ms keeps a busy loopback from
    /// looking like a dead master). Both bounds are kept real: they race a round trip.
    pub fn instance_timeout(lease_ms: u64) -> Duration {
        let (min, max) = (
            TimeScale::REAL.ms_of(&REDLOCK_INSTANCE_TIMEOUT_MIN),
            TimeScale::REAL.ms_of(&REDLOCK_INSTANCE_TIMEOUT_MAX),
        );
        Duration::from_millis((lease_ms / 10).clamp(min, max))
    }

    fn name_of(&self) -> &'static str {
        if self.unsigned_validity {
            Self::UNSIGNED_NAME
        } else {
            Self::NAME
        }
    }

    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.deps;
        let owner = deps.entropy.owner_value();
        let timeout = Self::instance_timeout(lease_ms);
        let start = deps.clock.now();
        let mut locked = 0usize;
        for conn in &deps.servers {
            if lock_instance(deps, conn, key, &owner, lease_ms, timeout).await {
                locked += 1;
            }
        }
        let now = deps.clock.now();
        let elapsed_ms = now.saturating_sub(start).as_millis() as u64;
        let drift_ms = Self::drift(lease_ms).as_millis() as u64;
        let validity_ms: Option<u64> = if self.unsigned_validity {
            // The bug, on purpose: wraps instead of going negative.
            Some(lease_ms.wrapping_sub(elapsed_ms).wrapping_sub(drift_ms)).filter(|v| *v > 0)
        } else {
            let v = lease_ms as i128 - elapsed_ms as i128 - drift_ms as i128;
            (v > 0).then_some(v as u64)
        };
        match validity_ms {
            Some(v) if locked >= self.quorum() => Ok(Attempt::Acquired(Guard {
                design: self.name_of().to_string(),
                key: key.to_string(),
                owner,
                acquired_at: start,
                valid_until: Some(now.saturating_add(Duration::from_millis(v))),
                token: None,
            })),
            _ => {
                unlock_all(deps, key, &owner, timeout).await;
                Ok(Attempt::Held)
            }
        }
    }
}

/// `SET key owner NX PX lease` on one master within `timeout` on the client's clock:
/// `true` if it answered OK in time.
async fn lock_instance(
    deps: &Deps,
    conn: &Conn,
    key: &str,
    owner: &str,
    lease_ms: u64,
    timeout: Duration,
) -> bool {
    let mut conn = conn.clone();
    let set = async {
        let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
            .arg(key)
            .arg(owner)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms)
            .query_async(&mut conn)
            .await;
        matches!(reply, Ok(Some(_)))
    };
    tokio::select! {
        biased;
        ok = set => ok,
        _ = deps.clock.sleep(timeout) => false,
    }
}

/// The compare-and-delete script on one master within `timeout`: `Some(true)` if it
/// deleted our key, `Some(false)` if not ours or absent, `None` if no answer in time.
async fn unlock_instance(
    deps: &Deps,
    conn: &Conn,
    key: &str,
    owner: &str,
    timeout: Duration,
) -> Option<bool> {
    let mut conn = conn.clone();
    let del = async {
        let reply: redis::RedisResult<i64> = COMPARE_AND_DELETE_SCRIPT
            .key(key)
            .arg(owner)
            .invoke_async(&mut conn)
            .await;
        reply.ok().map(|n| n == 1)
    };
    crate::clock::within(deps.clock.as_ref(), timeout, del)
        .await
        .flatten()
}

/// Unlocks `owner` on every master at once; the per-master outcomes, in server order.
async fn unlock_all(deps: &Deps, key: &str, owner: &str, timeout: Duration) -> Vec<Option<bool>> {
    futures_util::future::join_all(
        deps.servers
            .iter()
            .map(|conn| unlock_instance(deps, conn, key, owner, timeout)),
    )
    .await
}

#[async_trait]
impl LockDesign for Redlock {
    fn name(&self) -> &str {
        self.name_of()
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        if self.deps.servers.is_empty() {
            return Err(LockError::NoServers);
        }
        retry_acquire(&self.deps, key, options, || {
            self.attempt(key, options.lease_ms)
        })
        .await
    }

    /// A waiter's longest pause between attempts: [`crate::retry_acquire`]'s longest
    /// backoff with the default options the worlds pass.
    fn retry_horizon(&self) -> Duration {
        Duration::from_millis(AcquireOptions::BACKOFF_MAX_MS)
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.name_of(), guard)?;
        let lease_ms = guard.valid_until.map_or(0, |u| {
            u.saturating_sub(guard.acquired_at).as_millis() as u64
        });
        let outcomes = unlock_all(
            &self.deps,
            &guard.key,
            &guard.owner,
            Self::instance_timeout(lease_ms),
        )
        .await;
        Ok(released(&outcomes))
    }
}

/// A release's outcome from the masters' answers: removed if any master deleted our
/// key; unknown if none did and some never answered; else nothing was removed.
pub(crate) fn released(outcomes: &[Option<bool>]) -> Release {
    if outcomes.contains(&Some(true)) {
        Release::Removed
    } else if outcomes.contains(&None) {
        let silent = outcomes.iter().filter(|o| o.is_none()).count();
        Release::Unknown(format!(
            "{silent} of {} masters did not answer the unlock",
            outcomes.len()
        ))
    } else {
        Release::NotRemoved
    }
}
