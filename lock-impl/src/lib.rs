//! Redis lock designs as a library: the code a service ships, and the code locksim runs
//! inside its simulator, unchanged.
//!
//! Every design implements [`LockDesign`] and takes its environment as [`Deps`]: a
//! `redis` crate [`MultiplexedConnection`](redis::aio::MultiplexedConnection) (built
//! over any `AsyncRead + AsyncWrite` stream), a [`Clock`] and an [`Entropy`]. Nothing
//! here reads the machine's clock or randomness directly, so the simulator can
//! substitute its own. Production code uses [`TokioClock`], [`OsEntropy`] and
//! [`connect`].
//!
//! The built-in designs are listed in [`DESIGNS`], one record each ([`DesignInfo`]: name,
//! system, promise and how it is built), and built by name with [`build`]:
//!
//! | name | acquire | release | seeds |
//! | --- | --- | --- | --- |
//! | `setnx-del` | `SETNX` | `DEL` | 004 |
//! | `setnx-expire` | `SETNX`, then `PEXPIRE` | `DEL` | 001, 004 |
//! | `setnx-getset` | `SETNX` of a wall-clock expiry timestamp; `GET`, then `GETSET` once it passed | `DEL` unless the own timestamp passed | redis.io `SETNX` page |
//! | `set-nx-px-del` | `SET NX PX` | `DEL` | 001, 004 |
//! | `set-nx-px-check-del` | `SET NX PX` | `GET`, compare, `DEL` | 000, 004 |
//! | `set-nx-px-lua` | `SET NX PX` | Lua compare-and-delete | 001, 003 |
//! | `reentrant-watchdog` | Lua hash `{owner: count}`, watchdog renewal, pub/sub wait | Lua decrement, `DEL` + `PUBLISH` at 0 | 000, 002, 003 |
//! | `fenced` | Lua `SET NX PX` + `INCR` fencing token | Lua compare-and-delete | 001, 003 |
//! | `wait-synced` | `SET NX PX`, then `WAIT n` (released if fewer replicas acknowledged) | Lua compare-and-delete | 003, 004 |
//! | `redlock` | `SET NX PX` on N independent masters in turn; majority and validity = lease − elapsed − drift | Lua compare-and-delete on all | 000, 003 |
//! | `redlock-unsigned-validity` | `redlock` with the validity in unsigned arithmetic (a real-client bug class) | as `redlock` | 000, 003 |
//! | `redisson-redlock` | Redisson `RedissonMultiLock.tryLock`: per-node Redisson lock, failed-locks limit, re-expire; no validity check | Redisson unlock on all | 003 |
//! | `redis-py` | redis-py 5.3.1 `Lock`: `SET NX PX`, fixed 0.1 s sleep until `blocking_timeout` on `time.monotonic()` | redis-py's Lua release script | 001, 003 |
//! | `redis-py-3` | redis-py 3.5.3 `Lock`: as `redis-py`, `blocking_timeout` on `time.time()` (wall clock) | as `redis-py` | 001, 003 |
//! | `redsync` | go-redsync v4.17.0 `Mutex`: `SET NX PX` on N pools concurrently, quorum, `until = now + expiry − elapsed − expiry×0.01`; 32 tries, 50-250 ms delay | redsync's delete script on all, quorum | 000, 003 |
//! | `node-redlock` | node-redlock 5.0.0-beta.2: its Lua acquire script on N clients at once, decided at the first quorum; `expiration = start + duration − drift` on `Date.now()` (wall clock), not checked; 10 retries, 200 ± 100 ms | its Lua release script, with the same retries | 000, 003 |
//! | `node-redlock-using` | node-redlock 5.0.0-beta.2's `using()`: `node-redlock`'s acquire, then a timer that extends the lock `automaticExtensionThreshold` before its `expiration` (computed on `Date.now()`), again at once after a failure while `expiration` has not passed, else abort | clears the timer, waits for an extension in flight, then `node-redlock`'s release | 000, 003 |
//! | `redisson-fenced` | Redisson 3.52.0 `RFencedLock.tryLockAndGetToken`: `reentrant-watchdog` with a lock script that `INCR`s `redisson_lock_token:{key}` and returns it as the fencing token; wait budget on `currentTimeMillis` (wall clock) | as `reentrant-watchdog` | 001, 003 |
//! | `mysql-unique-index` | `INSERT INTO locks (name, owner)` (duplicate key: held) | `DELETE ... WHERE name AND owner` | 002 |
//! | `mysql-get-lock` | `SELECT GET_LOCK(name, 0)` (held by the connection) | `SELECT RELEASE_LOCK(name)` | 002 |
//! | `mongo-find-and-modify` | `findAndModify` upsert of `{_id: key}` unless a live `expiresAt` (client clock); `w: 1` | `delete {_id, owner}` | 002 |
//! | `mongo-find-and-modify-majority` | as `mongo-find-and-modify`, `w: "majority"` | as `mongo-find-and-modify`, `w: "majority"` | 002 |
//! | `mongo-find-and-modify-fenced` | as `-majority`; the document's `version` (`$inc` per acquisition) is the fencing token | `findAndModify {_id, owner}` setting `expiresAt` to the epoch | 002 |
//! | `etcd-mutex` | etcd `concurrency.Mutex` (v3.4.23): a session lease, `Txn` putting `<key>/<lease>` if absent; the oldest key under the prefix holds, waiters watch the next older key's deletion | `Delete` of the key, then revoke of the session | 002 |
//! | `etcd-mutex-fenced` | as `etcd-mutex`; the key's create revision is the fencing token | as `etcd-mutex` | 002 |
//! | `etcd-lock-service` | a session lease, then etcd's `v3lock` `Lock` RPC with it | the `Unlock` RPC, then revoke of the session | 002 |
//! | `mysql-for-update` | `BEGIN; SELECT name FROM lock_rows WHERE name = ? FOR UPDATE` (held by the transaction; waits up to `innodb_lock_wait_timeout`) | `COMMIT` | 002 |
//! | `mysql-unique-index-expiry` | `INSERT INTO lock_leases (name, owner, expires_at)` with the client's wall clock; an expired row taken over by `UPDATE ... WHERE name AND expires_at < now` | `DELETE ... WHERE name AND owner` | 002 |
//! | `mysql-unique-index-fenced` | as `mysql-unique-index-expiry` in `lock_fences`, with `fence = LAST_INSERT_ID(fence + 1)` as fencing token | `UPDATE ... SET owner = '', expires_at = 0 WHERE name AND owner` | 002 |
//! | `redisson-rw` | Redisson 3.52.0 `RReadWriteLock` (`RedissonReadLock` / `RedissonWriteLock`): one hash with `mode` and per-holder counts, a timeout key per read hold, watchdog (`ReadLockTask` for readers), pub/sub wait; `acquire` takes the write lock, `acquire_read` the read lock | their Lua unlock scripts (read: the hash lives as long as the longest timeout key left) | 004 |
//!
//! # Your own design
//!
//! Checking *your* lock is the point. Implement [`LockDesign`]; [`retry_acquire`]
//! gives you the wait-budget loop. `examples/custom_design.rs` is a complete one (a
//! `SET NX EX` lock with a `GETDEL` release), and the real-Redis test suite runs the
//! same conformance bodies on it as on the built-in designs:
//!
//! ```no_run
//! use async_trait::async_trait;
//! use lock_impl::{Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError,
//!                 Release, retry_acquire};
//!
//! struct MyLock { deps: Deps }
//!
//! #[async_trait]
//! impl LockDesign for MyLock {
//!     fn name(&self) -> &str { "my-lock" }
//!
//!     async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
//!         let deps = &self.deps;
//!         retry_acquire(deps, key, options, || async move {
//!             let owner = deps.entropy.owner_value();
//!             let sent_at = deps.clock.now();
//!             let set: Option<String> = redis::cmd("SET").arg(key).arg(&owner)
//!                 .arg("NX").arg("PX").arg(options.lease_ms)
//!                 .query_async(&mut deps.conn.clone()).await
//!                 .map_err(|source| LockError::Redis { command: "SET", source })?;
//!             Ok(match set {
//!                 Some(_) => Attempt::Acquired(Guard {
//!                     design: "my-lock".into(), key: key.into(), owner,
//!                     acquired_at: sent_at,
//!                     valid_until: Some(sent_at + std::time::Duration::from_millis(options.lease_ms)),
//!                     token: None,
//!                 }),
//!                 None => Attempt::Held,
//!             })
//!         }).await
//!     }
//!
//!     async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
//!         let n: i64 = redis::cmd("DEL").arg(&guard.key)
//!             .query_async(&mut self.deps.conn.clone()).await
//!             .map_err(|source| LockError::Redis { command: "DEL", source })?;
//!         Ok(if n == 1 { Release::Removed } else { Release::NotFound })
//!     }
//! }
//! ```

