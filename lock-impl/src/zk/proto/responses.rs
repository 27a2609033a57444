//! Reply bodies by operation ([`Response`]), a `multi`'s results ([`MultiResult`]),
//! and the reply and notification frames.

use super::*;

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
