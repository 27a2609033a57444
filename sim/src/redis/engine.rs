//! The command engine: one keyspace, executed one command at a time.
//!
//! The engine has no clock and no network. The caller passes the server host's clock
//! reading (`now_us`, unix microseconds) with every command, so the same engine serves
//! the simulator (a skewed, drifting host clock), the in-process tests (a fixed clock)
//! and `locksim serve-model` (the real clock).
//!
//! STUB: the public API below is the contract between the engine and the server layer;
//! the implementation is filled in by the engine work.

use super::reply::Reply;

/// Per-connection state the engine reads and changes (`HELLO`, `SELECT`, `CLIENT
/// SETNAME`, subscriptions, `QUIT`).
#[derive(Debug, Clone)]
pub struct Session {
    /// Redis's client id (`CLIENT ID`), unique per engine.
    pub id: u64,
    /// Who is on the other end (a turmoil host name or a socket address); recorded in
    /// [`KeyEvent`]s so a history can say which client removed which lock.
    pub peer: String,
    /// Negotiated protocol: 2 or 3.
    pub protocol: u8,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Channels this connection is subscribed to, in subscription order.
    pub channels: Vec<Vec<u8>>,
    /// Set by `QUIT` (and by a protocol error): close after writing the reply.
    pub close_after_reply: bool,
}

/// Why a key left the keyspace, or was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyCause {
    /// `DEL`, `UNLINK`, `GETDEL`, or a hash losing its last field, from a command or a
    /// script.
    Command,
    /// Expired (lazily or by the active cycle).
    Expired,
    /// Replaced by a `SET` that overwrote it.
    Overwritten,
    /// `FLUSHALL` / `FLUSHDB`.
    Flushed,
}

/// The server's own record of what happened to keys: the ground truth a checker uses
/// to tell whose lock a release really removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyEvent {
    /// A string key was written (by `SET`, `SETNX`, ...).
    Written {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// The value written (lossy UTF-8).
        value: String,
    },
    /// A key was removed.
    Removed {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer, or `"expiry"` for expiry.
        by: String,
        /// The key.
        key: String,
        /// For a string: its value; for a hash: its field names joined with `,`.
        value: String,
        /// Why.
        cause: KeyCause,
    },
}

/// The Redis model's state: keyspace with expiry, script cache, pub/sub registry.
#[derive(Debug, Default)]
pub struct Engine {
    next_client_id: u64,
}

impl Engine {
    /// An empty server.
    pub fn new() -> Self {
        Self::default()
    }

    /// A session for a new connection from `peer`, with a fresh client id.
    pub fn connect(&mut self, peer: impl Into<String>) -> Session {
        self.next_client_id += 1;
        Session {
            id: self.next_client_id,
            peer: peer.into(),
            protocol: 2,
            name: None,
            channels: Vec::new(),
            close_after_reply: false,
        }
    }

    /// Forget a closed connection (drops its subscriptions).
    pub fn disconnect(&mut self, _session: &Session) {}

    /// Executes one command (`argv[0]` is the name, any case) at server time `now_us`
    /// and returns its reply.
    pub fn execute(&mut self, _session: &mut Session, argv: &[Vec<u8>], _now_us: u64) -> Reply {
        let name = argv.first().map(|a| String::from_utf8_lossy(a).into_owned()).unwrap_or_default();
        Reply::err(format!("unknown command '{name}', with args beginning with: "))
    }

    /// One active-expiry cycle at `now_us`: removes expired keys; returns how many.
    pub fn active_expire(&mut self, _now_us: u64) -> usize {
        0
    }

    /// Messages published since the last call, as `(session id, push reply)`, in
    /// delivery order. The server layer writes each to its connection.
    pub fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        Vec::new()
    }

    /// Key events recorded since the last call, oldest first.
    pub fn take_key_events(&mut self) -> Vec<KeyEvent> {
        Vec::new()
    }
}
