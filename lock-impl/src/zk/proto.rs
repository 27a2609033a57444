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

/// Why bytes could not be read as the record expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed ZooKeeper record: {what} at byte {at}: {why}")]
pub struct DecodeError {
    /// The field being read.
    pub what: &'static str,
    /// Its offset in the frame.
    pub at: usize,
    /// What was wrong.
    pub why: String,
}

/// Reads jute primitives from one frame's payload.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, what: &'static str, why: impl Into<String>) -> DecodeError {
        DecodeError {
            what,
            at: self.pos,
            why: why.into(),
        }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(self.err(what, format!("needs {n} bytes, {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A jute `int`.
    pub fn int(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A jute `long`.
    pub fn long(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A jute `boolean` (any non-zero byte is true, as `DataInput.readBoolean`).
    pub fn boolean(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.take(1, what)?[0] != 0)
    }

    fn length(&mut self, what: &'static str) -> Result<Option<usize>, DecodeError> {
        let n = self.int(what)?;
        if n < 0 {
            return Ok(None);
        }
        let n = n as usize;
        if n > self.remaining() {
            return Err(self.err(
                what,
                format!("length {n} exceeds the {} bytes left", self.remaining()),
            ));
        }
        Ok(Some(n))
    }

    /// A jute `buffer` (`None`: null).
    pub fn buffer(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.length(what)? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n, what)?.to_vec())),
        }
    }

    /// A jute `ustring` (null reads as the empty string, as the server's paths do not
    /// distinguish them).
    pub fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        match self.length(what)? {
            None => Ok(String::new()),
            Some(n) => {
                let at = self.pos;
                let b = self.take(n, what)?;
                String::from_utf8(b.to_vec()).map_err(|e| DecodeError {
                    what,
                    at,
                    why: format!("not UTF-8: {e}"),
                })
            }
        }
    }

    /// A jute `vector<ustring>` (null reads as empty).
    pub fn strings(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.int(what)?;
        if n < 0 {
            return Ok(Vec::new());
        }
        // Each element takes at least 4 bytes: a count beyond that is a lie, and must
        // not size an allocation.
        if n as usize > self.remaining() / 4 {
            return Err(self.err(what, format!("count {n} exceeds the frame")));
        }
        (0..n).map(|_| self.string(what)).collect()
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.err(what, format!("{} trailing bytes", self.remaining())))
        }
    }
}

/// Writes jute primitives.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that reserves the 4-byte frame length, filled in by
    /// [`Writer::into_frame`].
    pub fn frame() -> Self {
        Self {
            buf: vec![0, 0, 0, 0],
        }
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// The frame, its length prefix filled in (for a writer made by
    /// [`Writer::frame`]).
    pub fn into_frame(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }

    /// A jute `int`.
    pub fn int(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `long`.
    pub fn long(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `boolean`.
    pub fn boolean(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// A jute `buffer` (`None`: null, length -1).
    pub fn buffer(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            None => self.int(-1),
            Some(b) => {
                self.int(b.len() as i32);
                self.buf.extend_from_slice(b);
                self
            }
        }
    }

    /// A jute `ustring`.
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(Some(v.as_bytes()))
    }

    /// A jute `vector<ustring>`.
    pub fn strings(&mut self, v: &[String]) -> &mut Self {
        self.int(v.len() as i32);
        for s in v {
            self.string(s);
        }
        self
    }

    /// Raw bytes (an already-encoded record).
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
}

/// Splits the first complete frame off `buf`: `Ok(Some((payload, consumed)))`,
/// `Ok(None)` if more bytes are needed, or an error for a length the protocol forbids.
pub fn split_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 || len as usize > MAX_FRAME_LEN {
        return Err(DecodeError {
            what: "frame length",
            at: 0,
            why: format!("{len} is outside 0..={MAX_FRAME_LEN}"),
        });
    }
    let len = len as usize;
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((&buf[4..4 + len], 4 + len)))
}

