//! One ZooKeeper 3.8 server as a state machine without I/O: frames in, frames out.
//!
//! It takes a connection's frames ([`ZkServer::receive`]), the time, and timer ticks
//! ([`ZkServer::tick`]), and queues the frames and closes each connection must see
//! ([`ZkServer::take_output`]). The driver (`super::driver`) runs it over turmoil's
//! TCP in the simulator and over tokio's on a real port for the differential test.
//!
//! Read from ZooKeeper 3.8.0: `ZooKeeperServer.processConnectRequest` (timeout clamped
//! to `[minSessionTimeout, maxSessionTimeout]`, by default `[2, 20] × tickTime`; a
//! client that saw a newer zxid is refused; a reconnect closes the session's other
//! connection and checks the password; an invalid session gets timeout 0, id 0 and 16
//! zero bytes, then the close), `generatePasswd`, `PrepRequestProcessor` (each write's
//! checks and their order, the sequential suffix `%010d` of the parent's `cversion`, a
//! failed write still taking a zxid as an error txn, `multi` all-or-nothing with `OK`
//! before and `RUNTIMEINCONSISTENCY` after the failing op), `FinalRequestProcessor`
//! (the reply header's zxid is the last processed one; errors carry no body; `exists`
//! leaves a watch even on a missing node), `DataTree` (see [`super::tree`]),
//! `WatchManager` (one-shot, per connection, a connection told once per trigger),
//! `SessionTrackerImpl` and `ExpiryQueue` (a session expires in the tick-aligned
//! bucket `(⌊(now + timeout) / tick⌋ + 1) × tick`, re-bucketed by every packet; the
//! tracker wakes at every bucket boundary; expiry is a `closeSession` txn and closes
//! the session's connection), `NIOServerCnxn` (notifications have xid -1, zxid -1).
//!
//! Simplifications, stated: one server (no quorum, no leader: the ensemble is
//! [`super::ensemble`], which prepares writes with the same `prep`); writes are applied as they
//! arrive (ZooKeeper's pipeline gives the same order for one server); sessions of one
//! expiry bucket expire in id order (ZooKeeper: a hash set's order); no ACL checks (any
//! non-empty ACL is accepted, `INVALIDACL` for an empty one), no auth, quotas,
//! containers or TTL nodes (`UNIMPLEMENTED`), `SetWatches` or persistent watches
//! (`UNIMPLEMENTED`), no read-only mode, no throttling; ephemeral nodes of one
//! expiring session are deleted in path order (ZooKeeper: a hash set's order).

use std::collections::{BTreeMap, BTreeSet};

use lock_impl::zk::proto::{
    self, ConnectRequest, ConnectResponse, ErrorCode, MultiOp, MultiResult, PING_XID, ReplyHeader,
    Request, Response, create_mode, op,
};

pub use super::front::{ConnId, Out};
use super::front::{Front, other_conns_of};
use super::java::session_password;
use super::tree::{DataTree, Trigger, Txn, TxnBody, parent_of, validate_path};

/// Server settings (`zoo.cfg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkConfig {
    /// `tickTime`, ms.
    pub tick_time_ms: u32,
    /// `minSessionTimeout`, ms (`None`: 2 × tickTime).
    pub min_session_timeout_ms: Option<u32>,
    /// `maxSessionTimeout`, ms (`None`: 20 × tickTime).
    pub max_session_timeout_ms: Option<u32>,
    /// The id in the high byte of session ids (a standalone server uses 1).
    pub server_id: i64,
}

impl Default for ZkConfig {
    fn default() -> Self {
        Self {
            tick_time_ms: 2000,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            server_id: 1,
        }
    }
}

impl ZkConfig {
    /// The session timeouts a client may get.
    pub fn timeout_bounds(&self) -> (u32, u32) {
        (
            self.min_session_timeout_ms.unwrap_or(2 * self.tick_time_ms),
            self.max_session_timeout_ms
                .unwrap_or(20 * self.tick_time_ms),
        )
    }
}

/// The server's two clocks at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkNow {
    /// Monotonic ms (`Time.currentElapsedTime`): sessions expire by it.
    pub elapsed_ms: u64,
    /// Wall clock, unix ms (`Time.currentWallTime`): ctime and mtime.
    pub wall_ms: i64,
}

