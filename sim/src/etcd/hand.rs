//! The services served by hand over the member (`v3lock`'s `Lock` and `Unlock`, and
//! the `Watch` stream), with tonic's `Grpc` and prost messages written here, because
//! `etcd-client` does not export what they need: `v3lockpb`'s request and response
//! types (it exports only the responses) and `WatchRequest`'s `oneof` (its type is in
//! a private module). Their field numbers follow `v3lock.proto` and `rpc.proto` at
//! v3.4.23. And the router of every service of a member.

use std::collections::VecDeque;
use std::task::{Context, Poll};

use etcd_client::proto::{
    PbDeleteRequest, PbKvServer, PbLeaseServer, PbPutRequest, PbRangeRequest, PbRangeResponse,
    PbResponseHeader, PbTxnRequest, PbWatchResponse,
};
use tonic::{Request, Response, Status, Streaming};

use super::op::{Applied, Request as OpRequest};
use super::service::{BoxStream, Kv, Lease, SharedEtcd, peer, status};
use super::store::event_revision;

/// `v3lock.proto` and `rpc.proto`'s messages the crate does not export.
pub mod wire {
    use etcd_client::proto::PbResponseHeader;

    /// `v3lockpb.LockRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LockRequest {
        #[prost(bytes = "vec", tag = "1")]
        pub name: Vec<u8>,
        #[prost(int64, tag = "2")]
        pub lease: i64,
    }

    /// `v3lockpb.LockResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LockResponse {
        #[prost(message, optional, tag = "1")]
        pub header: Option<PbResponseHeader>,
        #[prost(bytes = "vec", tag = "2")]
        pub key: Vec<u8>,
    }

    /// `v3lockpb.UnlockRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct UnlockRequest {
        #[prost(bytes = "vec", tag = "1")]
        pub key: Vec<u8>,
    }

    /// `v3lockpb.UnlockResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct UnlockResponse {
        #[prost(message, optional, tag = "1")]
        pub header: Option<PbResponseHeader>,
    }

    /// `etcdserverpb.WatchRequest` with its `oneof` as optional fields.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WatchRequest {
        #[prost(message, optional, tag = "1")]
        pub create_request: Option<WatchCreateRequest>,
        #[prost(message, optional, tag = "2")]
        pub cancel_request: Option<WatchCancelRequest>,
        #[prost(message, optional, tag = "3")]
        pub progress_request: Option<WatchProgressRequest>,
    }

    /// `etcdserverpb.WatchCreateRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WatchCreateRequest {
        #[prost(bytes = "vec", tag = "1")]
        pub key: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub range_end: Vec<u8>,
        #[prost(int64, tag = "3")]
        pub start_revision: i64,
        #[prost(bool, tag = "4")]
        pub progress_notify: bool,
        /// `NOPUT` 0, `NODELETE` 1.
        #[prost(int32, repeated, tag = "5")]
        pub filters: Vec<i32>,
        #[prost(bool, tag = "6")]
        pub prev_kv: bool,
        #[prost(int64, tag = "7")]
        pub watch_id: i64,
        #[prost(bool, tag = "8")]
        pub fragment: bool,
    }

    /// `etcdserverpb.WatchCancelRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WatchCancelRequest {
        #[prost(int64, tag = "1")]
        pub watch_id: i64,
    }

    /// `etcdserverpb.WatchProgressRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WatchProgressRequest {}
}

/// One watcher of a watch stream.
struct Watcher {
    id: i64,
    key: Vec<u8>,
    range_end: Vec<u8>,
    /// The first revision not yet sent.
    next: i64,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
}

/// A watch stream's state.
struct WatchState {
    member: SharedEtcd,
    requests: Streaming<wire::WatchRequest>,
    /// The member's changes this stream has collected up to.
    seen: u64,
    watchers: Vec<Watcher>,
    next_id: i64,
    out: VecDeque<PbWatchResponse>,
    closed: bool,
}

impl WatchState {
    fn header(&self) -> PbResponseHeader {
        self.member.with(|s| s.header())
    }

