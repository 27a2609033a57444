//! The MySQL designs against the model: the conformance bodies of `lock_impl::testing`
//! with the MariaDB model on a real loopback port (real clock), one body for the model
//! and (in `lock-impl/tests/real_mysql.rs`) for Debian's real MariaDB.

use std::sync::Arc;

use lock_impl::testing::{Factory, MySqlBackend, mysql_server, run_all};
use sim::mysql::{MySqlConfig, spawn_tokio_mysql};

async fn conformance_on_model(name: &'static str) {
    let info = lock_impl::MYSQL_DESIGNS
        .iter()
        .find(|d| d.name == name)
        .expect("a MySQL design");
    let (addr, _shared) = spawn_tokio_mysql(MySqlConfig::default())
        .await
        .expect("the model on a loopback port");
    let backend = MySqlBackend {
        server: mysql_server(addr),
    };
    let factory: Factory = Arc::new(move |deps| lock_impl::build(name, deps).expect("built-in"));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mysql_design_is_in_this_suite() {
    let covered = [
        "mysql-unique-index",
        "mysql-get-lock",
        "mysql-for-update",
        "mysql-unique-index-expiry",
        "mysql-unique-index-fenced",
    ];
    for d in lock_impl::MYSQL_DESIGNS {
        assert!(covered.contains(&d.name), "{} has no model test", d.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("mysql-unique-index").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_get_lock_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("mysql-get-lock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_for_update_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("mysql-for-update").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_expiry_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("mysql-unique-index-expiry").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_fenced_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("mysql-unique-index-fenced").await;
}