/// `org.apache.zookeeper.data.Stat`, in wire order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stat {
    /// zxid of the create.
    pub czxid: i64,
    /// zxid of the last data change.
    pub mzxid: i64,
    /// Create time, server wall clock, ms.
    pub ctime: i64,
    /// Last data change time, server wall clock, ms.
    pub mtime: i64,
    /// Data version.
    pub version: i32,
    /// Children version (counts child creates; names sequential children).
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Session owning an ephemeral node, 0 for others.
    pub ephemeral_owner: i64,
    /// Data length.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
    /// zxid of the last change to the children.
    pub pzxid: i64,
}

impl Stat {
    /// Encodes the record.
    pub fn write(&self, w: &mut Writer) {
        w.long(self.czxid)
            .long(self.mzxid)
            .long(self.ctime)
            .long(self.mtime)
            .int(self.version)
            .int(self.cversion)
            .int(self.aversion)
            .long(self.ephemeral_owner)
            .int(self.data_length)
            .int(self.num_children)
            .long(self.pzxid);
    }

    /// Decodes the record.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            czxid: r.long("stat.czxid")?,
            mzxid: r.long("stat.mzxid")?,
            ctime: r.long("stat.ctime")?,
            mtime: r.long("stat.mtime")?,
            version: r.int("stat.version")?,
            cversion: r.int("stat.cversion")?,
            aversion: r.int("stat.aversion")?,
            ephemeral_owner: r.long("stat.ephemeralOwner")?,
            data_length: r.int("stat.dataLength")?,
            num_children: r.int("stat.numChildren")?,
            pzxid: r.long("stat.pzxid")?,
        })
    }
}

/// `org.apache.zookeeper.data.ACL` (permissions and `Id{scheme, id}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// `ZooDefs.Perms` bits.
    pub perms: i32,
    /// The id's scheme (`world`, `digest`, `ip`, ...).
    pub scheme: String,
    /// The id.
    pub id: String,
}

impl Acl {
    /// `ZooDefs.Ids.OPEN_ACL_UNSAFE`: `world:anyone` with every permission.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: 31,
            scheme: "world".into(),
            id: "anyone".into(),
        }]
    }

    fn write_all(acl: &[Acl], w: &mut Writer) {
        w.int(acl.len() as i32);
        for a in acl {
            w.int(a.perms).string(&a.scheme).string(&a.id);
        }
    }

    fn read_all(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
        let n = r.int("acl count")?;
        if n < 0 {
            return Ok(Vec::new());
        }
        if n as usize > r.remaining() / 12 {
            return Err(DecodeError {
                what: "acl count",
                at: 0,
                why: format!("{n} exceeds the frame"),
            });
        }
        (0..n)
            .map(|_| {
                Ok(Acl {
                    perms: r.int("acl.perms")?,
                    scheme: r.string("acl.id.scheme")?,
                    id: r.string("acl.id.id")?,
                })
            })
            .collect()
    }
}

/// `ConnectRequest` (the first frame a client sends; it has no request header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// The highest zxid the client has seen (a server behind it refuses the session).
    pub last_zxid_seen: i64,
    /// The session timeout the client asks for, ms.
    pub timeout_ms: i32,
    /// 0 for a new session, else the session to resume.
    pub session_id: i64,
    /// The session's password (16 zero bytes for a new session).
    pub passwd: Vec<u8>,
    /// `Some` if the client sent the `readOnly` flag (every client since 3.4 does).
    pub read_only: Option<bool>,
}

impl ConnectRequest {
    /// The frame.
    pub fn to_frame(&self) -> Vec<u8> {
        let mut w = Writer::frame();
        w.int(self.protocol_version)
            .long(self.last_zxid_seen)
            .int(self.timeout_ms)
            .long(self.session_id)
            .buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            w.boolean(ro);
        }
        w.into_frame()
    }

    /// From a frame's payload.
    pub fn read(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let req = Self {
            protocol_version: r.int("connect.protocolVersion")?,
            last_zxid_seen: r.long("connect.lastZxidSeen")?,
            timeout_ms: r.int("connect.timeOut")?,
            session_id: r.long("connect.sessionId")?,
            passwd: r.buffer("connect.passwd")?.unwrap_or_default(),
            read_only: if r.remaining() > 0 {
                Some(r.boolean("connect.readOnly")?)
            } else {
                None
            },
        };
        Ok(req)
    }
}

