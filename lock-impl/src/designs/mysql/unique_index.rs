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

use async_trait::async_trait;

use super::*;

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
