//! Errors a lock operation can return.
//!
//! An error means the call could not be made as asked (bad input, an unreachable server,
//! a reply the design cannot read). An operation whose *outcome* is unknown (a reply
//! that timed out, a connection dropped mid-request) is not an error: it is
//! [`crate::Acquire::Unknown`] or [`crate::Release::Unknown`], because the lock may or may
//! not have been taken and the caller must treat it so.

/// Why a lock operation could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `lease_ms` must be a positive number of milliseconds.
    #[error("invalid lease_ms={lease_ms}: a lease must be a positive number of milliseconds")]
    InvalidLease {
        /// The value that was given.
        lease_ms: i64,
    },
    /// `wait_ms` must be zero (try once) or positive; a call that blocks until it gets
    /// the lock (such as `ReentrantWatchdog::lock_waiting`) needs a positive one.
    #[error(
        "invalid wait_ms={wait_ms}: a wait budget must be zero (try once) or positive, \
         and positive for a call that waits for the lock"
    )]
    InvalidWait {
        /// The value that was given.
        wait_ms: i64,
    },
    /// Redis keys used as locks must not be empty.
    #[error("invalid key: a lock key must not be empty")]
    EmptyKey,
    /// No lock design is registered under this name.
    #[error("unknown design '{name}'; allowed: {allowed}")]
    UnknownDesign {
        /// The name that was asked for.
        name: String,
        /// The registered names, comma separated.
        allowed: String,
    },
    /// The server could not be reached.
    #[error("cannot connect to Redis at {addr}: {source}")]
    Connect {
        /// The address that was dialled.
        addr: String,
        /// What the connection attempt reported.
        source: redis::RedisError,
    },
    /// Dependencies were asked for with an empty list of servers.
    #[error("no Redis servers given: a design needs at least one URL")]
    NoServers,
    /// The server answered with an error, or with a reply of an unexpected shape.
    #[error("Redis replied with an error to {command}: {source}")]
    Redis {
        /// The command that was sent.
        command: &'static str,
        /// The reply.
        source: redis::RedisError,
    },
    /// A guard was released by a design that did not issue it.
    #[error("guard for key '{key}' was issued by design '{issued_by}', not '{released_by}'")]
    ForeignGuard {
        /// The guard's key.
        key: String,
        /// The design that issued the guard.
        issued_by: String,
        /// The design asked to release it.
        released_by: String,
    },
    /// The unlock script found no hold by this owner: the lock is absent (never taken,
    /// released already, or expired) or held by another owner. Redisson's
    /// `IllegalMonitorStateException`.
    #[error(
        "attempt to unlock lock '{key}', not locked by owner '{owner}' \
         (absent, expired, or held by another owner)"
    )]
    NotOwner {
        /// The lock key.
        key: String,
        /// The owner value the release was made with.
        owner: String,
    },
    /// A ZooKeeper design was built over dependencies without an ensemble.
    #[error("design {design} needs a ZooKeeper ensemble (no ZkEnsemble in Deps::systems)")]
    NoZooKeeper {
        /// The design.
        design: &'static str,
    },
    /// A design was built over dependencies without its system's handle: the error
    /// of every system that has no variant of its own ([`crate::Deps::require`]), so a
    /// new system adds none.
    #[error(
        "design {design} locks on {system}, but this world gives it no {system} handle (Deps::systems)"
    )]
    NoSystem {
        /// The design.
        design: &'static str,
        /// The system's name.
        system: &'static str,
    },
    /// A ZooKeeper server address is not `host:port`.
    #[error("invalid ZooKeeper address '{addr}': expected host:port")]
    BadZooKeeperAddress {
        /// What was given.
        addr: String,
    },
    /// ZooKeeper answered an operation with an error the design does not expect.
    #[error("ZooKeeper {op} failed: {source}")]
    ZooKeeper {
        /// The operation.
        op: &'static str,
        /// What the client reported.
        source: crate::zk::ZkError,
    },
    /// A MySQL design was built over dependencies without a server.
    #[error("design {design} needs a MySQL server (no MySqlServer in Deps::systems)")]
    NoMySql {
        /// The design.
        design: &'static str,
    },
    /// A MongoDB design was given no replica set (no [`crate::mongo::MongoServer`] in [`crate::Deps::systems`]).
    #[error("design {design} locks on MongoDB, but this world has no MongoDB replica set")]
    NoMongo {
        /// The design.
        design: &'static str,
    },
    /// etcd answered a call with an error the design does not expect (or the client
    /// could not be built).
    #[error("etcd call `{command}` failed: {message}")]
    Etcd {
        /// The call (`LeaseGrant`, `Txn`, `DeleteRange`, `connect`).
        command: &'static str,
        /// The gRPC code and etcd's message.
        message: String,
    },
    /// MongoDB answered a command with an error the design does not expect.
    #[error("MongoDB command `{command}` failed: {source}")]
    Mongo {
        /// The command's name.
        command: String,
        /// What the client reported.
        source: crate::mongo::MongoError,
    },
    /// MySQL answered a statement with an error the design does not expect.
    #[error("MySQL statement `{statement}` failed: {source}")]
    MySql {
        /// The statement.
        statement: String,
        /// What the client reported.
        source: crate::mysql::MySqlError,
    },
    /// A watchdog renews every lease/3 milliseconds, so a lease below `min_ms` would
    /// renew every 0 ms.
    #[error(
        "invalid watchdog lease_ms={lease_ms}: the watchdog renews every lease/3 ms, \
         so the lease must be at least {min_ms} ms"
    )]
    LeaseTooShortForWatchdog {
        /// The lease that was given.
        lease_ms: u64,
        /// The smallest lease a watchdog can renew.
        min_ms: u64,
    },
    /// A read (shared) acquisition asked of a design that has only one, exclusive, mode.
    #[error("design {design} has no read mode: it only takes an exclusive lock")]
    NoReadMode {
        /// The design asked.
        design: String,
    },
}

impl LockError {
    /// Whether the error was raised before any command reached a server (bad
    /// arguments, an unknown design, a foreign guard), so the operation certainly did
    /// nothing. Any other error may come after a command took effect: a design whose
    /// second command failed after its first one took the lock (`SETNX` done, `PEXPIRE`
    /// refused) returns an error with the lock held, so its outcome is unknown.
    pub fn nothing_sent(&self) -> bool {
        match self {
            LockError::InvalidLease { .. }
            | LockError::InvalidWait { .. }
            | LockError::EmptyKey
            | LockError::UnknownDesign { .. }
            | LockError::NoServers
            | LockError::ForeignGuard { .. }
            | LockError::LeaseTooShortForWatchdog { .. }
            | LockError::NoZooKeeper { .. }
            | LockError::NoMySql { .. }
            | LockError::NoMongo { .. }
            | LockError::NoSystem { .. }
            | LockError::BadZooKeeperAddress { .. }
            | LockError::NoReadMode { .. } => true,
            LockError::Connect { .. }
            | LockError::Redis { .. }
            | LockError::NotOwner { .. }
            | LockError::ZooKeeper { .. }
            | LockError::MySql { .. }
            | LockError::Mongo { .. }
            | LockError::Etcd { .. } => false,
        }
    }
}