/// `ConnectResponse`: a negotiated timeout of 0 means the session is expired (or the
/// password was wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// The negotiated session timeout, ms; 0: the session is invalid.
    pub timeout_ms: i32,
    /// The session id (0 if invalid).
    pub session_id: i64,
    /// The session password.
    pub passwd: Vec<u8>,
    /// Whether the server is read-only (present if the request carried the flag).
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    /// The frame.
    pub fn to_frame(&self) -> Vec<u8> {
        let mut w = Writer::frame();
        w.int(self.protocol_version)
            .int(self.timeout_ms)
            .long(self.session_id)
            .buffer(Some(&self.passwd));
        if let Some(ro) = self.read_only {
            w.boolean(ro);
        }
        w.into_frame()
    }

    /// From a frame's payload.
    pub fn read(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(Self {
            protocol_version: r.int("connectResponse.protocolVersion")?,
            timeout_ms: r.int("connectResponse.timeOut")?,
            session_id: r.long("connectResponse.sessionId")?,
            passwd: r.buffer("connectResponse.passwd")?.unwrap_or_default(),
            read_only: if r.remaining() > 0 {
                Some(r.boolean("connectResponse.readOnly")?)
            } else {
                None
            },
        })
    }
}

/// `ReplyHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request's xid, [`PING_XID`] or [`NOTIFICATION_XID`].
    pub xid: i32,
    /// The server's last processed zxid (-1 on notifications).
    pub zxid: i64,
    /// The error, [`ErrorCode::OK`] if none.
    pub err: ErrorCode,
}

impl ReplyHeader {
    /// Encodes the record.
    pub fn write(&self, w: &mut Writer) {
        w.int(self.xid).long(self.zxid).int(self.err.0);
    }

    /// Decodes the record.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            xid: r.int("replyHeader.xid")?,
            zxid: r.long("replyHeader.zxid")?,
            err: ErrorCode(r.int("replyHeader.err")?),
        })
    }
}

/// `WatcherEvent`, the body of a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    /// What happened.
    pub kind: EventType,
    /// The client state ([`state::SYNC_CONNECTED`] from a server).
    pub state: i32,
    /// The node.
    pub path: String,
}

impl WatcherEvent {
    /// Encodes the record.
    pub fn write(&self, w: &mut Writer) {
        w.int(self.kind.code()).int(self.state).string(&self.path);
    }

    /// Decodes the record.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            kind: EventType::from_code(r.int("watcherEvent.type")?),
            state: r.int("watcherEvent.state")?,
            path: r.string("watcherEvent.path")?,
        })
    }
}

/// One operation of a `multi` (and the standalone requests of the same shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// `create` (op 1) or `create2` (op 15).
    Create {
        /// `op::CREATE` or `op::CREATE2`.
        op: i32,
        /// The record.
        req: CreateRequest,
    },
    /// `delete`.
    Delete {
        /// The node.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// `setData`.
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Option<Vec<u8>>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// `check`: fails unless the node's version matches.
    Check {
        /// The node.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
}

impl MultiOp {
    /// The op code.
    pub fn code(&self) -> i32 {
        match self {
            MultiOp::Create { op, .. } => *op,
            MultiOp::Delete { .. } => op::DELETE,
            MultiOp::SetData { .. } => op::SET_DATA,
            MultiOp::Check { .. } => op::CHECK,
        }
    }

    /// The node it works on.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create { req, .. } => &req.path,
            MultiOp::Delete { path, .. }
            | MultiOp::SetData { path, .. }
            | MultiOp::Check { path, .. } => path,
        }
    }
}

