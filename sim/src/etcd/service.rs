//! One etcd member and its gRPC services over any byte stream: `KV` (`Range`, `Put`,
//! `DeleteRange`, `Txn`) and `Lease` (`LeaseGrant`, `LeaseRevoke`, the
//! `LeaseKeepAlive` stream, `LeaseTimeToLive`, `LeaseLeases`) here, `Watch` and the
//! `v3lock` `Lock` service in `hand.rs`, each answering as etcd v3.4.23 does (see
//! [`super::store`] for the rules). HTTP/2 is hyper's server, one connection at a
//! time on an executor the host gives (so a paused member's streams freeze with it),
//! without the `date` header (hyper's comes from the machine's clock).
//!
//! The protocol definitions are `etcd-client`'s (built with its `build-server`
//! feature): `KV` and `Lease` are its generated servers; the two it does not export
//! all of are served by hand (`hand.rs` says why).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::proto::{
    PbCompactionRequest, PbCompactionResponse, PbDeleteRequest, PbDeleteResponse, PbKvService,
    PbLeaseGrantRequest, PbLeaseGrantResponse, PbLeaseKeepAliveRequest, PbLeaseKeepAliveResponse,
    PbLeaseLeasesRequest, PbLeaseLeasesResponse, PbLeaseRevokeRequest, PbLeaseRevokeResponse,
    PbLeaseService, PbLeaseStatus, PbLeaseTimeToLiveRequest, PbLeaseTimeToLiveResponse,
    PbPutRequest, PbPutResponse, PbRangeRequest, PbRangeResponse, PbTxnRequest, PbTxnResponse,
};
use futures_util::Stream;
use lock_impl::Clock;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status, Streaming};

use super::link::{
    ELECTION_TICKS, FRAME_LEASE_REQUEST, HEARTBEAT_MILLIS, LEASE_FOUND, LEASE_MISSING,
    LEASE_NOT_PRIMARY, LEASE_RENEW, LEASE_TTL, LeaseFrame, REQUEST_TIMED_OUT, RaftLink,
};
use super::op::{Applied, Op, Request as OpRequest};
use super::store::{EtcdError, Store};

/// The client host a request came from (put in each request's extensions by
/// [`serve_connection`]).
#[derive(Debug, Clone)]
pub struct Peer(pub String);

pub(super) fn peer<T>(r: &Request<T>) -> String {
    r.extensions()
        .get::<Peer>()
        .map(|p| p.0.clone())
        .unwrap_or_default()
}

pub(super) fn status(e: EtcdError) -> Status {
    Status::new(e.code, e.message)
}

/// One member: its store, its clock, what its waiters wait on, and its Raft.
pub struct EtcdMember {
    store: Mutex<Store>,
    clock: Arc<dyn Clock>,
    pub(super) changes: Changes,
    /// The member's Raft plumbing ([`super::raft`]).
    pub raft: RaftLink,
}

/// Tells the member's waiters (watches, `Lock` calls, renewals of an expired lease)
/// that the store moved, waking them in an order of the run's own. (tokio's `watch`
/// channel would not do: it spreads its waiters over eight lists picked with tokio's
/// unseeded random numbers, so waiters woken together would run in a different order
/// every run, and so would the replies they send.)
#[derive(Default)]
pub(super) struct Changes {
    generation: std::sync::atomic::AtomicU64,
    notify: tokio::sync::Notify,
}

impl Changes {
    /// The store moved.
    pub(super) fn bump(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.notify.notify_waiters();
    }

    /// What a waiter has seen.
    pub(super) fn seen(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until the store moved past `seen`.
    pub(super) async fn past(&self, seen: u64) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.seen() != seen {
                return;
            }
            notified.await;
        }
    }
}

/// A member shared by its services and its host.
pub type SharedEtcd = Arc<EtcdMember>;

impl EtcdMember {
    /// A member with `store`, on `clock`, replicating through `raft`.
    pub fn new(store: Store, clock: Arc<dyn Clock>, raft: RaftLink) -> SharedEtcd {
        Arc::new(EtcdMember {
            store: Mutex::new(store),
            clock,
            changes: Changes::default(),
            raft,
        })
    }

