//! The ZooKeeper client and the `zk-curator` designs against a real ZooKeeper (a
//! private server from Debian's `zookeeper` jars on a free loopback port, started once
//! for this binary by `lock_impl::testing::real_zookeeper`): the conformance bodies of
//! `lock_impl::testing`, and the client's session behaviour. Skips without the package,
//! unless `LOCKSIM_REQUIRE_ZK` is set.

use std::sync::Arc;
use std::time::Duration;

use lock_impl::testing::{Factory, ZkBackend, real_zookeeper, run_all};
use lock_impl::zk::proto::{ErrorCode, EventType, create_mode};
use lock_impl::zk::{SessionState, TokioDialer, ZkClient, ZkEnsemble, ZkError};
use lock_impl::{AcquireOptions, OsEntropy, TokioClock};

fn ensemble(timeout_ms: u32) -> Option<ZkEnsemble> {
    let addr = real_zookeeper()?;
    Some(ZkEnsemble {
        servers: vec![(addr.ip().to_string(), addr.port())],
        dialer: Arc::new(TokioDialer),
        session_timeout_ms: timeout_ms,
        scale: lock_impl::TimeScale::REAL,
    })
}

async fn client(e: &ZkEnsemble) -> ZkClient {
    ZkClient::connect(
        e,
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Duration::from_secs(5),
    )
    .await
    .expect("session with the real ZooKeeper")
}

async fn conformance(name: &'static str) {
    let Some(addr) = real_zookeeper() else {
        return;
    };
    let info = lock_impl::designs_on(lock_impl::Backend::ZooKeeper)
        .find(|d| d.name == name)
        .expect("a ZooKeeper design");
    let backend = ZkBackend {
        servers: vec![addr.to_string()],
        session_timeout_ms: 10_000,
    };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
    println!("real-zookeeper conformance passed: design={name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_curator_passes_the_conformance_bodies_on_real_zookeeper() {
    conformance("zk-curator").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_curator_fenced_passes_the_conformance_bodies_on_real_zookeeper() {
    conformance("zk-curator-fenced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_are_czxids_and_grow_between_holders() {
    let Some(addr) = real_zookeeper() else {
        return;
    };
    let backend = ZkBackend {
        servers: vec![addr.to_string()],
        session_timeout_ms: 10_000,
    };
    let a = lock_impl::build(
        "zk-curator-fenced",
        lock_impl::testing::Backend::deps(&backend).await,
    )
    .unwrap();
    let key = lock_impl::testing::fresh_key("fenced-zk");
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let mut last = 0;
    for _ in 0..3 {
        let lock_impl::Acquire::Acquired(g) = a.acquire(&key, opts).await.unwrap() else {
            panic!("a free lock is granted");
        };
        let token = g.token.expect("fenced guards carry a token");
        assert!(token > last, "token {token} after {last}");
        last = token;
        a.release(&g).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_deletes_its_ephemerals_and_fires_the_watch() {
    let Some(e) = ensemble(10_000) else {
        return;
    };
    let (a, b) = (client(&e).await, client(&e).await);
    let dir = format!("/locksim-client-{}", std::process::id());
    let _ = a.create(&dir, None, create_mode::PERSISTENT).await;
    let node = a
        .create(
            &format!("{dir}/n-"),
            Some(b"x"),
            create_mode::EPHEMERAL_SEQUENTIAL,
        )
        .await
        .unwrap();
    let (stat, watch) = b.exists_watch(&node).await.unwrap();
    assert_eq!(stat.unwrap().ephemeral_owner, a.session_id());
    a.close().await.unwrap();
    assert_eq!(a.state(), SessionState::Closed);
    let event = tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the watch fires")
        .expect("event delivered");
    assert_eq!(
        (event.kind, event.path.as_str()),
        (EventType::NodeDeleted, node.as_str())
    );
    assert_eq!(b.exists(&node).await.unwrap(), None);
    assert_eq!(
        b.delete(&node, -1).await,
        Err(ZkError::Server(ErrorCode::NO_NODE))
    );
    b.delete(&dir, -1).await.unwrap();
    b.close().await.unwrap();
}
