//! ZooKeeper's wire protocol: jute records over TCP, each frame a 4-byte big-endian
//! length and its payload. Shared by the client ([`super::ZkClient`]) and locksim's
//! server model (`sim::zk`), so both speak exactly one encoding.
//!
//! Read from ZooKeeper 3.8's `zookeeper-jute/src/main/resources/zookeeper.jute` (the
//! records), `ZooDefs.OpCode` (the operation codes), `KeeperException.Code` (the error
//! codes), `ClientCnxn` (the special xids) and jute's `BinaryOutputArchive` (the
//! primitive encodings: `int` 4 bytes and `long` 8 bytes big-endian, `boolean` one
//! byte, `buffer` and `ustring` a 4-byte length, `-1` for null, then the bytes;
//! `vector` a 4-byte count, `-1` for null, then the elements).
//!
//! Decoding never panics: a short or malformed frame is a [`DecodeError`] naming what
//! was being read.

use std::fmt;

mod jute;
mod records;
mod requests;
mod responses;

pub use jute::{DecodeError, Reader, Writer, split_frame};
pub use records::{Acl, ConnectRequest, ConnectResponse, ReplyHeader, Stat, WatcherEvent};
pub use requests::{CreateRequest, MultiOp, Request};
pub use responses::{MultiResult, Response, notification_frame, reply_frame};

/// Largest frame either side accepts: jute's default `jute.maxbuffer` (0xfffff bytes)
/// plus room for the headers, as ZooKeeper's `packetLen` check allows.
pub const MAX_FRAME_LEN: usize = 0xfffff + 1024;

/// The xid of notifications (watch events) the server sends.
pub const NOTIFICATION_XID: i32 = -1;
/// The xid of pings and their replies.
pub const PING_XID: i32 = -2;
/// The xid of authentication packets (unused here, reserved by the Java client).
pub const AUTH_XID: i32 = -4;
/// The xid of `SetWatches` packets (reserved by the Java client).
pub const SET_WATCHES_XID: i32 = -8;

/// `ZooDefs.OpCode`.
#[allow(missing_docs)]
pub mod op {
    pub const NOTIFICATION: i32 = 0;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const SET_WATCHES: i32 = 101;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// `KeeperException.Code`: the error a reply header carries (`0`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ErrorCode(pub i32);

#[allow(missing_docs)]
impl ErrorCode {
    pub const OK: Self = Self(0);
    pub const SYSTEM_ERROR: Self = Self(-1);
    pub const RUNTIME_INCONSISTENCY: Self = Self(-2);
    pub const DATA_INCONSISTENCY: Self = Self(-3);
    pub const CONNECTION_LOSS: Self = Self(-4);
    pub const MARSHALLING_ERROR: Self = Self(-5);
    pub const UNIMPLEMENTED: Self = Self(-6);
    pub const OPERATION_TIMEOUT: Self = Self(-7);
    pub const BAD_ARGUMENTS: Self = Self(-8);
    pub const UNKNOWN_SESSION: Self = Self(-12);
    pub const API_ERROR: Self = Self(-100);
    pub const NO_NODE: Self = Self(-101);
    pub const NO_AUTH: Self = Self(-102);
    pub const BAD_VERSION: Self = Self(-103);
    pub const NO_CHILDREN_FOR_EPHEMERALS: Self = Self(-108);
    pub const NODE_EXISTS: Self = Self(-110);
    pub const NOT_EMPTY: Self = Self(-111);
    pub const SESSION_EXPIRED: Self = Self(-112);
    pub const INVALID_CALLBACK: Self = Self(-113);
    pub const INVALID_ACL: Self = Self(-114);
    pub const AUTH_FAILED: Self = Self(-115);
    pub const SESSION_MOVED: Self = Self(-118);
    pub const NOT_READ_ONLY: Self = Self(-119);
    pub const EPHEMERAL_ON_LOCAL_SESSION: Self = Self(-120);
    pub const NO_WATCHER: Self = Self(-121);
    pub const REQUEST_TIMEOUT: Self = Self(-122);
    pub const THROTTLED_OP: Self = Self(-127);

    /// The Java name (`NONODE`, `NODEEXISTS`, ...), or `UNKNOWN` for a code the client
    /// does not know.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "OK",
            -1 => "SYSTEMERROR",
            -2 => "RUNTIMEINCONSISTENCY",
            -3 => "DATAINCONSISTENCY",
            -4 => "CONNECTIONLOSS",
            -5 => "MARSHALLINGERROR",
            -6 => "UNIMPLEMENTED",
            -7 => "OPERATIONTIMEOUT",
            -8 => "BADARGUMENTS",
            -12 => "UNKNOWNSESSION",
            -100 => "APIERROR",
            -101 => "NONODE",
            -102 => "NOAUTH",
            -103 => "BADVERSION",
            -108 => "NOCHILDRENFOREPHEMERALS",
            -110 => "NODEEXISTS",
            -111 => "NOTEMPTY",
            -112 => "SESSIONEXPIRED",
            -113 => "INVALIDCALLBACK",
            -114 => "INVALIDACL",
            -115 => "AUTHFAILED",
            -118 => "SESSIONMOVED",
            -119 => "NOTREADONLY",
            -120 => "EPHEMERALONLOCALSESSION",
            -121 => "NOWATCHER",
            -122 => "REQUESTTIMEOUT",
            -127 => "THROTTLEDOP",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// `Watcher.Event.EventType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    /// A connection state change (no path).
    None,
    /// The watched node was created.
    NodeCreated,
    /// The watched node was deleted.
    NodeDeleted,
    /// The watched node's data changed.
    NodeDataChanged,
    /// The watched node's children changed.
    NodeChildrenChanged,
    /// Any other code (a newer server's event).
    Other(i32),
}

impl EventType {
    /// The wire code.
    pub fn code(self) -> i32 {
        match self {
            EventType::None => -1,
            EventType::NodeCreated => 1,
            EventType::NodeDeleted => 2,
            EventType::NodeDataChanged => 3,
            EventType::NodeChildrenChanged => 4,
            EventType::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: i32) -> Self {
        match code {
            -1 => EventType::None,
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            c => EventType::Other(c),
        }
    }
}

/// `Watcher.Event.KeeperState` codes that travel on the wire or reach watchers.
#[allow(missing_docs)]
pub mod state {
    pub const DISCONNECTED: i32 = 0;
    pub const SYNC_CONNECTED: i32 = 3;
    pub const AUTH_FAILED: i32 = 4;
    pub const CONNECTED_READ_ONLY: i32 = 5;
    pub const EXPIRED: i32 = -112;
    pub const CLOSED: i32 = 7;
}

/// `CreateMode` flags.
#[allow(missing_docs)]
pub mod create_mode {
    pub const PERSISTENT: i32 = 0;
    pub const EPHEMERAL: i32 = 1;
    pub const PERSISTENT_SEQUENTIAL: i32 = 2;
    pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
    pub const CONTAINER: i32 = 4;
}