#![warn(missing_docs)]

mod clock;
mod connector;
pub mod designs;
mod entropy;
mod error;
pub mod etcd;
mod lock;
pub mod mongo;
pub mod mysql;
pub mod scale;
mod sentinel;
#[cfg(feature = "testing")]
pub mod testing;
pub mod zk;

use std::sync::Arc;
use std::time::Duration;

pub use clock::{Clock, Sleep, TokioClock};
pub use connector::{ClientConnector, Conn, Connector, Dial, ReconnectPolicy};
pub use entropy::{Entropy, OsEntropy, SeededEntropy};
pub use error::LockError;
pub use lock::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, Observer, PubSubConnector, Release,
    Spawner, SystemHandle, SystemHandles, Task, TokioSpawner, Wait, retry_acquire,
};
pub use scale::TimeScale;
pub use sentinel::{AddrConnector, ClientAddrConnector, SentinelConnector};

/// A built-in design's one record: what the catalog, `locksim list`, the CLI, the world
/// and the facade know about it, and how it is built. [`DESIGNS`] lists them all; a
/// new design is its module plus one record there.
#[derive(Debug, Clone, Copy)]
pub struct DesignInfo {
    /// The user-facing identifier: what `--design` takes and what the built design's
    /// [`LockDesign::name`] returns.
    pub name: &'static str,
    /// Builds it over a client's dependencies ([`build`] by name).
    pub build: fn(Deps) -> Arc<dyn LockDesign>,
    /// One line: acquire and release.
    pub summary: &'static str,
    /// The documents that describe it, by the short names of `docs/designs.md`
    /// ("Where the designs come from").
    pub sources: &'static str,
    /// The failure it is known for.
    pub known_failure: &'static str,
    /// Whether the lock expires on its own after the lease.
    pub expires: bool,
    /// Whether release compares the owner value before deleting (so a foreign owner
    /// value leaves the lock in place).
    pub release_checks_owner: bool,
    /// Independent Redis masters it locks on (`Deps::servers`): 1 for a single-master
    /// design, [`REDLOCK_MASTERS`] for the Redlock family, 0 for a design on another
    /// system ([`DesignInfo::backend`]).
    pub masters: usize,
    /// The system that holds its lock.
    pub backend: Backend,
}

