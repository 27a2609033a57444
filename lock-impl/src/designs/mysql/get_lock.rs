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

use async_trait::async_trait;

use super::*;

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
pub(super) fn flag(sql: &str, reply: &Reply) -> Result<Option<bool>, LockError> {
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