    /// `f` on the store; waiters hear of a new revision.
    pub fn with<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (r, moved) = {
            let mut s = self.store.lock().unwrap_or_else(|e| e.into_inner());
            let before = s.revision();
            let r = f(&mut s);
            (r, s.revision() != before)
        };
        if moved {
            self.changes.bump();
        }
        r
    }

    /// `f` on the store, telling no waiter (the node loop tells them once per batch).
    pub(super) fn with_quiet<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        f(&mut self.store.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn now(&self) -> Duration {
        self.clock.now()
    }

    pub(super) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// `millis` thousandths of this world's etcd second.
    pub(super) fn seconds_millis(&self, millis: u32) -> Duration {
        self.with_quiet(|s| s.seconds(1)) * millis / 1000
    }

    /// `ReqTimeout`: 5 s plus two election timeouts (7 s at etcd's defaults).
    pub(super) fn request_timeout(&self) -> Duration {
        self.with_quiet(|s| s.seconds(7))
    }

    /// Whether this member leads its cluster now.
    pub fn leading(&self) -> bool {
        self.raft.status().leading
    }

    /// Proposes `request` by client host `by` and waits for this member to apply it:
    /// its result, or `etcdserver: request timed out` after `ReqTimeout`.
    pub async fn propose(&self, by: &str, request: OpRequest) -> Result<Applied, EtcdError> {
        let op = Op::new(self.raft.next_id(), by, request);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.raft.proposals.send(super::link::Proposal {
            op,
            reply: Some(tx),
        });
        tokio::select! {
            biased;
            r = rx => r.unwrap_or(Err(REQUEST_TIMED_OUT)),
            _ = self.clock.sleep(self.request_timeout()) => Err(REQUEST_TIMED_OUT),
        }
    }

    /// Proposes `request` without waiting for it.
    pub(super) fn propose_detached(&self, by: &str, request: OpRequest) {
        let op = Op::new(self.raft.next_id(), by, request);
        let _ = self
            .raft
            .proposals
            .send(super::link::Proposal { op, reply: None });
    }

    /// The lessor's period.
    pub(super) fn expiry_check(&self) -> Duration {
        self.with_quiet(|s| s.expiry_check())
    }

    /// The lessor's loop: every half etcd second on the member's clock, the primary
    /// proposes the revoke of every lease that expired. Runs until dropped.
    pub async fn run_lessor(self: SharedEtcd) {
        let period = self.expiry_check();
        loop {
            let now = self.now();
            for id in self.with_quiet(|s| s.due(now)) {
                self.propose_detached("", OpRequest::Expire(id));
            }
            self.clock.sleep(period).await;
        }
    }

    /// Waits until the store moves past `seen`, or `timeout` passes.
    pub(super) async fn wait_change(&self, seen: u64, timeout: Duration) {
        tokio::select! {
            biased;
            _ = self.changes.past(seen) => {}
            _ = self.clock.sleep(timeout) => {}
        }
    }
}

/// The `KV` service.
#[derive(Clone)]
pub struct Kv(pub SharedEtcd);

/// A result that is not the request's kind (cannot happen: a member answers each
/// request with its own kind).
fn mismatch() -> Status {
    Status::internal("etcd model: a request answered with another kind")
}

