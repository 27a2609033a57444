//! A ZooKeeper client over any byte stream: the session handshake, pings, requests
//! matched to replies by xid, one-shot watches, connection loss reported as such, and
//! reconnection to the next server of the list within the session, as the Java client
//! (`ClientCnxn` 3.8) does it.
//!
//! Why not a published crate: `zookeeper` (0.8), `zookeeper-async`, `tokio-zookeeper`
//! and `zookeeper-client` all dial with `std::net`/`tokio::net` themselves (from
//! addresses resolved by the OS), run their pings and timeouts on the machine's or
//! tokio's clock rather than one handed in, and spawn their I/O threads or tasks
//! themselves. locksim must give a client turmoil's simulated streams, the host's
//! [`Clock`] (so a paused or drifting client pings late) and a spawner under the
//! client's pause gate; none of them takes those, so this client is written against
//! [`StreamDialer`] and [`Clock`] instead.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::proto::{
    self, Acl, ConnectRequest, ConnectResponse, CreateRequest, ErrorCode, EventType, MultiOp,
    MultiResult, PING_XID, ReplyHeader, Request, Response, Stat, op, split_frame, state,
};
use crate::scale::{self, TimeScale};
use crate::{Clock, Entropy, Task};

mod driver;

use driver::Driver;

/// A byte stream to one server.
pub trait ZkIo: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> ZkIo for T {}

/// A boxed stream.
pub type ZkStream = Box<dyn ZkIo>;

/// A boxed dial.
pub type StreamDial<'a> = Pin<Box<dyn Future<Output = io::Result<ZkStream>> + Send + 'a>>;

/// Dials raw byte streams and runs connection drivers: what a ZooKeeper client needs
/// from its environment. Production: [`TokioDialer`]; the simulator: turmoil TCP under
/// the client's pause gate, with the driver spawned under the same gate.
pub trait StreamDialer: Send + Sync + 'static {
    /// A stream to `host:port`.
    fn dial(&self, host: &str, port: u16) -> StreamDial<'_>;
    /// Runs a connection driver in the background (it must freeze and die with the
    /// client, so the environment decides how).
    fn spawn(&self, task: Task);
}

/// `tokio::net::TcpStream` and `tokio::spawn`: the production dialer.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioDialer;

impl StreamDialer for TokioDialer {
    fn dial(&self, host: &str, port: u16) -> StreamDial<'_> {
        let host = host.to_string();
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            let _ = s.set_nodelay(true);
            Ok(Box::new(s) as ZkStream)
        })
    }

    fn spawn(&self, task: Task) {
        tokio::spawn(task);
    }
}

/// Where a ZooKeeper client connects: the ensemble's servers, the dialer, and the
/// session timeout it asks for.
#[derive(Clone)]
pub struct ZkEnsemble {
    /// `(host, port)` of every server (the connect string).
    pub servers: Vec<(String, u16)>,
    /// How to reach them.
    pub dialer: Arc<dyn StreamDialer>,
    /// The session timeout asked for, ms (the server clamps it to
    /// `[2 × tickTime, 20 × tickTime]`).
    pub session_timeout_ms: u32,
    /// The world's clock scale for the client's own sleeps (the reconnect pause and the
    /// pause after a turn of the server list: [`scale::ZK_RECONNECT_JITTER`],
    /// [`scale::ZK_HOST_LIST_TURN`]). Production: [`TimeScale::REAL`]; a design sets
    /// its [`Deps::scale`](crate::Deps::scale) here.
    pub scale: TimeScale,
}

impl std::fmt::Debug for ZkEnsemble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkEnsemble")
            .field("servers", &self.servers)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .field("scale", &self.scale)
            .finish_non_exhaustive()
    }
}