/// What a lock-server system says of itself, once: its name and its promise. Each
/// system's module holds its record (`zk::SYSTEM`, `mysql::SYSTEM`, `mongo::SYSTEM`;
/// Redis's is here), and [`Backend`] reads it; a new system is its modules plus its one
/// row in the `backends!` table below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendInfo {
    /// Its name in reports and messages.
    pub name: &'static str,
    /// What the system promises a lock, and what it does not, in a sentence (the
    /// report's legend and docs/designs.md's design table).
    pub promise: &'static str,
    /// The design the lock-service comparison "常见分布式锁方案对比" names for it
    /// (docs/designs.md, "Where the designs come from"; a comparison row of
    /// `scenarios::family`).
    pub seed_design: &'static str,
}

/// Redis's record ([`Backend::Redis`]).
const REDIS: BackendInfo = BackendInfo {
    name: "Redis",
    promise: "Redis: a key with a TTL on one master, so a lock holds only while that \
              master lives, its clock keeps time and the holder finishes within the \
              lease; replication is asynchronous, so a failover can promote a replica \
              that never had the lock, and Redlock's majority of independent masters \
              still leans on their clocks and persistence",
    // The row "基于redis Lua脚本能力" (`SET lock_name random_value EX seconds NX`,
    // release by the Lua compare-and-delete): see `scenarios::family`.
    seed_design: designs::SetNxPxLua::NAME,
};

/// The systems table: one row per system, `Variant => its record`, in the order
/// reports list systems (and worlds build them). It defines [`Backend`], its
/// [`Backend::ALL`] and [`Backend::info`].
macro_rules! backends {
    ($($variant:ident => $info:path,)*) => {
        /// The system a design's lock lives on: it picks the world a design runs in and
        /// the scenarios whose faults make sense for it (`Scenario::applies_to`). What
        /// each says of itself is its [`BackendInfo`] ([`Backend::info`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Backend {
            $(
                #[doc = concat!("The system whose record is `", stringify!($info), "`.")]
                $variant,
            )*
        }

        impl Backend {
            /// Every system, in the table's order.
            pub const ALL: &'static [Backend] = &[$(Backend::$variant,)*];

            /// What the system says of itself.
            pub fn info(self) -> &'static BackendInfo {
                match self {
                    $(Backend::$variant => &$info,)*
                }
            }
        }
    };
}

backends! {
    Redis => REDIS,
    ZooKeeper => zk::SYSTEM,
    MySql => mysql::SYSTEM,
    MongoDb => mongo::SYSTEM,
    Etcd => etcd::SYSTEM,
}

impl Backend {
    /// Its name in reports and messages.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// What the system promises a lock, and what it does not, in a sentence (the
    /// report's legend and docs/designs.md's design table).
    pub fn promise(self) -> &'static str {
        self.info().promise
    }
}

