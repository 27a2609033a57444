//! The MariaDB 10.11 server as a state machine without I/O: connections (handshake,
//! login, commands), the `locks` table, and the user-level locks of `GET_LOCK`.
//!
//! Rules, from MariaDB's documentation and source (`sql/item_func.cc`:
//! `Item_func_get_lock`, `Item_func_release_lock`, `Item_func_is_used_lock`;
//! `sql/mdl.cc`), checked against Debian's `mariadb-server` 10.11 by
//! `sim/tests/mysql_real.rs`:
//!
//! - Handshake V10 with server version `5.5.5-10.11.19-MariaDB-0+deb12u1`, a 20-byte
//!   scramble, `mysql_native_password`; a login with a wrong password, an unknown user
//!   or another database is refused with `ER_ACCESS_DENIED_ERROR` (1045, 28000),
//!   `ER_ACCESS_DENIED_NO_PASSWORD_ERROR` (1698, 28000) or `ER_DBACCESS_DENIED_ERROR`
//!   (1044, 42000), and the connection closed.
//! - `GET_LOCK(name, timeout)`: 1 if the connection now holds `name` (free, or held by
//!   this connection already: the hold is counted, since 10.0.2 one `RELEASE_LOCK`
//!   per `GET_LOCK`), 0 if another connection holds it and `timeout` ran out; NULL for
//!   a NULL or empty name. Lock names compare byte for byte (case and trailing spaces
//!   matter). A connection may hold several locks.
//! - `RELEASE_LOCK(name)`: 1 if this connection held it (one hold less), 0 if another
//!   connection holds it, NULL if nobody does (or the name is NULL or empty).
//! - `IS_USED_LOCK(name)`: the holder's connection id, or NULL.
//! - All three answer a one-column resultset: the column named by the expression as
//!   written, type `LONG` (3), binary collation (63), flags `BINARY` (128), length 1
//!   (10 for `IS_USED_LOCK`); the row's value in text, or NULL.
//! - Every user lock of a connection is released when the connection ends, however
//!   it ends (`COM_QUIT`, a reset, the server noticing a closed socket).
//! - The `locks` table (`name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255)
//!   NOT NULL`, InnoDB, `utf8mb4_general_ci`): exists once created by `CREATE TABLE IF
//!   NOT EXISTS` (a second create answers OK with one warning); before that, `INSERT`
//!   and `DELETE` answer `ER_NO_SUCH_TABLE`. `INSERT` of a name already present is
//!   `ER_DUP_ENTRY` (1062, 23000, "Duplicate entry '<name as inserted>' for key
//!   'PRIMARY'"); a value longer than 255 characters `ER_DATA_TOO_LONG` (1406, 22001,
//!   strict mode). The key compares under `utf8mb4_general_ci`: case-insensitively
//!   and ignoring trailing spaces. `DELETE ... WHERE name = ? AND owner = ?` answers
//!   OK with the number of rows deleted (0 or 1).
//! - Status flags: `SERVER_STATUS_AUTOCOMMIT` (2) on every reply these statements get.
//!
//! - `GET_LOCK` with a timeout of `n` > 0 seconds on a lock another connection holds
//!   waits: it gets the lock (1) as soon as it is released, or answers 0 after `n`
//!   seconds of the server's true time.
//!
//! - `wait_timeout` (global default 28800 s, `SET SESSION wait_timeout = n` clamped to
//!   1..=31536000 with a warning): a connection idle that long between commands is
//!   closed by the server, without a packet, and its user locks go with it.
//!
//! Simplifications (stated): a negative timeout (wait forever) is answered with
//! `ER_NOT_SUPPORTED_YET` (1235, 42000); a waiting connection is not watched for a
//! close until its wait ends; waiters are woken in no particular fairness order; the
//! collation compares ASCII case only (no accent folding); no transactions; `COM_PING`,
//! `COM_QUIT` and `COM_QUERY` are the only commands (others: `ER_UNKNOWN_COM_ERROR`,
//! 1047, 08S01); an auth plugin other than `mysql_native_password` is refused rather
//! than switched.

use std::collections::BTreeMap;