impl ZkEnsemble {
    /// The connect string (`host:port,host:port`), for messages.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// What went wrong with a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkError {
    /// The server answered with an error code.
    #[error("server replied {0}")]
    Server(ErrorCode),
    /// The connection was lost (`sent`: after the request went out, so its outcome is
    /// unknown) or there was none (`sent: false`: nothing was sent).
    #[error("connection loss ({why}); request sent: {sent}")]
    ConnectionLoss {
        /// Whether the request had been written to a server.
        sent: bool,
        /// What happened.
        why: String,
    },
    /// The session expired: every ephemeral node it owned is gone.
    #[error("session expired")]
    SessionExpired,
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// The server sent something this client cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ZkError {
    /// The `KeeperException.Code` this error stands for.
    pub fn code(&self) -> ErrorCode {
        match self {
            ZkError::Server(c) => *c,
            ZkError::ConnectionLoss { .. } => ErrorCode::CONNECTION_LOSS,
            ZkError::SessionExpired => ErrorCode::SESSION_EXPIRED,
            ZkError::Closed => ErrorCode::SESSION_EXPIRED,
            ZkError::Protocol(_) => ErrorCode::MARSHALLING_ERROR,
        }
    }

    /// Whether the request may have taken effect without the client learning it.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            ZkError::ConnectionLoss { sent: true, .. } | ZkError::Protocol(_)
        )
    }
}

/// The session as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// Dialling or handshaking (first connection or after a loss).
    Connecting,
    /// Connected to `server` with the negotiated timeout.
    Connected {
        /// The session id.
        session_id: i64,
        /// The negotiated timeout, ms.
        timeout_ms: u32,
        /// `host:port` of the server.
        server: String,
    },
    /// A server said the session is gone.
    Expired,
    /// Closed by the client.
    Closed,
}

/// A watch event as delivered to the caller: a node event (`kind` other than
/// [`EventType::None`], `state` [`state::SYNC_CONNECTED`]) or a connection state
/// change (`kind` [`EventType::None`], `state` [`state::DISCONNECTED`],
/// [`state::EXPIRED`] or [`state::CLOSED`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened.
    pub kind: EventType,
    /// The client state with it.
    pub state: i32,
    /// The node (empty for state changes).
    pub path: String,
}

/// A one-shot watch: resolves with the first event for its node, or the connection
/// state change that ended it.
pub type Watch = oneshot::Receiver<WatchedEvent>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchKind {
    /// `exists` and `getData` watches: created, deleted, data changed.
    Data,
    /// `getChildren` watches: children changed, deleted.
    Child,
}

type ReplyTx = oneshot::Sender<Result<(ReplyHeader, Response), ZkError>>;

enum Cmd {
    Request {
        xid: i32,
        req: Request,
        watch: Option<(WatchKind, oneshot::Sender<WatchedEvent>)>,
        reply: ReplyTx,
    },
}

struct Pending {
    xid: i32,
    code: i32,
    path: String,
    watch: Option<(WatchKind, oneshot::Sender<WatchedEvent>)>,
    reply: ReplyTx,
}

