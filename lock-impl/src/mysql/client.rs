//! One MySQL connection over any byte stream: the handshake with
//! `mysql_native_password`, `COM_QUERY` with its OK / ERR / text-resultset reply,
//! `COM_PING` and `COM_QUIT`, each exchange bounded by a timeout on the caller's
//! [`Clock`].
//!
//! The protocol is strictly request / reply on one connection, so there is no
//! background driver: a [`MySqlConn`] is used by one caller at a time (the designs keep
//! theirs behind a mutex). A connection whose exchange failed midway (an I/O error, a
//! timeout, an unreadable packet) is broken: later calls fail at once without sending,
//! and the owner dials a new one, as a connection pool does. Everything scoped to the
//! old connection on the server (its `GET_LOCK`s, its open transaction) is gone once
//! the server notices.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::proto::{
    self, COM_PING, COM_QUERY, COM_QUIT, Column, EofPacket, ErrPacket, Handshake,
    HandshakeResponse, OkPacket, Reply, ResultSet, cap, split_packet,
};
use crate::Clock;
use crate::clock::within;
use crate::zk::{StreamDialer, ZkStream};

/// Where a MySQL client connects, as whom, and how long it waits.
#[derive(Clone)]
pub struct MySqlServer {
    /// Host name.
    pub host: String,
    /// Port (3306).
    pub port: u16,
    /// User name.
    pub user: String,
    /// Password (`mysql_native_password`).
    pub password: String,
    /// The database to use (`CLIENT_CONNECT_WITH_DB`).
    pub database: String,
    /// How to reach it (the ZooKeeper client's dialer: any byte stream will do).
    pub dialer: Arc<dyn StreamDialer>,
    /// How long one dial, handshake or statement may take before the connection is
    /// given up as broken (the statement's outcome then unknown), ms.
    pub timeout_ms: u64,
}

impl std::fmt::Debug for MySqlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlServer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("database", &self.database)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

impl MySqlServer {
    /// `host:port`, for messages.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// What went wrong with a MySQL call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MySqlError {
    /// The server answered with an ERR packet.
    #[error("server replied {0}")]
    Server(ErrPacket),
    /// The connection broke, timed out or could not be made; `sent`: the statement had
    /// been written, so its outcome is unknown.
    #[error("connection lost ({why}); statement sent: {sent}")]
    Connection {
        /// Whether the statement had gone out.
        sent: bool,
        /// What happened.
        why: String,
        /// The client library's error number for it, as libmariadb and libmysqlclient
        /// report it ([`CR_CONN_HOST_ERROR`], [`CR_SERVER_GONE_ERROR`],
        /// [`CR_SERVER_LOST`]).
        errno: u16,
    },
    /// The server sent something this client cannot read (the connection is broken).
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// `CR_CONN_HOST_ERROR` (2003, "Can't connect to server on '…'"): the dial failed.
pub const CR_CONN_HOST_ERROR: u16 = 2003;
/// `CR_SERVER_GONE_ERROR` (2006, "Server has gone away"): the connection was found
/// gone before the statement could go out (closed by the server's `wait_timeout`, a
/// reset, a restart), as a client's `net_clear` / write finds it.
pub const CR_SERVER_GONE_ERROR: u16 = 2006;
/// `CR_SERVER_LOST` (2013, "Lost connection to server during query"): the connection
/// broke, or no reply came, after the statement (or the login) went out.
pub const CR_SERVER_LOST: u16 = 2013;

impl MySqlError {
    /// The error number the client sees: the server's for an ERR packet, the client
    /// library's for a connection failure (2003, 2006, 2013); none for a reply this
    /// client cannot read.
    pub fn client_errno(&self) -> Option<u16> {
        match self {
            MySqlError::Server(e) => Some(e.code),
            MySqlError::Connection { errno, .. } => Some(*errno),
            MySqlError::Protocol(_) => None,
        }
    }