/// `CreateRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// The node (a sequential node's name gets a suffix).
    pub path: String,
    /// Its data (`None`: null).
    pub data: Option<Vec<u8>>,
    /// Its ACL (must not be empty).
    pub acl: Vec<Acl>,
    /// The [`create_mode`] flags.
    pub flags: i32,
}

/// A request body, by operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `ping` (op 11, xid -2).
    Ping,
    /// `closeSession` (op -11).
    CloseSession,
    /// `create` / `create2`.
    Create {
        /// `op::CREATE` or `op::CREATE2`.
        op: i32,
        /// The record.
        req: CreateRequest,
    },
    /// `delete`.
    Delete {
        /// The node.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// `exists` (watch: a data watch, set even if the node does not exist).
    Exists {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// `getData`.
    GetData {
        /// The node.
        path: String,
        /// Leave a data watch.
        watch: bool,
    },
    /// `setData`.
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Option<Vec<u8>>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// `getChildren2` (children and the parent's Stat).
    GetChildren2 {
        /// The node.
        path: String,
        /// Leave a child watch.
        watch: bool,
    },
    /// `sync`.
    Sync {
        /// The node.
        path: String,
    },
    /// `multi`: all or nothing.
    Multi(Vec<MultiOp>),
    /// An operation this codec does not decode: the server answers `UNIMPLEMENTED`.
    Other(i32),
}

impl Request {
    /// The op code.
    pub fn code(&self) -> i32 {
        match self {
            Request::Ping => op::PING,
            Request::CloseSession => op::CLOSE_SESSION,
            Request::Create { op, .. } => *op,
            Request::Delete { .. } => op::DELETE,
            Request::Exists { .. } => op::EXISTS,
            Request::GetData { .. } => op::GET_DATA,
            Request::SetData { .. } => op::SET_DATA,
            Request::GetChildren2 { .. } => op::GET_CHILDREN2,
            Request::Sync { .. } => op::SYNC,
            Request::Multi(_) => op::MULTI,
            Request::Other(code) => *code,
        }
    }

    /// Whether the server must order it as a write (it gets a zxid).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::CloseSession
                | Request::Create { .. }
                | Request::Delete { .. }
                | Request::SetData { .. }
                | Request::Multi(_)
        )
    }

    /// The frame: `RequestHeader{xid, type}` and the body.
    pub fn to_frame(&self, xid: i32) -> Vec<u8> {
        let mut w = Writer::frame();
        w.int(xid).int(self.code());
        self.write_body(&mut w);
        w.into_frame()
    }

    fn write_body(&self, w: &mut Writer) {
        match self {
            Request::Ping | Request::CloseSession | Request::Other(_) => {}
            Request::Create { req, .. } => write_create(req, w),
            Request::Delete { path, version } => {
                w.string(path).int(*version);
            }
            Request::Exists { path, watch }
            | Request::GetData { path, watch }
            | Request::GetChildren2 { path, watch } => {
                w.string(path).boolean(*watch);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                w.string(path).buffer(data.as_deref()).int(*version);
            }
            Request::Sync { path } => {
                w.string(path);
            }
            Request::Multi(ops) => {
                for o in ops {
                    // MultiHeader{type, done=false, err=-1}, then the op's record.
                    w.int(o.code()).boolean(false).int(-1);
                    match o {
                        MultiOp::Create { req, .. } => write_create(req, w),
                        MultiOp::Delete { path, version } | MultiOp::Check { path, version } => {
                            w.string(path).int(*version);
                        }
                        MultiOp::SetData {
                            path,
                            data,
                            version,
                        } => {
                            w.string(path).buffer(data.as_deref()).int(*version);
                        }
                    }
                }
                w.int(-1).boolean(true).int(-1);
            }
        }
    }

    /// Decodes a request frame's payload: its xid and the request.
    pub fn read(payload: &[u8]) -> Result<(i32, Request), DecodeError> {
        let mut r = Reader::new(payload);
        let xid = r.int("requestHeader.xid")?;
        let code = r.int("requestHeader.type")?;
        let req = match code {
            op::PING => Request::Ping,
            op::CLOSE_SESSION => Request::CloseSession,
            op::CREATE | op::CREATE2 => Request::Create {
                op: code,
                req: read_create(&mut r)?,
            },
            op::DELETE => Request::Delete {
                path: r.string("delete.path")?,
                version: r.int("delete.version")?,
            },
            op::EXISTS => Request::Exists {
                path: r.string("exists.path")?,
                watch: r.boolean("exists.watch")?,
            },
            op::GET_DATA => Request::GetData {
                path: r.string("getData.path")?,
                watch: r.boolean("getData.watch")?,
            },
            op::SET_DATA => Request::SetData {
                path: r.string("setData.path")?,
                data: r.buffer("setData.data")?,
                version: r.int("setData.version")?,
            },
            op::GET_CHILDREN2 => Request::GetChildren2 {
                path: r.string("getChildren2.path")?,
                watch: r.boolean("getChildren2.watch")?,
            },
            op::SYNC => Request::Sync {
                path: r.string("sync.path")?,
            },
            op::MULTI => {
                let mut ops = Vec::new();
                loop {
                    let kind = r.int("multiHeader.type")?;
                    let done = r.boolean("multiHeader.done")?;
                    let _err = r.int("multiHeader.err")?;
                    if done {
                        break;
                    }
                    ops.push(match kind {
                        op::CREATE | op::CREATE2 => MultiOp::Create {
                            op: kind,
                            req: read_create(&mut r)?,
                        },
                        op::DELETE => MultiOp::Delete {
                            path: r.string("delete.path")?,
                            version: r.int("delete.version")?,
                        },
                        op::SET_DATA => MultiOp::SetData {
                            path: r.string("setData.path")?,
                            data: r.buffer("setData.data")?,
                            version: r.int("setData.version")?,
                        },
                        op::CHECK => MultiOp::Check {
                            path: r.string("check.path")?,
                            version: r.int("check.version")?,
                        },
                        other => {
                            return Err(DecodeError {
                                what: "multiHeader.type",
                                at: r.pos,
                                why: format!("op {other} cannot be part of a multi"),
                            });
                        }
                    });
                }
                Request::Multi(ops)
            }
            other => return Ok((xid, Request::Other(other))),
        };
        Ok((xid, req))
    }
}