/// A ZooKeeper session: cheap to clone (clones share it).
///
/// What it does, and where it follows `ClientCnxn`:
/// - one task (the driver, started by [`StreamDialer::spawn`]) owns the connection;
///   requests go to it over a channel and are answered in order: a reply whose xid is
///   not the oldest pending request's breaks the connection ("Xid out of order");
/// - after connecting, the read timeout is 2/3 of the negotiated session timeout and
///   the connect timeout the session timeout divided by the number of servers; a ping
///   (xid -2) goes out when nothing was sent for half the read timeout (less one
///   second once idle for more than a second, as `ClientCnxn` computes it);
/// - on connection loss every pending request fails with [`ZkError::ConnectionLoss`]
///   (`sent: true`: its outcome is unknown), every watch fires with a `Disconnected`
///   state event, and the driver dials the next server, after a random pause below a
///   second (`startConnect`, [`scale::ZK_RECONNECT_JITTER`]) and a full second once it
///   comes back to the server it was last connected to (`StaticHostProvider.next(1000)`,
///   [`scale::ZK_HOST_LIST_TURN`]), both at the ensemble's [`ZkEnsemble::scale`],
///   resending the session id, password and last zxid seen; a server answering with
///   timeout 0 ends the session ([`ZkError::SessionExpired`], watches fire with
///   `Expired`);
/// - a request made while there is no connection waits in the outgoing queue
///   (`ClientCnxn.queuePacket` adds it to `outgoingQueue` while the state is alive) and
///   goes out once the next connection's handshake is done; if that connection attempt
///   fails, or the connection is lost before the request was written, it fails with
///   `ConnectionLoss { sent: false }` (`SendThread.cleanup` fails every queued packet,
///   `conLossPacket`: `CONNECTIONLOSS` while the state is alive); once the session
///   expired or was closed it fails with [`ZkError::SessionExpired`] /
///   [`ZkError::Closed`] (`conLossPacket` in state `CLOSED`: `SESSIONEXPIRED`);
/// - [`ZkClient::inject_session_expiration`] ends the session on the client's side
///   only, as `ZooKeeper.getTestable().injectSessionExpiration()` does (Curator's
///   `ConnectionStateManager` calls it after a session timeout spent disconnected).
///
/// Read from ZooKeeper release-3.8.0-1: `ClientCnxn` (`queuePacket`, `SendThread.run`,
/// `startConnect`, `cleanup`, `conLossPacket`, `onConnected`), `ClientCnxnSocketNIO`,
/// `StaticHostProvider.next`, `ZooKeeperTestable.injectSessionExpiration`.
///
/// Simplifications (stated, not hidden): watches are not reset with `SetWatches` after
/// a reconnect: each fires once with the `Disconnected` event instead, and a recipe
/// re-reads (Curator's lock loop does exactly that on any event); a `closeSession`
/// queued while disconnected waits for the next connection attempt like any request
/// (the real client stops reconnecting at once); no authentication, ACLs other than
/// `world:anyone`, read-only mode, chroot or SASL.
#[derive(Clone)]
pub struct ZkClient {
    cmd: mpsc::UnboundedSender<Cmd>,
    state: watch::Receiver<SessionState>,
    expire: Arc<watch::Sender<bool>>,
    xid: Arc<AtomicI32>,
    server_list: Arc<str>,
}

impl std::fmt::Debug for ZkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkClient")
            .field("servers", &self.server_list)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

/// The idle-send time after which `ClientCnxn` sends a ping, for a read timeout:
/// `readTimeout / 2 - idleSend - (idleSend > 1000 ? 1000 : 0) <= 0`.
pub fn ping_after_ms(read_timeout_ms: u64) -> u64 {
    let half = read_timeout_ms / 2;
    if half > 2000 {
        half - 1000
    } else if half > 1000 {
        1001
    } else {
        half
    }
}

impl ZkClient {
    /// Starts a session with `ensemble` and waits until it is established, or fails
    /// after `connect_within` on `clock` (the driver keeps trying in the background
    /// only while a handle is alive).
    pub async fn connect(
        ensemble: &ZkEnsemble,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        connect_within: Duration,
    ) -> Result<ZkClient, ZkError> {
        let client = Self::start(ensemble, clock.clone(), entropy);
        let mut state = client.state.clone();
        let wait = async {
            loop {
                match &*state.borrow_and_update() {
                    SessionState::Connected { .. } => return Ok(()),
                    SessionState::Expired => return Err(ZkError::SessionExpired),
                    SessionState::Closed => return Err(ZkError::Closed),
                    SessionState::Connecting => {}
                }
                if state.changed().await.is_err() {
                    return Err(ZkError::Closed);
                }
            }
        };
        let expiry = clock.sleep(connect_within);
        tokio::pin!(wait);
        tokio::select! {
            biased;
            r = &mut wait => r.map(|()| client),
            () = expiry => Err(ZkError::ConnectionLoss {
                sent: false,
                why: format!(
                    "no session with {} within {} ms",
                    ensemble.connect_string(),
                    connect_within.as_millis()
                ),
            }),
        }
    }