#[derive(Debug, Clone)]
struct Session {
    timeout_ms: u32,
    /// Its expiry bucket.
    expires_at: u64,
    closing: bool,
}

#[derive(Debug, Clone)]
struct Conn {
    session: Option<i64>,
    timeout_ms: u32,
    /// The peer's name, for the model's own record.
    peer: String,
}

/// An event the model records about itself (sessions opened and ended), for the
/// history and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A session was created.
    SessionCreated {
        /// Its id.
        session_id: i64,
        /// The peer of the connection that created it.
        peer: String,
        /// Its negotiated timeout.
        timeout_ms: u32,
    },
    /// A session expired (no packet within its timeout).
    SessionExpired {
        /// Its id.
        session_id: i64,
        /// The ephemeral nodes deleted with it.
        ephemerals: Vec<String>,
    },
    /// A session was closed by its client.
    SessionClosed {
        /// Its id.
        session_id: i64,
    },
}

/// One ZooKeeper server (see the module doc).
#[derive(Debug)]
pub struct ZkServer {
    config: ZkConfig,
    tree: DataTree,
    sessions: BTreeMap<i64, Session>,
    buckets: BTreeMap<u64, BTreeSet<i64>>,
    next_expiration_ms: u64,
    next_session_id: i64,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    front: Front,
    log: Vec<Txn>,
    events: Vec<ServerEvent>,
}

