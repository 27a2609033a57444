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

use async_trait::async_trait;

use super::*;

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
