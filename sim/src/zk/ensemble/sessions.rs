//! Clients and their sessions: connections, `ConnectRequest`s (new sessions are
//! proposed, reconnects checked), requests queued per connection (writes forwarded
//! to the leader, reads served behind them), touches for the session tracker, and
//! the answers once a write commits (see the parent module's doc).

use super::*;

impl Peer {
    /// Answers the request `origin` names (its commit, or `SyncDone`), then the reads
    /// queued behind it.
    pub(super) fn finish_origin(&mut self, o: Origin, txn: Option<&Txn>) {
        if let Some(TxnBody::CreateSession { timeout_ms }) = txn.map(|t| &t.body) {
            let conn = self
                .conns
                .iter()
                .find(|(_, c)| c.creating.as_ref().is_some_and(|(s, _, _)| *s == o.session))
                .map(|(id, _)| *id);
            let Some(conn) = conn else { return };
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let Some((id, req, _)) = c.creating.take() else {
                return;
            };
            c.session = Some(id);
            c.timeout_ms = *timeout_ms;
            let peer = c.peer.clone();
            self.events.push(ServerEvent::SessionCreated {
                session_id: id,
                peer,
                timeout_ms: *timeout_ms,
            });
            if let Role::Following(f) = &mut self.role {
                f.touched.insert(id, *timeout_ms);
            }
            let resp = ConnectResponse {
                protocol_version: 0,
                timeout_ms: *timeout_ms as i32,
                session_id: id,
                passwd: session_password(id),
                read_only: req.read_only.map(|_| false),
            };
            self.send(conn, resp.to_frame());
            return;
        }
        let conn = self.conns.iter().find(|(_, c)| {
            c.session == Some(o.session) && c.queue.front().is_some_and(|q| q.xid == o.xid)
        });
        let Some((&conn, _)) = conn else { return };
        let Some(q) = self.conns.get_mut(&conn).and_then(|c| c.queue.pop_front()) else {
            return;
        };
        match txn {
            Some(t) => self.reply_write(conn, q.xid, &q.req, t),
            None => self.serve_read(conn, q.xid, q.req),
        }
        self.drain_reads(conn);
    }