    fn handle(&mut self, req: wire::WatchRequest) {
        if let Some(c) = req.create_request {
            let current = self.member.with(|s| s.revision());
            let id = if c.watch_id != 0 {
                c.watch_id
            } else {
                while self.watchers.iter().any(|w| w.id == self.next_id) {
                    self.next_id += 1;
                }
                self.next_id += 1;
                self.next_id - 1
            };
            self.out.push_back(PbWatchResponse {
                header: Some(self.header()),
                watch_id: id,
                created: true,
                ..Default::default()
            });
            self.watchers.push(Watcher {
                id,
                key: c.key,
                range_end: c.range_end,
                next: if c.start_revision > 0 {
                    c.start_revision
                } else {
                    current + 1
                },
                prev_kv: c.prev_kv,
                no_put: c.filters.contains(&0),
                no_delete: c.filters.contains(&1),
            });
            self.collect();
        } else if let Some(c) = req.cancel_request {
            self.watchers.retain(|w| w.id != c.watch_id);
            self.out.push_back(PbWatchResponse {
                header: Some(self.header()),
                watch_id: c.watch_id,
                canceled: true,
                ..Default::default()
            });
        } else if req.progress_request.is_some() {
            // A progress notification: the header's revision, watch ID -1.
            self.out.push_back(PbWatchResponse {
                header: Some(self.header()),
                watch_id: -1,
                ..Default::default()
            });
        }
    }

    /// Queues every watcher's events up to the store's revision.
    fn collect(&mut self) {
        let member = self.member.clone();
        let header = self.header();
        let mut queued = Vec::new();
        member.with(|s| {
            for w in &mut self.watchers {
                if w.next > s.revision() {
                    continue;
                }
                let mut events = s.events_since(w.next, &w.key, &w.range_end);
                w.next = s.revision() + 1;
                events.retain(|e| !(e.r#type == 0 && w.no_put || e.r#type == 1 && w.no_delete));
                if !w.prev_kv {
                    for e in &mut events {
                        e.prev_kv = None;
                    }
                }
                if events.is_empty() {
                    continue;
                }
                debug_assert!(
                    events
                        .windows(2)
                        .all(|p| event_revision(&p[0]) <= event_revision(&p[1]))
                );
                queued.push(PbWatchResponse {
                    header: Some(header),
                    watch_id: w.id,
                    events,
                    ..Default::default()
                });
            }
        });
        self.out.extend(queued);
    }

    /// The next response: queued ones first, then whatever a request or a new
    /// revision makes.
    async fn next(&mut self) -> Option<PbWatchResponse> {
        loop {
            if let Some(r) = self.out.pop_front() {
                return Some(r);
            }
            if self.closed {
                return None;
            }
            let (member, seen) = (self.member.clone(), self.seen);
            tokio::select! {
                biased;
                req = self.requests.message() => match req {
                    Ok(Some(req)) => self.handle(req),
                    Ok(None) | Err(_) => self.closed = true,
                },
                _ = member.changes.past(seen) => {
                    self.seen = member.changes.seen();
                    self.collect();
                }
            }
        }
    }
}

/// The `Lock` service's `Lock`: `v3lock`'s server runs `concurrency.NewMutex` on a
/// session of the request's lease (orphaned at once: the server keeps nothing alive)
/// and answers when the mutex is its: the key's name is the request's name, `/`, and
/// the lease in hex. A client that goes away while waiting has its key deleted
/// (`Mutex.Lock`'s cleanup when its context ends).
async fn lock(
    member: SharedEtcd,
    req: wire::LockRequest,
    by: String,
) -> Result<wire::LockResponse, Status> {
    use etcd_client::proto::{PbCompare, PbTargetUnion, PbTxnOpRequest, PbTxnRequestOp};
    let mut pfx = req.name.clone();
    pfx.push(b'/');
    let my_key = [pfx.clone(), format!("{:x}", req.lease).into_bytes()].concat();
    let owner_get = PbRangeRequest {
        key: pfx.clone(),
        range_end: prefix_end(&pfx),
        limit: 1,
        sort_order: 1,
        sort_target: 2,
        ..Default::default()
    };
    let txn = PbTxnRequest {
        compare: vec![PbCompare {
            result: 0,
            target: 1,
            key: my_key.clone(),
            range_end: Vec::new(),
            target_union: Some(PbTargetUnion::CreateRevision(0)),
        }],
        success: vec![
            PbTxnRequestOp {
                request: Some(PbTxnOpRequest::RequestPut(PbPutRequest {
                    key: my_key.clone(),
                    lease: req.lease,
                    ..Default::default()
                })),
            },
            PbTxnRequestOp {
                request: Some(PbTxnOpRequest::RequestRange(owner_get.clone())),
            },
        ],
        failure: vec![
            PbTxnRequestOp {
                request: Some(PbTxnOpRequest::RequestRange(PbRangeRequest {
                    key: my_key.clone(),
                    ..Default::default()
                })),
            },
            PbTxnRequestOp {
                request: Some(PbTxnOpRequest::RequestRange(owner_get)),
            },
        ],
    };
    // The service calls etcd through its own client: an error reaches the caller as
    // the client's Go error, which gRPC sends as `Unknown` with etcd's message.
    let resp = match member.propose(&by, OpRequest::Txn(txn)).await {
        Ok(Applied::Txn(t)) => t,
        Ok(_) => {
            return Err(Status::internal(
                "etcd model: a txn answered with another kind",
            ));
        }
        Err(e) => return Err(Status::new(tonic::Code::Unknown, e.message)),
    };
    let ranges: Vec<&PbRangeResponse> = resp
        .responses
        .iter()
        .filter_map(|r| match &r.response {
            Some(etcd_client::proto::PbTxnOpResponse::ResponseRange(rr)) => Some(rr),
            _ => None,
        })
        .collect();
    let header = resp.header.unwrap_or_default();
    let mut my_rev = header.revision;
    if !resp.succeeded {
        my_rev = ranges
            .first()
            .and_then(|r| r.kvs.first())
            .map_or(my_rev, |kv| kv.create_revision);
    }
    let owner = ranges.last().and_then(|r| r.kvs.first());
    if owner.is_none_or(|kv| kv.create_revision == my_rev) {
        return Ok(wire::LockResponse {
            header: Some(header),
            key: my_key,
        });
    }
    // Wait for the deletion of every key created before ours (`waitDeletes`); if
    // the caller goes away first, delete ours.
    let mut cleanup = DeleteOnDrop {
        member: member.clone(),
        key: Some(my_key.clone()),
        by: by.clone(),
    };
    loop {
        let seen = member.changes.seen();
        let (older, header) = member.with(|s| {
            let older = s
                .keys_with_prefix(&pfx)
                .into_iter()
                .filter(|kv| kv.create_revision < my_rev)
                .count();
            (older, s.header())
        });
        if older == 0 {
            cleanup.key = None;
            return Ok(wire::LockResponse {
                header: Some(header),
                key: my_key,
            });
        }
        member.changes.past(seen).await;
    }
}

/// Deletes a waiter's key if its `Lock` call ends before the lock is its.
struct DeleteOnDrop {
    member: SharedEtcd,
    key: Option<Vec<u8>>,
    by: String,
}

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let d = PbDeleteRequest {
                key,
                ..Default::default()
            };
            self.member.propose_detached(&self.by, OpRequest::Delete(d));
        }
    }
}

