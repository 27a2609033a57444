//! What every serving ZooKeeper server does alike for its client connections, whether
//! it stands alone ([`super::server`]) or serves in an ensemble ([`super::ensemble`]):
//! the watch tables, the frames queued for the connections, replies, notifications and
//! the reads served from the server's own tree.
//!
//! Read from ZooKeeper 3.8.0: `WatchManager` (one-shot, per connection, a connection
//! told once per trigger), `FinalRequestProcessor` (the reply header's zxid is the last
//! one the server processed; errors carry no body; `exists` leaves a watch even on a
//! missing node), `NIOServerCnxn` (notifications have xid -1, zxid -1).

use std::collections::{BTreeMap, BTreeSet};

use lock_impl::zk::proto::{self, ErrorCode, ReplyHeader, Request, Response, WatcherEvent, state};

use super::tree::{DataTree, Trigger, WatchTable};

/// A connection's id, given by `ZkServer::connect` (or `Peer::connect` in an ensemble).
pub type ConnId = u64;

/// What a connection must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Write this frame.
    Frame(Vec<u8>),
    /// Close the connection (after the frames before it).
    Close,
}

/// The watch tables and the output queue of one server's client connections.
#[derive(Debug, Default)]
pub(super) struct Front {
    data_watches: BTreeMap<String, BTreeSet<ConnId>>,
    child_watches: BTreeMap<String, BTreeSet<ConnId>>,
    outbox: Vec<(ConnId, Out)>,
}

impl Front {
    /// Takes everything queued for the connections.
    pub(super) fn take_output(&mut self) -> Vec<(ConnId, Out)> {
        std::mem::take(&mut self.outbox)
    }

    /// The connection is gone: its watches go with it.
    pub(super) fn forget(&mut self, conn: ConnId) {
        for table in [&mut self.data_watches, &mut self.child_watches] {
            table.retain(|_, set| {
                set.remove(&conn);
                !set.is_empty()
            });
        }
    }

    /// Queues a frame for `conn`.
    pub(super) fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.outbox.push((conn, Out::Frame(frame)));
    }

    /// Closes `conn` after the frames queued before: its watches go.
    pub(super) fn close(&mut self, conn: ConnId) {
        self.outbox.push((conn, Out::Close));
        self.forget(conn);
    }

    /// Replies to request `xid` of `conn`, stamped with `tree`'s last zxid; an error
    /// carries no body.
    pub(super) fn reply(
        &mut self,
        tree: &DataTree,
        conn: ConnId,
        xid: i32,
        err: ErrorCode,
        body: &Response,
    ) {
        let header = ReplyHeader {
            xid,
            zxid: tree.last_zxid(),
            err,
        };
        let body = if err == ErrorCode::OK {
            body
        } else {
            &Response::Empty
        };
        self.send(conn, proto::reply_frame(header, body));
    }

    /// `WatchManager.triggerWatch` for each trigger, in order.
    pub(super) fn fire(&mut self, triggers: &[Trigger]) {
        let mut previous: BTreeSet<ConnId> = BTreeSet::new();
        for t in triggers {
            let table = match t.table {
                WatchTable::Data => &mut self.data_watches,
                WatchTable::Child => &mut self.child_watches,
            };
            let watchers = table.remove(&t.path).unwrap_or_default();
            let frame = proto::notification_frame(&WatcherEvent {
                kind: t.event,
                state: state::SYNC_CONNECTED,
                path: t.path.clone(),
            });
            for c in &watchers {
                if t.suppress_previous && previous.contains(c) {
                    continue;
                }
                self.outbox.push((*c, Out::Frame(frame.clone())));
            }
            previous = watchers;
        }
    }

    /// Serves a read (`exists`, `getData`, `getChildren2`, `sync`) from `tree`,
    /// leaving the watch it asks for; any other request is `UNIMPLEMENTED`.
    pub(super) fn read(&mut self, tree: &DataTree, conn: ConnId, xid: i32, req: Request) {
        match req {
            Request::Exists { path, watch } => {
                if path.contains('\0') {
                    return self.reply(tree, conn, xid, ErrorCode::BAD_ARGUMENTS, &Response::Empty);
                }
                if watch {
                    self.data_watches
                        .entry(path.clone())
                        .or_default()
                        .insert(conn);
                }
                match tree.get(&path).map(|n| n.wire_stat()) {
                    Some(stat) => self.reply(tree, conn, xid, ErrorCode::OK, &Response::Stat(stat)),
                    None => self.reply(tree, conn, xid, ErrorCode::NO_NODE, &Response::Empty),
                }
            }
            Request::GetData { path, watch } => match tree.get(&path) {
                Some(n) => {
                    let body = Response::GetData(n.data.clone(), n.wire_stat());
                    if watch {
                        self.data_watches.entry(path).or_default().insert(conn);
                    }
                    self.reply(tree, conn, xid, ErrorCode::OK, &body);
                }
                None => self.reply(tree, conn, xid, ErrorCode::NO_NODE, &Response::Empty),
            },
            Request::GetChildren2 { path, watch } => match tree.get(&path) {
                Some(n) => {
                    let children = n.children.iter().map(str::to_string).collect();
                    let body = Response::GetChildren2(children, n.wire_stat());
                    if watch {
                        self.child_watches.entry(path).or_default().insert(conn);
                    }
                    self.reply(tree, conn, xid, ErrorCode::OK, &body);
                }
                None => self.reply(tree, conn, xid, ErrorCode::NO_NODE, &Response::Empty),
            },
            Request::Sync { path } => {
                self.reply(tree, conn, xid, ErrorCode::OK, &Response::Sync(path))
            }
            _ => self.reply(tree, conn, xid, ErrorCode::UNIMPLEMENTED, &Response::Empty),
        }
    }
}

/// The connections in `conns` besides `conn` that carry `session`: a reconnect closes
/// them (`CLIENT_RECONNECT`). `session_of` reads a connection's session.
pub(super) fn other_conns_of<C>(
    conns: &BTreeMap<ConnId, C>,
    conn: ConnId,
    session: i64,
    session_of: impl Fn(&C) -> Option<i64>,
) -> Vec<ConnId> {
    conns
        .iter()
        .filter(|(id, c)| **id != conn && session_of(c) == Some(session))
        .map(|(id, _)| *id)
        .collect()
}
