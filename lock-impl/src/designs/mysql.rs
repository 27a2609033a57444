//! The MySQL designs: `mysql-unique-index` (the first row of the lock-service
//! comparison "常见分布式锁方案对比", docs/designs.md), `mysql-get-lock`
//! (MariaDB's user-level locks), `mysql-for-update` (a row lock), and
//! `mysql-unique-index-expiry` / `-fenced` (an expiry column), all over one connection
//! per client
//! ([`crate::mysql::MySqlConn`]) that is redialled, as a pool does, after it broke.
//!
//! `mysql-unique-index` (the comparison's "基于mysql 表唯一索引": a table with a unique index;
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
//! - known failure (the comparison's 缺点 1 and 2): no expiry, so a holder that dies leaves
//!   the row forever and every other client waits: stuck; no reentrancy (a second
//!   `INSERT` by the holder is a duplicate), no blocking wait (clients poll).
//!
//! `mysql-get-lock` (MariaDB's `GET_LOCK`,
//! <https://mariadb.com/kb/en/get_lock/>: "the lock is released when the session
//! terminates (either normally or abnormally)"):
//! - acquire: `SELECT GET_LOCK('<key>', 0)`: 1 is the lock, 0 held by another
//!   connection (retried within the wait budget), NULL an error; the guard's owner
//!   value names the holding connection ([`get_lock_owner`]);
//! - release: `SELECT RELEASE_LOCK('<key>')`: 1 one of this connection's holds
//!   released, 0 held by another connection, NULL held by nobody. MariaDB (10.0.2 and
//!   later) counts a connection's nested `GET_LOCK`s of one name and frees the lock only
//!   at the last `RELEASE_LOCK` (<https://mariadb.com/kb/en/get_lock/>: "if a
//!   connection obtains the same lock multiple times, it must release it the same
//!   number of times"), and its `1` does not say which release that was. The design
//!   counts its connection's holds as the server does ([`MySqlGetLock`]'s `holds`: one
//!   up per `1` from `GET_LOCK`, one down per `1` from `RELEASE_LOCK`, on the
//!   connection that answered), so a `1` with holds left is
//!   [`Release::StillHeld`] and the last one is [`Release::Removed`]. A hold the
//!   client never heard of (a `GET_LOCK` whose reply was lost) is not counted: its
//!   count then runs short of the server's, as any client's would;
//! - known failure: the lock belongs to the *connection*, not the client. When the
//!   connection drops (a reset, a proxy, a pool recycling it) the server releases the
//!   lock at once, another client takes it, and the holder, which never looks,
//!   reconnects for its next statement and keeps working believing it holds the lock:
//!   two holders. (Per connection it is reentrant: a second `GET_LOCK` of the same
//!   name by the same connection is counted.)
//!
//! `mysql-for-update` (a row lock held for the critical section, as a `SELECT ... FOR
//! UPDATE` in a transaction):
//! - on every new connection, `CREATE TABLE IF NOT EXISTS lock_rows (name VARCHAR(255)
//!   NOT NULL PRIMARY KEY)`: one row per lock name, never deleted;
//! - acquire: `SET SESSION innodb_lock_wait_timeout = n` (0 for a single try, else the
//!   wait budget in whole seconds, at most half the client's reply timeout, rounded
//!   down), `BEGIN`,
//!   `SELECT name FROM lock_rows WHERE name = '<key>' FOR UPDATE` on that same
//!   connection: the row is the lock, held by the transaction; `ER_LOCK_WAIT_TIMEOUT`
//!   means held (`ROLLBACK`, retried within the budget); no row yet: `ROLLBACK`,
//!   `INSERT IGNORE` the row, lock again. The guard's owner names the connection;
//! - release: `COMMIT` on that connection; if it is gone, the server has already
//!   rolled the transaction back ([`Release::NotFound`]);
//! - known failure: as `GET_LOCK`, the lock belongs to the connection. A dropped
//!   connection (a reset, `wait_timeout` reaping an idle one) rolls the transaction
//!   back and frees the row at once; the holder keeps working. A second `BEGIN` on the
//!   holder's connection (a reentrant acquire) would commit the first transaction and
//!   free the lock, so it is not reentrant.
//!
//! `mysql-unique-index-expiry` (the unique index with an expiry, as lock libraries on
//! a table add one):
//! - table `lock_leases (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT
//!   NULL, expires_at BIGINT NOT NULL)`, times in ms of the client's wall clock;
//! - acquire: `INSERT ... VALUES ('<key>', '<owner>', <now + lease>)`; on a duplicate,
//!   `UPDATE lock_leases SET owner = '<owner>', expires_at = <now + lease> WHERE name =
//!   '<key>' AND expires_at < <now>`: one row changed is a takeover of an expired lock;
//! - release: `DELETE ... WHERE name AND owner`;
//! - known failure: client clocks decide. A waiter whose wall clock runs ahead of the
//!   holder's, or a holder paused past its lease, lets the row be taken over while
//!   the first holder still works.
//!
//! `mysql-unique-index-fenced`: the same in `lock_fences`, with a `fence BIGINT`
//! column: 1 on insert, `fence = LAST_INSERT_ID(fence + 1)` on a takeover (the OK
//! packet's insert id returns it atomically); the fence is the guard's token. A
//! release empties the owner and expires the row (`UPDATE ... SET owner = '',
//! expires_at = 0`) instead of deleting it, so the count never restarts.
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
        source: MySqlError::Connection {
            sent: false,
            why,
            errno: crate::mysql::client::CR_SERVER_GONE_ERROR,
        },
    }
}