#[tonic::async_trait]
impl PbKvService for Kv {
    async fn range(&self, r: Request<PbRangeRequest>) -> Result<Response<PbRangeResponse>, Status> {
        let by = peer(&r);
        match self.0.propose(&by, OpRequest::Range(r.into_inner())).await {
            Ok(Applied::Range(a)) => Ok(Response::new(a)),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    async fn put(&self, r: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        let by = peer(&r);
        match self.0.propose(&by, OpRequest::Put(r.into_inner())).await {
            Ok(Applied::Put(a)) => Ok(Response::new(a)),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    async fn delete_range(
        &self,
        r: Request<PbDeleteRequest>,
    ) -> Result<Response<PbDeleteResponse>, Status> {
        let by = peer(&r);
        match self.0.propose(&by, OpRequest::Delete(r.into_inner())).await {
            Ok(Applied::Delete(a)) => Ok(Response::new(a)),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    async fn txn(&self, r: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        let by = peer(&r);
        match self.0.propose(&by, OpRequest::Txn(r.into_inner())).await {
            Ok(Applied::Txn(a)) => Ok(Response::new(a)),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    async fn compact(
        &self,
        _r: Request<PbCompactionRequest>,
    ) -> Result<Response<PbCompactionResponse>, Status> {
        Err(Status::unimplemented(
            "locksim's etcd model does not compact",
        ))
    }
}

/// The `Lease` service.
#[derive(Clone)]
pub struct Lease(pub SharedEtcd);

/// A keep-alive stream's state.
struct KeepAlive {
    member: SharedEtcd,
    requests: Streaming<PbLeaseKeepAliveRequest>,
    /// For a stream opened `WithRequireLeader`: when the member next looks for its
    /// leader, and how many looks in a row found none.
    monitor: Option<(Duration, usize)>,
    /// The member's election timeout.
    election: Duration,
    /// The stream was cancelled for want of a leader.
    ended: bool,
}

/// gRPC metadata a client sets to require a leader (`rpctypes.MetadataRequireLeaderKey`).
const REQUIRE_LEADER_KEY: &str = "hasleader";

/// `maxNoLeaderCnt` (v3.4.23 `v3rpc/interceptor.go`).
const MAX_NO_LEADER_CNT: usize = 3;

/// `rpctypes.ErrGRPCNoLeader`.
fn no_leader() -> Status {
    Status::unavailable("etcdserver: no leader")
}

/// Sleeps on the member's clock until `at` (forever without one).
async fn sleep_until(member: &SharedEtcd, at: Option<Duration>) {
    match at {
        Some(at) => member.clock().sleep(at.saturating_sub(member.now())).await,
        None => std::future::pending().await,
    }
}

impl KeepAlive {
    /// `monitorLeader`'s look, every election timeout: whether the stream is now
    /// cancelled (the member has known no leader for `maxNoLeaderCnt` looks in a row).
    fn look_for_leader(&mut self) -> bool {
        let leaderless = self.member.raft.status().leader == 0;
        let Some((at, count)) = self.monitor.as_mut() else {
            return false;
        };
        *count = if leaderless { *count + 1 } else { 0 };
        *at += self.election;
        if *count >= MAX_NO_LEADER_CNT {
            self.monitor = None;
            self.ended = true;
        }
        self.ended
    }
}

/// The answer to one renewal (`LeaseRenew`, on the primary lessor wherever it is): a
/// lease not found answers TTL 0; a renewal the leader did not answer within
/// `ReqTimeout` ends the stream with the error.
async fn renew(m: SharedEtcd, id: i64) -> Result<PbLeaseKeepAliveResponse, Status> {
    let ttl = match lease_at_primary(&m, LEASE_RENEW, id).await {
        Ok(found) => found.map_or(0, |(ttl, _, _)| ttl),
        Err(e) => return Err(status(e)),
    };
    Ok(PbLeaseKeepAliveResponse {
        header: Some(m.with(|s| s.header())),
        id,
        ttl,
    })
}

pub(super) type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl PbLeaseService for Lease {
    async fn lease_grant(
        &self,
        r: Request<PbLeaseGrantRequest>,
    ) -> Result<Response<PbLeaseGrantResponse>, Status> {
        let by = peer(&r);
        let mut req = r.into_inner();
        // The member that receives the grant chooses its ID before proposing it.
        if req.id == 0 {
            req.id = self.0.with_quiet(|s| s.new_lease_id());
        }
        match self.0.propose(&by, OpRequest::Grant(req)).await {
            Ok(Applied::Grant { id, ttl, header }) => Ok(Response::new(PbLeaseGrantResponse {
                header: Some(header),
                id,
                ttl,
                error: String::new(),
            })),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    async fn lease_revoke(
        &self,
        r: Request<PbLeaseRevokeRequest>,
    ) -> Result<Response<PbLeaseRevokeResponse>, Status> {
        let by = peer(&r);
        match self.0.propose(&by, OpRequest::Revoke(r.into_inner())).await {
            Ok(Applied::Revoke(h)) => Ok(Response::new(PbLeaseRevokeResponse { header: Some(h) })),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(status(e)),
        }
    }

    type LeaseKeepAliveStream = BoxStream<PbLeaseKeepAliveResponse>;

    async fn lease_keep_alive(
        &self,
        r: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        // `WithRequireLeader` (v3.4.23 `v3rpc/interceptor.go`, `newStreamInterceptor`):
        // a stream whose metadata says `hasleader: true` is refused by a member that
        // knows no leader, and one it accepted is cancelled once the member has known
        // none for `maxNoLeaderCnt` (3) election timeouts in a row (`monitorLeader`);
        // `LeaseKeepAlive` then ends with `ErrGRPCNoLeader`.
        let require_leader = r
            .metadata()
            .get(REQUIRE_LEADER_KEY)
            .is_some_and(|v| v.as_bytes() == b"true");
        if require_leader && self.0.raft.status().leader == 0 {
            return Err(no_leader());
        }
        let election = self.0.seconds_millis(HEARTBEAT_MILLIS) * ELECTION_TICKS as u32;
        let state = KeepAlive {
            member: self.0.clone(),
            requests: r.into_inner(),
            monitor: require_leader.then(|| (self.0.now() + election, 0)),
            election,
            ended: false,
        };
        let stream = futures_util::stream::unfold(state, |mut st| async move {
            if st.ended {
                return None;
            }
            // The next request, then its answer, each raced against the monitor.
            let id = loop {
                tokio::select! {
                    biased;
                    m = st.requests.message() => match m {
                        Ok(Some(req)) => break req.id,
                        Ok(None) | Err(_) => return None,
                    },
                    _ = sleep_until(&st.member, st.monitor.map(|(at, _)| at)) => {
                        if st.look_for_leader() {
                            return Some((Err(no_leader()), st));
                        }
                    }
                }
            };
            let member = st.member.clone();
            let renew = renew(member, id);
            tokio::pin!(renew);
            loop {
                tokio::select! {
                    biased;
                    resp = &mut renew => return Some((resp, st)),
                    _ = sleep_until(&st.member, st.monitor.map(|(at, _)| at)) => {
                        if st.look_for_leader() {
                            return Some((Err(no_leader()), st));
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn lease_time_to_live(
        &self,
        r: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        let req = r.get_ref();
        let found = lease_at_primary(&self.0, LEASE_TTL, req.id)
            .await
            .map_err(status)?;
        let header = self.0.with(|s| s.header());
        // v3rpc's `LeaseTimeToLive`: a lease not found is TTL -1, not an error.
        let (ttl, granted_ttl, keys) = found.unwrap_or((-1, 0, Vec::new()));
        Ok(Response::new(PbLeaseTimeToLiveResponse {
            header: Some(header),
            id: req.id,
            ttl,
            granted_ttl,
            keys: if req.keys { keys } else { Vec::new() },
        }))
    }

    async fn lease_leases(
        &self,
        _r: Request<PbLeaseLeasesRequest>,
    ) -> Result<Response<PbLeaseLeasesResponse>, Status> {
        let (ids, header) = self.0.with(|s| (s.lease_ids(), s.header()));
        Ok(Response::new(PbLeaseLeasesResponse {
            header: Some(header),
            leases: ids.into_iter().map(|id| PbLeaseStatus { id }).collect(),
        }))
    }
}

pub use super::hand::router;

/// A task of one host's (not `Send`: it runs on that host's thread).
pub type LocalTask = Pin<Box<dyn std::future::Future<Output = ()>>>;

/// An executor for HTTP/2's tasks: a host's spawner (under its pause gate).
#[derive(Clone)]
pub struct LocalExec(pub std::rc::Rc<dyn Fn(LocalTask)>);

impl<F: std::future::Future<Output = ()> + 'static> hyper::rt::Executor<F> for LocalExec {
    fn execute(&self, fut: F) {
        (self.0)(Box::pin(fut))
    }
}

/// Serves one client connection `io` from client host `peer` with `routes`, spawning
/// HTTP/2's stream tasks with `exec`. Ends when the connection does.
pub async fn serve_connection<I>(
    io: I,
    peer: String,
    routes: tonic::service::Routes,
    exec: LocalExec,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::Service;
    let svc = tower::service_fn(
        move |mut req: tonic::codegen::http::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(Peer(peer.clone()));
            let mut routes = routes.clone();
            async move { routes.call(req).await }
        },
    );
    let _ = hyper::server::conn::http2::Builder::new(exec)
        .auto_date_header(false)
        .serve_connection(
            hyper_util::rt::TokioIo::new(io),
            hyper_util::service::TowerToHyperService::new(svc),
        )
        .await;
}

/// The leader's answer to a forwarded lease request.
pub(super) async fn answer_lease(m: &SharedEtcd, req: &LeaseFrame) -> LeaseFrame {
    let mut ans = LeaseFrame {
        token: req.token,
        from: m.raft.view.me,
        kind: req.kind,
        id: req.id,
        ..Default::default()
    };
    if !m.with(|s| s.is_primary()) {
        ans.status = LEASE_NOT_PRIMARY;
        return ans;
    }
    match local_lease(m, req.kind, req.id).await {
        Some((ttl, granted, keys)) => {
            ans.ttl = ttl;
            ans.granted_ttl = granted;
            ans.keys = keys;
        }
        None => ans.status = LEASE_MISSING,
    }
    ans
}

/// A lease request on the primary lessor: (TTL, granted TTL, keys), or `None` if no
/// such lease. A renewal of a lease that expired but is not revoked yet waits for the
/// revoke (`lessor.Renew`).
pub(super) async fn local_lease(
    m: &SharedEtcd,
    kind: u32,
    id: i64,
) -> Option<(i64, i64, Vec<Vec<u8>>)> {
    if kind == LEASE_TTL {
        return m.with(|s| s.time_to_live(id, m.now()));
    }
    let period = m.with(|s| s.expiry_check());
    loop {
        let seen = m.changes.seen();
        if !m.with(|s| s.expired(id, m.now())) {
            break;
        }
        m.wait_change(seen, period).await;
    }
    let now = m.now();
    m.with(|s| s.renew(id, now))
        .map(|ttl| (ttl, ttl, Vec::new()))
}

/// A lease request answered by the primary lessor, wherever it is: this member's if it
/// is the primary, else the leader's through the link, asked again (a tick later if
/// there is no leader) until `ReqTimeout` (`EtcdServer.LeaseRenew`,
/// `LeaseTimeToLive`). `Ok(None)`: no such lease.
pub(super) async fn lease_at_primary(
    m: &SharedEtcd,
    kind: u32,
    id: i64,
) -> Result<Option<(i64, i64, Vec<Vec<u8>>)>, EtcdError> {
    let deadline = m.now() + m.request_timeout();
    let tick = m.seconds_millis(HEARTBEAT_MILLIS);
    loop {
        let now = m.now();
        if now >= deadline {
            return Err(REQUEST_TIMED_OUT);
        }
        if m.with(|s| s.is_primary()) {
            return Ok(local_lease(m, kind, id).await);
        }
        let leader = m.raft.status().leader;
        if leader == raft::INVALID_ID || leader == m.raft.view.me {
            m.clock().sleep(tick).await;
            continue;
        }
        let token = m.raft.next_id();
        let (tx, rx) = oneshot::channel();
        m.raft
            .lease_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token, tx);
        let req = LeaseFrame {
            token,
            from: m.raft.view.me,
            kind,
            id,
            ..Default::default()
        };
        m.raft.send(
            leader,
            FRAME_LEASE_REQUEST,
            prost::Message::encode_to_vec(&req),
        );
        let wait = (deadline - now).min(tick * ELECTION_TICKS as u32);
        let answer = tokio::select! {
            biased;
            a = rx => a.ok(),
            _ = m.clock().sleep(wait) => None,
        };
        m.raft
            .lease_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&token);
        match answer {
            Some(a) if a.status == LEASE_FOUND => {
                return Ok(Some((a.ttl, a.granted_ttl, a.keys)));
            }
            Some(a) if a.status == LEASE_MISSING => return Ok(None),
            Some(_) => m.clock().sleep(tick).await,
            None => {}
        }
    }
}
