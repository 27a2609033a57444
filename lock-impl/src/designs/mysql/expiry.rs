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

use async_trait::async_trait;

use super::*;

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