/// `mysql-unique-index` (see the module doc).
pub struct MySqlUniqueIndex {
    session: Session,
}

impl MySqlUniqueIndex {
    /// The design's name.
    pub const NAME: &'static str = "mysql-unique-index";

    /// Over the world's MySQL server (`deps.system::<MySqlServer>()`).
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
    /// Lock name → (connection, holds): the nested `GET_LOCK`s this client was told it
    /// got on that connection and has not released yet, as the server counts them.
    holds: std::sync::Mutex<std::collections::BTreeMap<String, (u32, u64)>>,
}

impl MySqlGetLock {
    /// The design's name.
    pub const NAME: &'static str = "mysql-get-lock";

    /// Over the world's MySQL server (`deps.system::<MySqlServer>()`).
    pub fn new(deps: Deps) -> Self {
        MySqlGetLock {
            session: Session::new(deps, &[]),
            holds: std::sync::Mutex::default(),
        }
    }

    /// `GET_LOCK(key)` answered `1` on connection `id`: one hold more there (a hold
    /// counted on another connection is gone with it: the server freed it).
    fn held_once_more(&self, key: &str, id: u32) {
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        let entry = holds.entry(key.to_string()).or_insert((id, 0));
        if entry.0 != id {
            *entry = (id, 0);
        }
        entry.1 += 1;
    }

    /// The server says this connection holds `key` no more.
    fn forget(&self, key: &str) {
        self.holds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// `RELEASE_LOCK(key)` answered `1` on connection `id`: one hold fewer; the holds
    /// left (0: the server freed the lock, or the client counted none it knew of).
    fn released_once(&self, key: &str, id: u32) -> u64 {
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        let left = match holds.get(key) {
            Some(&(conn, n)) if conn == id => n.saturating_sub(1),
            _ => 0,
        };
        if left == 0 {
            holds.remove(key);
        } else {
            holds.insert(key.to_string(), (id, left));
        }
        left
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
                        self.held_once_more(key, id);
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
            Outcome::Reply(r, id) => Ok(match flag(&sql, &r)? {
                Some(true) => match self.released_once(&guard.key, id) {
                    0 => Release::Removed,
                    count => Release::StillHeld { count },
                },
                // Not held by this connection: whatever the client counted is gone.
                Some(false) => {
                    self.forget(&guard.key);
                    Release::HeldByOther
                }
                None => {
                    self.forget(&guard.key);
                    Release::NotFound
                }
            }),
            Outcome::NotSent(why) => Err(not_sent_release(&sql, why)),
            Outcome::Unknown(why) => Ok(Release::Unknown(why)),
        }
    }
}