impl ZkServer {
    /// A fresh server started at `now`.
    pub fn new(config: ZkConfig, now: ZkNow) -> Self {
        let tick = u64::from(config.tick_time_ms.max(1));
        // SessionTrackerImpl.initializeNextSessionId.
        let mut next_session_id =
            (((now.elapsed_ms as i64) << 24) as u64 >> 8) as i64 | (config.server_id << 56);
        if next_session_id == i64::MIN {
            next_session_id += 1;
        }
        Self {
            config,
            tree: DataTree::new(),
            sessions: BTreeMap::new(),
            buckets: BTreeMap::new(),
            next_expiration_ms: (now.elapsed_ms / tick + 1) * tick,
            next_session_id,
            conns: BTreeMap::new(),
            next_conn: 1,
            front: Front::default(),
            log: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The data tree.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// Every txn applied, in zxid order: what an ensemble's followers would receive.
    pub fn log(&self) -> &[Txn] {
        &self.log
    }

    /// The live sessions' ids.
    pub fn sessions(&self) -> Vec<i64> {
        self.sessions.keys().copied().collect()
    }

    /// Takes the events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    /// When the session tracker next wakes (monotonic ms): the next bucket boundary.
    pub fn next_tick_ms(&self) -> u64 {
        self.next_expiration_ms
    }

    /// A new connection from `peer`.
    pub fn connect(&mut self, peer: impl Into<String>) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                session: None,
                timeout_ms: 0,
                peer: peer.into(),
            },
        );
        id
    }

    /// The connection is gone (peer closed, or we closed it): its watches go with it;
    /// its session stays until it expires.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.forget(conn);
    }

    /// Takes everything queued for the connections.
    pub fn take_output(&mut self) -> Vec<(ConnId, Out)> {
        self.front.take_output()
    }

    fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.front.send(conn, frame);
    }

    fn close_conn(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.close(conn);
    }

    fn bucket(&self, now_ms: u64, timeout_ms: u32) -> u64 {
        let tick = u64::from(self.config.tick_time_ms.max(1));
        ((now_ms + u64::from(timeout_ms)) / tick + 1) * tick
    }

    /// `SessionTrackerImpl.touchSession`: false if the session is gone or closing.
    fn touch(&mut self, session_id: i64, timeout_ms: u32, now_ms: u64) -> bool {
        let bucket = self.bucket(now_ms, timeout_ms);
        let Some(s) = self.sessions.get_mut(&session_id) else {
            return false;
        };
        if s.closing {
            return false;
        }
        let old = s.expires_at;
        s.expires_at = bucket;
        if old != bucket {
            if let Some(set) = self.buckets.get_mut(&old) {
                set.remove(&session_id);
                if set.is_empty() {
                    self.buckets.remove(&old);
                }
            }
            self.buckets.entry(bucket).or_default().insert(session_id);
        }
        true
    }

    /// The session tracker's wake-up: expires every bucket whose time has come.
    pub fn tick(&mut self, now: ZkNow) {
        let tick = u64::from(self.config.tick_time_ms.max(1));
        while now.elapsed_ms >= self.next_expiration_ms {
            let due = self.next_expiration_ms;
            self.next_expiration_ms += tick;
            let Some(expired) = self.buckets.remove(&due) else {
                continue;
            };
            for session_id in expired {
                if let Some(s) = self.sessions.get_mut(&session_id) {
                    s.closing = true;
                }
                let ephemerals = self.tree.ephemerals(session_id);
                self.end_session(session_id, now);
                self.events.push(ServerEvent::SessionExpired {
                    session_id,
                    ephemerals,
                });
            }
        }
    }

    /// A `closeSession` txn: ephemerals deleted (watches fire), session removed, its
    /// connections closed. Returns the txn's zxid.
    fn end_session(&mut self, session_id: i64, now: ZkNow) -> i64 {
        let zxid = self.commit(session_id, now, TxnBody::CloseSession);
        if let Some(s) = self.sessions.remove(&session_id)
            && let Some(set) = self.buckets.get_mut(&s.expires_at)
        {
            set.remove(&session_id);
            if set.is_empty() {
                self.buckets.remove(&s.expires_at);
            }
        }
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.session == Some(session_id))
            .map(|(id, _)| *id)
            .collect();
        for c in conns {
            self.close_conn(c);
        }
        zxid
    }

    /// Logs and applies one txn with the next zxid, and delivers its watch events.
    fn commit(&mut self, session_id: i64, now: ZkNow, body: TxnBody) -> i64 {
        let txn = Txn {
            zxid: self.tree.last_zxid() + 1,
            time_ms: now.wall_ms,
            session_id,
            body,
        };
        let triggers = self.tree.apply(&txn);
        self.fire(&triggers);
        let zxid = txn.zxid;
        self.log.push(txn);
        zxid
    }

    fn fire(&mut self, triggers: &[Trigger]) {
        self.front.fire(triggers);
    }

    /// Handles one frame from `conn` at `now`.
    pub fn receive(&mut self, conn: ConnId, payload: &[u8], now: ZkNow) {
        let Some(c) = self.conns.get(&conn).cloned() else {
            return;
        };
        match c.session {
            None => self.on_connect(conn, payload, now),
            Some(session_id) => {
                let (xid, req) = match Request::read(payload) {
                    Ok(r) => r,
                    // A request ZooKeeper cannot deserialize closes the connection.
                    Err(_) => return self.close_conn(conn),
                };
                // ZooKeeperServer.submitRequest touches the session first; a session
                // that is gone or closing closes the connection.
                if !self.touch(session_id, c.timeout_ms, now.elapsed_ms) {
                    return self.close_conn(conn);
                }
                self.on_request(conn, session_id, xid, req, now);
            }
        }
    }

    fn on_connect(&mut self, conn: ConnId, payload: &[u8], now: ZkNow) {
        let Ok(req) = ConnectRequest::read(payload) else {
            return self.close_conn(conn);
        };
        if req.last_zxid_seen > self.tree.last_zxid() {
            // "Refusing session request for client ... as it has seen zxid ..."
            return self.close_conn(conn);
        }
        let (min, max) = self.config.timeout_bounds();
        let timeout = (req.timeout_ms.max(0) as u32).clamp(min, max.max(min));
        let respond = |this: &mut Self, valid: Option<i64>| {
            let resp = match valid {
                Some(id) => ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: timeout as i32,
                    session_id: id,
                    passwd: session_password(id),
                    read_only: req.read_only.map(|_| false),
                },
                None => ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: 0,
                    session_id: 0,
                    passwd: vec![0; 16],
                    read_only: req.read_only.map(|_| false),
                },
            };
            this.send(conn, resp.to_frame());
        };
        if req.session_id == 0 {
            let id = self.next_session_id;
            self.next_session_id += 1;
            self.sessions.insert(
                id,
                Session {
                    timeout_ms: timeout,
                    expires_at: 0,
                    closing: false,
                },
            );
            self.touch(id, timeout, now.elapsed_ms);
            self.commit(
                id,
                now,
                TxnBody::CreateSession {
                    timeout_ms: timeout,
                },
            );
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session = Some(id);
                c.timeout_ms = timeout;
            }
            let peer = self
                .conns
                .get(&conn)
                .map(|c| c.peer.clone())
                .unwrap_or_default();
            self.events.push(ServerEvent::SessionCreated {
                session_id: id,
                peer,
                timeout_ms: timeout,
            });
            respond(self, Some(id));
            return;
        }
        // A reconnect: the session's other connection is closed (CLIENT_RECONNECT).
        for o in other_conns_of(&self.conns, conn, req.session_id, |c| c.session) {
            self.close_conn(o);
        }
        let valid = req.passwd == session_password(req.session_id)
            && self.touch(req.session_id, timeout, now.elapsed_ms);
        if valid {
            if let Some(s) = self.sessions.get_mut(&req.session_id) {
                s.timeout_ms = timeout;
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session = Some(req.session_id);
                c.timeout_ms = timeout;
            }
            respond(self, Some(req.session_id));
        } else {
            respond(self, None);
            self.close_conn(conn);
        }
    }

    fn reply(&mut self, conn: ConnId, xid: i32, err: ErrorCode, body: &Response) {
        self.front.reply(&self.tree, conn, xid, err, body);
    }

    fn session_ok(&self, session_id: i64) -> bool {
        self.sessions.get(&session_id).is_some_and(|s| !s.closing)
    }

    fn on_request(&mut self, conn: ConnId, session_id: i64, xid: i32, req: Request, now: ZkNow) {
        if matches!(req, Request::Ping) {
            let header = ReplyHeader {
                xid: PING_XID,
                zxid: self.tree.last_zxid(),
                err: ErrorCode::OK,
            };
            return self.send(conn, proto::reply_frame(header, &Response::Empty));
        }
        if !self.session_ok(session_id) {
            return self.reply(conn, xid, ErrorCode::SESSION_EXPIRED, &Response::Empty);
        }
        match req {
            Request::Ping => {}
            Request::CloseSession => {
                if let Some(s) = self.sessions.get_mut(&session_id) {
                    s.closing = true;
                }
                // The reply goes out before the close (FinalRequestProcessor, then
                // sendCloseSession); end_session closes the connection after it.
                let zxid = self.tree.last_zxid() + 1;
                let header = ReplyHeader {
                    xid,
                    zxid,
                    err: ErrorCode::OK,
                };
                let frame = proto::reply_frame(header, &Response::Empty);
                // Watches of other connections fire during the txn; ours gets the
                // reply, then the close.
                self.end_session_with_reply(session_id, now, conn, frame);
                self.events.push(ServerEvent::SessionClosed { session_id });
            }
            read @ (Request::Exists { .. }
            | Request::GetData { .. }
            | Request::GetChildren2 { .. }
            | Request::Sync { .. }) => self.front.read(&self.tree, conn, xid, read),
            Request::Create { op: code, req } => {
                let single = MultiOp::Create { op: code, req };
                let (body, result) = match prep(&self.tree, &single, session_id) {
                    Ok((body, result)) => (body, Ok(result)),
                    Err(e) => (TxnBody::Error(e), Err(e)),
                };
                self.commit(session_id, now, body);
                self.finish_single(conn, xid, result);
            }
            Request::Delete { path, version } => self.write_single(
                conn,
                xid,
                session_id,
                now,
                MultiOp::Delete { path, version },
            ),
            Request::SetData {
                path,
                data,
                version,
            } => self.write_single(
                conn,
                xid,
                session_id,
                now,
                MultiOp::SetData {
                    path,
                    data,
                    version,
                },
            ),
            Request::Multi(ops) => {
                let (body, results) = prep_multi(&self.tree, &ops, session_id, now.wall_ms);
                self.commit(session_id, now, body);
                self.reply(conn, xid, ErrorCode::OK, &Response::Multi(results));
            }
            Request::Other(_) => {
                self.reply(conn, xid, ErrorCode::UNIMPLEMENTED, &Response::Empty);
            }
        }
    }

    fn end_session_with_reply(
        &mut self,
        session_id: i64,
        now: ZkNow,
        conn: ConnId,
        frame: Vec<u8>,
    ) {
        // Detach our connection so end_session does not close it before the reply.
        let ours = self.conns.get_mut(&conn).and_then(|c| c.session.take());
        self.end_session(session_id, now);
        if ours.is_some() {
            self.send(conn, frame);
            self.close_conn(conn);
        }
    }

    fn write_single(&mut self, conn: ConnId, xid: i32, session_id: i64, now: ZkNow, one: MultiOp) {
        let (body, result) = match prep(&self.tree, &one, session_id) {
            Ok((body, result)) => (body, Ok(result)),
            Err(e) => (TxnBody::Error(e), Err(e)),
        };
        self.commit(session_id, now, body);
        if let (Ok(MultiResult::SetData(_)), MultiOp::SetData { path, .. }) = (&result, &one) {
            let stat = self
                .tree
                .get(path)
                .map(|n| n.wire_stat())
                .unwrap_or_default();
            return self.reply(conn, xid, ErrorCode::OK, &Response::Stat(stat));
        }
        self.finish_single(conn, xid, result);
    }

    fn finish_single(&mut self, conn: ConnId, xid: i32, result: Result<MultiResult, ErrorCode>) {
        // The Stat of create2 and setData is read after the txn applied.
        let body = match result {
            Err(e) => return self.reply(conn, xid, e, &Response::Empty),
            Ok(MultiResult::Create(p)) => Response::Create(p),
            Ok(MultiResult::Create2(p, _)) => {
                let stat = self.tree.get(&p).map(|n| n.wire_stat()).unwrap_or_default();
                Response::Create2(p, stat)
            }
            Ok(MultiResult::SetData(_)) | Ok(MultiResult::Check) | Ok(MultiResult::Delete) => {
                Response::Empty
            }
            Ok(MultiResult::Error(e)) => return self.reply(conn, xid, e, &Response::Empty),
        };
        self.reply(conn, xid, ErrorCode::OK, &body);
    }
}

