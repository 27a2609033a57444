//! The MariaDB 10.11 server as a state machine without I/O: connections (handshake,
//! login, commands), the tables (through [`super::innodb`]: transactions, row locks),
//! and the user-level locks of `GET_LOCK`.
//!
//! The server's rules and simplifications, as checked against Debian's
//! `mariadb-server` 10.11 by `sim/tests/real/mysql_real.rs`, are listed on
//! [`MySqlModel`]; what a statement does is in `query`.

use std::collections::BTreeMap;

use lock_impl::mysql::proto::{
    self, Column, EofPacket, ErrPacket, Handshake, HandshakeResponse, OkPacket, Reply, ResultSet,
    column_type, encode_reply, status,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod query;

use super::innodb::{BinlogEvent, Engine};
use super::sql::Value;
pub use super::types::{ConnId, ServerEvent};

/// The server's version string in its handshake (MariaDB prefixes `5.5.5-`).
pub const SERVER_VERSION: &str = "5.5.5-10.11.19-MariaDB-0+deb12u1";
/// The server's capability flags (Debian's 10.11, as its handshake announces them).
pub const SERVER_CAPABILITIES: u32 = 0x81ff_f7fe;
/// MariaDB's extended capabilities.
pub const MARIADB_CAPABILITIES: u32 = 0x1d;
/// `utf8mb4_general_ci`, the server's default collation.
pub const SERVER_CHARSET: u8 = 45;

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
    /// The global `innodb_lock_wait_timeout`, seconds: how long a statement waits for a
    /// row lock (MariaDB's default: 50).
    pub lock_wait_timeout_s: u64,
    /// `innodb_flush_log_at_trx_commit` (MariaDB's default: 1): what a crash keeps of
    /// the transactions committed before it (see [`MySqlModel::durable_log`]).
    pub flush_log_at_trx_commit: u8,
}

impl Default for MySqlConfig {
    fn default() -> Self {
        MySqlConfig {
            user: "locksim".into(),
            password: "locksim".into(),
            database: "locksim".into(),
            seed: 0,
            wait_timeout_s: 28_800,
            lock_wait_timeout_s: 50,
            flush_log_at_trx_commit: 1,
        }
    }
}

/// The values MariaDB allows for `innodb_flush_log_at_trx_commit`
/// (<https://mariadb.com/docs/server/ref/mdb/system-variables/innodb_flush_log_at_trx_commit>):
/// 3 flushes at prepare and at commit, as durable as 1 for what a crash keeps.
pub const FLUSH_LOG_AT_TRX_COMMIT: [u8; 4] = [0, 1, 2, 3];

/// What a connection should do after a packet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// Bytes to write (framed packets).
    pub bytes: Vec<u8>,
    /// Close the connection after writing them.
    pub close: bool,
    /// Instead of a reply: a statement waiting for a lock another connection holds
    /// (the driver retries it with [`MySqlModel::retry`] whenever a lock may have been
    /// freed, and answers [`Waiting::timed_out`] at the deadline).
    pub wait: Option<Waiting>,
}

/// A statement waiting for a lock another connection holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// What waits.
    pub kind: WaitKind,
    /// How long it may wait, ms (`GET_LOCK`'s timeout; `innodb_lock_wait_timeout`).
    pub timeout_ms: u64,
    /// The reply's first sequence id.
    pub seq: u8,
    /// The status flags of its reply when it times out.
    pub status: u16,
    /// Its place in the queue of waiters (see [`MySqlModel::leave_queue`]).
    pub ticket: u64,
}

/// What a [`Waiting`] statement waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitKind {
    /// A `GET_LOCK` for a user lock.
    GetLock {
        /// The lock.
        name: Vec<u8>,
        /// The result column's name.
        column: String,
    },
    /// A statement for a row lock: run again whenever a lock may have been freed.
    Row {
        /// The statement.
        sql: String,
        /// The row's table.
        table: String,
        /// The row's folded key.
        key: Vec<u8>,
    },
}

impl Waiting {
    /// The reply when the timeout ran out: `GET_LOCK`'s 0, or InnoDB's
    /// `ER_LOCK_WAIT_TIMEOUT` (the statement rolled back, the transaction kept).
    pub fn timed_out(&self) -> Vec<u8> {
        let reply = match &self.kind {
            WaitKind::GetLock { column, .. } => int_result(column.clone(), 1, Some(0), self.status),
            WaitKind::Row { .. } => Reply::Err(lock_wait_timeout()),
        };
        encode_reply(&reply, self.seq)
    }
}