/// The end of the range of every key with prefix `p` (`clientv3.GetPrefixRangeEnd`).
pub fn prefix_end(p: &[u8]) -> Vec<u8> {
    let mut end = p.to_vec();
    while let Some(last) = end.last_mut() {
        if *last < 0xff {
            *last += 1;
            return end;
        }
        end.pop();
    }
    vec![0]
}

/// The hand-served services: `v3lockpb.Lock` and `etcdserverpb.Watch`.
#[derive(Clone)]
pub struct HandServed {
    member: SharedEtcd,
    name: &'static str,
}

mod routes {
    use super::*;
    use tonic::codegen::{Body, BoxFuture, StdError, http};
    use tonic::server::{Grpc, NamedService, StreamingService, UnaryService};
    use tonic_prost::ProstCodec;

    struct LockCall(SharedEtcd);
    impl UnaryService<wire::LockRequest> for LockCall {
        type Response = wire::LockResponse;
        type Future = BoxFuture<Response<wire::LockResponse>, Status>;
        fn call(&mut self, r: Request<wire::LockRequest>) -> Self::Future {
            let (m, by) = (self.0.clone(), peer(&r));
            Box::pin(async move { lock(m, r.into_inner(), by).await.map(Response::new) })
        }
    }

    struct UnlockCall(SharedEtcd);
    impl UnaryService<wire::UnlockRequest> for UnlockCall {
        type Response = wire::UnlockResponse;
        type Future = BoxFuture<Response<wire::UnlockResponse>, Status>;
        fn call(&mut self, r: Request<wire::UnlockRequest>) -> Self::Future {
            let by = peer(&r);
            let d = PbDeleteRequest {
                key: r.into_inner().key,
                ..Default::default()
            };
            let m = self.0.clone();
            Box::pin(async move {
                match m.propose(&by, OpRequest::Delete(d)).await {
                    Ok(Applied::Delete(d)) => {
                        Ok(Response::new(wire::UnlockResponse { header: d.header }))
                    }
                    Ok(_) => Err(Status::internal(
                        "etcd model: a delete answered with another kind",
                    )),
                    Err(e) => Err(status(e)),
                }
            })
        }
    }