    /// Starts the driver without waiting for the session.
    pub fn start(ensemble: &ZkEnsemble, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Self {
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (state_tx, state_rx) = watch::channel(SessionState::Connecting);
        let (expire_tx, expire_rx) = watch::channel(false);
        // StaticHostProvider shuffles the connect string once; so do we, from the
        // client's entropy.
        let mut servers = ensemble.servers.clone();
        for i in (1..servers.len()).rev() {
            let j = entropy.below(i as u64 + 1) as usize;
            servers.swap(i, j);
        }
        let driver = Driver {
            servers,
            dialer: ensemble.dialer.clone(),
            clock,
            entropy,
            requested_timeout_ms: ensemble.session_timeout_ms,
            scale: ensemble.scale,
            session_id: 0,
            passwd: vec![0; 16],
            last_zxid: 0,
            negotiated_ms: 0,
            state: state_tx,
            cmds: cmd_rx,
            pending: VecDeque::new(),
            data_watches: BTreeMap::new(),
            child_watches: BTreeMap::new(),
            closing: None,
        };
        ensemble
            .dialer
            .spawn(Box::pin(driver.run_until_expired(expire_rx)));
        ZkClient {
            cmd: cmd_tx,
            state: state_rx,
            expire: Arc::new(expire_tx),
            xid: Arc::new(AtomicI32::new(1)),
            server_list: ensemble.connect_string().into(),
        }
    }

    /// The session's state now.
    pub fn state(&self) -> SessionState {
        self.state.borrow().clone()
    }

    /// A receiver of every state change (for a connection-state listener).
    pub fn state_changes(&self) -> watch::Receiver<SessionState> {
        self.state.clone()
    }

    /// The session id, once one was established (0 before).
    pub fn session_id(&self) -> i64 {
        match &*self.state.borrow() {
            SessionState::Connected { session_id, .. } => *session_id,
            _ => 0,
        }
    }

    /// Ends the session on this side only, as `ZooKeeper.getTestable().
    /// injectSessionExpiration()` does: the state becomes [`SessionState::Expired`],
    /// every watch fires with `Expired`, every pending and queued request fails with
    /// [`ZkError::SessionExpired`], and the connection (if any) is dropped without a
    /// `closeSession` (the server expires the session on its own clock).
    pub fn inject_session_expiration(&self) {
        let _ = self.expire.send(true);
    }

    /// The switch [`Self::inject_session_expiration`] throws, for a connection-state
    /// watcher that must not keep the session's request channel open.
    pub fn expiry_switch(&self) -> Arc<watch::Sender<bool>> {
        self.expire.clone()
    }

    /// Why a request cannot be queued now: the session is over. While connecting, a
    /// request waits in the outgoing queue (`ClientCnxn.queuePacket`: only a state that
    /// is no longer alive refuses it).
    fn unavailable(&self) -> Option<ZkError> {
        match &*self.state.borrow() {
            SessionState::Connected { .. } | SessionState::Connecting => None,
            SessionState::Expired => Some(ZkError::SessionExpired),
            SessionState::Closed => Some(ZkError::Closed),
        }
    }

    async fn call(
        &self,
        req: Request,
        watch: Option<WatchKind>,
    ) -> (Result<(ReplyHeader, Response), ZkError>, Option<Watch>) {
        if let Some(e) = self.unavailable() {
            return (Err(e), None);
        }
        let (tx, rx) = oneshot::channel();
        let (watch_tx, watch_rx) = match watch {
            Some(kind) => {
                let (t, r) = oneshot::channel();
                (Some((kind, t)), Some(r))
            }
            None => (None, None),
        };
        let xid = self.xid.fetch_add(1, Ordering::Relaxed);
        if self
            .cmd
            .send(Cmd::Request {
                xid,
                req,
                watch: watch_tx,
                reply: tx,
            })
            .is_err()
        {
            return (Err(self.unavailable().unwrap_or(ZkError::Closed)), None);
        }
        let result = match rx.await {
            Ok(r) => r,
            Err(_) => Err(self.unavailable().unwrap_or(ZkError::ConnectionLoss {
                sent: true,
                why: "driver stopped".into(),
            })),
        };
        (result, watch_rx)
    }

    async fn call_ok(&self, req: Request) -> Result<Response, ZkError> {
        match self.call(req, None).await.0? {
            (h, _) if h.err != ErrorCode::OK => Err(ZkError::Server(h.err)),
            (_, body) => Ok(body),
        }
    }

    /// `create` (op 1): the created node's name (with a sequential node's suffix).
    pub async fn create(
        &self,
        path: &str,
        data: Option<&[u8]>,
        flags: i32,
    ) -> Result<String, ZkError> {
        match self
            .call_ok(create_req(op::CREATE, path, data, flags))
            .await?
        {
            Response::Create(p) => Ok(p),
            other => Err(unexpected("create", &other)),
        }
    }

    /// `create2` (op 15): the created node's name and Stat.
    pub async fn create2(
        &self,
        path: &str,
        data: Option<&[u8]>,
        flags: i32,
    ) -> Result<(String, Stat), ZkError> {
        match self
            .call_ok(create_req(op::CREATE2, path, data, flags))
            .await?
        {
            Response::Create2(p, s) => Ok((p, s)),
            other => Err(unexpected("create2", &other)),
        }
    }

    /// `delete` with an expected version (-1: any).
    pub async fn delete(&self, path: &str, version: i32) -> Result<(), ZkError> {
        self.call_ok(Request::Delete {
            path: path.into(),
            version,
        })
        .await
        .map(|_| ())
    }

    /// `exists`: the Stat, or `None` if there is no such node.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, ZkError> {
        self.exists_inner(path, false).await.map(|(s, _)| s)
    }

