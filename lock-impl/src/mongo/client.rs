//! One MongoDB connection over any byte stream: `OP_MSG` commands, each exchange
//! bounded by a timeout on the caller's [`Clock`], and the replies' error shapes
//! (`ok: 0` with `errmsg` / `code` / `codeName`, `writeErrors`, `writeConcernError`).
//!
//! Like the MySQL client, a connection is used by one caller at a time and is broken
//! for good once an exchange failed midway (an I/O error, a timeout, an unreadable
//! message): the owner dials another, as a driver's pool does.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::bson::{Document, Value};
use super::wire::{Message, split_message};
use crate::Clock;
use crate::clock::within;
use crate::zk::{StreamDialer, ZkStream};

/// The standard port of `mongod`.
pub const MONGO_PORT: u16 = 27017;

/// `NotWritablePrimary` (10107, "not primary"): a write sent to a member that is not
/// the primary.
pub const NOT_WRITABLE_PRIMARY: i32 = 10107;
/// `NotPrimaryNoSecondaryOk` (13435): a read sent to a secondary without
/// `secondaryOk`.
pub const NOT_PRIMARY_NO_SECONDARY_OK: i32 = 13435;
/// `DuplicateKey` (11000, "E11000 duplicate key error …").
pub const DUPLICATE_KEY: i32 = 11000;
/// `WriteConcernFailed` (64): `wtimeout` passed before the write concern was met.
pub const WRITE_CONCERN_FAILED: i32 = 64;
/// `PrimarySteppedDown` (189).
pub const PRIMARY_STEPPED_DOWN: i32 = 189;
/// `InterruptedDueToReplStateChange` (11602).
pub const INTERRUPTED_DUE_TO_REPL_STATE_CHANGE: i32 = 11602;
/// `CommandNotFound` (59).
pub const COMMAND_NOT_FOUND: i32 = 59;

/// The members of a replica set a client may reach, and how.
#[derive(Clone)]
pub struct MongoServer {
    /// The seed list, `(host, port)`, in the order a client tries them (a connection
    /// string's hosts).
    pub seeds: Vec<(String, u16)>,
    /// The database the lock collection lives in.
    pub database: String,
    /// How to reach them (any byte stream will do).
    pub dialer: Arc<dyn StreamDialer>,
    /// How long one dial or one command may take before the connection is given up
    /// as broken (the command's outcome then unknown), ms.
    pub timeout_ms: u64,
}

impl std::fmt::Debug for MongoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MongoServer")
            .field("seeds", &self.seeds)
            .field("database", &self.database)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// A command the server answered with `ok: 0`: its `code`, `codeName` and `errmsg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    /// `code`.
    pub code: i32,
    /// `codeName`.
    pub code_name: String,
    /// `errmsg`.
    pub errmsg: String,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code_name, self.code, self.errmsg)
    }
}

impl CommandError {
    /// Reads `{ok: 0, errmsg, code, codeName}` (or the same fields of a
    /// `writeErrors` entry or a `writeConcernError`).
    pub fn from_doc(doc: &Document) -> CommandError {
        CommandError {
            code: doc.get_i64("code").unwrap_or(0) as i32,
            code_name: doc.get_str("codeName").unwrap_or("").to_string(),
            errmsg: doc.get_str("errmsg").unwrap_or("").to_string(),
        }
    }
}

/// What went wrong with a MongoDB call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MongoError {
    /// The server answered `ok: 0`.
    #[error("server replied {0}")]
    Command(CommandError),
    /// The connection broke, timed out or could not be made; `sent`: the command had
    /// been written, so its outcome is unknown.
    #[error("connection lost ({why}); command sent: {sent}")]
    Connection {
        /// Whether the command had gone out.
        sent: bool,
        /// What happened.
        why: String,
    },
    /// The server sent something this client cannot read (the connection is broken).
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl MongoError {
    /// Whether the command may have taken effect without the client learning it.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            MongoError::Connection { sent: true, .. } | MongoError::Protocol(_)
        )
    }
}

/// Whether a reply says `ok: 1`.
pub fn is_ok(reply: &Document) -> bool {
    reply.get("ok").is_some_and(Value::truthy)
}

/// The reply's `writeConcernError`, if any.
pub fn write_concern_error(reply: &Document) -> Option<CommandError> {
    reply
        .get_document("writeConcernError")
        .map(CommandError::from_doc)
}

