//! The records a session opens and notifies with: [`Stat`], [`Acl`], the connect
//! request and response, [`ReplyHeader`] and [`WatcherEvent`].

use super::*;

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

    pub(super) fn write_all(acl: &[Acl], w: &mut Writer) {
        w.int(acl.len() as i32);
        for a in acl {
            w.int(a.perms).string(&a.scheme).string(&a.id);
        }
    }

    pub(super) fn read_all(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
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
