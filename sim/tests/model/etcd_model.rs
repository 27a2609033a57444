//! The etcd designs against the etcd model on a real loopback port (real clock): the
//! conformance bodies of `lock_impl::testing`, and the model's answers to what the
//! designs send.

use std::sync::Arc;

use lock_impl::testing::{EtcdBackend, Factory, run_all};
use lock_impl::{Acquire, AcquireOptions, Release};

async fn conformance(name: &'static str) {
    let info = lock_impl::designs_on(lock_impl::Backend::Etcd)
        .find(|d| d.name == name)
        .expect("an etcd design");
    let (addr, _member) = sim::etcd::spawn_tokio_member().unwrap();
    let backend = EtcdBackend {
        host: addr.ip().to_string(),
        port: addr.port(),
    };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_mutex_passes_the_conformance_bodies() {
    conformance("etcd-mutex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_mutex_fenced_passes_the_conformance_bodies() {
    conformance("etcd-mutex-fenced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lock_service_passes_the_conformance_bodies() {
    conformance("etcd-lock-service").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_mutex_hands_out_increasing_tokens() {
    let (addr, _member) = sim::etcd::spawn_tokio_member().unwrap();
    let lock = lock_impl::build(
        "etcd-mutex-fenced",
        lock_impl::production_etcd_deps(&addr.ip().to_string(), addr.port()),
    )
    .unwrap();
    let opts = AcquireOptions::new(5_000, 0).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let Acquire::Acquired(g) = lock.acquire("fenced-k", opts).await.unwrap() else {
            panic!("a free lock is granted");
        };
        tokens.push(g.token.expect("a token"));
        assert_eq!(lock.release(&g).await.unwrap(), Release::Removed);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

/// A range at the latest revision reads the live keys alone (a deleted key is skipped
/// without being walked), one at an older revision every key's history: both give
/// what etcd gives, with the count taken before the filters and the limit, and only
/// the kept keys copied.
#[test]
fn a_store_ranges_alike_over_live_keys_and_over_history() {
    use etcd_client::proto::{PbDeleteRequest, PbPutRequest, PbRangeRequest};
    use sim::etcd::store::Store;

    let mut store = Store::new(1, 2, std::time::Duration::from_secs(1));
    let key = |i: u32| format!("lock/{i:03}").into_bytes();
    for i in 0..50 {
        let p = PbPutRequest {
            key: key(i),
            value: format!("v{i}").into_bytes(),
            ..Default::default()
        };
        store.put(&p, "client-0").unwrap();
    }
    let before_deletes = store.revision();
    for i in (0..50).step_by(2) {
        let d = PbDeleteRequest {
            key: key(i),
            ..Default::default()
        };
        store.delete_range(&d, "client-0").unwrap();
    }
    // A key outside the prefix, after it in key order.
    let p = PbPutRequest {
        key: b"lock0".to_vec(),
        ..Default::default()
    };
    store.put(&p, "client-0").unwrap();
    let prefix = |revision: i64| PbRangeRequest {
        key: b"lock/".to_vec(),
        range_end: b"lock0".to_vec(),
        revision,
        ..Default::default()
    };
    let names = |kvs: &[etcd_client::proto::PbKeyValue]| -> Vec<String> {
        kvs.iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .collect()
    };

    // Now: the 25 odd keys, by key, with their values.
    let now = store.range(&prefix(0)).unwrap();
    assert_eq!(now.count, 25);
    assert_eq!(
        names(&now.kvs),
        (1..50)
            .step_by(2)
            .map(|i| format!("lock/{i:03}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(now.kvs[0].value, b"v1");
    // Before the deletes: all 50, by key.
    let then = store.range(&prefix(before_deletes)).unwrap();
    assert_eq!(then.count, 50);
    assert_eq!(names(&then.kvs)[..3], ["lock/000", "lock/001", "lock/002"]);

    // Mutex.Lock's waiter: the last created before a revision, one key, by create
    // revision descending; the count is every key in range, `more` says the rest.
    let waiter = PbRangeRequest {
        sort_target: 2,
        sort_order: 2,
        limit: 1,
        max_create_revision: now.kvs[10].create_revision,
        ..prefix(0)
    };
    let w = store.range(&waiter).unwrap();
    assert_eq!(names(&w.kvs), ["lock/021"]);
    assert_eq!((w.count, w.more), (25, true));
    // keys_only clears the values of the kept keys; count_only keeps none.
    let keys_only = store
        .range(&PbRangeRequest {
            keys_only: true,
            limit: 2,
            ..prefix(0)
        })
        .unwrap();
    assert_eq!(names(&keys_only.kvs), ["lock/001", "lock/003"]);
    assert!(keys_only.kvs.iter().all(|kv| kv.value.is_empty()));
    let count_only = store
        .range(&PbRangeRequest {
            count_only: true,
            ..prefix(0)
        })
        .unwrap();
    assert_eq!((count_only.count, count_only.kvs.len()), (25, 0));
    // The lock service's view of the live keys under the prefix agrees.
    assert_eq!(names(&store.keys_with_prefix(b"lock/")), names(&now.kvs));
    // A deleted key put again lives again, with a new create revision.
    store
        .put(
            &PbPutRequest {
                key: key(0),
                ..Default::default()
            },
            "client-1",
        )
        .unwrap();
    let again = store.range(&prefix(0)).unwrap();
    assert_eq!(again.count, 26);
    assert_eq!(again.kvs[0].create_revision, store.revision());
    // And the old revision still reads the old world.
    assert_eq!(store.range(&prefix(before_deletes)).unwrap().count, 50);
}

/// A keep-alive stream opened `WithRequireLeader` (`hasleader: true`, as clientv3
/// 3.4's lease keeper opens it) is answered as `v3rpc/interceptor.go` answers it: while
/// the member has a leader it renews; once the member has lost its leader, an open
/// stream is cancelled after `maxNoLeaderCnt` election timeouts and a new one is
/// refused, both with `etcdserver: no leader`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_require_leader_keep_alive_stream_ends_on_a_member_without_a_leader() {
    use std::time::Duration;
    let mut cluster = sim::etcd::spawn_tokio_cluster(3).unwrap();
    let start = tokio::time::Instant::now();
    while cluster.leader() != Some(0) {
        assert!(start.elapsed() < Duration::from_secs(10), "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A client of the follower etcd-2, every call `WithRequireLeader`.
    let addr = cluster.members[1].0;
    let options = etcd_client::ConnectOptions::new().with_require_leader(true);
    let mut client = etcd_client::Client::connect([format!("http://{addr}")], Some(options))
        .await
        .unwrap();
    let lease = client.lease_grant(30, None).await.unwrap().id();
    let (mut keeper, mut stream) = client.lease_keep_alive(lease).await.unwrap();
    keeper.keep_alive().await.unwrap();
    let answer = stream.message().await.unwrap().expect("an answer");
    assert!(answer.ttl() > 0, "{answer:?}");
    // etcd-2 alone: it loses its leader within an election timeout or two.
    cluster.kill(0);
    cluster.kill(2);
    let lost = tokio::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => {}
                other => return other.map(|_| ()),
            }
        }
    })
    .await
    .expect("the stream ends");
    let err = ended.expect_err("ended with an error");
    assert!(err.to_string().contains("etcdserver: no leader"), "{err}");
    // Within the leaderless looks (3 election timeouts of 1 s) after the leader was
    // lost, well before a renewal's `ReqTimeout` (7 s) would end it.
    assert!(
        lost.elapsed() < Duration::from_secs(6),
        "{:?}",
        lost.elapsed()
    );
    let refused = client.lease_keep_alive(lease).await;
    let err = refused.map(|_| ()).expect_err("refused");
    assert!(err.to_string().contains("etcdserver: no leader"), "{err}");
}
