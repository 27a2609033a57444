//! One body, two backends: the conformance bodies that `lock-impl` runs against a real
//! `redis-server` run here against the model, served on a loopback port with the real
//! clock. A design that behaves differently on the two fails one of the suites.

use std::sync::Arc;

use lock_impl::testing::{Factory, UrlBackend, run_all};

async fn model_backend() -> UrlBackend {
    let (addr, _shared) = sim::redis::server::spawn_tokio_model()
        .await
        .expect("bind a loopback port");
    UrlBackend {
        url: format!("redis://{addr}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_design_passes_the_conformance_bodies_on_the_model() {
    for design in lock_impl::DESIGNS.iter().filter(|d| d.on_redis()) {
        let backend = model_backend().await;
        let name = design.name;
        let factory: Factory = Arc::new(move |deps| lock_impl::build(name, deps).unwrap());
        run_all(
            &backend,
            &factory,
            design.expires,
            design.release_checks_owner,
        )
        .await;
        println!("model conformance passed: design={name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_rw_passes_the_read_write_bodies_on_the_model() {
    let backend = model_backend().await;
    let factory: Factory =
        Arc::new(|deps| lock_impl::build(lock_impl::designs::RedissonRw::NAME, deps).unwrap());
    lock_impl::testing::read_write_bodies(&backend, &factory).await;
    println!("model read-write bodies passed: design=redisson-rw");
}