    /// `exists` leaving a data watch (set whether or not the node exists).
    pub async fn exists_watch(&self, path: &str) -> Result<(Option<Stat>, Watch), ZkError> {
        let (s, w) = self.exists_inner(path, true).await?;
        Ok((s, w.expect("a watch was asked for")))
    }

    async fn exists_inner(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Option<Stat>, Option<Watch>), ZkError> {
        let (r, w) = self
            .call(
                Request::Exists {
                    path: path.into(),
                    watch,
                },
                watch.then_some(WatchKind::Data),
            )
            .await;
        match r? {
            (h, _) if h.err == ErrorCode::NO_NODE => Ok((None, w)),
            (h, _) if h.err != ErrorCode::OK => Err(ZkError::Server(h.err)),
            (_, Response::Stat(s)) => Ok((Some(s), w)),
            (_, other) => Err(unexpected("exists", &other)),
        }
    }

    /// `getData`.
    pub async fn get_data(&self, path: &str) -> Result<(Option<Vec<u8>>, Stat), ZkError> {
        self.get_data_inner(path, false)
            .await
            .map(|(d, s, _)| (d, s))
    }

    /// `getData` leaving a data watch (only if the node exists: else `NONODE`).
    pub async fn get_data_watch(
        &self,
        path: &str,
    ) -> Result<(Option<Vec<u8>>, Stat, Watch), ZkError> {
        let (d, s, w) = self.get_data_inner(path, true).await?;
        Ok((d, s, w.expect("a watch was asked for")))
    }

    async fn get_data_inner(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Option<Vec<u8>>, Stat, Option<Watch>), ZkError> {
        let (r, w) = self
            .call(
                Request::GetData {
                    path: path.into(),
                    watch,
                },
                watch.then_some(WatchKind::Data),
            )
            .await;
        match r? {
            (h, _) if h.err != ErrorCode::OK => Err(ZkError::Server(h.err)),
            (_, Response::GetData(d, s)) => Ok((d, s, w)),
            (_, other) => Err(unexpected("getData", &other)),
        }
    }