/// The reply's first `writeErrors` entry, if any.
pub fn first_write_error(reply: &Document) -> Option<CommandError> {
    reply
        .get_array("writeErrors")?
        .iter()
        .find_map(Value::as_document)
        .map(CommandError::from_doc)
}

/// One connection.
pub struct MongoConn {
    stream: ZkStream,
    inbuf: Vec<u8>,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    next_request: i32,
    broken: Option<String>,
    addr: String,
}

impl std::fmt::Debug for MongoConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MongoConn")
            .field("addr", &self.addr)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl MongoConn {
    /// Dials `host:port` (no handshake: the caller's first command, `hello`, is it).
    pub async fn connect(
        dialer: &dyn StreamDialer,
        host: &str,
        port: u16,
        clock: Arc<dyn Clock>,
        timeout_ms: u64,
    ) -> Result<Self, MongoError> {
        let timeout = Duration::from_millis(timeout_ms.max(1));
        let addr = format!("{host}:{port}");
        let stream = match within(clock.as_ref(), timeout, dialer.dial(host, port)).await {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                return Err(MongoError::Connection {
                    sent: false,
                    why: format!("dial {addr}: {e}"),
                });
            }
            None => {
                return Err(MongoError::Connection {
                    sent: false,
                    why: format!("dial {addr}: timed out"),
                });
            }
        };
        Ok(MongoConn {
            stream,
            inbuf: Vec::new(),
            clock,
            timeout,
            next_request: 1,
            broken: None,
            addr,
        })
    }

    /// `host:port` it is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Why the connection is broken, if it is.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Runs `body` against database `db` (`$db` is added) and returns the reply
    /// document, `ok: 0` included; waits at most the connection's timeout.
    pub async fn command(&mut self, db: &str, body: Document) -> Result<Document, MongoError> {
        let timeout = self.timeout;
        self.command_within(db, body, timeout).await
    }

    /// As [`Self::command`], with its own timeout (a long poll).
    pub async fn command_within(
        &mut self,
        db: &str,
        mut body: Document,
        timeout: Duration,
    ) -> Result<Document, MongoError> {
        if let Some(why) = &self.broken {
            return Err(MongoError::Connection {
                sent: false,
                why: format!("connection broken earlier: {why}"),
            });
        }
        body.set("$db", db);
        let id = self.next_request;
        self.next_request = self.next_request.wrapping_add(1).max(1);
        let bytes = Message {
            request_id: id,
            response_to: 0,
            flags: 0,
            body,
        }
        .encode();
        let clock = self.clock.clone();
        let exchange = async {
            let sent = async {
                self.stream.write_all(&bytes).await?;
                self.stream.flush().await
            }
            .await;
            // A message this small leaves in one write or not at all.
            sent.map_err(|e| MongoError::Connection {
                sent: false,
                why: e.to_string(),
            })?;
            let reply = self.read_message().await?;
            if reply.response_to != id {
                return Err(MongoError::Protocol(format!(
                    "a reply to request {} while waiting for {id}",
                    reply.response_to
                )));
            }
            Ok(reply.body)
        };
        let result = match within(clock.as_ref(), timeout, exchange).await {
            Some(r) => r,
            None => Err(MongoError::Connection {
                sent: true,
                why: format!("no reply within {} ms", timeout.as_millis()),
            }),
        };
        if let Err(e) = &result {
            self.broken = Some(e.to_string());
        }
        result
    }

    async fn read_message(&mut self) -> Result<Message, MongoError> {
        loop {
            match split_message(&self.inbuf) {
                Ok(Some(len)) => {
                    let msg =
                        Message::decode(&self.inbuf[..len]).map_err(|e| MongoError::Protocol(e.0));
                    self.inbuf.drain(..len);
                    return msg;
                }
                Ok(None) => {}
                Err(e) => return Err(MongoError::Protocol(e.0)),
            }
            let mut chunk = [0u8; 8192];
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|e| MongoError::Connection {
                    sent: true,
                    why: e.to_string(),
                })?;
            if n == 0 {
                return Err(MongoError::Connection {
                    sent: true,
                    why: "the server closed the connection".into(),
                });
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Closes the stream.
    pub async fn close(mut self) {
        let _ = self.stream.shutdown().await;
    }
}