fn check_version(current: i32, expected: i32) -> Result<(), ErrorCode> {
    if expected != -1 && expected != current {
        Err(ErrorCode::BAD_VERSION)
    } else {
        Ok(())
    }
}

/// `PrepRequestProcessor.pRequest2Txn` for one write: its txn and its result, or the
/// error, checked in ZooKeeper's order against `tree`.
pub(crate) fn prep(
    tree: &DataTree,
    one: &MultiOp,
    session_id: i64,
) -> Result<(TxnBody, MultiResult), ErrorCode> {
    match one {
        MultiOp::Create { op: code, req } => {
            let (ephemeral, sequential) = match req.flags {
                create_mode::PERSISTENT => (false, false),
                create_mode::EPHEMERAL => (true, false),
                create_mode::PERSISTENT_SEQUENTIAL => (false, true),
                create_mode::EPHEMERAL_SEQUENTIAL => (true, true),
                4..=6 => return Err(ErrorCode::UNIMPLEMENTED),
                _ => return Err(ErrorCode::BAD_ARGUMENTS),
            };
            // validatePathForCreate.
            let Some(last_slash) = req.path.rfind('/') else {
                return Err(ErrorCode::BAD_ARGUMENTS);
            };
            if req.path.contains('\0') {
                return Err(ErrorCode::BAD_ARGUMENTS);
            }
            // fixupACL.
            if req.acl.is_empty() {
                return Err(ErrorCode::INVALID_ACL);
            }
            let parent_path = &req.path[..last_slash];
            let Some(parent) = tree.get(parent_path) else {
                return Err(ErrorCode::NO_NODE);
            };
            let mut path = req.path.clone();
            if sequential {
                path.push_str(&format!("{:010}", parent.stat.cversion));
            }
            validate_path(&path)?;
            if tree.get(&path).is_some() {
                return Err(ErrorCode::NODE_EXISTS);
            }
            if parent.stat.ephemeral_owner != 0 {
                return Err(ErrorCode::NO_CHILDREN_FOR_EPHEMERALS);
            }
            let body = TxnBody::Create {
                path: path.clone(),
                data: req.data.clone(),
                ephemeral_owner: if ephemeral { session_id } else { 0 },
                parent_cversion: parent.stat.cversion + 1,
            };
            let result = if *code == op::CREATE2 {
                MultiResult::Create2(path, Default::default())
            } else {
                MultiResult::Create(path)
            };
            Ok((body, result))
        }
        MultiOp::Delete { path, version } => {
            validate_path(path)?;
            if tree.get(parent_of(path)).is_none() {
                return Err(ErrorCode::NO_NODE);
            }
            let Some(node) = tree.get(path) else {
                return Err(ErrorCode::NO_NODE);
            };
            check_version(node.stat.version, *version)?;
            if !node.children.is_empty() {
                return Err(ErrorCode::NOT_EMPTY);
            }
            Ok((TxnBody::Delete { path: path.clone() }, MultiResult::Delete))
        }
        MultiOp::SetData {
            path,
            data,
            version,
        } => {
            validate_path(path)?;
            let Some(node) = tree.get(path) else {
                return Err(ErrorCode::NO_NODE);
            };
            check_version(node.stat.version, *version)?;
            let new_version = node.stat.version.wrapping_add(1);
            Ok((
                TxnBody::SetData {
                    path: path.clone(),
                    data: data.clone(),
                    version: new_version,
                },
                MultiResult::SetData(Default::default()),
            ))
        }
        MultiOp::Check { path, version } => {
            validate_path(path)?;
            let Some(node) = tree.get(path) else {
                return Err(ErrorCode::NO_NODE);
            };
            check_version(node.stat.version, *version)?;
            Ok((TxnBody::Check { path: path.clone() }, MultiResult::Check))
        }
    }
}

