//! The MySQL designs: `mysql-unique-index` (seed 002's first row) and `mysql-get-lock`
//! (MariaDB's user-level locks), both over one connection per client
//! ([`crate::mysql::MySqlConn`]) that is redialled, as a pool does, after it broke.
//!
//! `mysql-unique-index` (seed 002, "基于mysql 表唯一索引": a table with a unique index;
//! lock = `INSERT`, an error means taken; unlock = `DELETE`):
//! - on every new connection, `CREATE TABLE IF NOT EXISTS locks (name VARCHAR(255) NOT
//!   NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL)`;
//! - acquire: `INSERT INTO locks (name, owner) VALUES ('<key>', '<owner>')`: OK is the
//!   lock; `ER_DUP_ENTRY` (1062) means held (retried with backoff within the wait
//!   budget), and so does a statement InnoDB rolled back (`ER_LOCK_DEADLOCK` 1213,
//!   `ER_LOCK_WAIT_TIMEOUT` 1205: real InnoDB picks deadlock victims among
//!   concurrent `INSERT`s of one key racing its `DELETE`; the model never does);
//! - release: `DELETE FROM locks WHERE name = '<key>' AND owner = '<owner>'`: one row
//!   deleted is ours released, none means it was not ours (or gone);
//! - known failure (seed 002's 缺点 1 and 2): no expiry, so a holder that dies leaves
//!   the row forever and every other client waits: stuck; no reentrancy (a second
//!   `INSERT` by the holder is a duplicate), no blocking wait (clients poll).
//!
//! `mysql-get-lock` (MariaDB's `GET_LOCK`,
//! <https://mariadb.com/kb/en/get_lock/>: "the lock is released when the session
//! terminates (either normally or abnormally)"):
//! - acquire: `SELECT GET_LOCK('<key>', 0)`: 1 is the lock, 0 held by another
//!   connection (retried within the wait budget), NULL an error; the guard's owner
//!   value names the holding connection ([`get_lock_owner`]);
//! - release: `SELECT RELEASE_LOCK('<key>')`: 1 released, 0 held by another
//!   connection, NULL held by nobody;
//! - known failure: the lock belongs to the *connection*, not the client. When the
//!   connection drops (a reset, a proxy, a pool recycling it) the server releases the
//!   lock at once, another client takes it, and the holder, which never looks,
//!   reconnects for its next statement and keeps working believing it holds the lock:
//!   two holders. (Per connection it is reentrant: a second `GET_LOCK` of the same
//!   name by the same connection is counted.)
//!
//! Outcomes: a statement found unsendable on a reused connection (reset while idle)
//! is sent once more on a fresh one, as a pool does; a statement whose connection
//! broke after it was sent has an unknown outcome ([`Acquire::Unknown`], [`Release::Unknown`]); one that was never sent (the
//! dial failed) did nothing: an acquisition tries again within its budget, a release
//! is an error. Any other server error is [`LockError::MySql`].

use async_trait::async_trait;

