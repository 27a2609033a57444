//! Redisson's synced writes: a lock, unlock or renewal script batched with `WAIT`, and
//! the call failed when no replica acknowledged it (`Config.checkLockSyncedSlaves`,
//! `true` by default at both pinned versions).
//!
//! **3.20.0** (`RedissonBaseLock.evalWriteAsync`): when the client's topology lists an
//! available replica, `INFO REPLICATION` on the master gives `connected_slaves` = *n*;
//! the script is sent in a `CommandBatchService` with `syncSlaves(n, 1 s)`: the default
//! `ExecutionMode.IN_MEMORY`, so the script and `WAIT n 1000` go out pipelined on one
//! connection, no `MULTI`/`EXEC` (`CommandBatchService.execute` appends the `WAIT` to
//! the entry's commands; `MULTI` only for the atomic modes). With *n* = 0 the batch has
//! no `WAIT`. When `WAIT` answers 0 and *n* > 0 the call fails with `IllegalStateException
//! ("None of slaves were synced")`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::RedisResult;

use super::redisson_retry::{self, Version};
use crate::scale::REDISSON_SLAVES_SYNC_TIMEOUT;
use crate::{Conn, Deps};

/// The message of the failed sync (3.52.0's; 3.20's is its first sentence).
pub const NOT_SYNCED: &str = "None of slaves were synced";

/// One script call: its text, keys and arguments, sent as `EVALSHA` (bare) or `EVAL`
/// (in a synced batch).
pub(crate) struct Call {
    pub(crate) script: &'static redis::Script,
    pub(crate) source: &'static str,
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
}

impl Call {
    /// The script alone (`EVALSHA`, loading it on `NOSCRIPT`).
    async fn invoke<T: redis::FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        let mut inv = self.script.prepare_invoke();
        for k in &self.keys {
            inv.key(k);
        }
        for a in &self.args {
            inv.arg(a);
        }
        inv.invoke_async(conn).await
    }

    /// The script as `EVAL`, for a pipeline.
    fn eval(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.source)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }
}

/// What a synced call came to.
pub(crate) enum Synced<T> {
    /// The script's reply, synced (or with nothing to sync).
    Done(T),
    /// The script ran on the master (its reply is dropped, as Redisson drops it), but
    /// `WAIT` for `replicas` answered 0.
    NotSynced { replicas: u64 },
}

/// The error text Redisson raises for a failed sync, with the `WAIT`'s count.
pub(crate) fn not_synced(replicas: u64) -> String {
    format!("{NOT_SYNCED} (WAIT {replicas}: 0 acknowledged)")
}

/// 3.52.0's `MasterSlaveEntry.availableSlaves`: the replica count last read, `None`
/// until read (Redisson's -1). One per design instance, as one per Redisson client.
#[derive(Clone, Default)]
pub(crate) struct ReplicaCount(Arc<Mutex<Option<u64>>>);

impl ReplicaCount {
    fn get(&self) -> Option<u64> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn set(&self, n: Option<u64>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = n;
    }
}

