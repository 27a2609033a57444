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

/// A cluster under test: its members' client addresses, and how to find its leader and
/// crash a member (the model's on loopback, or Debian's etcd processes).
trait Cluster {
    fn addrs(&self) -> Vec<std::net::SocketAddr>;
    fn leader(&self) -> Option<usize>;
    fn kill(&mut self, i: usize);
}

impl Cluster for sim::etcd::TokioCluster {
    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.members.iter().map(|(a, _)| *a).collect()
    }
    fn leader(&self) -> Option<usize> {
        sim::etcd::TokioCluster::leader(self)
    }
    fn kill(&mut self, i: usize) {
        sim::etcd::TokioCluster::kill(self, i)
    }
}

impl Cluster for lock_impl::testing::EtcdCluster {
    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        lock_impl::testing::EtcdCluster::addrs(self).to_vec()
    }
    fn leader(&self) -> Option<usize> {
        lock_impl::testing::EtcdCluster::leader(self)
    }
    fn kill(&mut self, i: usize) {
        lock_impl::testing::EtcdCluster::kill(self, i)
    }
}

/// Waits (up to 20 s of real time) until `f` answers.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(mut f: impl FnMut() -> F) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no answer within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A lock key with a lease, written and renewed through followers; then the leader
/// crashes: what a survivor says of the key, the lease and the next revisions. Lines
/// name members by role (`leader`, `follower 1`, `follower 2`), revisions relative to
/// the key's.
async fn cluster_script(mut cluster: impl Cluster) -> Vec<String> {
    let mut out = Vec::new();
    let leader = eventually(|| std::future::ready(cluster.leader())).await;
    let (f1, f2) = ((leader + 1) % 3, (leader + 2) % 3);
    let addrs = cluster.addrs();
    let mut c = Vec::new();
    for a in &addrs {
        c.push(connect(*a).await);
    }
    let g = c[f1].lease_grant(5, None).await.unwrap();
    out.push(format!("grant through follower 1: ttl {}", g.ttl()));
    let put = c[f2]
        .put("lock/a", "x", Some(PutOptions::new().with_lease(g.id())))
        .await
        .unwrap();
    let r1 = put.header().unwrap().revision();
    let got = c[leader].get("lock/a", None).await.unwrap();
    let kv = &got.kvs()[0];
    out.push(format!(
        "put through follower 2, read on the leader: create {} mod {} with the lease {}",
        kv.create_revision() - r1,
        kv.mod_revision() - r1,
        kv.lease() == g.id()
    ));
    let (mut keeper, mut answers) = c[f1].lease_keep_alive(g.id()).await.unwrap();
    keeper.keep_alive().await.unwrap();
    let a = answers.message().await.unwrap().unwrap();
    out.push(format!("keep-alive through follower 1: ttl {}", a.ttl()));
    let t = c[f2].lease_time_to_live(g.id(), None).await.unwrap();
    out.push(format!(
        "time to live through follower 2: granted {}, left 4 or 5: {}",
        t.granted_ttl(),
        (4..=5).contains(&t.ttl())
    ));
    drop((keeper, answers));
    cluster.kill(leader);
    let next = eventually(|| std::future::ready(cluster.leader().filter(|l| *l != leader))).await;
    out.push(format!("a survivor leads: {}", next == f1 || next == f2));
    let mut s = c[f1].clone();
    let got = eventually(|| {
        let mut s = s.clone();
        async move { s.get("lock/a", None).await.ok() }
    })
    .await;
    out.push(format!(
        "after the crash, the key on follower 1: {} key(s), create {}",
        got.kvs().len(),
        got.kvs().first().map_or(-1, |kv| kv.create_revision() - r1)
    ));
    // The new leader's lessor gave the lease its whole TTL again, plus an election
    // timeout (`Promote`): at least 5 s left.
    let t = c[f2].lease_time_to_live(g.id(), None).await.unwrap();
    out.push(format!(
        "the lease after the new leader: at least 5 s left: {}",
        t.ttl() >= 5
    ));
    let put = c[f2].put("lock/b", "y", None).await.unwrap();
    out.push(format!(
        "the next write: revision {}",
        put.header().unwrap().revision() - r1
    ));
    s.lease_revoke(g.id()).await.unwrap();
    let got = c[f2].get("lock/a", None).await.unwrap();
    out.push(format!("after the revoke: {} key(s)", got.kvs().len()));
    out
}

/// The cluster script on three model members over loopback and on three of Debian's
/// etcd: the same transcript (what the key, the lease and the revisions do when the
/// leader crashes right after a lock key was written through a follower).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_crash_keeps_the_lock_key_and_its_lease_on_the_model_as_on_real_etcd() {
    if real_etcd().is_none() {
        return;
    }
    let real = lock_impl::testing::EtcdCluster::start(3).expect("a private etcd cluster");
    let model = sim::etcd::spawn_tokio_cluster(3).unwrap();
    let (on_real, on_model) = tokio::join!(cluster_script(real), cluster_script(model));
    for (i, (r, m)) in on_real.iter().zip(&on_model).enumerate() {
        assert_eq!(r, m, "line {i} differs:\nreal:  {r}\nmodel: {m}");
    }
    assert_eq!(on_real.len(), on_model.len(), "{on_real:?}\n{on_model:?}");
}