    /// Whether the statement may have taken effect without the client learning it.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            MySqlError::Connection { sent: true, .. } | MySqlError::Protocol(_)
        )
    }

    /// The server's error number, if the server answered with one.
    pub fn code(&self) -> Option<u16> {
        match self {
            MySqlError::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

/// The capabilities this client asks for: 4.1 protocol, secure connection and plugin
/// auth, a database at connect, transactions; no `CLIENT_DEPRECATE_EOF`, no session
/// tracking, no multi-statements (one statement per `COM_QUERY`).
pub const CLIENT_CAPABILITIES: u32 = cap::LONG_PASSWORD
    | cap::LONG_FLAG
    | cap::CONNECT_WITH_DB
    | cap::PROTOCOL_41
    | cap::TRANSACTIONS
    | cap::SECURE_CONNECTION
    | cap::MULTI_RESULTS
    | cap::PLUGIN_AUTH;

/// `utf8mb4_general_ci`.
pub const CLIENT_CHARSET: u8 = 45;

/// One connection.
pub struct MySqlConn {
    stream: ZkStream,
    inbuf: Vec<u8>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    handshake: Handshake,
    broken: Option<String>,
}

impl std::fmt::Debug for MySqlConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlConn")
            .field("connection_id", &self.handshake.connection_id)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl MySqlConn {
    /// Dials `server` and logs in.
    pub async fn connect(server: &MySqlServer, clock: Arc<dyn Clock>) -> Result<Self, MySqlError> {
        let timeout = Duration::from_millis(server.timeout_ms.max(1));
        let not_sent = |why: String, errno: u16| MySqlError::Connection {
            sent: false,
            why,
            errno,
        };
        let stream = match within(
            clock.as_ref(),
            timeout,
            server.dialer.dial(&server.host, server.port),
        )
        .await
        {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                return Err(not_sent(
                    format!("dial {}: {e}", server.addr()),
                    CR_CONN_HOST_ERROR,
                ));
            }
            None => {
                return Err(not_sent(
                    format!("dial {}: timed out", server.addr()),
                    CR_CONN_HOST_ERROR,
                ));
            }
        };
        let mut conn = MySqlConn {
            stream,
            inbuf: Vec::new(),
            clock: clock.clone(),
            timeout,
            handshake: Handshake::default(),
            broken: None,
        };
        let login = async {
            let (seq, payload) = conn.read_packet().await?;
            if payload.first() == Some(&0xff) {
                return Err(MySqlError::Server(
                    ErrPacket::decode(&payload).map_err(|e| MySqlError::Protocol(e.0))?,
                ));
            }
            let hs = Handshake::decode(&payload).map_err(|e| MySqlError::Protocol(e.0))?;
            let response = HandshakeResponse {
                capabilities: CLIENT_CAPABILITIES & (hs.capabilities | cap::LONG_PASSWORD),
                max_packet: 16 * 1024 * 1024,
                charset: CLIENT_CHARSET,
                user: server.user.clone(),
                auth: proto::native_password(server.password.as_bytes(), &hs.scramble),
                database: Some(server.database.clone()),
                auth_plugin: Some(proto::NATIVE_PASSWORD.into()),
            };
            conn.write_packet(seq.wrapping_add(1), &response.encode())
                .await?;
            let (_, reply) = conn.read_packet().await?;
            match reply.first() {
                Some(0x00) => {
                    OkPacket::decode(&reply).map_err(|e| MySqlError::Protocol(e.0))?;
                }
                Some(0xff) => {
                    return Err(MySqlError::Server(
                        ErrPacket::decode(&reply).map_err(|e| MySqlError::Protocol(e.0))?,
                    ));
                }
                Some(0xfe) => {
                    return Err(MySqlError::Protocol(
                        "the server asked to switch the authentication plugin \
                         (only mysql_native_password is supported)"
                            .into(),
                    ));
                }
                _ => return Err(MySqlError::Protocol("unexpected reply to login".into())),
            }
            Ok(hs)
        };
        let result = within(clock.as_ref(), timeout, login).await;
        match result {
            Some(Ok(hs)) => {
                conn.handshake = hs;
                Ok(conn)
            }
            // Lost while reading the handshake or the login's reply: 2013, as
            // libmysqlclient's "at 'reading initial communication packet'".
            Some(Err(MySqlError::Connection { why, .. })) => Err(not_sent(why, CR_SERVER_LOST)),
            Some(Err(e)) => Err(e),
            None => Err(not_sent("login timed out".into(), CR_SERVER_LOST)),
        }
    }

    /// The server's handshake.
    pub fn handshake(&self) -> &Handshake {
        &self.handshake
    }

    /// The server's id for this connection (`CONNECTION_ID()`).
    pub fn connection_id(&self) -> u32 {
        self.handshake.connection_id
    }

    /// Why the connection is broken, if it is.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    async fn write_packet(&mut self, seq: u8, payload: &[u8]) -> Result<(), MySqlError> {
        let bytes = proto::frame(seq, payload);
        let r = async {
            self.stream.write_all(&bytes).await?;
            self.stream.flush().await
        }
        .await;
        // A packet this small leaves in one write or not at all: a write that fails
        // (the connection was reset before it) sent nothing.
        r.map_err(|e| MySqlError::Connection {
            sent: false,
            why: e.to_string(),
            errno: CR_SERVER_GONE_ERROR,
        })
    }

    async fn read_packet(&mut self) -> Result<(u8, Vec<u8>), MySqlError> {
        loop {
            match split_packet(&self.inbuf) {
                Ok(Some((seq, payload, used))) => {
                    let payload = payload.to_vec();
                    self.inbuf.drain(..used);
                    return Ok((seq, payload));
                }
                Ok(None) => {}
                Err(e) => return Err(MySqlError::Protocol(e.0)),
            }
            let mut chunk = [0u8; 8192];
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|e| MySqlError::Connection {
                    sent: true,
                    why: e.to_string(),
                    errno: CR_SERVER_LOST,
                })?;
            if n == 0 {
                return Err(MySqlError::Connection {
                    sent: true,
                    why: "the server closed the connection".into(),
                    errno: CR_SERVER_LOST,
                });
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn read_reply(&mut self) -> Result<Reply, MySqlError> {
        let perr = |e: proto::ProtoError| MySqlError::Protocol(e.0);
        let (_, first) = self.read_packet().await?;
        match first.first() {
            Some(0x00) => return Ok(Reply::Ok(OkPacket::decode(&first).map_err(perr)?)),
            Some(0xff) => return Ok(Reply::Err(ErrPacket::decode(&first).map_err(perr)?)),
            Some(0xfb) => {
                return Err(MySqlError::Protocol(
                    "LOCAL INFILE requests are not supported".into(),
                ));
            }
            None => return Err(MySqlError::Protocol("an empty reply".into())),
            _ => {}
        }
        let count = proto::Reader::new(&first)
            .lenenc("column count")
            .map_err(perr)?;
        let count = usize::try_from(count)
            .ok()
            .filter(|&n| n <= 4096)
            .ok_or_else(|| MySqlError::Protocol(format!("{count} columns")))?;
        let mut columns = Vec::with_capacity(count);
        for _ in 0..count {
            let (_, p) = self.read_packet().await?;
            columns.push(Column::decode(&p).map_err(perr)?);
        }
        let (_, p) = self.read_packet().await?;
        if !EofPacket::is_eof(&p) {
            return Err(MySqlError::Protocol("no EOF after the columns".into()));
        }
        let mut rows = Vec::new();
        loop {
            let (_, p) = self.read_packet().await?;
            if EofPacket::is_eof(&p) {
                let eof = EofPacket::decode(&p).map_err(perr)?;
                return Ok(Reply::Rows(ResultSet { columns, rows, eof }));
            }
            if p.first() == Some(&0xff) {
                return Ok(Reply::Err(ErrPacket::decode(&p).map_err(perr)?));
            }
            rows.push(proto::decode_row(&p, count).map_err(perr)?);
        }
    }

    /// Sends `payload` as a new command and reads its reply, within the timeout; any
    /// failure breaks the connection.
    async fn command(&mut self, payload: Vec<u8>) -> Result<Reply, MySqlError> {
        if let Some(why) = &self.broken {
            return Err(MySqlError::Connection {
                sent: false,
                why: format!("connection broken earlier: {why}"),
                errno: CR_SERVER_GONE_ERROR,
            });
        }
        let (clock, timeout) = (self.clock.clone(), self.timeout);
        let exchange = async {
            self.write_packet(0, &payload).await?;
            self.read_reply().await
        };
        let result = match within(clock.as_ref(), timeout, exchange).await {
            Some(r) => r,
            None => Err(MySqlError::Connection {
                sent: true,
                why: format!("no reply within {} ms", timeout.as_millis()),
                errno: CR_SERVER_LOST,
            }),
        };
        if let Err(e) = &result {
            self.broken = Some(e.to_string());
        }
        result
    }

    /// Runs one SQL statement (`COM_QUERY`); an ERR reply is `Ok(Reply::Err)`.
    pub async fn query_reply(&mut self, sql: &str) -> Result<Reply, MySqlError> {
        let mut payload = vec![COM_QUERY];
        payload.extend_from_slice(sql.as_bytes());
        self.command(payload).await
    }

    /// Runs one SQL statement; an ERR reply is [`MySqlError::Server`].
    pub async fn query(&mut self, sql: &str) -> Result<Reply, MySqlError> {
        match self.query_reply(sql).await? {
            Reply::Err(e) => Err(MySqlError::Server(e)),
            r => Ok(r),
        }
    }

    /// `COM_PING`.
    pub async fn ping(&mut self) -> Result<Reply, MySqlError> {
        self.command(vec![COM_PING]).await
    }

    /// `COM_QUIT`, then closes the stream (the server answers nothing).
    pub async fn quit(mut self) {
        if self.broken.is_none() {
            let _ = self.write_packet(0, &[COM_QUIT]).await;
        }
        let _ = self.stream.shutdown().await;
    }
}

/// The single value of a one-row, one-column resultset: `Ok(None)` for SQL NULL.
pub fn scalar(reply: &Reply) -> Result<Option<&[u8]>, MySqlError> {
    match reply {
        Reply::Rows(rs) if rs.columns.len() == 1 && rs.rows.len() == 1 => {
            Ok(rs.rows[0][0].as_deref())
        }
        other => Err(MySqlError::Protocol(format!(
            "expected one value, got {}",
            describe(other)
        ))),
    }
}

/// A short description of a reply, for messages.
pub fn describe(reply: &Reply) -> String {
    match reply {
        Reply::Ok(ok) => format!("OK ({} rows affected)", ok.affected_rows),
        Reply::Err(e) => e.to_string(),
        Reply::Rows(rs) => format!("{} columns, {} rows", rs.columns.len(), rs.rows.len()),
    }
}

/// Quotes `s` as a MariaDB string literal: `'` and `\` are backslash-escaped, as
/// `mysql_real_escape_string` does, so any key is a literal and never SQL.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x1a' => out.push_str("\\Z"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
