//! Redisson's retry layers, per pinned version: the command executor's resend of a
//! command whose reply timed out, and what the watchdog does after a failed renewal.
//!
//! **The resend** (`org.redisson.command.RedisExecutor`, tags `redisson-3.20.0` and
//! `redisson-3.52.0`). A command runs as attempts `0..=retryAttempts`; each attempt
//! computes its delay (3.20: `retryInterval`, 1,500 ms; 3.52.0: `retryDelay.calcDelay
//! (attempt)`, `EqualJitterDelay(1 s, 2 s)`: `min(1 s × 2^attempt, 2 s)`, half fixed,
//! half random), then:
//! - gets a connection; `scheduleRetryTimeout` ends an attempt that has none by the
//!   delay (or whose connection failed, at the delay) and starts the next at once;
//! - writes the command; `scheduleResponseTimeout`: when no reply came within
//!   `timeout` (`BaseConfig.timeout`, 3 s), and `isResendAllowed` (attempts left, the
//!   command not `noRetry`), waits the delay and sends **the same command again**, on
//!   a connection from the pool (the channel is kept: `CommandsQueue` drops the late
//!   reply). After the last attempt the caller gets `RedisResponseTimeoutException`.

use std::future::Future;
use std::time::Duration;

use redis::{ErrorKind, RedisError, RedisResult};

use crate::scale::{
    REDISSON_3_20_RETRY_INTERVAL, REDISSON_3_52_RETRY_DELAY_BASE, REDISSON_3_52_RETRY_DELAY_MAX,
};
use crate::{Conn, Deps, Entropy, TimeScale};

/// The Redisson version whose retry layers a design follows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Version {
    /// Redisson 3.20.0 (`reentrant-watchdog`).
    V3_20,
    /// Redisson 3.52.0 (`redisson-fenced`, `redisson-rw`).
    V3_52,
}

impl Version {
    /// The version as Redisson tags it.
    pub fn name(self) -> &'static str {
        match self {
            Version::V3_20 => "3.20.0",
            Version::V3_52 => "3.52.0",
        }
    }

    /// `BaseConfig.retryAttempts`: resends after the first send (3.20: 3; 3.52.0: 4).
    pub fn retry_attempts(self) -> u32 {
        match self {
            Version::V3_20 => 3,
            Version::V3_52 => 4,
        }
    }

    /// Whether the lock and unlock scripts are resent after a reply timeout (3.20's
    /// `evalWriteAsync`), or sent once (3.52.0's `syncedEvalNoRetry`).
    pub fn resends_lock_and_unlock(self) -> bool {
        self == Version::V3_20
    }

    /// Whether the watchdog schedules the next renewal after one that failed (3.52.0's
    /// `RenewalTask.run`), or stops (3.20's `renewExpiration`).
    pub fn watchdog_survives_failed_renewal(self) -> bool {
        self == Version::V3_52
    }

    /// The delay of `attempt` (0 for the first send) at `scale`: 3.20's constant
    /// `retryInterval`; 3.52.0's `EqualJitterDelay.calcDelay`: `e = min(base ×
    /// 2^attempt, max)`, then `e/2 + random(0..=e/2)`.
    pub fn retry_delay(self, attempt: u32, scale: TimeScale, entropy: &dyn Entropy) -> Duration {
        match self {
            Version::V3_20 => scale.of(&REDISSON_3_20_RETRY_INTERVAL),
            Version::V3_52 => {
                let base = scale.ms_of(&REDISSON_3_52_RETRY_DELAY_BASE);
                let max = scale.ms_of(&REDISSON_3_52_RETRY_DELAY_MAX);
                let exponential = base.saturating_mul(1u64 << attempt.min(62)).min(max);
                let half = exponential / 2;
                let random = if half == 0 {
                    0
                } else {
                    entropy.below(half + 1)
                };
                Duration::from_millis((half + random).max(1))
            }
        }
    }

    /// The longest delay any attempt may take at `scale`.
    pub fn longest_retry_delay(self, scale: TimeScale) -> Duration {
        match self {
            Version::V3_20 => scale.of(&REDISSON_3_20_RETRY_INTERVAL),
            Version::V3_52 => scale.of(&REDISSON_3_52_RETRY_DELAY_MAX),
        }
    }
}

/// Whether `err` leaves the reply unknown: a timeout, or a connection that broke under
/// the command.
fn reply_lost(err: &RedisError) -> bool {
    err.is_timeout() || err.is_io_error() || err.is_connection_dropped()
}

/// Whether `err` is [`Conn`]'s failed dial: the command was never sent.
fn not_connected(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Client && err.to_string().contains("not connected")
}