/// Whether two waiters wait for the same lock.
fn same_lock(a: &WaitKind, b: &WaitKind) -> bool {
    match (a, b) {
        (WaitKind::GetLock { name: x, .. }, WaitKind::GetLock { name: y, .. }) => x == y,
        (
            WaitKind::Row {
                table: t1, key: k1, ..
            },
            WaitKind::Row {
                table: t2, key: k2, ..
            },
        ) => t1 == t2 && k1 == k2,
        _ => false,
    }
}

/// `ER_LOCK_WAIT_TIMEOUT`.
fn lock_wait_timeout() -> ErrPacket {
    ErrPacket::new(
        1205,
        "HY000",
        "Lock wait timeout exceeded; try restarting transaction",
    )
}

#[derive(Debug, Clone)]
struct Conn {
    host: String,
    scramble: Vec<u8>,
    logged_in: bool,
    /// The session's `wait_timeout`, seconds.
    wait_timeout_s: u64,
    /// The session's `innodb_lock_wait_timeout`, seconds.
    lock_wait_timeout_s: u64,
}

/// The server.
///
/// Rules, from MariaDB's documentation and source (`sql/item_func.cc`:
/// `Item_func_get_lock`, `Item_func_release_lock`, `Item_func_is_used_lock`;
/// `sql/mdl.cc`), checked against Debian's `mariadb-server` 10.11 by
/// `sim/tests/real/mysql_real.rs`:
///
/// - Handshake V10 with server version `5.5.5-10.11.19-MariaDB-0+deb12u1`, a 20-byte
///   scramble, `mysql_native_password`; a login with a wrong password, an unknown user
///   or another database is refused with `ER_ACCESS_DENIED_ERROR` (1045, 28000),
///   `ER_ACCESS_DENIED_NO_PASSWORD_ERROR` (1698, 28000) or `ER_DBACCESS_DENIED_ERROR`
///   (1044, 42000), and the connection closed.
/// - `GET_LOCK(name, timeout)`: 1 if the connection now holds `name` (free, or held by
///   this connection already: the hold is counted, since 10.0.2 one `RELEASE_LOCK`
///   per `GET_LOCK`), 0 if another connection holds it and `timeout` ran out; NULL for
///   a NULL or empty name. Lock names compare byte for byte (case and trailing spaces
///   matter). A connection may hold several locks.
/// - `RELEASE_LOCK(name)`: 1 if this connection held it (one hold less), 0 if another
///   connection holds it, NULL if nobody does (or the name is NULL or empty).
/// - `IS_USED_LOCK(name)`: the holder's connection id, or NULL.
/// - All three answer a one-column resultset: the column named by the expression as
///   written, type `LONG` (3), binary collation (63), flags `BINARY` (128), length 1
///   (10 for `IS_USED_LOCK`); the row's value in text, or NULL.
/// - Every user lock of a connection is released when the connection ends, however
///   it ends (`COM_QUIT`, a reset, the server noticing a closed socket).
/// - Tables (the designs' `locks`, `lock_rows`, `lock_leases`, ...: a `VARCHAR(255)`
///   primary key first, `VARCHAR(255)` and `BIGINT` columns, all `NOT NULL`; InnoDB,
///   `utf8mb4_general_ci`): exist once created by `CREATE TABLE IF NOT EXISTS` (a
///   second create answers OK with one warning); before that, statements on them answer
///   `ER_NO_SUCH_TABLE` (1146, 42S02), and an unknown column `ER_BAD_FIELD_ERROR` (1054,
///   42S22, "Unknown column 'x' in 'INSERT INTO'" / "'WHERE'" / "'SET'" / "'SELECT'").
///   `INSERT` of a key already present is `ER_DUP_ENTRY` (1062, 23000, "Duplicate entry
///   '&lt;key as inserted&gt;' for key 'PRIMARY'"), with `IGNORE` OK with 0 rows and one
///   warning; a value longer than 255 characters `ER_DATA_TOO_LONG` (1406, 22001,
///   strict mode); a column left out `ER_NO_DEFAULT_FOR_FIELD` (1364, HY000). The key
///   compares under `utf8mb4_general_ci`: case-insensitively and ignoring trailing
///   spaces. `DELETE` answers OK with the rows deleted; `UPDATE` with the rows changed
///   and the info "Rows matched: m  Changed: c  Warnings: 0" (the client does not ask
///   for `CLIENT_FOUND_ROWS`), and as insert id the argument of a `LAST_INSERT_ID(expr)`
///   it evaluated; `SELECT ... FOR UPDATE` a resultset with the table's column
///   definitions. Transactions and row locks: [`super::innodb`].
/// - Status flags: `SERVER_STATUS_AUTOCOMMIT` (2) on every reply, with
///   `SERVER_STATUS_IN_TRANS` (1) inside `BEGIN` ... `COMMIT`.
///
/// - `GET_LOCK` with a timeout of `n` > 0 seconds on a lock another connection holds
///   waits: it gets the lock (1) as soon as it is released, or answers 0 after `n`
///   seconds of the server's true time.
///
/// - `wait_timeout` (global default 28800 s, `SET SESSION wait_timeout = n` clamped to
///   1..=31536000 with a warning): a connection idle that long between commands is
///   closed by the server, without a packet, and its user locks go with it (and its
///   open transaction is rolled back, its row locks freed).
/// - `innodb_lock_wait_timeout` (global default 50 s, `SET SESSION
///   innodb_lock_wait_timeout = n` clamped to 0..=100000000 with a warning): how long a
///   statement waits for a row lock before `ER_LOCK_WAIT_TIMEOUT` (1205, HY000).
///
/// Simplifications (stated): a negative timeout (wait forever) is answered with
/// `ER_NOT_SUPPORTED_YET` (1235, 42000); a waiting connection is not watched for a
/// close until its wait ends (nor is it on the server); a freed lock goes to the
/// connection that waited longest for it; the
/// collation compares ASCII case only (no accent folding); `COM_PING`,
/// `COM_QUIT` and `COM_QUERY` are the only commands (others: `ER_UNKNOWN_COM_ERROR`,
/// 1047, 08S01); an auth plugin other than `mysql_native_password` is refused rather
/// than switched.
#[derive(Debug)]
pub struct MySqlModel {
    config: MySqlConfig,
    rng: ChaCha8Rng,
    next_id: ConnId,
    conns: BTreeMap<ConnId, Conn>,
    /// The tables, transactions and row locks.
    engine: Engine,
    /// User locks: name → (holder, holds).
    user_locks: BTreeMap<Vec<u8>, (ConnId, u64)>,
    events: Vec<ServerEvent>,
    /// Set by a `GET_LOCK` that must wait (see [`Output::wait`]).
    waiting: Option<Waiting>,
    /// The waiters, by ticket: a lock freed goes to the one waiting longest for it (a
    /// user lock's waiters, as MDL's queue; a row's, as InnoDB's).
    queue: BTreeMap<u64, (ConnId, WaitKind)>,
    next_ticket: u64,
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

fn ok(status: u16) -> Reply {
    Reply::Ok(OkPacket {
        status,
        ..OkPacket::default()
    })
}

fn int_result(column: String, length: u32, value: Option<i64>, status: u16) -> Reply {
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
            status,
        },
    })
}

