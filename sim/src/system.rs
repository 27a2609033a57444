//! What each lock-server system has: the capabilities a scenario asks for (a lock
//! server to pause, a primary that Sentinel fails over, a replicated write an election
//! rolls back, notifications to lose...). A scenario names what it needs; a design runs
//! it if its system has all of it (see `scenarios::catalog::Def::needs`), and otherwise
//! the cell says which capability is missing.
//!
//! Each system's list sits in its world module (its `SystemInfo`); the world's registry
//! ([`crate::world::capabilities`]) is the one place that maps a design's
//! [`lock_impl::Backend`] to it.

/// Something a scenario's faults or probe need from the system a design locks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// A host that serves the lock and can be paused, crashed and restarted,
    /// partitioned from clients, and whose clock can step or drift: every system.
    LockServer,
    /// Lock-release notifications a waiter waits on, which the server can drop on a
    /// live connection (Redis pub/sub: a subscriber's output buffer limit, a message
    /// published while a subscriber reconnects). ZooKeeper has none to drop: it
    /// delivers a watch event in order on the session's connection, and loses it only
    /// with that connection, which the network faults cover.
    Notifications,
    /// Replicas that Sentinel promotes when the master is lost (Redis).
    SentinelFailover,
    /// An append-only file with an `appendfsync` policy (Redis).
    AppendOnlyFile,
    /// Several independent masters a client locks on at once (Redlock over Redis).
    IndependentMasters,
    /// Sessions whose expiry ends the locks they own (ZooKeeper's ephemeral nodes).
    SessionExpiry,
    /// A quorum leader that commits each write before answering (ZooKeeper).
    QuorumLeader,
    /// Followers that serve reads from their own, possibly lagging, copy (ZooKeeper).
    FollowerReads,
    /// Locks that belong to a server-side connection, which the server can end
    /// (MySQL's `GET_LOCK` and row locks; `wait_timeout`).
    ConnectionLocks,
    /// An asynchronous replica promoted behind a virtual address (MySQL).
    AsyncReplicaPromotion,
    /// Crash recovery from a redo log flushed by policy
    /// (`innodb_flush_log_at_trx_commit`).
    RedoLogRecovery,
    /// A replica set whose elections roll back writes a majority never had (MongoDB).
    ElectionRollback,
    /// Several servers that keep the lock by a majority and elect a new leader or
    /// primary when the one serving loses it (a ZooKeeper ensemble, a MongoDB replica
    /// set): the lock server can be cut off from the rest of its system while clients
    /// still reach it.
    Quorum,
    /// The system serves locks from the run's first moment (a Redis server, a MySQL
    /// server, a replica set initiated before the run). A ZooKeeper ensemble elects its
    /// first leader inside the run, one `tickTime` after FastLeaderElection's wait in
    /// the model: at a 10 s lease (2 s ticks) that is past a one-second world.
    ServingAtStart,
    /// The world's observers follow more than one lock key (the segmented stock):
    /// only the Redis world's do.
    ManyKeys,
}

impl Capability {
    /// What it is, for the reason a cell does not run ("needs ...").
    pub fn describe(self) -> &'static str {
        match self {
            Capability::LockServer => "a lock server to pause, crash, cut off or set the clock of",
            Capability::Notifications => {
                "release notifications a server drops on a live connection (Redis pub/sub; a ZooKeeper watch event is lost only with its connection)"
            }
            Capability::SentinelFailover => "Redis replicas that Sentinel promotes",
            Capability::AppendOnlyFile => "Redis's append-only file",
            Capability::IndependentMasters => "independent Redis masters (Redlock)",
            Capability::SessionExpiry => "sessions whose expiry deletes their locks",
            Capability::QuorumLeader => "a quorum leader that commits before it answers",
            Capability::FollowerReads => "followers that serve reads from a lagging copy",
            Capability::ConnectionLocks => "locks owned by a server-side connection",
            Capability::AsyncReplicaPromotion => {
                "an asynchronous MySQL replica promoted behind a virtual address"
            }
            Capability::RedoLogRecovery => "crash recovery from a redo log flushed by policy",
            Capability::ElectionRollback => {
                "replica-set elections that roll back unreplicated writes"
            }
            Capability::ServingAtStart => {
                "a lock service serving from the run's start (the model's ZooKeeper ensemble elects its first leader a tickTime into the run: 2 s at this world's 10 s lease, past its 1.5 s)"
            }
            Capability::Quorum => {
                "a quorum of servers that elects a new leader when the one serving is cut off"
            }
            Capability::ManyKeys => {
                "observers of several lock keys (only the Redis world's follow more than one)"
            }
        }
    }
}