/// How many independent masters the Redlock designs run against in locksim's world
/// (the spec's example, N = 5).
pub const REDLOCK_MASTERS: usize = 5;

/// The built-in designs, in the order reports list them.
pub static DESIGNS: &[DesignInfo] = &[
    DesignInfo {
        name: designs::SetnxDel::NAME,
        build: |deps| Arc::new(designs::SetnxDel::new(deps)),
        summary: "SETNX to acquire, DEL to release; no expiry",
        sources: "Dewu's article",
        known_failure: "a holder that dies leaves the lock held forever",
        expires: false,
        release_checks_owner: false,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::SetnxExpire::NAME,
        build: |deps| Arc::new(designs::SetnxExpire::new(deps)),
        summary: "SETNX, then PEXPIRE as a second command; DEL to release",
        sources: "the four-ideas article; Dewu's article",
        known_failure: "a crash between SETNX and PEXPIRE leaves a lock without expiry",
        expires: true,
        release_checks_owner: false,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::SetnxGetset::NAME,
        build: |deps| Arc::new(designs::SetnxGetset::new(deps)),
        summary: "SETNX of an expiry timestamp; a waiter that finds it passed takes the lock \
                  with GETSET; DEL to release if the own timestamp has not passed",
        sources: "the Redis SETNX command page",
        known_failure: "the timestamps are client wall clocks: clients whose clocks disagree \
                        by more than the lease take a live lock",
        expires: true,
        release_checks_owner: false,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::SetNxPxDel::NAME,
        build: |deps| Arc::new(designs::SetNxPxDel::new(deps)),
        summary: "SET NX PX to acquire, DEL to release",
        sources: "the four-ideas article; Dewu's article",
        known_failure: "a holder past its lease deletes the next holder's lock",
        expires: true,
        release_checks_owner: false,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::SetNxPxCheckDel::NAME,
        build: |deps| Arc::new(designs::SetNxPxCheckDel::new(deps)),
        summary: "SET NX PX; release by GET, compare, then DEL (two commands)",
        sources: "the 2023 article; Dewu's article",
        known_failure: "the lease expiring between GET and DEL deletes another's lock",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::SetNxPxLua::NAME,
        build: |deps| Arc::new(designs::SetNxPxLua::new(deps)),
        summary: "SET NX PX; release by Lua compare-and-delete",
        sources: "the four-ideas article; the three-Redis-locks article",
        known_failure: "a pause past the lease gives two holders (no fencing)",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::ReentrantWatchdog::NAME,
        build: |deps| Arc::new(designs::ReentrantWatchdog::new(deps)),
        summary: "Redisson RLock: reentrant Lua hash lock, watchdog renews every lease/3, \
                  pub/sub waiting; Lua unlock",
        sources: "the 2023 article; the lock-service comparison; the three-Redis-locks article",
        known_failure: "a pause freezes the watchdog too: past the lease, two holders",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::Fenced::NAME,
        build: |deps| Arc::new(designs::Fenced::new(deps)),
        summary: "Lua SET NX PX + INCR fencing token; release by Lua compare-and-delete",
        sources: "the four-ideas article; the three-Redis-locks article",
        known_failure: "two holders after a pause unless the storage checks tokens; \
                        a failover can reissue a token",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::WaitSynced::NAME,
        build: |deps| Arc::new(designs::WaitSynced::new(deps)),
        summary: "SET NX PX, then WAIT for the master's replicas; released if fewer acknowledged",
        sources: "the three-Redis-locks article; Dewu's article",
        known_failure: "WAIT is not consensus: a replica it did not wait for can be promoted \
                        without the lock; a pause past the lease still gives two holders",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::Redlock::NAME,
        build: |deps| Arc::new(designs::Redlock::new(deps)),
        summary: "Redlock: SET NX PX on 5 independent masters in turn; majority and \
                  validity = lease - elapsed - drift; Lua compare-and-delete on all",
        sources: "the 2023 article; the three-Redis-locks article",
        known_failure: "a master's clock jump or a restart without persistence breaks the \
                        promise; a pause after the validity check overruns it",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::Redlock::UNSIGNED_NAME,
        build: |deps| Arc::new(designs::Redlock::unsigned_validity(deps)),
        summary: "redlock with the validity computed in unsigned arithmetic \
                  (lease - elapsed - drift wraps when elapsed > lease)",
        sources: "the 2023 article; the three-Redis-locks article",
        known_failure: "an acquisition slower than the lease wraps to a huge validity: \
                        the client believes it holds expired keys",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::RedissonRedlock::NAME,
        build: |deps| Arc::new(designs::RedissonRedlock::new(deps)),
        summary: "Redisson RedLock (RedissonMultiLock.tryLock): per-node Redisson lock with \
                  lease 2 x wait, failed-locks limit, re-expire to the lease; no validity check",
        sources: "the three-Redis-locks article",
        known_failure: "no validity check: a slow acquisition or a node's clock jump gives \
                        two holders",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::ZkCurator::NAME,
        build: |deps| Arc::new(designs::ZkCurator::new(deps)),
        summary: "Curator InterProcessMutex: protected-mode ephemeral sequential node, \
                      lowest sequence holds, others watch their predecessor; delete to release",
        sources: "the lock-service comparison; Dewu's article",
        known_failure: "the lock lives as long as the session: a holder paused past its \
                            session timeout keeps working after its node is gone",
        expires: false,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::ZooKeeper,
    },
    DesignInfo {
        name: designs::ZkCurator::FENCED_NAME,
        build: |deps| Arc::new(designs::ZkCurator::fenced(deps)),
        summary: "zk-curator with the lock node's czxid as fencing token",
        sources: "the lock-service comparison; Dewu's article",
        known_failure: "two holders in belief after a session expiry; a fencing storage \
                            refuses the stale one",
        expires: false,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::ZooKeeper,
    },
    DesignInfo {
        name: designs::RedisPy::NAME,
        build: |deps| Arc::new(designs::RedisPy::new(deps)),
        summary: "redis-py 5.3.1 Lock: SET NX PX with a uuid token, sleep 0.1 s between tries \
                  (at the world's scale) until blocking_timeout (time.monotonic); Lua GET-compare-DEL release",
        sources: "the four-ideas article; the three-Redis-locks article",
        known_failure: "a pause past the lease gives two holders: no fencing, no validity \
                        for the caller to check",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::RedisPy::V3_NAME,
        build: |deps| Arc::new(designs::RedisPy::v3(deps)),
        summary: "redis-py 3.5.3 Lock: as redis-py, but blocking_timeout measured on \
                  time.time(), the wall clock",
        sources: "the four-ideas article; the three-Redis-locks article",
        known_failure: "as redis-py; and a client wall-clock step ends the wait early or \
                        stretches it far past its budget",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::Redsync::NAME,
        build: |deps| Arc::new(designs::Redsync::new(deps)),
        summary: "go-redsync v4.17.0 Mutex: SET NX PX on every pool concurrently, quorum and \
                  until = now + expiry - elapsed - expiry x 0.01; 32 tries, 50-250 ms apart (at \
                  the world's scale); delete script on all",
        sources: "the 2023 article; the three-Redis-locks article",
        known_failure: "Redlock's: a pause past until, a master's clock jump or a restart \
                        without persistence gives two holders; nothing checks until",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::NodeRedlock::NAME,
        build: |deps| Arc::new(designs::NodeRedlock::new(deps)),
        summary: "node-redlock 5.0.0-beta.2: Lua acquire script on every client, decided at \
                  the first quorum; expiration = start + duration - drift on Date.now() (the \
                  wall clock), never checked; 10 retries 200 +/- 100 ms (at \
                  the world's scale); Lua release, retried",
        sources: "the 2023 article; the three-Redis-locks article",
        known_failure: "Redlock's, plus the wall clock: a client clock step moves the \
                        expiration, and an already-expired lock is returned as acquired",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::NodeRedlockUsing::NAME,
        build: |deps| Arc::new(designs::NodeRedlockUsing::new(deps)),
        summary: "node-redlock 5.0.0-beta.2 using(): node-redlock's acquire, then a timer \
                  that extends the lock automaticExtensionThreshold (500 ms at the world's \
                  scale; a quarter of a lease too short for it) before its Date.now() expiration, retried at once while \
                  it has not passed, else the routine's signal aborts; release stops the timer",
        sources: "the 2023 article; the three-Redis-locks article",
        known_failure: "the extension timer freezes with a paused holder: past the expiration \
                        the signal aborts, and a routine that does not check it works on under \
                        the next holder",
        expires: true,
        release_checks_owner: true,
        masters: REDLOCK_MASTERS,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::ReentrantWatchdog::FENCED_NAME,
        build: |deps| Arc::new(designs::ReentrantWatchdog::fenced(deps)),
        summary: "Redisson 3.52.0 RFencedLock: the RLock hash lock, watchdog and pub/sub wait, \
                  with a lock script that INCRs redisson_lock_token:{key} and returns it as \
                  the fencing token; wait budget on currentTimeMillis (the wall clock)",
        sources: "the four-ideas article; the three-Redis-locks article",
        known_failure: "two holders in belief after a pause; a fencing storage refuses the \
                        stale one; a failover can reissue a token",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
    DesignInfo {
        name: designs::MySqlUniqueIndex::NAME,
        build: |deps| Arc::new(designs::MySqlUniqueIndex::new(deps)),
        summary: "the lock-service comparison's MySQL unique index: INSERT INTO locks (name, owner) to lock \
                  (a duplicate key means held); DELETE ... WHERE name AND owner to unlock",
        sources: "the lock-service comparison",
        known_failure: "no expiry: a holder that dies leaves its row, and every other client \
                        waits forever",
        expires: false,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MySql,
    },
    DesignInfo {
        name: designs::MySqlGetLock::NAME,
        build: |deps| Arc::new(designs::MySqlGetLock::new(deps)),
        summary: "MariaDB GET_LOCK(name, 0) to lock, RELEASE_LOCK(name) to unlock; \
                  the lock belongs to the connection",
        sources: "the lock-service comparison",
        known_failure: "a dropped connection releases the lock on the server while the holder, \
                        reconnecting, keeps working: two holders",
        expires: false,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MySql,
    },
    DesignInfo {
        name: designs::MongoFindAndModify::NAME,
        build: |deps| Arc::new(designs::MongoFindAndModify::new(deps)),
        summary: "the lock-service comparison's MongoDB findAndModify: upsert {_id: key} unless its expiresAt \
                  (the client's clock) is still ahead, w:1; delete {_id, owner} to unlock",
        sources: "the lock-service comparison",
        known_failure: "w:1 acknowledges a lock only the primary has: a failover before a \
                        secondary copied it elects a member without it, and the old primary \
                        rolls it back: two holders",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MongoDb,
    },
    DesignInfo {
        name: designs::MongoFindAndModify::MAJORITY_NAME,
        build: |deps| Arc::new(designs::MongoFindAndModify::majority(deps)),
        summary: "mongo-find-and-modify with writeConcern w:\"majority\": acknowledged once a \
                  majority of the replica set has the lock",
        sources: "the lock-service comparison",
        known_failure: "survives a failover; the lease is still on client clocks, so a pause \
                        past it gives two holders",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MongoDb,
    },
    DesignInfo {
        name: designs::MongoFindAndModify::FENCED_NAME,
        build: |deps| Arc::new(designs::MongoFindAndModify::fenced(deps)),
        summary: "mongo-find-and-modify-majority with the lock document's version ($inc per \
                  acquisition) as fencing token; release expires the document instead of \
                  deleting it",
        sources: "the lock-service comparison",
        known_failure: "two holders in belief after a pause; a fencing storage refuses the \
                        stale one",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MongoDb,
    },
    DesignInfo {
        name: designs::EtcdMutex::NAME,
        build: |deps| Arc::new(designs::EtcdMutex::new(deps)),
        summary: "etcd clientv3/concurrency Mutex (v3.4.23) on a Session: a key <key>/<lease> \
                  put with the session's lease, kept alive by the lease keeper; the lock is \
                  the oldest key under the prefix, waiters watch the next older one's \
                  deletion",
        sources: "the lock-service comparison",
        known_failure: "the lease expires on the server while its holder is paused or cut \
                        off; the next waiter takes the lock and the old holder, never told, \
                        still acts: two holders (Jepsen, etcd 3.4.3)",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::Etcd,
    },
    DesignInfo {
        name: designs::EtcdMutex::FENCED_NAME,
        build: |deps| Arc::new(designs::EtcdMutex::fenced(deps)),
        summary: "etcd-mutex with the lock key's create revision as the fencing token",
        sources: "the lock-service comparison",
        known_failure: "two holders in belief after a pause; a fencing storage refuses the \
                        stale one",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::Etcd,
    },
    DesignInfo {
        name: designs::EtcdMutex::LOCK_SERVICE_NAME,
        build: |deps| Arc::new(designs::EtcdMutex::lock_service(deps)),
        summary: "etcd's v3lock Lock RPC with a session's lease (the server runs the mutex \
                  for the caller); Unlock RPC to release",
        sources: "the lock-service comparison",
        known_failure: "as etcd-mutex: the lease can expire under a paused holder",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::Etcd,
    },
    DesignInfo {
        name: designs::MySqlForUpdate::NAME,
        build: |deps| Arc::new(designs::MySqlForUpdate::new(deps)),
        summary: "a row per lock name; BEGIN; SELECT ... FOR UPDATE (waiting up to \
                  innodb_lock_wait_timeout) to lock, COMMIT to unlock; the row lock belongs \
                  to the transaction, and so to the connection",
        sources: "the lock-service comparison",
        known_failure: "a dropped connection rolls the transaction back and frees the row lock \
                        while the holder, which never looks, keeps working: two holders",
        expires: false,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MySql,
    },
    DesignInfo {
        name: designs::MySqlExpiry::NAME,
        build: |deps| Arc::new(designs::MySqlExpiry::new(deps)),
        summary: "the unique index with an expires_at column written from the client's wall \
                  clock; a waiter that finds the row expired takes it over with UPDATE ... \
                  WHERE name AND expires_at < now",
        sources: "the lock-service comparison",
        known_failure: "client clocks decide: a waiter whose clock runs ahead, or a holder \
                        paused past its lease, lets a second client take the row while the \
                        first still works",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MySql,
    },
    DesignInfo {
        name: designs::MySqlExpiry::FENCED_NAME,
        build: |deps| Arc::new(designs::MySqlExpiry::fenced(deps)),
        summary: "mysql-unique-index-expiry with a fence column counted up on every take \
                  (LAST_INSERT_ID(fence + 1) returns it) as fencing token; rows are kept",
        sources: "the lock-service comparison",
        known_failure: "two holders in belief when client clocks disagree; a fencing storage \
                        refuses the stale one",
        expires: true,
        release_checks_owner: true,
        masters: 0,
        backend: Backend::MySql,
    },
    DesignInfo {
        name: designs::RedissonRw::NAME,
        build: |deps| Arc::new(designs::RedissonRw::new(deps)),
        summary: "Redisson 3.52.0 RReadWriteLock: read and write locks in one hash (mode, \
                  per-holder counts, a timeout key per read hold), watchdog every lease/3, \
                  pub/sub wait; acquire takes the write lock, acquire_read the read lock",
        sources: "Dewu's article",
        known_failure: "a pause freezes the watchdog too: past the lease a writer takes the \
                        lock under a paused reader or writer",
        expires: true,
        release_checks_owner: true,
        masters: 1,
        backend: Backend::Redis,
    },
];

impl DesignInfo {
    /// Whether it locks on Redis.
    pub fn on_redis(&self) -> bool {
        self.backend == Backend::Redis
    }
}

/// Records are told apart by name ([`DESIGNS`] has no two with the same one; a test
/// keeps it so): a function pointer has no meaningful equality.
impl PartialEq for DesignInfo {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for DesignInfo {}

/// The names of [`DESIGNS`], comma separated, for error messages.
pub fn design_names() -> String {
    DESIGNS
        .iter()
        .map(|d| d.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The record of the built-in design called `name`: the one lookup between a name (a
/// command line's `--design`, a test's) and a running client. The error names the
/// allowed values.
pub fn design(name: &str) -> Result<&'static DesignInfo, LockError> {
    DESIGNS
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| LockError::UnknownDesign {
            name: name.to_string(),
            allowed: design_names(),
        })
}

/// The built-in designs whose lock lives on `backend`, in [`DESIGNS`]' order.
pub fn designs_on(backend: Backend) -> impl Iterator<Item = &'static DesignInfo> {
    DESIGNS.iter().filter(move |d| d.backend == backend)
}

/// Builds the built-in design called `name` over `deps` (its record's
/// [`DesignInfo::build`]).
pub fn build(name: &str, deps: Deps) -> Result<Arc<dyn LockDesign>, LockError> {
    design(name).map(|info| (info.build)(deps))
}

/// Connects to a real Redis at `url` (e.g. `redis://127.0.0.1:6379`) with a
/// `response_timeout` per reply: the production way to get [`Deps::conn`].
pub async fn connect(
    url: &str,
    response_timeout: Duration,
) -> Result<redis::aio::MultiplexedConnection, LockError> {
    let connect_err = |source| LockError::Connect {
        addr: url.to_string(),
        source,
    };
    let client = redis::Client::open(url).map_err(connect_err)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(response_timeout))
        .set_connection_timeout(Some(Duration::from_secs(2)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(connect_err)
}

/// Subscriber connections to the server a [`Connector`] reaches: the
/// [`Deps::pubsub`] of a world whose lock connection is that connector's.
pub struct ConnectorPubSub(pub Arc<dyn Connector>);

impl PubSubConnector for ConnectorPubSub {
    fn connect(
        &self,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = redis::RedisResult<redis::aio::PubSub>> + Send + '_>,
    > {
        self.0.pubsub()
    }
}

/// Production dependencies: a reconnecting connection to `url`, tokio's clock, OS
/// randomness, `tokio::spawn`, and subscriber connections to the same server.
pub async fn production_deps(url: &str, response_timeout: Duration) -> Result<Deps, LockError> {
    production_deps_multi(&[url], response_timeout).await
}

/// Production dependencies over several independent servers (Redlock): `conn` is the
/// first, `servers` all of them in the order given. Every server is dialled once up
/// front so a wrong URL fails here, naming it; later breaks are redialled.
pub async fn production_deps_multi(
    urls: &[&str],
    response_timeout: Duration,
) -> Result<Deps, LockError> {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mut servers = Vec::with_capacity(urls.len());
    for url in urls {
        let connector: Arc<dyn Connector> = Arc::new(ClientConnector::new(url, response_timeout)?);
        let conn = Conn::new(connector, clock.clone(), ReconnectPolicy::default());
        conn.ensure_connected()
            .await
            .map_err(|source| LockError::Connect {
                addr: url.to_string(),
                source,
            })?;
        servers.push(conn);
    }
    let Some(first) = servers.first().cloned() else {
        return Err(LockError::NoServers);
    };
    Ok(Deps {
        pubsub: Some(Arc::new(ConnectorPubSub(first.connector().clone()))),
        ..Deps::new(
            first,
            servers,
            clock,
            Arc::new(OsEntropy),
            Arc::new(TokioSpawner),
        )
    })
}

/// A connector for worlds without Redis (the ZooKeeper designs never use
/// [`Deps::conn`]): every dial fails, naming why.
struct NoRedis;

impl Connector for NoRedis {
    fn server(&self) -> &str {
        "no-redis"
    }

    fn connect(&self) -> Dial<'_, redis::aio::MultiplexedConnection> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "not connected",
                "this world has no Redis server".to_string(),
            )))
        })
    }

    fn pubsub(&self) -> Dial<'_, redis::aio::PubSub> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "not connected",
                "this world has no Redis server".to_string(),
            )))
        })
    }
}