    struct WatchCall(SharedEtcd);
    impl StreamingService<wire::WatchRequest> for WatchCall {
        type Response = PbWatchResponse;
        type ResponseStream = BoxStream<PbWatchResponse>;
        type Future = BoxFuture<Response<Self::ResponseStream>, Status>;
        fn call(&mut self, r: Request<Streaming<wire::WatchRequest>>) -> Self::Future {
            let member = self.0.clone();
            let state = WatchState {
                seen: member.changes.seen(),
                member,
                requests: r.into_inner(),
                watchers: Vec::new(),
                next_id: 0,
                out: VecDeque::new(),
                closed: false,
            };
            let stream = futures_util::stream::unfold(state, |mut st| async move {
                st.next().await.map(|r| (Ok(r), st))
            });
            Box::pin(async move { Ok(Response::new(Box::pin(stream) as BoxStream<_>)) })
        }
    }

    impl HandServed {
        /// The `v3lockpb.Lock` service of `member`.
        pub fn lock(member: SharedEtcd) -> Self {
            HandServed {
                member,
                name: "v3lockpb.Lock",
            }
        }

        /// The `etcdserverpb.Watch` service of `member`.
        pub fn watch(member: SharedEtcd) -> Self {
            HandServed {
                member,
                name: "etcdserverpb.Watch",
            }
        }
    }

    impl<B> tower::Service<http::Request<B>> for HandServed
    where
        B: Body + Send + 'static,
        B::Error: Into<StdError> + Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            let member = self.member.clone();
            let path = format!("/{}/", self.name);
            let method = req.uri().path().strip_prefix(&path).map(str::to_string);
            Box::pin(async move {
                let codec = ProstCodec::default();
                Ok(match method.as_deref() {
                    Some("Lock") if path.contains("Lock") => {
                        Grpc::new(codec).unary(LockCall(member), req).await
                    }
                    Some("Unlock") => {
                        Grpc::new(ProstCodec::default())
                            .unary(UnlockCall(member), req)
                            .await
                    }
                    Some("Watch") => {
                        Grpc::new(ProstCodec::default())
                            .streaming(WatchCall(member), req)
                            .await
                    }
                    _ => Status::unimplemented("").into_http(),
                })
            })
        }
    }

    /// Names for tonic's router: each instance routes under its own name, so the
    /// router takes the two through [`NamedLock`] and [`NamedWatch`].
    #[derive(Clone)]
    pub struct NamedLock(pub HandServed);
    #[derive(Clone)]
    pub struct NamedWatch(pub HandServed);
    impl NamedService for NamedLock {
        const NAME: &'static str = "v3lockpb.Lock";
    }
    impl NamedService for NamedWatch {
        const NAME: &'static str = "etcdserverpb.Watch";
    }
    macro_rules! forward {
        ($t:ident) => {
            impl<B> tower::Service<http::Request<B>> for $t
            where
                B: Body + Send + 'static,
                B::Error: Into<StdError> + Send + 'static,
            {
                type Response = http::Response<tonic::body::Body>;
                type Error = std::convert::Infallible;
                type Future = BoxFuture<Self::Response, Self::Error>;
                fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                    <HandServed as tower::Service<http::Request<B>>>::poll_ready(&mut self.0, cx)
                }
                fn call(&mut self, req: http::Request<B>) -> Self::Future {
                    self.0.call(req)
                }
            }
        };
    }
    forward!(NamedLock);
    forward!(NamedWatch);

    /// Every service of `member`, as one router.
    pub fn router(member: &SharedEtcd) -> tonic::service::Routes {
        tonic::service::Routes::new(PbKvServer::new(Kv(member.clone())))
            .add_service(PbLeaseServer::new(Lease(member.clone())))
            .add_service(NamedWatch(HandServed::watch(member.clone())))
            .add_service(NamedLock(HandServed::lock(member.clone())))
            .prepare()
    }
}

pub use routes::router;
