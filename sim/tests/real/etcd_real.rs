//! The etcd model against Debian's real etcd (3.4.23, a private member): one script
//! of calls through the published client, run on both, whose transcripts must match
//! (revisions relative to the script's start, lease IDs by their order of grant,
//! errors by gRPC code and message, TTLs, keys, watch events); and the etcd designs'
//! conformance bodies on the real member.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, LeaseTimeToLiveOptions, LockOptions,
    PutOptions, Txn, TxnOp, WatchOptions,
};
use lock_impl::testing::{EtcdBackend, Factory, real_etcd, run_all};

/// Lease IDs by their order of grant, and revisions relative to a base.
#[derive(Default)]
struct Norm {
    base: i64,
    leases: BTreeMap<i64, String>,
}

impl Norm {
    fn rev(&self, r: i64) -> String {
        if r == 0 {
            "0".into()
        } else {
            format!("R{:+}", r - self.base)
        }
    }

    fn lease(&mut self, id: i64) -> String {
        if id == 0 {
            return "none".into();
        }
        let n = self.leases.len() + 1;
        self.leases
            .entry(id)
            .or_insert_with(|| format!("L{n}"))
            .clone()
    }

    fn text(&mut self, s: &str) -> String {
        let mut out = s.to_string();
        for (id, name) in &self.leases {
            out = out.replace(&format!("{id:x}"), name);
        }
        out
    }

    fn kv(&mut self, kv: &etcd_client::KeyValue) -> String {
        let key = self.text(&String::from_utf8_lossy(kv.key()));
        let lease = self.lease(kv.lease());
        format!(
            "{key}={} create {} mod {} version {} lease {lease}",
            String::from_utf8_lossy(kv.value()),
            self.rev(kv.create_revision()),
            self.rev(kv.mod_revision()),
            kv.version(),
        )
    }
}

fn err(e: etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(s) => format!("error {:?}: {}", s.code(), s.message()),
        other => format!("error {other}"),
    }
}