/// The table `mysql-for-update` locks rows of: one row per lock name, never deleted.
pub const MYSQL_LOCK_ROWS_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS lock_rows (name VARCHAR(255) NOT NULL PRIMARY KEY)";

/// `mysql-for-update` (see the module doc).
pub struct MySqlForUpdate {
    session: Session,
}

impl MySqlForUpdate {
    /// The design's name.
    pub const NAME: &'static str = "mysql-for-update";

    /// Over the world's MySQL server (`deps.system::<MySqlServer>()`).
    pub fn new(deps: Deps) -> Self {
        MySqlForUpdate {
            session: Session::new(deps, &[MYSQL_LOCK_ROWS_TABLE]),
        }
    }

    /// How long one `FOR UPDATE` may wait in the server, seconds: 0 for a single try;
    /// else the wait budget rounded up to whole seconds (the variable's unit), at most
    /// half the client's reply timeout so a wait ends in a reply, not a broken
    /// connection (with a reply timeout under 2 s: 0, and the client polls).
    fn lock_wait_s(&self, options: &AcquireOptions) -> u64 {
        match options.wait {
            Wait::TryOnce => 0,
            Wait::Retry { budget_ms, .. } => {
                let cap = self
                    .session
                    .server
                    .as_ref()
                    .map_or(0, |s| s.timeout_ms / 2000);
                budget_ms.div_ceil(1000).min(cap)
            }
        }
    }

    /// One try: `SET SESSION innodb_lock_wait_timeout`, `BEGIN`, `SELECT ... FOR
    /// UPDATE` on one connection; a missing row is inserted (autocommit) and the
    /// transaction begun again.
    async fn attempt(&self, key: &str, wait_s: u64) -> Result<Attempt, LockError> {
        let set = format!("SET SESSION innodb_lock_wait_timeout = {wait_s}");
        let id = match self.session.run(Self::NAME, &set).await? {
            Outcome::Reply(Reply::Ok(_), id) => id,
            Outcome::Reply(other, _) => return Err(server_error(&set, other)),
            // Nothing can be locked by a SET: try again within the budget.
            Outcome::NotSent(_) | Outcome::Unknown(_) => return Ok(Attempt::Held),
        };
        let select = format!(
            "SELECT name FROM lock_rows WHERE name = {} FOR UPDATE",
            quote(key)
        );
        for _ in 0..2 {
            match self.session.run_on(id, "BEGIN").await? {
                Outcome::Reply(Reply::Ok(_), _) => {}
                Outcome::Reply(other, _) => return Err(server_error("BEGIN", other)),
                Outcome::NotSent(_) | Outcome::Unknown(_) => return Ok(Attempt::Held),
            }
            let sent_at = self.session.deps.clock.now();
            match self.session.run_on(id, &select).await? {
                Outcome::Reply(Reply::Rows(rs), _) if rs.rows.len() == 1 => {
                    return Ok(Attempt::Acquired(guard(
                        Self::NAME,
                        key,
                        get_lock_owner(id),
                        sent_at,
                        None,
                    )));
                }
                Outcome::Reply(Reply::Rows(_), _) => {
                    // No row for this name yet: end the empty transaction, insert the
                    // row (a duplicate from a racing client is fine), lock again.
                    self.session.run_on(id, "ROLLBACK").await?;
                    let insert = format!(
                        "INSERT IGNORE INTO lock_rows (name) VALUES ({})",
                        quote(key)
                    );
                    match self.session.run_on(id, &insert).await? {
                        Outcome::Reply(Reply::Ok(_), _) => {}
                        Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => {
                            return Ok(Attempt::Held);
                        }
                        Outcome::Reply(other, _) => return Err(server_error(&insert, other)),
                        Outcome::NotSent(_) | Outcome::Unknown(_) => return Ok(Attempt::Held),
                    }
                }
                // Another transaction holds the row past the wait (or InnoDB chose
                // this one as a deadlock victim): end ours, try again in the budget.
                Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => {
                    self.session.run_on(id, "ROLLBACK").await?;
                    return Ok(Attempt::Held);
                }
                Outcome::Reply(other, _) => return Err(server_error(&select, other)),
                Outcome::NotSent(_) => return Ok(Attempt::Held),
                // The connection broke with the SELECT sent: the server may have
                // granted the row before it noticed (and then rolls back).
                Outcome::Unknown(why) => return Ok(Attempt::Unknown(why)),
            }
        }
        Ok(Attempt::Held)
    }
}