/// Dependencies for a design on another system than Redis: `clock`, `entropy` and
/// `spawner` as given, [`Deps::conn`] reaching no Redis (its commands fail), and no
/// server of any system yet: [`zookeeper_deps`], [`mysql_deps`] and [`mongo_deps`]
/// each set their own.
fn without_redis(
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    let conn = Conn::new(Arc::new(NoRedis), clock.clone(), ReconnectPolicy::default());
    Deps::new(conn.clone(), vec![conn], clock, entropy, spawner)
}

/// Dependencies for the ZooKeeper designs: the ensemble, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis (its commands fail).
pub fn zookeeper_deps(
    ensemble: zk::ZkEnsemble,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    without_redis(clock, entropy, spawner).with_system(ensemble)
}

/// Dependencies for the MySQL designs: the server, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis and no other system's
/// handle is set.
pub fn mysql_deps(
    server: mysql::MySqlServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    without_redis(clock, entropy, spawner).with_system(server)
}

/// Dependencies for the MongoDB designs: the replica set's members, and `clock`,
/// `entropy` and `spawner` as given; [`Deps::conn`] reaches no Redis.
pub fn mongo_deps(
    server: mongo::MongoServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    without_redis(clock, entropy, spawner).with_system(server)
}

/// Dependencies for the etcd designs: the member, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis.
pub fn etcd_deps(
    server: etcd::EtcdServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    without_redis(clock, entropy, spawner).with_system(server)
}

