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