#[async_trait]
impl LockDesign for MySqlForUpdate {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        self.session.server(Self::NAME)?;
        let deps = &self.session.deps;
        let wait_s = self.lock_wait_s(&options);
        retry_acquire(deps, key, options, || self.attempt(key, wait_s)).await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(Self::NAME, guard)?;
        let id = guard
            .owner
            .strip_prefix("connection-")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&id| self.session.had(id));
        let Some(id) = id else {
            // Not a connection of this client: someone else's transaction, which
            // only its own connection can end.
            return Ok(Release::NotRemoved);
        };
        match self.session.run_on(id, "COMMIT").await? {
            Outcome::Reply(Reply::Ok(_), _) => Ok(Release::Removed),
            Outcome::Reply(other, _) => Err(server_error("COMMIT", other)),
            // The connection is gone, and the server rolled its transaction back with
            // it: the row lock was lost before this release.
            Outcome::NotSent(_) => Ok(Release::NotFound),
            Outcome::Unknown(why) => Ok(Release::Unknown(why)),
        }
    }
}

/// The table `mysql-unique-index-expiry` locks in: the lock-service comparison's unique index with
/// an expiry written from the client's wall clock (ms since the epoch).
pub const MYSQL_LEASES_TABLE: &str = "CREATE TABLE IF NOT EXISTS lock_leases \
     (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL, \
     expires_at BIGINT NOT NULL)";

/// The table `mysql-unique-index-fenced` locks in: the expiry table with a fencing
/// token counted up on every take; rows are never deleted, so the count never restarts.
pub const MYSQL_FENCES_TABLE: &str = "CREATE TABLE IF NOT EXISTS lock_fences \
     (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL, \
     expires_at BIGINT NOT NULL, fence BIGINT NOT NULL)";

/// `mysql-unique-index-expiry` and `mysql-unique-index-fenced` (see the module doc).
pub struct MySqlExpiry {
    session: Session,
    fenced: bool,
}

impl MySqlExpiry {
    /// The design's name.
    pub const NAME: &'static str = "mysql-unique-index-expiry";
    /// The fenced variant's name.
    pub const FENCED_NAME: &'static str = "mysql-unique-index-fenced";

    /// Over the world's MySQL server (`deps.system::<MySqlServer>()`).
    pub fn new(deps: Deps) -> Self {
        MySqlExpiry {
            session: Session::new(deps, &[MYSQL_LEASES_TABLE]),
            fenced: false,
        }
    }

    /// The fenced variant, over the world's MySQL server.
    pub fn fenced(deps: Deps) -> Self {
        MySqlExpiry {
            session: Session::new(deps, &[MYSQL_FENCES_TABLE]),
            fenced: true,
        }
    }

