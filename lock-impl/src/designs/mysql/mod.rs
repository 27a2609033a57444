//! The MySQL designs, all over one connection per client ([`crate::mysql::MySqlConn`])
//! that is redialled, as a pool does, after it broke; one module each:
//! `mysql-unique-index` (the first row of the lock-service comparison
//! "常见分布式锁方案对比", docs/designs.md), `mysql-get-lock` (MariaDB's user-level
//! locks), `mysql-for-update` (a row lock), and `mysql-unique-index-expiry` / `-fenced`
//! (an expiry column).
//!
//! Outcomes: a statement found unsendable on a reused connection (reset while idle)
//! is sent once more on a fresh one, as a pool does; a statement whose connection
//! broke after it was sent has an unknown outcome ([`Acquire::Unknown`], [`Release::Unknown`]); one that was never sent (the
//! dial failed) did nothing: an acquisition tries again within its budget, a release
//! is an error. Any other server error is [`LockError::MySql`].

mod expiry;
mod for_update;
mod get_lock;
mod unique_index;

pub use expiry::{MYSQL_FENCES_TABLE, MYSQL_LEASES_TABLE, MySqlExpiry};
pub use for_update::{MYSQL_LOCK_ROWS_TABLE, MySqlForUpdate};
pub use get_lock::MySqlGetLock;
pub use unique_index::MySqlUniqueIndex;

use super::{check_guard, guard};
use crate::lock::Attempt;
use crate::mysql::{MySqlConn, MySqlError, MySqlServer, Reply, quote, scalar};
use crate::{
    Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, Wait, retry_acquire,
};

/// The table `mysql-unique-index` creates and locks in.
pub const MYSQL_LOCKS_TABLE: &str = "CREATE TABLE IF NOT EXISTS locks \
     (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL)";

/// The owner value of a `mysql-get-lock` guard: the holding connection, as
/// `CONNECTION_ID()` (and `IS_USED_LOCK`) name it, `connection-<id>`. The lock belongs
/// to that connection, whatever the client believes.
pub fn get_lock_owner(connection_id: u32) -> String {
    format!("connection-{connection_id}")
}

/// `ER_DUP_ENTRY`.
const ER_DUP_ENTRY: u16 = 1062;
/// `ER_LOCK_WAIT_TIMEOUT`: InnoDB gave up waiting for a row lock; with autocommit
/// (innodb_rollback_on_timeout off) the statement is rolled back: nothing happened.
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// `ER_LOCK_DEADLOCK` ("Deadlock found when trying to get lock; try restarting
/// transaction"): InnoDB chose this statement's transaction as the deadlock victim and
/// rolled it back. Real InnoDB does this to concurrent `INSERT`s of one unique key
/// racing a `DELETE` of it (each waits for the other's shared next-key lock on the
/// duplicate), so a lock built on a unique index meets it under plain contention.
/// Under autocommit nothing was written: the statement may simply be run again.
const ER_LOCK_DEADLOCK: u16 = 1213;

/// Whether a server error means the statement was rolled back and may be retried.
pub(super) fn rolled_back(code: u16) -> bool {
    code == ER_LOCK_DEADLOCK || code == ER_LOCK_WAIT_TIMEOUT
}

/// How often a release `DELETE` rolled back by InnoDB is run again before the error is
/// returned (a client retries "try restarting transaction").
const RELEASE_ROLLBACK_RETRIES: usize = 3;

/// One connection, redialled after it broke.
struct Session {
    deps: Deps,
    server: Option<MySqlServer>,
    /// Statements to run on every new connection.
    setup: &'static [&'static str],
    conn: tokio::sync::Mutex<Option<MySqlConn>>,
    /// The ids of every connection this session has had.
    had: std::sync::Mutex<std::collections::BTreeSet<u32>>,
}

/// What became of one statement.
enum Outcome {
    /// The server's reply (ERR included), on the connection with this id.
    Reply(Reply, u32),
    /// Never sent: nothing happened.
    NotSent(String),
    /// Sent, reply lost: the outcome is unknown.
    Unknown(String),
}