fn write_create(req: &CreateRequest, w: &mut Writer) {
    w.string(&req.path).buffer(req.data.as_deref());
    Acl::write_all(&req.acl, w);
    w.int(req.flags);
}

fn read_create(r: &mut Reader<'_>) -> Result<CreateRequest, DecodeError> {
    Ok(CreateRequest {
        path: r.string("create.path")?,
        data: r.buffer("create.data")?,
        acl: Acl::read_all(r)?,
        flags: r.int("create.flags")?,
    })
}

/// One result of a `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// A `create`: the node's name.
    Create(String),
    /// A `create2`: the node's name and Stat.
    Create2(String, Stat),
    /// A `delete`.
    Delete,
    /// A `setData`: the node's new Stat.
    SetData(Stat),
    /// A `check`.
    Check,
    /// The op failed (`OK` for ops before the failing one, `RUNTIMEINCONSISTENCY`
    /// for those after it, as ZooKeeper reports them).
    Error(ErrorCode),
}

/// A reply body, by operation (empty for `delete`, `ping`, `closeSession` and every
/// error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// No body.
    Empty,
    /// `create`: the created node's name (with its sequence suffix).
    Create(String),
    /// `create2`: the name and the Stat.
    Create2(String, Stat),
    /// `exists`, `setData`: the Stat.
    Stat(Stat),
    /// `getData`: data and Stat.
    GetData(Option<Vec<u8>>, Stat),
    /// `getChildren2`: children (in the server's order) and the parent's Stat.
    GetChildren2(Vec<String>, Stat),
    /// `sync`: the path.
    Sync(String),
    /// `multi`.
    Multi(Vec<MultiResult>),
}

