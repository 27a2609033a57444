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
use tonic::{Request, Response, Status, Streaming};

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

/// One member: its store, its clock, and what its waiters wait on.
pub struct EtcdMember {
    store: Mutex<Store>,
    clock: Arc<dyn Clock>,
    pub(super) changes: Changes,
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
    fn bump(&self) {
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
    /// A member with `store`, on `clock`.
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> SharedEtcd {
        Arc::new(EtcdMember {
            store: Mutex::new(store),
            clock,
            changes: Changes::default(),
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

    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The lessor's period.
    fn expiry_check(&self) -> Duration {
        self.with(|s| s.expiry_check())
    }

    /// The lessor's loop: every half etcd second on the member's clock, revokes the
    /// leases that expired. Runs until dropped.
    pub async fn run_lessor(self: SharedEtcd) {
        let period = self.expiry_check();
        loop {
            let now = self.now();
            if self.with(|s| s.expire(now)) {
                // A renewal waiting on a revoked lease hears of it (a revoke of a
                // lease without keys moves no revision).
                self.changes.bump();
            }
            self.clock.sleep(period).await;
        }
    }

    /// Waits until the store moves past `seen`, or `timeout` passes.
    async fn wait_change(&self, seen: u64, timeout: Duration) {
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

impl Kv {
    /// One request on the store, by the client host that sent it: etcd's answer, or
    /// its error as a status.
    fn answer<Q, A>(
        &self,
        r: Request<Q>,
        f: impl FnOnce(&mut Store, &Q, &str) -> Result<A, EtcdError>,
    ) -> Result<Response<A>, Status> {
        let by = peer(&r);
        self.0
            .with(|s| f(s, r.get_ref(), &by))
            .map(Response::new)
            .map_err(status)
    }
}

#[tonic::async_trait]
impl PbKvService for Kv {
    async fn range(&self, r: Request<PbRangeRequest>) -> Result<Response<PbRangeResponse>, Status> {
        self.answer(r, |s, q, _| s.range(q))
    }

    async fn put(&self, r: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        self.answer(r, |s, q, by| s.put(q, by))
    }

    async fn delete_range(
        &self,
        r: Request<PbDeleteRequest>,
    ) -> Result<Response<PbDeleteResponse>, Status> {
        self.answer(r, |s, q, by| s.delete_range(q, by))
    }

    async fn txn(&self, r: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        self.answer(r, |s, q, by| s.txn(q, by))
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
}

impl KeepAlive {
    /// The answer to one renewal (`LeaseRenew`): an expired lease not yet revoked is
    /// waited out and answered as not found (TTL 0).
    async fn renew(&self, id: i64) -> PbLeaseKeepAliveResponse {
        let m = &self.member;
        let period = m.expiry_check();
        loop {
            let seen = m.changes.seen();
            if !m.with(|s| s.expired(id, m.now())) {
                break;
            }
            m.wait_change(seen, period).await;
        }
        let now = m.now();
        let (ttl, header) = m.with(|s| (s.renew(id, now).unwrap_or(0), s.header()));
        PbLeaseKeepAliveResponse {
            header: Some(header),
            id,
            ttl,
        }
    }
}

pub(super) type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl PbLeaseService for Lease {
    async fn lease_grant(
        &self,
        r: Request<PbLeaseGrantRequest>,
    ) -> Result<Response<PbLeaseGrantResponse>, Status> {
        let by = peer(&r);
        let now = self.0.now();
        let (id, ttl) = self
            .0
            .with(|s| s.grant(r.get_ref().id, r.get_ref().ttl, now, &by))
            .map_err(status)?;
        Ok(Response::new(PbLeaseGrantResponse {
            header: Some(self.0.with(|s| s.header())),
            id,
            ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        r: Request<PbLeaseRevokeRequest>,
    ) -> Result<Response<PbLeaseRevokeResponse>, Status> {
        let by = peer(&r);
        self.0
            .with(|s| s.revoke(r.get_ref().id, &by).map(|_| s.header()))
            .map(|h| Response::new(PbLeaseRevokeResponse { header: Some(h) }))
            .map_err(status)
    }

    type LeaseKeepAliveStream = BoxStream<PbLeaseKeepAliveResponse>;

    async fn lease_keep_alive(
        &self,
        r: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let state = KeepAlive {
            member: self.0.clone(),
            requests: r.into_inner(),
        };
        let stream = futures_util::stream::unfold(state, |mut st| async move {
            match st.requests.message().await {
                Ok(Some(req)) => {
                    let resp = st.renew(req.id).await;
                    Some((Ok(resp), st))
                }
                Ok(None) | Err(_) => None,
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn lease_time_to_live(
        &self,
        r: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        let now = self.0.now();
        let req = r.get_ref();
        let (found, header) = self.0.with(|s| (s.time_to_live(req.id, now), s.header()));
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