use lock_impl::mysql::proto::{
    self, Column, EofPacket, ErrPacket, Handshake, HandshakeResponse, OkPacket, Reply, ResultSet,
    column_type, encode_reply, status,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::sql::{Statement, parse};

/// The server's version string in its handshake (MariaDB prefixes `5.5.5-`).
pub const SERVER_VERSION: &str = "5.5.5-10.11.19-MariaDB-0+deb12u1";
/// The server's capability flags (Debian's 10.11, as its handshake announces them).
pub const SERVER_CAPABILITIES: u32 = 0x81ff_f7fe;
/// MariaDB's extended capabilities.
pub const MARIADB_CAPABILITIES: u32 = 0x1d;
/// `utf8mb4_general_ci`, the server's default collation.
pub const SERVER_CHARSET: u8 = 45;

/// A connection's id (`CONNECTION_ID()`).
pub type ConnId = u32;

/// The model's configuration: the one account and database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MySqlConfig {
    /// The user allowed to log in.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The database it may use.
    pub database: String,
    /// Seeds the handshake scrambles.
    pub seed: u64,
    /// The global `wait_timeout`, seconds: a connection idle that long between
    /// commands is closed by the server (MariaDB's default: 28800).
    pub wait_timeout_s: u64,
}

impl Default for MySqlConfig {
    fn default() -> Self {
        MySqlConfig {
            user: "locksim".into(),
            password: "locksim".into(),
            database: "locksim".into(),
            seed: 0,
            wait_timeout_s: 28_800,
        }
    }
}

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
    /// A connection ended, releasing these user locks.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// The client's host.
        host: String,
        /// The user locks it still held.
        released: Vec<String>,
    },
    /// A row was inserted.
    Inserted {
        /// By whom.
        conn: ConnId,
        /// The row.
        name: String,
        /// The row.
        owner: String,
    },
    /// A row was deleted.
    Deleted {
        /// By whom.
        conn: ConnId,
        /// The row.
        name: String,
        /// The row.
        owner: String,
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

/// What a connection should do after a packet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// Bytes to write (framed packets).
    pub bytes: Vec<u8>,
    /// Close the connection after writing them.
    pub close: bool,
    /// Instead of a reply: a `GET_LOCK` waiting for a lock another connection holds
    /// (the driver retries it with [`MySqlModel::retry_get_lock`] whenever a lock is
    /// released, and answers [`Waiting::timed_out`] at the deadline).
    pub wait: Option<Waiting>,
}

/// A `GET_LOCK` waiting for its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The lock.
    pub name: Vec<u8>,
    /// How long it may wait, ms (the timeout's seconds).
    pub timeout_ms: u64,
    /// The result column's name.
    pub column: String,
    /// The reply's first sequence id.
    pub seq: u8,
}

impl Waiting {
    /// The reply when the timeout ran out: 0.
    pub fn timed_out(&self) -> Vec<u8> {
        encode_reply(&int_result(self.column.clone(), 1, Some(0)), self.seq)
    }
}

#[derive(Debug, Clone)]
struct Conn {
    host: String,
    scramble: Vec<u8>,
    logged_in: bool,
    /// The session's `wait_timeout`, seconds.
    wait_timeout_s: u64,
}

/// The `locks` table: the folded key → (name, owner) as inserted.
type Table = BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>;

/// The server.
#[derive(Debug)]
pub struct MySqlModel {
    config: MySqlConfig,
    rng: ChaCha8Rng,
    next_id: ConnId,
    conns: BTreeMap<ConnId, Conn>,
    /// `None` until created.
    table: Option<Table>,
    /// User locks: name → (holder, holds).
    user_locks: BTreeMap<Vec<u8>, (ConnId, u64)>,
    events: Vec<ServerEvent>,
    /// Set by a `GET_LOCK` that must wait (see [`Output::wait`]).
    waiting: Option<Waiting>,
}