    fn drain_reads(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.queue.front().is_none_or(|q| q.waiting) {
                return;
            }
            let Some(q) = c.queue.pop_front() else { return };
            self.serve_read(conn, q.xid, q.req);
        }
    }

    fn reply_write(&mut self, conn: ConnId, xid: i32, req: &Request, txn: &Txn) {
        let stat_of =
            |tree: &DataTree, p: &str| tree.get(p).map(|n| n.wire_stat()).unwrap_or_default();
        if let TxnBody::Error(e) = txn.body {
            return self.reply(conn, xid, e, &Response::Empty);
        }
        match (req, &txn.body) {
            (Request::CloseSession, _) => {
                let frame = proto::reply_frame(
                    ReplyHeader {
                        xid,
                        zxid: txn.zxid,
                        err: ErrorCode::OK,
                    },
                    &Response::Empty,
                );
                self.send(conn, frame);
                self.close_conn(conn);
            }
            (Request::Create { op: code, .. }, TxnBody::Create { path, .. }) => {
                let body = if *code == op::CREATE2 {
                    Response::Create2(path.clone(), stat_of(&self.tree, path))
                } else {
                    Response::Create(path.clone())
                };
                self.reply(conn, xid, ErrorCode::OK, &body);
            }
            (Request::SetData { path, .. }, _) => {
                let body = Response::Stat(stat_of(&self.tree, path));
                self.reply(conn, xid, ErrorCode::OK, &body);
            }
            (Request::Multi(ops), TxnBody::Multi(subs)) => {
                let results = ops
                    .iter()
                    .zip(subs)
                    .map(|(one, sub)| match (one, sub) {
                        (_, TxnBody::Error(e)) => MultiResult::Error(*e),
                        (MultiOp::Create { op: code, .. }, TxnBody::Create { path, .. }) => {
                            if *code == op::CREATE2 {
                                MultiResult::Create2(path.clone(), stat_of(&self.tree, path))
                            } else {
                                MultiResult::Create(path.clone())
                            }
                        }
                        (MultiOp::SetData { path, .. }, _) => {
                            MultiResult::SetData(stat_of(&self.tree, path))
                        }
                        (MultiOp::Check { .. }, _) => MultiResult::Check,
                        _ => MultiResult::Delete,
                    })
                    .collect();
                self.reply(conn, xid, ErrorCode::OK, &Response::Multi(results));
            }
            _ => self.reply(conn, xid, ErrorCode::OK, &Response::Empty),
        }
    }

    /// A new client connection from `peer`.
    pub fn connect(&mut self, peer: impl Into<String>) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                session: None,
                creating: None,
                timeout_ms: 0,
                peer: peer.into(),
                queue: VecDeque::new(),
            },
        );
        id
    }

    /// The connection is gone: its watches go with it; its session stays.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.forget(conn);
    }

    fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.front.send(conn, frame);
    }

    pub(super) fn close_conn(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.close(conn);
    }

    fn reply(&mut self, conn: ConnId, xid: i32, err: ErrorCode, body: &Response) {
        self.front.reply(&self.tree, conn, xid, err, body);
    }

    pub(super) fn fire(&mut self, triggers: &[Trigger]) {
        self.front.fire(triggers);
    }

    /// Records that `session` was heard from: the leader's tracker, or the learner's
    /// table for the next ping. False if the leader knows it gone or closing.
    pub(super) fn touch(&mut self, session: i64, timeout_ms: u32, now_ms: u64) -> bool {
        let tick = self.tick_ms();
        match &mut self.role {
            Role::Leading(l) => l.tracker.touch(tick, session, timeout_ms, now_ms),
            Role::Following(f) => {
                f.touched.insert(session, timeout_ms);
                true
            }
            Role::Looking { .. } => false,
        }
    }

    /// A frame from client connection `conn`.
    pub fn receive(&mut self, conn: ConnId, payload: &[u8], now: ZkNow) {
        if !self.serving() {
            // "ZooKeeperServer not running": the connection is closed.
            return self.close_conn(conn);
        }
        let Some(c) = self.conns.get(&conn).cloned() else {
            return;
        };
        if c.creating.is_some() {
            return;
        }
        let Some(session) = c.session else {
            return self.on_connect(conn, payload, now);
        };
        let Ok((xid, req)) = Request::read(payload) else {
            return self.close_conn(conn);
        };
        if !self.touch(session, c.timeout_ms, now.elapsed_ms) {
            return self.close_conn(conn);
        }
        if matches!(req, Request::Ping) {
            let header = ReplyHeader {
                xid: PING_XID,
                zxid: self.tree.last_zxid(),
                err: ErrorCode::OK,
            };
            return self.send(conn, proto::reply_frame(header, &Response::Empty));
        }
        let origin = Origin {
            sid: self.me,
            session,
            xid,
        };
        let leader = self.leader().unwrap_or(self.me);
        let is_sync = matches!(req, Request::Sync { .. });
        let waiting = req.is_write() || (is_sync && leader != self.me);
        let idle = c.queue.is_empty();
        if let Some(c) = self.conns.get_mut(&conn) {
            c.queue.push_back(Queued {
                xid,
                req: req.clone(),
                waiting,
            });
        }
        if req.is_write() {
            if leader == self.me {
                self.submit(origin, req, now);
            } else {
                self.to(
                    leader,
                    PeerMsg::Request {
                        origin,
                        payload: payload.to_vec(),
                    },
                );
            }
        } else if is_sync && leader != self.me {
            self.to(leader, PeerMsg::SyncRequest { origin });
        } else if idle {
            self.drain_reads(conn);
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
        let (min, max) = self.cfg.zk.timeout_bounds();
        let timeout = (req.timeout_ms.max(0) as u32).clamp(min, max.max(min));
        if req.session_id == 0 {
            let id = self.next_session_id;
            self.next_session_id += 1;
            if let Some(c) = self.conns.get_mut(&conn) {
                c.creating = Some((id, req, timeout));
            }
            let origin = Origin {
                sid: self.me,
                session: id,
                xid: 0,
            };
            match self.leader() {
                Some(l) if l == self.me => {
                    let tick = self.tick_ms();
                    if let Some(lead) = self.leading() {
                        lead.tracker.add(tick, id, timeout, now.elapsed_ms);
                    }
                    self.propose(
                        id,
                        TxnBody::CreateSession {
                            timeout_ms: timeout,
                        },
                        Some(origin),
                        now,
                    );
                }
                Some(l) => self.to(
                    l,
                    PeerMsg::CreateSession {
                        origin,
                        timeout_ms: timeout,
                    },
                ),
                None => self.close_conn(conn),
            }
            return;
        }
        for o in other_conns_of(&self.conns, conn, req.session_id, |c| c.session) {
            self.close_conn(o);
        }
        let valid = req.passwd == session_password(req.session_id)
            && self.sessions.contains_key(&req.session_id)
            && self.touch(req.session_id, timeout, now.elapsed_ms);
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: if valid { timeout as i32 } else { 0 },
            session_id: if valid { req.session_id } else { 0 },
            passwd: if valid {
                session_password(req.session_id)
            } else {
                vec![0; 16]
            },
            read_only: req.read_only.map(|_| false),
        };
        self.send(conn, resp.to_frame());
        if valid {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session = Some(req.session_id);
                c.timeout_ms = timeout;
            }
        } else {
            self.close_conn(conn);
        }
    }

    fn serve_read(&mut self, conn: ConnId, xid: i32, req: Request) {
        self.front.read(&self.tree, conn, xid, req);
    }
}
