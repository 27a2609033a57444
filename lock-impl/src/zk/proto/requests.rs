//! Request bodies by operation ([`Request`]), with a `multi`'s operations
//! ([`MultiOp`]).

use super::*;

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
