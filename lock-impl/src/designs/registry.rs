//! The built-in designs' one table: [`DESIGNS`], one [`DesignInfo`] per design (name,
//! system, promise, how it is built), and the lookups by name ([`design`], [`build`]).
//! A new design is its module in `designs/` plus one record here; docs/designs.md
//! describes each at length.

use std::sync::Arc;

use crate::designs;
use crate::{Backend, Deps, LockDesign, LockError};

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