/// The `utf8mb4_general_ci` comparison key of a `VARCHAR` value (PAD SPACE; ASCII
/// case folded).
fn fold(v: &[u8]) -> Vec<u8> {
    let mut end = v.len();
    while end > 0 && v[end - 1] == b' ' {
        end -= 1;
    }
    v[..end].iter().map(u8::to_ascii_uppercase).collect()
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

fn ok() -> Reply {
    Reply::Ok(OkPacket {
        status: status::AUTOCOMMIT,
        ..OkPacket::default()
    })
}

fn int_result(column: String, length: u32, value: Option<i64>) -> Reply {
    Reply::Rows(ResultSet {
        columns: vec![Column {
            catalog: "def".into(),
            schema: String::new(),
            table: String::new(),
            org_table: String::new(),
            name: column,
            org_name: String::new(),
            charset: 63,
            length,
            column_type: column_type::LONG,
            flags: 128,
            decimals: 0,
        }],
        rows: vec![vec![value.map(|v| v.to_string().into_bytes())]],
        eof: EofPacket {
            warnings: 0,
            status: status::AUTOCOMMIT,
        },
    })
}

impl MySqlModel {
    /// A fresh server (no table yet, no locks).
    pub fn new(config: MySqlConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        MySqlModel {
            config,
            rng,
            next_id: 1,
            conns: BTreeMap::new(),
            table: None,
            user_locks: BTreeMap::new(),
            events: Vec::new(),
            waiting: None,
        }
    }

    /// A client connected from `host`: its id and the handshake to send.
    pub fn connect(&mut self, host: String) -> (ConnId, Output) {
        let id = self.next_id;
        self.next_id += 1;
        // Printable scramble bytes, as `generate_user_salt` makes them (33..=126).
        let scramble: Vec<u8> = (0..20).map(|_| self.rng.random_range(33u8..=126)).collect();
        let hs = Handshake {
            protocol_version: 10,
            server_version: SERVER_VERSION.into(),
            connection_id: id,
            scramble: scramble.clone(),
            capabilities: SERVER_CAPABILITIES,
            charset: SERVER_CHARSET,
            status: status::AUTOCOMMIT,
            mariadb_capabilities: MARIADB_CAPABILITIES,
            auth_plugin: proto::NATIVE_PASSWORD.into(),
        };
        self.conns.insert(
            id,
            Conn {
                host,
                scramble,
                logged_in: false,
                wait_timeout_s: self.config.wait_timeout_s,
            },
        );
        (
            id,
            Output {
                bytes: proto::frame(0, &hs.encode()),
                close: false,
                wait: None,
            },
        )
    }

    /// A connection ended (however): its user locks are released.
    pub fn disconnect(&mut self, id: ConnId) {
        let Some(conn) = self.conns.remove(&id) else {
            return;
        };
        let released: Vec<Vec<u8>> = self
            .user_locks
            .iter()
            .filter(|(_, (holder, _))| *holder == id)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &released {
            self.user_locks.remove(n);
        }
        if conn.logged_in {
            self.events.push(ServerEvent::Disconnected {
                conn: id,
                host: conn.host,
                released: released.iter().map(|n| text(n)).collect(),
            });
        }
    }

    /// One packet from connection `id`.
    pub fn receive(&mut self, id: ConnId, seq: u8, payload: &[u8]) -> Output {
        let Some(conn) = self.conns.get(&id).cloned() else {
            return Output {
                bytes: Vec::new(),
                close: true,
                wait: None,
            };
        };
        if !conn.logged_in {
            return self.login(id, &conn, seq, payload);
        }
        match payload.first() {
            Some(&proto::COM_QUIT) => Output {
                bytes: Vec::new(),
                close: true,
                wait: None,
            },
            Some(&proto::COM_PING) => Output {
                bytes: encode_reply(&ok(), 1),
                close: false,
                wait: None,
            },
            Some(&proto::COM_QUERY) => {
                let sql = String::from_utf8_lossy(&payload[1..]).into_owned();
                self.waiting = None;
                let reply = self.query(id, &sql);
                match self.waiting.take() {
                    Some(wait) => Output {
                        bytes: Vec::new(),
                        close: false,
                        wait: Some(wait),
                    },
                    None => Output {
                        bytes: encode_reply(&reply, 1),
                        close: false,
                        wait: None,
                    },
                }
            }
            _ => Output {
                bytes: encode_reply(
                    &Reply::Err(ErrPacket::new(1047, "08S01", "Unknown command")),
                    1,
                ),
                close: false,
                wait: None,
            },
        }
    }

    fn login(&mut self, id: ConnId, conn: &Conn, seq: u8, payload: &[u8]) -> Output {
        let reply_seq = seq.wrapping_add(1);
        let refuse = |err: ErrPacket| Output {
            bytes: encode_reply(&Reply::Err(err), reply_seq),
            close: true,
            wait: None,
        };
        let Ok(resp) = HandshakeResponse::decode(payload) else {
            // `ER_HANDSHAKE_ERROR`.
            return refuse(ErrPacket::new(1043, "08S01", "Bad handshake"));
        };
        let using = if resp.auth.is_empty() { "NO" } else { "YES" };
        let hash = proto::native_password_hash(self.config.password.as_bytes());
        let plugin_ok = resp
            .auth_plugin
            .as_deref()
            .is_none_or(|p| p == proto::NATIVE_PASSWORD);
        if resp.user != self.config.user {
            // An unknown account: `ER_ACCESS_DENIED_NO_PASSWORD_ERROR`, as the server
            // answers it (no "using password" part).
            return refuse(ErrPacket::new(
                1698,
                "28000",
                format!("Access denied for user '{}'@'{}'", resp.user, conn.host),
            ));
        }
        if !plugin_ok || !proto::check_native_password(&resp.auth, &conn.scramble, &hash) {
            return refuse(ErrPacket::new(
                1045,
                "28000",
                format!(
                    "Access denied for user '{}'@'{}' (using password: {using})",
                    resp.user, conn.host
                ),
            ));
        }
        if let Some(db) = &resp.database
            && db != &self.config.database
        {
            return refuse(ErrPacket::new(
                1044,
                "42000",
                format!(
                    "Access denied for user '{}'@'{}' to database '{db}'",
                    resp.user, conn.host
                ),
            ));
        }
        if let Some(c) = self.conns.get_mut(&id) {
            c.logged_in = true;
        }
        self.events.push(ServerEvent::Connected {
            conn: id,
            host: conn.host.clone(),
        });
        Output {
            bytes: encode_reply(&ok(), reply_seq),
            close: false,
            wait: None,
        }
    }

    /// Runs one statement for connection `id`.
    pub fn query(&mut self, id: ConnId, sql: &str) -> Reply {
        let stmt = match parse(sql, &self.config.database) {
            Ok(s) => s,
            Err(e) => return Reply::Err(e),
        };
        match stmt {
            Statement::CreateLocks => {
                if self.table.is_some() {
                    // `ER_TABLE_EXISTS_ERROR` as a note.
                    Reply::Ok(OkPacket {
                        status: status::AUTOCOMMIT,
                        warnings: 1,
                        ..OkPacket::default()
                    })
                } else {
                    self.table = Some(BTreeMap::new());
                    ok()
                }
            }
            Statement::Insert { name, owner } => {
                let Some(table) = self.table.as_mut() else {
                    return Reply::Err(self.no_table());
                };
                for (col, v) in [("name", &name), ("owner", &owner)] {
                    if String::from_utf8_lossy(v).chars().count() > 255 {
                        return Reply::Err(ErrPacket::new(
                            1406,
                            "22001",
                            format!("Data too long for column '{col}' at row 1"),
                        ));
                    }
                }
                let key = fold(&name);
                if table.contains_key(&key) {
                    let shown: String = text(&name).chars().take(192).collect();
                    return Reply::Err(ErrPacket::new(
                        1062,
                        "23000",
                        format!("Duplicate entry '{shown}' for key 'PRIMARY'"),
                    ));
                }
                table.insert(key, (name.clone(), owner.clone()));
                self.events.push(ServerEvent::Inserted {
                    conn: id,
                    name: text(&name),
                    owner: text(&owner),
                });
                Reply::Ok(OkPacket {
                    affected_rows: 1,
                    status: status::AUTOCOMMIT,
                    ..OkPacket::default()
                })
            }
            Statement::Delete { name, owner } => {
                let Some(table) = self.table.as_mut() else {
                    return Reply::Err(self.no_table());
                };
                let key = fold(&name);
                let hit = table
                    .get(&key)
                    .is_some_and(|(_, o)| fold(o) == fold(&owner));
                let mut affected = 0;
                if hit && let Some((n, o)) = table.remove(&key) {
                    affected = 1;
                    self.events.push(ServerEvent::Deleted {
                        conn: id,
                        name: text(&n),
                        owner: text(&o),
                    });
                }
                Reply::Ok(OkPacket {
                    affected_rows: affected,
                    status: status::AUTOCOMMIT,
                    ..OkPacket::default()
                })
            }
            Statement::GetLock {
                name,
                timeout,
                column,
            } => {
                let name = match name {
                    Some(n) if !n.is_empty() => n,
                    _ => return int_result(column, 1, None),
                };
                match self.user_locks.get_mut(&name) {
                    Some((holder, holds)) if *holder == id => {
                        *holds += 1;
                        int_result(column, 1, Some(1))
                    }
                    Some(_) if timeout == 0 => int_result(column, 1, Some(0)),
                    // A negative timeout would wait forever (as in MySQL 5.7+); the
                    // model does not take it.
                    Some(_) if timeout < 0 => Reply::Err(ErrPacket::new(
                        1235,
                        "42000",
                        "This version of MariaDB doesn't yet support \
                         'GET_LOCK with a negative timeout in the locksim model'",
                    )),
                    Some(_) => {
                        self.waiting = Some(Waiting {
                            name,
                            timeout_ms: (timeout as u64).saturating_mul(1000),
                            column,
                            seq: 1,
                        });
                        // Not sent: `receive` turns it into a wait.
                        ok()
                    }
                    None => {
                        self.user_locks.insert(name.clone(), (id, 1));
                        self.events.push(ServerEvent::LockTaken {
                            conn: id,
                            name: text(&name),
                        });
                        int_result(column, 1, Some(1))
                    }
                }
            }
            Statement::ReleaseLock { name, column } => {
                let name = match name {
                    Some(n) if !n.is_empty() => n,
                    _ => return int_result(column, 1, None),
                };
                match self.user_locks.get_mut(&name) {
                    None => int_result(column, 1, None),
                    Some((holder, _)) if *holder != id => int_result(column, 1, Some(0)),
                    Some((_, holds)) => {
                        *holds -= 1;
                        if *holds == 0 {
                            self.user_locks.remove(&name);
                            self.events.push(ServerEvent::LockReleased {
                                conn: id,
                                name: text(&name),
                            });
                        }
                        int_result(column, 1, Some(1))
                    }
                }
            }
            Statement::SetWaitTimeout { seconds } => {
                // The variable's range is 1..=31536000; a value outside is clamped with
                // a warning (`ER_TRUNCATED_WRONG_VALUE` as a note).
                let clamped = seconds.clamp(1, 31_536_000);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.wait_timeout_s = clamped as u64;
                }
                Reply::Ok(OkPacket {
                    status: status::AUTOCOMMIT,
                    warnings: u16::from(clamped != seconds),
                    ..OkPacket::default()
                })
            }
            Statement::IsUsedLock { name, column } => {
                let holder = name
                    .filter(|n| !n.is_empty())
                    .and_then(|n| self.user_locks.get(&n).map(|(h, _)| i64::from(*h)));
                int_result(column, 10, holder)
            }
        }
    }

    /// Retries connection `id`'s waiting `GET_LOCK`: its reply (1) if the lock is free
    /// now (and taken), `None` if it is still held by another connection.
    pub fn retry_get_lock(&mut self, id: ConnId, wait: &Waiting) -> Option<Vec<u8>> {
        if self.user_locks.contains_key(&wait.name) {
            return None;
        }
        self.user_locks.insert(wait.name.clone(), (id, 1));
        self.events.push(ServerEvent::LockTaken {
            conn: id,
            name: text(&wait.name),
        });
        Some(encode_reply(
            &int_result(wait.column.clone(), 1, Some(1)),
            wait.seq,
        ))
    }

    fn no_table(&self) -> ErrPacket {
        ErrPacket::new(
            1146,
            "42S02",
            format!("Table '{}.locks' doesn't exist", self.config.database),
        )
    }

    /// Takes the events since the last call.
    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    /// The `locks` table's rows: (name, owner), in key order.
    pub fn rows(&self) -> Vec<(String, String)> {
        self.table
            .iter()
            .flat_map(|t| t.values())
            .map(|(n, o)| (text(n), text(o)))
            .collect()
    }

    /// The user locks: name → holder connection.
    pub fn user_locks(&self) -> BTreeMap<String, ConnId> {
        self.user_locks
            .iter()
            .map(|(n, (h, _))| (text(n), *h))
            .collect()
    }

    /// How long connection `id` may stay idle between commands before the server
    /// closes it (its session's `wait_timeout`; before login, the global one).
    pub fn idle_timeout(&self, id: ConnId) -> std::time::Duration {
        let s = self
            .conns
            .get(&id)
            .map_or(self.config.wait_timeout_s, |c| c.wait_timeout_s);
        std::time::Duration::from_secs(s)
    }

    /// The host of connection `id`.
    pub fn host_of(&self, id: ConnId) -> Option<&str> {
        self.conns.get(&id).map(|c| c.host.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_impl::mysql::proto::{HandshakeResponse, native_password, split_packet};
    use rand::RngExt;

    fn logged_in(m: &mut MySqlModel) -> ConnId {
        let (id, hello) = m.connect("client-1".into());
        let (_, payload, _) = split_packet(&hello.bytes).unwrap().unwrap();
        let hs = Handshake::decode(payload).unwrap();
        let resp = HandshakeResponse {
            capabilities: lock_impl::mysql::client::CLIENT_CAPABILITIES,
            max_packet: 1 << 24,
            charset: 45,
            user: "locksim".into(),
            auth: native_password(b"locksim", &hs.scramble),
            database: Some("locksim".into()),
            auth_plugin: Some(proto::NATIVE_PASSWORD.into()),
        };
        let out = m.receive(id, 1, &resp.encode());
        assert_eq!(out.bytes[4], 0x00, "login OK");
        id
    }

    #[test]
    fn garbage_is_answered_never_panicked_on() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let words: &[&[u8]] = &[
            b"SELECT",
            b"GET_LOCK",
            b"RELEASE_LOCK",
            b"IS_USED_LOCK",
            b"INSERT",
            b"INTO",
            b"locks",
            b"(",
            b")",
            b",",
            b"'k'",
            b"'",
            b"\\",
            b"NULL",
            b"0",
            b"-",
            b"-1",
            b"99999999999999999999",
            b"DELETE",
            b"FROM",
            b"WHERE",
            b"name",
            b"=",
            b"AND",
            b"owner",
            b"VALUES",
            b"CREATE",
            b"TABLE",
            b" ",
            b"\n",
            b"\xc3\xa9",
            b"\xff",
        ];
        let mut m = MySqlModel::new(MySqlConfig::default());
        let id = logged_in(&mut m);
        for _ in 0..20_000 {
            let mut payload = vec![proto::COM_QUERY];
            for _ in 0..rng.random_range(0..12) {
                payload.extend_from_slice(words[rng.random_range(0..words.len())]);
            }
            let out = m.receive(id, 0, &payload);
            assert!(!out.bytes.is_empty() && !out.close);
        }
        // Arbitrary bytes as a login, and as commands of another connection.
        for _ in 0..2_000 {
            let (other, _) = m.connect("client-2".into());
            let n = rng.random_range(0..64);
            let bytes: Vec<u8> = (0..n).map(|_| rng.random_range(0..=255u8)).collect();
            let _ = m.receive(other, 1, &bytes);
            let _ = m.receive(other, 0, &bytes);
            m.disconnect(other);
        }
    }

    #[test]
    fn a_connections_locks_go_with_it() {
        let mut m = MySqlModel::new(MySqlConfig::default());
        let a = logged_in(&mut m);
        let b = logged_in(&mut m);
        assert!(matches!(
            m.query(a, "SELECT GET_LOCK('k', 0)"),
            Reply::Rows(_)
        ));
        assert_eq!(m.user_locks().get("k"), Some(&a));
        let Reply::Rows(rs) = m.query(b, "SELECT GET_LOCK('k', 0)") else {
            panic!("a resultset")
        };
        assert_eq!(rs.rows[0][0].as_deref(), Some(&b"0"[..]));
        m.disconnect(a);
        assert!(m.user_locks().is_empty());
        let Reply::Rows(rs) = m.query(b, "SELECT GET_LOCK('k', 0)") else {
            panic!("a resultset")
        };
        assert_eq!(rs.rows[0][0].as_deref(), Some(&b"1"[..]));
    }
}