    fn design(&self) -> &'static str {
        if self.fenced {
            Self::FENCED_NAME
        } else {
            Self::NAME
        }
    }

    fn table(&self) -> &'static str {
        if self.fenced {
            "lock_fences"
        } else {
            "lock_leases"
        }
    }

    /// One try. The times are the client's wall clock, ms since the epoch: the row
    /// expires when some client's clock says so.
    async fn attempt(&self, key: &str, lease_ms: u64) -> Result<Attempt, LockError> {
        let deps = &self.session.deps;
        let design = self.design();
        let owner = deps.entropy.owner_value();
        let now = i64::try_from(deps.clock.wall().as_millis()).unwrap_or(i64::MAX);
        let until = now.saturating_add(i64::try_from(lease_ms).unwrap_or(i64::MAX));
        let sent_at = deps.clock.now();
        let acquired = |token: Option<u64>| {
            let mut g = guard(design, key, owner.clone(), sent_at, Some(lease_ms));
            g.token = token;
            Attempt::Acquired(g)
        };
        let insert = if self.fenced {
            format!(
                "INSERT INTO lock_fences (name, owner, expires_at, fence) VALUES ({}, {}, {until}, 1)",
                quote(key),
                quote(&owner)
            )
        } else {
            format!(
                "INSERT INTO lock_leases (name, owner, expires_at) VALUES ({}, {}, {until})",
                quote(key),
                quote(&owner)
            )
        };
        match self.session.run(design, &insert).await? {
            Outcome::Reply(Reply::Ok(_), _) => return Ok(acquired(self.fenced.then_some(1))),
            Outcome::Reply(Reply::Err(e), _) if e.code == ER_DUP_ENTRY => {}
            Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => return Ok(Attempt::Held),
            Outcome::Reply(other, _) => return Err(server_error(&insert, other)),
            Outcome::NotSent(_) => return Ok(Attempt::Held),
            Outcome::Unknown(why) => return Ok(Attempt::Unknown(why)),
        }
        // Held, or expired by this client's clock: take it over if expired.
        let fence = if self.fenced {
            ", fence = LAST_INSERT_ID(fence + 1)"
        } else {
            ""
        };
        let take = format!(
            "UPDATE {} SET owner = {}, expires_at = {until}{fence} WHERE name = {} AND expires_at < {now}",
            self.table(),
            quote(&owner),
            quote(key)
        );
        Ok(match self.session.run(design, &take).await? {
            Outcome::Reply(Reply::Ok(ok), _) if ok.affected_rows == 1 => {
                acquired(self.fenced.then_some(ok.last_insert_id))
            }
            Outcome::Reply(Reply::Ok(_), _) => Attempt::Held,
            Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => Attempt::Held,
            Outcome::Reply(other, _) => return Err(server_error(&take, other)),
            Outcome::NotSent(_) => Attempt::Held,
            Outcome::Unknown(why) => Attempt::Unknown(why),
        })
    }
}

#[async_trait]
impl LockDesign for MySqlExpiry {
    fn name(&self) -> &str {
        self.design()
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        self.session.server(self.design())?;
        let deps = &self.session.deps;
        let lease_ms = options.lease_ms;
        retry_acquire(deps, key, options, || self.attempt(key, lease_ms)).await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.design(), guard)?;
        // The fenced table keeps its rows (the fence must not restart): a release
        // empties the owner and expires the row instead of deleting it.
        let sql = if self.fenced {
            format!(
                "UPDATE lock_fences SET owner = '', expires_at = 0 WHERE name = {} AND owner = {}",
                quote(&guard.key),
                quote(&guard.owner)
            )
        } else {
            format!(
                "DELETE FROM lock_leases WHERE name = {} AND owner = {}",
                quote(&guard.key),
                quote(&guard.owner)
            )
        };
        let mut outcome = self.session.run(self.design(), &sql).await?;
        for _ in 0..RELEASE_ROLLBACK_RETRIES {
            match &outcome {
                Outcome::Reply(Reply::Err(e), _) if rolled_back(e.code) => {
                    outcome = self.session.run(self.design(), &sql).await?;
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