/// Runs `command` as Redisson's `RedisExecutor` does at `version`: on a connection
/// of `deps.conn`, resent after a lost reply while attempts are left if `resend`,
/// with every attempt's connection bounded by its delay. Returns the last attempt's
/// reply and the client-clock time that attempt was sent (the one a reply answers).
///
/// A resent script is not idempotent, and Redisson resends it anyway: a lock script
/// whose first run went through re-enters on the resend (the hash count is 2 where
/// the client counted 1); a renewal run twice re-arms twice (harmless); an unlock whose
/// first run deleted the lock answers `nil` on the resend ("not locked by current
/// thread"). 3.52.0 sends the lock and unlock scripts with `syncedEvalNoRetry` (no
/// resend; its unlock also writes an unlock latch so a retried unlock would answer as
/// the first), and keeps the resend for the renewal (`syncedEval`, retry on).
///
/// Which commands are resent, per version ([`Version::resends_lock_and_unlock`]):
///
/// | command | 3.20 (`reentrant-watchdog`) | 3.52.0 (`redisson-fenced`, `redisson-rw`) |
/// | --- | --- | --- |
/// | lock script (`tryLockInnerAsync`) | resent (`evalWriteAsync`) | not resent (`syncedEvalNoRetry`) |
/// | unlock script (`unlockInnerAsync`) | resent (`evalWriteAsync`) | not resent (`syncedEvalNoRetry`) |
/// | renewal | resent (`renewExpirationAsync` → `evalWriteAsync`) | resent (`LockTask` / `ReadLockTask` → `syncedEval`) |
/// | connection not had within the delay | next attempt | next attempt |
///
/// Under Sentinel, 3.52.0 sends these scripts in a synced batch (`syncedEval`, see
/// [`super::redisson_sync`]) whose executor resends after a lost reply whatever the
/// caller's `noRetry`: there the lock and unlock scripts are resent too.
///
/// **The watchdog** ([`Version::watchdog_survives_failed_renewal`]). 3.20
/// (`RedissonBaseLock.renewExpiration`): a renewal that ends in an error (its resends
/// spent) logs "Can't update lock … expiration" and removes the entry: the watchdog
/// stops. 3.52.0 (`renewal/RenewalTask.run`, since 3.44.0): it logs "Can't update locks
/// … expiration" and `schedule()`s the next renewal. Both stop on a `0` reply (the lock
/// is not this holder's: `cancelExpirationRenewal`), and both schedule the next renewal
/// `lockWatchdogTimeout / 3` after the previous one completed.
///
/// **Time.** The delays are [`scale::Constant`](crate::scale::Constant)s, scaled with
/// the world ([`crate::scale`]): the catalog's 200 ms lease makes 1,500 ms 10 ms. The
/// reply timeout is the world's (`Workload::response_timeout_ms`, the `redis` crate's
/// response timeout): 3 s in the `redisson` profile, as `BaseConfig.timeout`; the
/// catalog keeps 500 ms for every design, so there an attempt waits 500 ms for its
/// reply and 6–13 ms before the resend (a lease and a half per attempt, where Redisson
/// at real scale spends a tenth of a lease).
///
/// **Connections.** locksim's [`Conn`] closes a connection whose reply timed out; a
/// resend sequence runs on [`Conn::keeping_after_reply_timeout`], so every attempt
/// goes out on the same socket, as Redisson's does; after a sequence that ended in a
/// timeout the connection is dropped as [`Conn`]'s rule says (the next command dials
/// again, and finds a new master after a failover). A connection that breaks under a
/// command (a reset) fails the attempt at once, and the next one follows the delay
/// later; Redisson would first wait out the reply timeout on the dead channel.
pub(crate) async fn send<T, F, Fut>(
    deps: &Deps,
    version: Version,
    resend: bool,
    mut command: F,
) -> (RedisResult<T>, Duration)
where
    F: FnMut(Conn) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let clock = &deps.clock;
    let conn = deps.conn.keeping_after_reply_timeout();
    let attempts = version.retry_attempts();
    let mut attempt = 0;
    loop {
        let delay = version.retry_delay(attempt, deps.scale, &*deps.entropy);
        let started = clock.now();
        // `scheduleRetryTimeout`: an attempt without a connection by its delay ends
        // then, and the next one starts at once; a failed one waits for that moment.
        let connected = tokio::select! {
            biased;
            r = conn.ensure_connected() => Some(r),
            () = clock.sleep(delay) => None,
        };
        let failed = match connected {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e),
            None => Some(RedisError::from((
                ErrorKind::Client,
                "not connected",
                format!(
                    "unable to acquire a connection within the retry delay ({} ms), attempt {attempt} of {attempts}",
                    delay.as_millis()
                ),
            ))),
        };
        if let Some(e) = failed {
            if attempt == attempts {
                return (Err(e), started);
            }
            let until = started + delay;
            let now = clock.now();
            if now < until {
                clock.sleep(until - now).await;
            }
            attempt += 1;
            continue;
        }
        let sent_at = clock.now();
        let reply = command(conn.clone()).await;
        match &reply {
            Err(e) if attempt < attempts && resend && reply_lost(e) => {
                clock.sleep(delay).await;
                attempt += 1;
            }
            // The connection went between the check and the send: never sent.
            Err(e) if attempt < attempts && not_connected(e) => {
                let until = started + delay;
                let now = clock.now();
                if now < until {
                    clock.sleep(until - now).await;
                }
                attempt += 1;
            }
            Err(e) => {
                if e.is_timeout() {
                    conn.drop_current().await;
                }
                return (reply, sent_at);
            }
            Ok(_) => return (reply, sent_at),
        }
    }
}
