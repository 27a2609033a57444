//! The MySQL system's part of a workload: the server clients log in to, its
//! `wait_timeout` and redo-log policy, and an optional asynchronous replica with the
//! failover that promotes it.

use serde::{Deserialize, Serialize};

/// The world's MySQL server: its host name and the account clients log in with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MySqlSpec {
    /// Its host name (`mysql-1`).
    pub name: String,
    /// The user clients log in as.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The database.
    pub database: String,
    /// The server's global `wait_timeout`, seconds: a connection idle that long is
    /// closed (with its `GET_LOCK`s). MariaDB's default, 28800, unless set.
    #[serde(
        default = "default_wait_timeout_s",
        skip_serializing_if = "is_default_wait_timeout"
    )]
    pub wait_timeout_s: u64,
    /// `innodb_flush_log_at_trx_commit`: 1 (MariaDB's default) flushes the redo log
    /// at every commit, so a crash loses no committed transaction; 2 writes it to the
    /// operating system at every commit and flushes it once a second, so a machine
    /// crash loses up to a second of commits (a crash of mysqld alone, none); 0 writes
    /// and flushes once a second, so any crash loses up to a second; 3 flushes at
    /// prepare and at commit (as durable as 1). Anything else is refused.
    #[serde(
        default = "default_flush_log_at_trx_commit",
        skip_serializing_if = "is_default_flush_log_at_trx_commit"
    )]
    pub innodb_flush_log_at_trx_commit: u8,
    /// An asynchronous replica and the failover that promotes it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<MySqlReplicaSpec>,
}

/// A MySQL replica of the world's server, replicating asynchronously (the binlog's row
/// events reach it `lag_ms` after their commit, unless the primary is down by then),
/// and an orchestrator (as orchestrator or MHA does it) that promotes it once the
/// primary has been down `failover_after_ms`, re-pointing the clients' address (a
/// virtual IP) at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MySqlReplicaSpec {
    /// Its host name (`mysql-2`).
    pub name: String,
    /// How long a committed change takes to reach it, ms.
    pub lag_ms: u64,
    /// How long the primary must be down before the promotion, ms.
    pub failover_after_ms: u64,
}

impl Default for MySqlReplicaSpec {
    fn default() -> Self {
        MySqlReplicaSpec {
            name: "mysql-2".into(),
            lag_ms: 10,
            failover_after_ms: 1_000,
        }
    }
}

fn default_wait_timeout_s() -> u64 {
    28_800
}

fn is_default_wait_timeout(s: &u64) -> bool {
    *s == default_wait_timeout_s()
}

fn default_flush_log_at_trx_commit() -> u8 {
    1
}

fn is_default_flush_log_at_trx_commit(v: &u8) -> bool {
    *v == default_flush_log_at_trx_commit()
}

impl Default for MySqlSpec {
    fn default() -> Self {
        MySqlSpec {
            name: "mysql-1".into(),
            user: "locksim".into(),
            password: "locksim".into(),
            database: "locksim".into(),
            wait_timeout_s: default_wait_timeout_s(),
            innodb_flush_log_at_trx_commit: default_flush_log_at_trx_commit(),
            replica: None,
        }
    }
}