impl MySqlModel {
    /// The configuration it was made with (a server recovered from its log takes it).
    pub fn config(&self) -> &MySqlConfig {
        &self.config
    }

    /// A fresh server (no table yet, no locks).
    pub fn new(config: MySqlConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        MySqlModel {
            config,
            rng,
            next_id: 1,
            conns: BTreeMap::new(),
            engine: Engine::default(),
            user_locks: BTreeMap::new(),
            events: Vec::new(),
            waiting: None,
            queue: BTreeMap::new(),
            next_ticket: 0,
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
                lock_wait_timeout_s: self.config.lock_wait_timeout_s,
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
        self.queue.retain(|_, (c, _)| *c != id);
        let row_locks = self.engine.end(id, false, true);
        if conn.logged_in {
            self.events.push(ServerEvent::Disconnected {
                conn: id,
                host: conn.host,
                released: released.iter().map(|n| text(n)).collect(),
                row_locks,
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
                bytes: encode_reply(&ok(self.engine.status(id)), 1),
                close: false,
                wait: None,
            },
            Some(&proto::COM_QUERY) => {
                let sql = String::from_utf8_lossy(&payload[1..]).into_owned();
                self.waiting = None;
                let reply = self.query(id, &sql);
                match self.waiting.take() {
                    Some(mut wait) => Output {
                        wait: Some({
                            self.next_ticket += 1;
                            wait.ticket = self.next_ticket;
                            self.queue.insert(wait.ticket, (id, wait.kind.clone()));
                            wait
                        }),
                        bytes: Vec::new(),
                        close: false,
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
            bytes: encode_reply(&ok(status::AUTOCOMMIT), reply_seq),
            close: false,
            wait: None,
        }
    }
    /// Takes the events since the last call.
    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    /// A table's rows as text, in key order (`None` if it was never created).
    pub fn rows(&self, table: &str) -> Option<Vec<Vec<String>>> {
        let t = self.engine.table(table)?;
        Some(
            t.rows
                .values()
                .map(|r| {
                    r.iter()
                        .map(|v| match v {
                            Value::Str(s) => text(s),
                            Value::Int(n) => n.to_string(),
                        })
                        .collect()
                })
                .collect(),
        )
    }

    /// The binary log from position `from` on (what a replica has not read yet).
    pub fn binlog_from(&self, from: usize) -> Vec<BinlogEvent> {
        self.engine.binlog_from(from).to_vec()
    }

    /// Applies a primary's binlog event (this server is its replica).
    pub fn apply(&mut self, event: &BinlogEvent) {
        self.engine.apply(event);
        self.events.extend(self.engine.take_events());
    }

    /// The once-per-second redo log flush of InnoDB's master thread (its driver calls
    /// it every second of the server's uptime): every transaction committed so far
    /// is on disk, whatever `innodb_flush_log_at_trx_commit` says.
    pub fn flush_log(&mut self) {
        self.engine.flush_log();
    }

    /// What of the committed log a crash now would leave on disk, and how many
    /// committed entries it would lose. MariaDB's documentation of
    /// `innodb_flush_log_at_trx_commit`: with 1 (and 3) the log is written and flushed
    /// at every commit, so nothing committed is lost; with 2 it is written to the operating
    /// system at every commit and flushed about once a second, so a crash of mysqld
    /// alone loses nothing but a crash of the machine (an OS crash, a power loss) loses
    /// up to a second of commits; with 0 it is written and flushed once a second, so
    /// even a crash of mysqld alone loses up to a second. `machine`: the machine
    /// crashed, not just mysqld. (The model's log is its binary log of committed row
    /// images; recovery replays its durable prefix: InnoDB's redo apply, without the
    /// binlog/redo two-phase commit's finer points.)
    pub fn durable_log(&self, machine: bool) -> (Vec<BinlogEvent>, usize) {
        let (len, flushed) = self.engine.log_positions();
        let keep = match (self.config.flush_log_at_trx_commit, machine) {
            (1 | 3, _) | (2, false) => len,
            _ => flushed,
        };
        (self.engine.binlog_from(0)[..keep].to_vec(), len - keep)
    }

    /// The server started again after a crash, with `log` on disk: crash recovery
    /// replays it (the rows are as its last durable commit left them), and there is
    /// no connection, user lock or transaction. Connection ids go on from
    /// `next_conn_id` (MariaDB starts again at 1; the model keeps the ids unique over
    /// the run so that an owner value named by a connection id names one connection).
    pub fn recover(config: MySqlConfig, log: &[BinlogEvent], next_conn_id: ConnId) -> Self {
        let mut m = MySqlModel::new(config);
        m.next_id = next_conn_id;
        for event in log {
            m.engine.apply(event);
        }
        // Recovery's own writes are no one's commands.
        m.engine.take_events();
        m.engine.flush_log();
        m
    }

    /// The `owner` of the row named `name` in any table with an `owner` column (a
    /// lock row), if it has a non-empty one.
    pub fn lock_row(&self, name: &str) -> Option<String> {
        self.engine.lock_row(name)
    }

    /// The id the next connection gets.
    pub fn next_conn_id(&self) -> ConnId {
        self.next_id
    }

    /// A failover made this replica the primary: recorded for the observer.
    pub fn promote(&mut self) {
        self.events.push(ServerEvent::Promoted);
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