use super::{check_guard, guard};
use crate::lock::Attempt;
use crate::mysql::{MySqlConn, MySqlError, MySqlServer, Reply, quote, scalar};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, retry_acquire};

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
fn rolled_back(code: u16) -> bool {
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
            server: deps.mysql.clone(),
            deps,
            setup,
            conn: tokio::sync::Mutex::new(None),
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

fn server_error(sql: &str, reply: Reply) -> LockError {
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

fn not_sent_release(sql: &str, why: String) -> LockError {
    LockError::MySql {
        statement: sql.to_string(),
        source: MySqlError::Connection { sent: false, why },
    }
}

/// `mysql-unique-index` (see the module doc).
pub struct MySqlUniqueIndex {
    session: Session,
}

impl MySqlUniqueIndex {
    /// The design's name.
    pub const NAME: &'static str = "mysql-unique-index";

    /// Over `deps.mysql`.
    pub fn new(deps: Deps) -> Self {
        MySqlUniqueIndex {
            session: Session::new(deps, &[MYSQL_LOCKS_TABLE]),
        }
    }
}

#[async_trait]
impl LockDesign for MySqlUniqueIndex {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        self.session.server(Self::NAME)?;
        let deps = &self.session.deps;
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sql = format!(
                "INSERT INTO locks (name, owner) VALUES ({}, {})",
                quote(key),
                quote(&owner)
            );
            let sent_at = deps.clock.now();
            Ok(match self.session.run(Self::NAME, &sql).await? {
                Outcome::Reply(Reply::Ok(_), _) => {
                    Attempt::Acquired(guard(Self::NAME, key, owner, sent_at, None))
                }
                Outcome::Reply(Reply::Err(e), _) if e.code == ER_DUP_ENTRY => Attempt::Held,
                // Rolled back (a deadlock victim, a lock-wait timeout): no row was
                // written; try again within the budget, as a duplicate is.
                Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => Attempt::Held,
                Outcome::Reply(other, _) => return Err(server_error(&sql, other)),
                Outcome::NotSent(_) => Attempt::Held,
                Outcome::Unknown(why) => Attempt::Unknown(why),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        let sql = format!(
            "DELETE FROM locks WHERE name = {} AND owner = {}",
            quote(&guard.key),
            quote(&guard.owner)
        );
        let mut outcome = self.session.run(Self::NAME, &sql).await?;
        for _ in 0..RELEASE_ROLLBACK_RETRIES {
            match &outcome {
                // Rolled back: the row is still there; delete it again.
                Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => {
                    outcome = self.session.run(Self::NAME, &sql).await?;
                }
                _ => break,
            }
        }
        match outcome {
            Outcome::Reply(Reply::Ok(ok), _) if ok.affected_rows == 1 => Ok(Release::Removed),
            Outcome::Reply(Reply::Ok(_), _) => Ok(Release::NotRemoved),
            Outcome::Reply(other, _) => Err(server_error(&sql, other)),
            Outcome::NotSent(why) => Err(not_sent_release(&sql, why)),
            Outcome::Unknown(why) => Ok(Release::Unknown(why)),
        }
    }
}

/// `mysql-get-lock` (see the module doc).
pub struct MySqlGetLock {
    session: Session,
}

impl MySqlGetLock {
    /// The design's name.
    pub const NAME: &'static str = "mysql-get-lock";

    /// Over `deps.mysql`.
    pub fn new(deps: Deps) -> Self {
        MySqlGetLock {
            session: Session::new(deps, &[]),
        }
    }
}

/// A `0`/`1`/NULL resultset value.
fn flag(sql: &str, reply: &Reply) -> Result<Option<bool>, LockError> {
    let v = scalar(reply).map_err(|source| LockError::MySql {
        statement: sql.to_string(),
        source,
    })?;
    match v {
        None => Ok(None),
        Some(b"1") => Ok(Some(true)),
        Some(b"0") => Ok(Some(false)),
        Some(other) => Err(LockError::MySql {
            statement: sql.to_string(),
            source: MySqlError::Protocol(format!(
                "expected 0, 1 or NULL, got '{}'",
                String::from_utf8_lossy(other)
            )),
        }),
    }
}

#[async_trait]
impl LockDesign for MySqlGetLock {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        self.session.server(Self::NAME)?;
        let deps = &self.session.deps;
        retry_acquire(deps, key, options, || async move {
            let sql = format!("SELECT GET_LOCK({}, 0)", quote(key));
            let sent_at = deps.clock.now();
            Ok(match self.session.run(Self::NAME, &sql).await? {
                Outcome::Reply(Reply::Err(e), _) => {
                    return Err(server_error(&sql, Reply::Err(e)));
                }
                Outcome::Reply(r, id) => match flag(&sql, &r)? {
                    Some(true) => {
                        Attempt::Acquired(guard(Self::NAME, key, get_lock_owner(id), sent_at, None))
                    }
                    Some(false) => Attempt::Held,
                    None => return Err(server_error(&sql, r)),
                },
                Outcome::NotSent(_) => Attempt::Held,
                Outcome::Unknown(why) => Attempt::Unknown(why),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        let sql = format!("SELECT RELEASE_LOCK({})", quote(&guard.key));
        match self.session.run(Self::NAME, &sql).await? {
            Outcome::Reply(Reply::Err(e), _) => Err(server_error(&sql, Reply::Err(e))),
            Outcome::Reply(r, _) => Ok(match flag(&sql, &r)? {
                Some(true) => Release::Removed,
                Some(false) => Release::HeldByOther,
                None => Release::NotFound,
            }),
            Outcome::NotSent(why) => Err(not_sent_release(&sql, why)),
            Outcome::Unknown(why) => Ok(Release::Unknown(why)),
        }
    }
}