/// Production dependencies for the etcd designs: the member at `host:port` (over
/// tokio TCP) with tokio's clock and OS randomness.
pub fn production_etcd_deps(host: &str, port: u16) -> Deps {
    etcd_deps(
        etcd::EtcdServer::new(host, port, Arc::new(zk::TokioDialer)),
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    )
}

/// Production dependencies for the MongoDB designs: `server` (over tokio TCP) with
/// tokio's clock and OS randomness.
pub fn production_mongo_deps(server: mongo::MongoServer) -> Deps {
    mongo_deps(
        server,
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    )
}

/// Production dependencies for the MySQL designs: `server` (over tokio TCP, see
/// [`mysql::MySqlServer`]) with tokio's clock and OS randomness.
pub fn production_mysql_deps(server: mysql::MySqlServer) -> Deps {
    mysql_deps(
        server,
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    )
}

/// Production dependencies for the ZooKeeper designs: the servers `host:port`, asking
/// for `session_timeout_ms`, over tokio TCP with tokio's clock and OS randomness.
pub fn production_zk_deps(servers: &[&str], session_timeout_ms: u32) -> Result<Deps, LockError> {
    let mut list = Vec::with_capacity(servers.len());
    for s in servers {
        let parsed = s
            .rsplit_once(':')
            .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h.to_string(), p)));
        match parsed {
            Some(hp) if !hp.0.is_empty() => list.push(hp),
            _ => {
                return Err(LockError::BadZooKeeperAddress {
                    addr: s.to_string(),
                });
            }
        }
    }
    if list.is_empty() {
        return Err(LockError::NoServers);
    }
    Ok(zookeeper_deps(
        zk::ZkEnsemble {
            servers: list,
            dialer: Arc::new(zk::TokioDialer),
            session_timeout_ms,
            scale: TimeScale::REAL,
        },
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    ))
}