impl Session {
    fn new(deps: Deps, setup: &'static [&'static str]) -> Self {
        Session {
            server: deps.system::<MySqlServer>().cloned(),
            deps,
            setup,
            conn: tokio::sync::Mutex::new(None),
            had: std::sync::Mutex::default(),
        }
    }

    /// Whether connection `id` was ever this session's.
    fn had(&self, id: u32) -> bool {
        self.had
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&id)
    }

    /// Runs `sql` on connection `id` only, never on another: a transaction's
    /// statements must reach the connection that began it (a redial would run them in
    /// autocommit, where a `FOR UPDATE` lock ends with its statement). If that
    /// connection is gone, nothing is sent.
    async fn run_on(&self, id: u32, sql: &str) -> Result<Outcome, LockError> {
        let mut slot = self.conn.lock().await;
        let Some(conn) = slot
            .as_mut()
            .filter(|c| c.broken().is_none() && c.connection_id() == id)
        else {
            return Ok(Outcome::NotSent(format!("{sql}: connection {id} is gone")));
        };
        match conn.query_reply(sql).await {
            Ok(r) => Ok(Outcome::Reply(r, id)),
            Err(e) if e.outcome_unknown() => {
                *slot = None;
                Ok(Outcome::Unknown(format!("{sql}: {e}")))
            }
            Err(MySqlError::Connection { why, .. }) => {
                *slot = None;
                Ok(Outcome::NotSent(format!("{sql}: {why}")))
            }
            Err(e) => Err(LockError::MySql {
                statement: sql.to_string(),
                source: e,
            }),
        }
    }

    fn server(&self, design: &'static str) -> Result<&MySqlServer, LockError> {
        self.server.as_ref().ok_or(LockError::NoMySql { design })
    }

    async fn run(&self, design: &'static str, sql: &str) -> Result<Outcome, LockError> {
        let server = self.server(design)?;
        let mut slot = self.conn.lock().await;
        // A pooled connection found dead when the statement is written (the server or
        // a middlebox reset it while idle) sent nothing: the statement goes once more
        // on a fresh connection, as a pool retries a stale connection.
        for attempt in 0..2 {
            if slot.as_ref().is_some_and(|c| c.broken().is_some()) {
                *slot = None;
            }
            let reused = slot.is_some();
            if slot.is_none() {
                let mut conn = match MySqlConn::connect(server, self.deps.clock.clone()).await {
                    Ok(c) => c,
                    Err(MySqlError::Server(e)) => {
                        return Err(LockError::MySql {
                            statement: "(login)".into(),
                            source: MySqlError::Server(e),
                        });
                    }
                    Err(e) => return Ok(Outcome::NotSent(format!("connect: {e}"))),
                };
                for stmt in self.setup {
                    match conn.query(stmt).await {
                        Ok(_) => {}
                        Err(e @ MySqlError::Server(_)) => {
                            return Err(LockError::MySql {
                                statement: stmt.to_string(),
                                source: e,
                            });
                        }
                        Err(e) => return Ok(Outcome::NotSent(format!("{stmt}: {e}"))),
                    }
                }
                self.had
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(conn.connection_id());
                *slot = Some(conn);
            }
            let Some(conn) = slot.as_mut() else {
                return Ok(Outcome::NotSent("no connection".into()));
            };
            let id = conn.connection_id();
            match conn.query_reply(sql).await {
                Ok(r) => return Ok(Outcome::Reply(r, id)),
                Err(e) if e.outcome_unknown() => {
                    *slot = None;
                    return Ok(Outcome::Unknown(format!("{sql}: {e}")));
                }
                Err(MySqlError::Connection { why, .. }) => {
                    *slot = None;
                    if !(reused && attempt == 0) {
                        return Ok(Outcome::NotSent(format!("{sql}: {why}")));
                    }
                }
                Err(e) => {
                    return Err(LockError::MySql {
                        statement: sql.to_string(),
                        source: e,
                    });
                }
            }
        }
        Ok(Outcome::NotSent(format!("{sql}: no connection")))
    }
}

pub(super) fn server_error(sql: &str, reply: Reply) -> LockError {
    LockError::MySql {
        statement: sql.to_string(),
        source: match reply {
            Reply::Err(e) => MySqlError::Server(e),
            other => MySqlError::Protocol(format!(
                "unexpected reply {}",
                crate::mysql::describe(&other)
            )),
        },
    }
}

pub(super) fn not_sent_release(sql: &str, why: String) -> LockError {
    LockError::MySql {
        statement: sql.to_string(),
        source: MySqlError::Connection {
            sent: false,
            why,
            errno: crate::mysql::client::CR_SERVER_GONE_ERROR,
        },
    }
}
