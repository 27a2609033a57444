//! What the server (`server.rs`) and its storage engine (`innodb.rs`) both speak of:
//! a connection's id, and the events an observer records.

/// A connection's id (`CONNECTION_ID()`).
pub type ConnId = u32;

/// What the server did that an observer records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client logged in.
    Connected {
        /// The connection.
        conn: ConnId,
        /// The client's host.
        host: String,
    },
    /// A connection ended, releasing these user locks, and rolling back its open
    /// transaction, which freed these row locks (keys as written).
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// The client's host.
        host: String,
        /// The user locks it still held.
        released: Vec<String>,
        /// The row locks its rolled-back transaction held.
        row_locks: Vec<String>,
    },
    /// A row was inserted (recorded when its transaction committed).
    Inserted {
        /// By whom.
        conn: ConnId,
        /// The table.
        table: String,
        /// The row's key.
        name: String,
        /// Its `owner` column, if the table has one.
        owner: Option<String>,
    },
    /// A row was deleted (recorded when its transaction committed).
    Deleted {
        /// By whom.
        conn: ConnId,
        /// The table.
        table: String,
        /// The row's key.
        name: String,
        /// Its `owner` column, if the table has one.
        owner: Option<String>,
    },
    /// A row was changed (recorded when its transaction committed).
    Updated {
        /// By whom.
        conn: ConnId,
        /// The table.
        table: String,
        /// The row's key.
        name: String,
        /// Its `owner` column before, if the table has one.
        before: Option<String>,
        /// Its `owner` column after.
        owner: Option<String>,
    },
    /// A failover (an orchestrator) made this server, a replica, the primary.
    Promoted,
    /// An explicit transaction locked a row (`SELECT ... FOR UPDATE`, or a write).
    RowLocked {
        /// The connection.
        conn: ConnId,
        /// The table.
        table: String,
        /// The row's key, as the statement wrote it.
        name: String,
    },
    /// A transaction's end (`COMMIT`, `ROLLBACK`, a `BEGIN` or DDL committing it)
    /// freed a row lock. (A connection's end reports its row locks in
    /// [`ServerEvent::Disconnected`].)
    RowUnlocked {
        /// The connection.
        conn: ConnId,
        /// The table.
        table: String,
        /// The row's key.
        name: String,
        /// Committed (else rolled back).
        committed: bool,
    },
    /// A connection took a user lock (its first hold).
    LockTaken {
        /// The connection.
        conn: ConnId,
        /// The lock.
        name: String,
    },
    /// A connection released a user lock (its last hold) with `RELEASE_LOCK`.
    LockReleased {
        /// The connection.
        conn: ConnId,
        /// The lock.
        name: String,
    },
}