    /// `setData` with an expected version (-1: any): the new Stat.
    pub async fn set_data(
        &self,
        path: &str,
        data: Option<&[u8]>,
        version: i32,
    ) -> Result<Stat, ZkError> {
        match self
            .call_ok(Request::SetData {
                path: path.into(),
                data: data.map(<[u8]>::to_vec),
                version,
            })
            .await?
        {
            Response::Stat(s) => Ok(s),
            other => Err(unexpected("setData", &other)),
        }
    }

    /// `getChildren2`: the children in the server's order and the node's Stat.
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat), ZkError> {
        self.get_children_inner(path, false)
            .await
            .map(|(c, s, _)| (c, s))
    }

    /// `getChildren2` leaving a child watch.
    pub async fn get_children2_watch(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, Watch), ZkError> {
        let (c, s, w) = self.get_children_inner(path, true).await?;
        Ok((c, s, w.expect("a watch was asked for")))
    }

    async fn get_children_inner(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<String>, Stat, Option<Watch>), ZkError> {
        let (r, w) = self
            .call(
                Request::GetChildren2 {
                    path: path.into(),
                    watch,
                },
                watch.then_some(WatchKind::Child),
            )
            .await;
        match r? {
            (h, _) if h.err != ErrorCode::OK => Err(ZkError::Server(h.err)),
            (_, Response::GetChildren2(c, s)) => Ok((c, s, w)),
            (_, other) => Err(unexpected("getChildren2", &other)),
        }
    }

    /// `sync`: the server catches up with the leader before later reads.
    pub async fn sync(&self, path: &str) -> Result<(), ZkError> {
        self.call_ok(Request::Sync { path: path.into() })
            .await
            .map(|_| ())
    }

    /// `multi`: all ops or none. A failed multi is `Ok` with the per-op results (the
    /// failing op's error among them), as the server reports it.
    pub async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiResult>, ZkError> {
        match self.call(Request::Multi(ops), None).await.0? {
            (_, Response::Multi(results)) => Ok(results),
            (h, _) if h.err != ErrorCode::OK => Err(ZkError::Server(h.err)),
            (_, other) => Err(unexpected("multi", &other)),
        }
    }

    /// The raw reply (header and body) to any request, for tests that compare servers.
    pub async fn raw(&self, req: Request) -> Result<(ReplyHeader, Response), ZkError> {
        self.call(req, None).await.0
    }

    /// The raw reply to a request that leaves a watch (`exists`/`getData`: a data
    /// watch; `getChildren2`: a child watch), for tests.
    pub async fn raw_watch(
        &self,
        req: Request,
    ) -> (Result<(ReplyHeader, Response), ZkError>, Option<Watch>) {
        let kind = match &req {
            Request::GetChildren2 { watch: true, .. } => Some(WatchKind::Child),
            Request::Exists { watch: true, .. } | Request::GetData { watch: true, .. } => {
                Some(WatchKind::Data)
            }
            _ => None,
        };
        self.call(req, kind).await
    }

    /// `closeSession`: the server deletes the session's ephemeral nodes at once.
    pub async fn close(&self) -> Result<(), ZkError> {
        match self.call(Request::CloseSession, None).await.0 {
            Ok(_) | Err(ZkError::Closed) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn create_req(code: i32, path: &str, data: Option<&[u8]>, flags: i32) -> Request {
    Request::Create {
        op: code,
        req: CreateRequest {
            path: path.into(),
            data: data.map(<[u8]>::to_vec),
            acl: Acl::open_unsafe(),
            flags,
        },
    }
}

fn unexpected(what: &str, body: &Response) -> ZkError {
    ZkError::Protocol(format!("unexpected reply body to {what}: {body:?}"))
}