impl Response {
    /// Encodes the body.
    pub fn write(&self, w: &mut Writer) {
        match self {
            Response::Empty => {}
            Response::Create(path) | Response::Sync(path) => {
                w.string(path);
            }
            Response::Create2(path, stat) => {
                w.string(path);
                stat.write(w);
            }
            Response::Stat(stat) => stat.write(w),
            Response::GetData(data, stat) => {
                w.buffer(data.as_deref());
                stat.write(w);
            }
            Response::GetChildren2(children, stat) => {
                w.strings(children);
                stat.write(w);
            }
            Response::Multi(results) => {
                for res in results {
                    let (kind, err) = match res {
                        MultiResult::Create(_) => (op::CREATE, 0),
                        MultiResult::Create2(..) => (op::CREATE2, 0),
                        MultiResult::Delete => (op::DELETE, 0),
                        MultiResult::SetData(_) => (op::SET_DATA, 0),
                        MultiResult::Check => (op::CHECK, 0),
                        MultiResult::Error(code) => (op::ERROR, code.0),
                    };
                    w.int(kind).boolean(false).int(err);
                    match res {
                        MultiResult::Create(p) => {
                            w.string(p);
                        }
                        MultiResult::Create2(p, s) => {
                            w.string(p);
                            s.write(w);
                        }
                        MultiResult::SetData(s) => s.write(w),
                        MultiResult::Delete | MultiResult::Check => {}
                        MultiResult::Error(code) => {
                            w.int(code.0);
                        }
                    }
                }
                w.int(-1).boolean(true).int(-1);
            }
        }
    }

    /// Decodes the body of a successful reply to a request with op code `code`.
    pub fn read(code: i32, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match code {
            op::CREATE => Response::Create(r.string("create.path")?),
            op::CREATE2 => Response::Create2(r.string("create2.path")?, Stat::read(r)?),
            op::EXISTS | op::SET_DATA => Response::Stat(Stat::read(r)?),
            op::GET_DATA => Response::GetData(r.buffer("getData.data")?, Stat::read(r)?),
            op::GET_CHILDREN2 => Response::GetChildren2(r.strings("children")?, Stat::read(r)?),
            op::SYNC => Response::Sync(r.string("sync.path")?),
            op::MULTI => {
                let mut results = Vec::new();
                loop {
                    let kind = r.int("multiHeader.type")?;
                    let done = r.boolean("multiHeader.done")?;
                    let _err = r.int("multiHeader.err")?;
                    if done {
                        break;
                    }
                    results.push(match kind {
                        op::CREATE => MultiResult::Create(r.string("create.path")?),
                        op::CREATE2 => {
                            MultiResult::Create2(r.string("create2.path")?, Stat::read(r)?)
                        }
                        op::DELETE => MultiResult::Delete,
                        op::SET_DATA => MultiResult::SetData(Stat::read(r)?),
                        op::CHECK => MultiResult::Check,
                        op::ERROR => MultiResult::Error(ErrorCode(r.int("error.err")?)),
                        other => {
                            return Err(DecodeError {
                                what: "multiHeader.type",
                                at: r.pos,
                                why: format!("unexpected result type {other}"),
                            });
                        }
                    });
                }
                Response::Multi(results)
            }
            _ => Response::Empty,
        })
    }
}

/// A reply frame: header and body.
pub fn reply_frame(header: ReplyHeader, body: &Response) -> Vec<u8> {
    let mut w = Writer::frame();
    header.write(&mut w);
    body.write(&mut w);
    w.into_frame()
}

/// A notification frame (xid -1, zxid -1, err 0, then the event), as
/// `NIOServerCnxn.process` writes it in 3.8.
pub fn notification_frame(event: &WatcherEvent) -> Vec<u8> {
    let mut w = Writer::frame();
    ReplyHeader {
        xid: NOTIFICATION_XID,
        zxid: -1,
        err: ErrorCode::OK,
    }
    .write(&mut w);
    event.write(&mut w);
    w.into_frame()
}