/// The script: every answer as a line.
async fn script(mut c: Client, tag: &str) -> Vec<String> {
    let k = |s: &str| format!("{tag}/{s}");
    let mut n = Norm::default();
    let mut out = Vec::new();
    let base = c.get(k("none"), None).await.unwrap();
    n.base = base.header().unwrap().revision();

    let r = c.put(k("a"), "v1", None).await.unwrap();
    out.push(format!("put a: {}", n.rev(r.header().unwrap().revision())));
    let r = c
        .put(k("a"), "v2", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    let prev = r.prev_key().map(|kv| n.kv(kv)).unwrap_or_default();
    out.push(format!(
        "put a again: {} prev {prev}",
        n.rev(r.header().unwrap().revision())
    ));
    let r = c.get(k("a"), None).await.unwrap();
    for kv in r.kvs() {
        let line = n.kv(kv);
        out.push(format!("get a: {line} count {}", r.count()));
    }

    let txn = Txn::new()
        .when([Compare::create_revision(k("a"), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(k("a"), "v3", None)])
        .or_else([TxnOp::get(k("a"), None)]);
    let r = c.txn(txn).await.unwrap();
    out.push(format!(
        "txn create(a)=0: succeeded {} at {} with {} responses",
        r.succeeded(),
        n.rev(r.header().unwrap().revision()),
        r.op_responses().len()
    ));
    let txn = Txn::new()
        .when([Compare::value(k("missing"), CompareOp::NotEqual, "x")])
        .and_then([TxnOp::put(k("b"), "vb", None), TxnOp::get(k("b"), None)]);
    let r = c.txn(txn).await.unwrap();
    out.push(format!(
        "txn value(missing)!=x: succeeded {}",
        r.succeeded()
    ));
    let txn = Txn::new()
        .when([Compare::version(k("missing"), CompareOp::Equal, 0)])
        .and_then([
            TxnOp::put(k("b"), "vb", None),
            TxnOp::get(
                k(""),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(
                            etcd_client::SortTarget::Create,
                            etcd_client::SortOrder::Ascend,
                        )
                        .with_limit(1),
                ),
            ),
        ]);
    let r = c.txn(txn).await.unwrap();
    let mut lines = Vec::new();
    for op in r.op_responses() {
        match op {
            etcd_client::TxnOpResponse::Put(p) => lines.push(format!(
                "put at {}",
                n.rev(p.header().map_or(0, |h| h.revision()))
            )),
            etcd_client::TxnOpResponse::Get(g) => {
                let kvs: Vec<String> = g.kvs().iter().map(|kv| n.kv(kv)).collect();
                lines.push(format!(
                    "first by create: {kvs:?} count {} more {} at {}",
                    g.count(),
                    g.more(),
                    n.rev(g.header().map_or(0, |h| h.revision()))
                ));
            }
            _ => lines.push("other".into()),
        }
    }
    out.push(format!(
        "txn version(missing)=0: succeeded {} at {}: {lines:?}",
        r.succeeded(),
        n.rev(r.header().unwrap().revision())
    ));

    let r = c
        .get(k("a"), Some(GetOptions::new().with_revision(n.base + 1000)))
        .await;
    out.push(format!(
        "get at a future revision: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));
    let r = c.get("", None).await;
    out.push(format!(
        "get of no key: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));
    let r = c
        .get(k("a"), Some(GetOptions::new().with_revision(n.base + 1)))
        .await
        .unwrap();
    let kvs: Vec<String> = r.kvs().iter().map(|kv| n.kv(kv)).collect();
    out.push(format!("get a at R+1: {kvs:?}"));

    let g = c.lease_grant(1, None).await.unwrap();
    let lease = g.id();
    let name = n.lease(lease);
    out.push(format!("grant 1 s: {name} ttl {}", g.ttl()));
    let r = c
        .put(k("leased"), "x", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap();
    out.push(format!(
        "put leased: {}",
        n.rev(r.header().unwrap().revision())
    ));
    let t = c
        .lease_time_to_live(lease, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    let keys: Vec<String> = t
        .keys()
        .iter()
        .map(|k| n.text(&String::from_utf8_lossy(k)))
        .collect();
    out.push(format!(
        "ttl: {} granted {} keys {keys:?} left>0 {}",
        n.lease(t.id()),
        t.granted_ttl(),
        t.ttl() > 0
    ));
    let r = c
        .put(k("bad"), "x", Some(PutOptions::new().with_lease(lease + 7)))
        .await;
    out.push(format!(
        "put with no such lease: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));
    let (mut keeper, mut stream) = c.lease_keep_alive(lease).await.unwrap();
    keeper.keep_alive().await.unwrap();
    let ka = stream.message().await.unwrap().unwrap();
    out.push(format!("keep-alive: {} ttl {}", n.lease(ka.id()), ka.ttl()));
    drop((keeper, stream));
    let r = c.lease_revoke(lease).await.unwrap();
    out.push(format!("revoke: {}", n.rev(r.header().unwrap().revision())));
    let r = c.get(k("leased"), None).await.unwrap();
    out.push(format!("leased after revoke: {} keys", r.kvs().len()));
    let r = c.lease_revoke(lease).await;
    out.push(format!(
        "revoke again: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));
    let t = c.lease_time_to_live(lease, None).await.unwrap();
    out.push(format!("ttl of a revoked lease: {}", t.ttl()));
    let r = c.lease_keep_alive(lease).await;
    out.push(format!(
        "keep-alive of a revoked lease: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));

    let r = c.delete(k("a"), None).await.unwrap();
    out.push(format!(
        "delete a: {} at {}",
        r.deleted(),
        n.rev(r.header().unwrap().revision())
    ));
    let r = c.delete(k("a"), None).await.unwrap();
    out.push(format!(
        "delete a again: {} at {}",
        r.deleted(),
        n.rev(r.header().unwrap().revision())
    ));

    let mut w = c
        .watch(
            k("a"),
            Some(WatchOptions::new().with_start_revision(n.base + 1)),
        )
        .await
        .unwrap();
    let mut events = Vec::new();
    while events.len() < 3 {
        let resp = w.message().await.unwrap().unwrap();
        for e in resp.events() {
            let kind = if e.event_type() == EventType::Put {
                "put"
            } else {
                "delete"
            };
            let kv = e.kv().map(|kv| n.kv(kv)).unwrap_or_default();
            events.push(format!("{kind} {kv}"));
        }
    }
    out.push(format!("watch a from R+1: {events:?}"));

    // The lock service, with a lease.
    let g = c.lease_grant(5, None).await.unwrap();
    let lease = g.id();
    n.lease(lease);
    let r = c
        .lock(k("lk"), Some(LockOptions::new().with_lease(lease)))
        .await
        .unwrap();
    let key = n.text(&String::from_utf8_lossy(r.key()));
    out.push(format!(
        "lock: key {key} at {}",
        n.rev(r.header().unwrap().revision())
    ));
    let r = c
        .lock(k("lk2"), Some(LockOptions::new().with_lease(lease + 7)))
        .await;
    out.push(format!(
        "lock with no such lease: {}",
        r.map(|_| "ok".into()).unwrap_or_else(err)
    ));
    let r = c.unlock(format!("{tag}/lk/{lease:x}")).await.unwrap();
    out.push(format!(
        "unlock: at {}",
        n.rev(r.header().unwrap().revision())
    ));

    // Expiry: a 2 s lease left alone is gone within 3.5 s, with its key.
    let g = c.lease_grant(2, None).await.unwrap();
    n.lease(g.id());
    c.put(
        k("expiring"),
        "x",
        Some(PutOptions::new().with_lease(g.id())),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let r = c.get(k("expiring"), None).await.unwrap();
    out.push(format!("expiring after 3.5 s: {} keys", r.kvs().len()));
    let t = c.lease_time_to_live(g.id(), None).await.unwrap();
    out.push(format!("ttl of an expired lease: {}", t.ttl()));
    out
}

async fn connect(addr: std::net::SocketAddr) -> Client {
    Client::connect([format!("http://{addr}")], None)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answers_the_script_as_real_etcd_does() {
    // A member of its own: the shared one's revisions move with the other tests'
    // writes.
    if real_etcd().is_none() {
        return;
    }
    let server = lock_impl::testing::EtcdProcess::start().expect("a private etcd");
    let real = server.addr();
    let (model, _member) = sim::etcd::spawn_tokio_member().unwrap();
    let (on_real, on_model) =
        tokio::join!(async { script(connect(real).await, "diff").await }, async {
            script(connect(model).await, "diff").await
        },);
    for (i, (r, m)) in on_real.iter().zip(&on_model).enumerate() {
        assert_eq!(r, m, "line {i} differs:\nreal:  {r}\nmodel: {m}");
    }
    assert_eq!(on_real.len(), on_model.len());
}

async fn conformance(name: &'static str) {
    let Some(addr) = real_etcd() else { return };
    let info = lock_impl::designs_on(lock_impl::Backend::Etcd)
        .find(|d| d.name == name)
        .expect("an etcd design");
    let backend = EtcdBackend {
        host: addr.ip().to_string(),
        port: addr.port(),
    };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_mutex_passes_the_conformance_bodies_on_real_etcd() {
    conformance("etcd-mutex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_mutex_fenced_passes_the_conformance_bodies_on_real_etcd() {
    conformance("etcd-mutex-fenced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lock_service_passes_the_conformance_bodies_on_real_etcd() {
    conformance("etcd-lock-service").await;
}
