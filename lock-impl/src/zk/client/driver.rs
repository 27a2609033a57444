//! The ZooKeeper client's connection driver: one task per session that dials,
//! handshakes, sends requests in order, pairs replies, delivers watches, pings, and
//! reconnects or expires as the Java client's `ClientCnxn` does.

use super::*;

/// Why a connection ended.
enum Ended {
    /// Lost: reconnect.
    Lost(String),
    /// The session is over (closed by us, or every handle dropped).
    Done,
}

pub(super) struct Driver {
    pub(super) servers: Vec<(String, u16)>,
    pub(super) dialer: Arc<dyn StreamDialer>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) entropy: Arc<dyn Entropy>,
    pub(super) requested_timeout_ms: u32,
    pub(super) scale: TimeScale,
    pub(super) session_id: i64,
    pub(super) passwd: Vec<u8>,
    pub(super) last_zxid: i64,
    pub(super) negotiated_ms: u32,
    pub(super) state: watch::Sender<SessionState>,
    pub(super) cmds: mpsc::UnboundedReceiver<Cmd>,
    pub(super) pending: VecDeque<Pending>,
    pub(super) data_watches: BTreeMap<String, Vec<oneshot::Sender<WatchedEvent>>>,
    pub(super) child_watches: BTreeMap<String, Vec<oneshot::Sender<WatchedEvent>>>,
    /// The xid of our `closeSession`, once sent.
    pub(super) closing: Option<i32>,
}