/// `connected_slaves` from an `INFO` text (0 when absent, as Redisson's
/// `getOrDefault("connected_slaves", "0")`).
fn connected_slaves(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Sends `call` as Redisson's synced eval does at `version` (see the module's doc):
/// the reply, whether it synced, and the client-clock time the script was sent.
/// `resend` is the caller's retry flag, which holds only for the bare script; the
/// synced batch is resent after a lost reply at both versions.
///
/// **3.52.0** (`CommandAsyncService.syncedEval`, `SyncMode.WAIT`): the same batch, with
/// `slavesSyncTimeout` (1 s) and `NoSyncedSlavesException`. *n* is cached on the master's
/// entry (`MasterSlaveEntry.availableSlaves`, first read with `INFO ALL`), and forgotten
/// when a `WAIT` answers a count other than *n*, so the next call reads `INFO` again.
/// The batch runs with the executor's retries whatever the caller asked for: the
/// `noRetry` of `syncedEvalNoRetry` reaches only the single-server path below.
///
/// **No sync** where Redisson does none: a single-server configuration
/// (`isSingleConfig()` at 3.52.0; at 3.20 the entry lists no replica, so no `INFO` and no
/// `WAIT`). A connection that does not follow a Sentinel-named master
/// ([`crate::Connector::follows_a_named_master`]) stands for that configuration: the
/// bare script, as before. A master that reports no connected replica gets the bare
/// script too (in a batch of one), so a master without replicas still grants.
///
/// What each caller does with a failed sync is its own (see
/// [`super::ReentrantWatchdog`]): 3.20's lock unlocks and throws (`handleNoSync`), 3.52.0's
/// `RLock` (and read-write lock) unlocks and retries the acquisition
/// (`ServiceManager.execute`), 3.52.0's fenced lock throws and leaves the key to expire;
/// a renewal fails (3.20's watchdog stops, 3.52.0's schedules the next); an unlock fails
/// (3.52.0 retries it).
///
/// **Time.** `WAIT`'s timeout (3.20's hard-coded 1 s, 3.52.0's `slavesSyncTimeout`) is a
/// client constant that competes with the lease (a holder waits it out before it may
/// work), so it is scaled with the world ([`REDISSON_SLAVES_SYNC_TIMEOUT`]). Redisson adds it to
/// the batch's reply timeout; locksim's reply timeout is the world's, longer than the
/// scaled `WAIT` at every scale the catalog uses, so it is not lengthened.
///
/// **Not ported.** 3.52.0's one-time probe (`WAIT 0 0` and `WAITAOF 0 0 0` on a
/// client's first synced call) that picks `WAIT` or `WAITAOF`: the model and the servers
/// the tests start are Redis 7.0, which has no `WAITAOF`, so the probe always picks
/// `WAIT` (with `appendonly` off, as in every world, it would too); the probe's round
/// trip is not sent. At 3.20 the gate on the client's topology (`getAvailableSlaves() >
/// 0`) is taken as always open in Sentinel mode: `INFO REPLICATION` is asked every call,
/// and a master without replicas answers 0, the same outcome.
pub(crate) async fn eval<T>(
    deps: &Deps,
    version: Version,
    resend: bool,
    cache: &ReplicaCount,
    call: &Call,
) -> (RedisResult<Synced<T>>, Duration)
where
    T: redis::FromRedisValue + Send,
{
    let bare = |resend: bool| async move {
        let (reply, at) = redisson_retry::send(deps, version, resend, |mut conn| async move {
            call.invoke::<T>(&mut conn).await
        })
        .await;
        (reply.map(Synced::Done), at)
    };
    if !deps.conn.connector().follows_a_named_master() {
        return bare(resend).await;
    }
    let replicas = match (version, cache.get()) {
        (Version::V3_52, Some(n)) => n,
        _ => {
            let section = match version {
                Version::V3_20 => "REPLICATION",
                Version::V3_52 => "ALL",
            };
            let (info, at) = redisson_retry::send(deps, version, true, |mut conn| async move {
                redis::cmd("INFO")
                    .arg(section)
                    .query_async::<String>(&mut conn)
                    .await
            })
            .await;
            let n = match info {
                Ok(text) => connected_slaves(&text),
                Err(e) => return (Err(e), at),
            };
            if version == Version::V3_52 {
                cache.set(Some(n));
            }
            n
        }
    };
    if replicas == 0 {
        // A batch of one: resent as the executor resends a batch.
        return bare(true).await;
    }
    let timeout_ms = deps.scale.ms_of(&REDISSON_SLAVES_SYNC_TIMEOUT).max(1);
    let (reply, at) = redisson_retry::send(deps, version, true, |mut conn| async move {
        let mut pipe = redis::pipe();
        pipe.add_command(call.eval()).add_command({
            let mut wait = redis::cmd("WAIT");
            wait.arg(replicas).arg(timeout_ms);
            wait
        });
        pipe.query_async::<(T, u64)>(&mut conn).await
    })
    .await;
    let (reply, acked) = match reply {
        Ok(pair) => pair,
        Err(e) => return (Err(e), at),
    };
    if version == Version::V3_52 && acked != replicas {
        cache.set(None);
    }
    if acked == 0 {
        (Ok(Synced::NotSynced { replicas }), at)
    } else {
        (Ok(Synced::Done(reply)), at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_slaves_is_read_from_info_and_zero_when_absent() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=a\r\n";
        assert_eq!(connected_slaves(info), 2);
        assert_eq!(connected_slaves("# Server\r\nredis_version:7.0.15\r\n"), 0);
    }
}