/// A `multi`: each op checked against the tree as the ops before it left it; all
/// applied, or none.
pub(crate) fn prep_multi(
    tree: &DataTree,
    ops: &[MultiOp],
    session_id: i64,
    time_ms: i64,
) -> (TxnBody, Vec<MultiResult>) {
    let mut scratch = tree.clone();
    let mut subs = Vec::new();
    let mut results = Vec::new();
    let mut failed_at = None;
    for (i, one) in ops.iter().enumerate() {
        match prep(&scratch, one, session_id) {
            Ok((body, result)) => {
                scratch.apply(&Txn {
                    zxid: tree.last_zxid() + 1,
                    time_ms,
                    session_id,
                    body: body.clone(),
                });
                subs.push(body);
                results.push(result);
            }
            Err(e) => {
                failed_at = Some((i, e));
                break;
            }
        }
    }
    match failed_at {
        None => {
            // Stats as the ops left them.
            let results = results
                .into_iter()
                .map(|r| match r {
                    MultiResult::Create2(p, _) => {
                        let s = scratch.get(&p).map(|n| n.wire_stat()).unwrap_or_default();
                        MultiResult::Create2(p, s)
                    }
                    other => other,
                })
                .collect::<Vec<_>>();
            let mut results = results;
            // setData results carry the node's Stat after the whole multi.
            for (r, one) in results.iter_mut().zip(ops) {
                if let (MultiResult::SetData(s), MultiOp::SetData { path, .. }) = (&mut *r, one) {
                    *s = scratch.get(path).map(|n| n.wire_stat()).unwrap_or_default();
                }
            }
            (TxnBody::Multi(subs), results)
        }
        Some((at, e)) => {
            let errors: Vec<ErrorCode> = (0..ops.len())
                .map(|i| match i.cmp(&at) {
                    std::cmp::Ordering::Less => ErrorCode::OK,
                    std::cmp::Ordering::Equal => e,
                    std::cmp::Ordering::Greater => ErrorCode::RUNTIME_INCONSISTENCY,
                })
                .collect();
            (
                TxnBody::Multi(errors.iter().map(|e| TxnBody::Error(*e)).collect()),
                errors.into_iter().map(MultiResult::Error).collect(),
            )
        }
    }
}