impl Driver {
    /// [`Driver::run`], ended early by [`ZkClient::inject_session_expiration`]: the
    /// session then ends as an expired one (`injectSessionExpiration` sets the state to
    /// `CLOSED` and queues the `Expired` event; `cleanup` fails the rest with
    /// `SESSIONEXPIRED`).
    pub(super) async fn run_until_expired(mut self, mut expire: watch::Receiver<bool>) {
        let injected = {
            let run = self.run();
            tokio::pin!(run);
            let injected = async {
                loop {
                    if *expire.borrow_and_update() {
                        return;
                    }
                    if expire.changed().await.is_err() {
                        // Every handle is gone: the driver ends on its own.
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                biased;
                () = &mut run => false,
                () = injected => true,
            }
        };
        if injected {
            self.finish(SessionState::Expired, ZkError::SessionExpired);
        }
    }

    async fn run(&mut self) {
        let n = self.servers.len().max(1);
        let mut index = 0usize;
        let mut last_connected: Option<usize> = None;
        let mut first = true;
        loop {
            if self.servers.is_empty() {
                self.finish(SessionState::Closed, ZkError::Closed);
                return;
            }
            // StaticHostProvider.next(1000): a full turn of the list since the last
            // server we were connected to costs a second (at the world's scale).
            let current = index % n;
            if !first {
                if Some(current) == last_connected || (last_connected.is_none() && current == 0) {
                    self.clock
                        .sleep(self.scale.of(&scale::ZK_HOST_LIST_TURN))
                        .await;
                }
                // startConnect: `Thread.sleep(nextLong(1000))` before any reconnect.
                let below = self.scale.ms_of(&scale::ZK_RECONNECT_JITTER).max(1);
                let jitter = self.entropy.below(below);
                self.clock.sleep(Duration::from_millis(jitter)).await;
            }
            first = false;
            let (host, port) = self.servers[current].clone();
            index += 1;
            match self.handshake(&host, port).await {
                Ok(Some(stream)) => {
                    last_connected = Some(current);
                    let _ = self.state.send(SessionState::Connected {
                        session_id: self.session_id,
                        timeout_ms: self.negotiated_ms,
                        server: format!("{host}:{port}"),
                    });
                    match self.serve(stream).await {
                        Ended::Done => return,
                        Ended::Lost(why) => {
                            self.lost(&why);
                            if self.fail_queued(&why) {
                                return;
                            }
                        }
                    }
                }
                Ok(None) => {
                    self.finish(SessionState::Expired, ZkError::SessionExpired);
                    return;
                }
                Err(why) => {
                    if self.cmds.is_closed() {
                        return;
                    }
                    // SendThread.run: a failed attempt runs `cleanAndNotifyState`, whose
                    // `cleanup` fails every packet queued meanwhile.
                    if self.fail_queued(&why) {
                        return;
                    }
                }
            }
        }
    }

    /// `SendThread.cleanup` for the outgoing queue: every request queued and not yet
    /// written fails with `ConnectionLoss { sent: false }` (`conLossPacket` while the
    /// state is alive). A `closeSession` among them ends the session (the real client
    /// stops reconnecting once closing): `true` then.
    fn fail_queued(&mut self, why: &str) -> bool {
        let mut closed = false;
        while let Ok(Cmd::Request { req, reply, .. }) = self.cmds.try_recv() {
            closed |= matches!(req, Request::CloseSession);
            let _ = reply.send(Err(ZkError::ConnectionLoss {
                sent: false,
                why: format!("not connected ({why})"),
            }));
        }
        if closed {
            self.finish(SessionState::Closed, ZkError::Closed);
        }
        closed
    }

    fn timeouts(&self) -> (Duration, Duration) {
        let n = self.servers.len().max(1) as u64;
        let session = u64::from(if self.negotiated_ms > 0 {
            self.negotiated_ms
        } else {
            self.requested_timeout_ms
        });
        let read = Duration::from_millis((session * 2 / 3).max(1));
        let connect = Duration::from_millis((session / n).max(1));
        (read, connect)
    }

    /// Dials and handshakes: the stream, `None` if the server says the session is
    /// expired, or why it failed.
    async fn handshake(&mut self, host: &str, port: u16) -> Result<Option<ZkStream>, String> {
        let (_, connect_timeout) = self.timeouts();
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout_ms: self.requested_timeout_ms as i32,
            session_id: self.session_id,
            passwd: self.passwd.clone(),
            read_only: Some(false),
        };
        let attempt = async {
            let mut stream = self
                .dialer
                .dial(host, port)
                .await
                .map_err(|e| format!("dial {host}:{port}: {e}"))?;
            stream
                .write_all(&request.to_frame())
                .await
                .map_err(|e| format!("write to {host}:{port}: {e}"))?;
            stream.flush().await.map_err(|e| e.to_string())?;
            let payload = read_frame(&mut stream)
                .await
                .map_err(|e| format!("handshake with {host}:{port}: {e}"))?;
            let resp = ConnectResponse::read(&payload).map_err(|e| e.to_string())?;
            Ok::<_, String>((stream, resp))
        };
        let expiry = self.clock.sleep(connect_timeout);
        tokio::pin!(attempt);
        let (stream, resp) = tokio::select! {
            biased;
            r = &mut attempt => r?,
            () = expiry => return Err(format!(
                "no session from {host}:{port} within {} ms",
                connect_timeout.as_millis()
            )),
        };
        if resp.timeout_ms <= 0 {
            return Ok(None);
        }
        self.negotiated_ms = resp.timeout_ms as u32;
        self.session_id = resp.session_id;
        self.passwd = resp.passwd;
        Ok(Some(stream))
    }

    /// Runs one established connection until it is lost or the session ends.
    async fn serve(&mut self, stream: ZkStream) -> Ended {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let (read_timeout, _) = self.timeouts();
        let ping_after = Duration::from_millis(ping_after_ms(read_timeout.as_millis() as u64));
        let mut inbuf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        let mut last_recv = self.clock.now();
        let mut last_send = self.clock.now();
        loop {
            let mut used = 0;
            loop {
                match split_frame(&inbuf[used..]) {
                    Ok(Some((payload, n))) => {
                        let payload = payload.to_vec();
                        used += n;
                        match self.on_frame(&payload) {
                            Ok(false) => {}
                            Ok(true) => {
                                self.finish(SessionState::Closed, ZkError::Closed);
                                return Ended::Done;
                            }
                            Err(why) => return Ended::Lost(why),
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return Ended::Lost(e.to_string()),
                }
            }
            inbuf.drain(..used);
            let now = self.clock.now();
            let read_deadline = last_recv + read_timeout;
            let ping_at = last_send + ping_after;
            let wake = read_deadline.min(ping_at).saturating_sub(now);
            let timer = self.clock.sleep(wake.max(Duration::from_millis(1)));
            let accepting = self.closing.is_none();
            tokio::select! {
                biased;
                read = rd.read(&mut chunk) => match read {
                    Ok(0) => return Ended::Lost("server closed the connection".into()),
                    Ok(n) => {
                        inbuf.extend_from_slice(&chunk[..n]);
                        last_recv = self.clock.now();
                    }
                    Err(e) => return Ended::Lost(format!("read: {e}")),
                },
                cmd = self.cmds.recv(), if accepting => match cmd {
                    Some(Cmd::Request { xid, req, watch, reply }) => {
                        let frame = req.to_frame(xid);
                        if matches!(req, Request::CloseSession) {
                            self.closing = Some(xid);
                        }
                        self.pending.push_back(Pending {
                            xid,
                            code: req.code(),
                            path: request_path(&req),
                            watch,
                            reply,
                        });
                        if let Err(e) = write_frame(&mut wr, &frame).await {
                            return Ended::Lost(format!("write: {e}"));
                        }
                        last_send = self.clock.now();
                    }
                    None => {
                        // Every handle is gone: close the session politely.
                        let frame = Request::CloseSession.to_frame(i32::MAX);
                        let _ = write_frame(&mut wr, &frame).await;
                        self.finish(SessionState::Closed, ZkError::Closed);
                        return Ended::Done;
                    }
                },
                () = timer => {
                    let now = self.clock.now();
                    if now >= read_deadline {
                        return Ended::Lost(format!(
                            "client session timed out, have not heard from server in {} ms",
                            (now - last_recv).as_millis()
                        ));
                    }
                    if now >= ping_at {
                        if let Err(e) = write_frame(&mut wr, &Request::Ping.to_frame(PING_XID)).await {
                            return Ended::Lost(format!("write ping: {e}"));
                        }
                        last_send = self.clock.now();
                    }
                }
            }
        }
    }

    /// Handles one frame; `Ok(true)` when our `closeSession` was answered.
    fn on_frame(&mut self, payload: &[u8]) -> Result<bool, String> {
        let mut r = proto::Reader::new(payload);
        let header = ReplyHeader::read(&mut r).map_err(|e| e.to_string())?;
        if header.xid == PING_XID {
            return Ok(false);
        }
        if header.xid == proto::NOTIFICATION_XID {
            let event = proto::WatcherEvent::read(&mut r).map_err(|e| e.to_string())?;
            self.notify(event);
            return Ok(false);
        }
        let Some(p) = self.pending.pop_front() else {
            return Err(format!("reply with xid {} but nothing pending", header.xid));
        };
        if p.xid != header.xid {
            let xid = header.xid;
            let _ = p.reply.send(Err(ZkError::ConnectionLoss {
                sent: true,
                why: format!("Xid out of order: got {xid}, expected {}", p.xid),
            }));
            return Err(format!("Xid out of order: got {xid}, expected {}", p.xid));
        }
        if header.zxid > 0 {
            self.last_zxid = header.zxid;
        }
        let body = if header.err == ErrorCode::OK {
            match Response::read(p.code, &mut r) {
                Ok(b) => b,
                Err(e) => {
                    let _ = p.reply.send(Err(ZkError::Protocol(e.to_string())));
                    return Err(e.to_string());
                }
            }
        } else if p.code == op::MULTI && r.remaining() > 0 {
            Response::read(p.code, &mut r).unwrap_or(Response::Empty)
        } else {
            Response::Empty
        };
        // ZKWatchManager registers a watch only if the request succeeded, or for
        // `exists` on a missing node (an exists watch).
        if let Some((kind, tx)) = p.watch {
            let registers = header.err == ErrorCode::OK
                || (p.code == op::EXISTS && header.err == ErrorCode::NO_NODE);
            if registers {
                let table = match kind {
                    WatchKind::Data => &mut self.data_watches,
                    WatchKind::Child => &mut self.child_watches,
                };
                table.entry(p.path.clone()).or_default().push(tx);
            }
        }
        let closed = Some(p.xid) == self.closing;
        if closed {
            // The caller of `close` must see the session closed once it returns.
            let _ = self.state.send(SessionState::Closed);
        }
        let _ = p.reply.send(Ok((header, body)));
        Ok(closed)
    }

    /// Delivers a node event to the watches it triggers (`ZKWatchManager.materialize`).
    fn notify(&mut self, event: proto::WatcherEvent) {
        let mut targets = Vec::new();
        match event.kind {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                targets.extend(self.data_watches.remove(&event.path).unwrap_or_default());
            }
            EventType::NodeDeleted => {
                targets.extend(self.data_watches.remove(&event.path).unwrap_or_default());
                targets.extend(self.child_watches.remove(&event.path).unwrap_or_default());
            }
            EventType::NodeChildrenChanged => {
                targets.extend(self.child_watches.remove(&event.path).unwrap_or_default());
            }
            EventType::None | EventType::Other(_) => {}
        }
        for tx in targets {
            let _ = tx.send(WatchedEvent {
                kind: event.kind,
                state: event.state,
                path: event.path.clone(),
            });
        }
    }

    fn fire_all(&mut self, client_state: i32) {
        let data = std::mem::take(&mut self.data_watches);
        let child = std::mem::take(&mut self.child_watches);
        for tx in data.into_values().chain(child.into_values()).flatten() {
            let _ = tx.send(WatchedEvent {
                kind: EventType::None,
                state: client_state,
                path: String::new(),
            });
        }
    }

    /// The connection broke: fail what was in flight, tell the watches.
    fn lost(&mut self, why: &str) {
        for p in self.pending.drain(..) {
            let _ = p.reply.send(Err(ZkError::ConnectionLoss {
                sent: true,
                why: why.to_string(),
            }));
        }
        self.closing = None;
        self.fire_all(state::DISCONNECTED);
        let _ = self.state.send(SessionState::Connecting);
    }

    /// The session is over: fail everything, now and later.
    fn finish(&mut self, end: SessionState, err: ZkError) {
        for p in self.pending.drain(..) {
            let _ = p.reply.send(Err(err.clone()));
        }
        self.fire_all(match end {
            SessionState::Expired => state::EXPIRED,
            _ => state::CLOSED,
        });
        let _ = self.state.send(end);
        self.cmds.close();
        while let Ok(Cmd::Request { reply, .. }) = self.cmds.try_recv() {
            let _ = reply.send(Err(err.clone()));
        }
    }
}

fn request_path(req: &Request) -> String {
    match req {
        Request::Create { req, .. } => req.path.clone(),
        Request::Delete { path, .. }
        | Request::Exists { path, .. }
        | Request::GetData { path, .. }
        | Request::SetData { path, .. }
        | Request::GetChildren2 { path, .. }
        | Request::Sync { path } => path.clone(),
        _ => String::new(),
    }
}

async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

/// Reads exactly one frame (for the handshake, before the driver's buffered loop).
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = i32::from_be_bytes(len);
    if len < 0 || len as usize > proto::MAX_FRAME_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame length {len} out of range"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf).await?;
    Ok(buf)
}
