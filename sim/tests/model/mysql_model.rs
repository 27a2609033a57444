//! The MySQL designs against the model: the conformance bodies of `lock_impl::testing`
//! with the MariaDB model on a real loopback port (real clock), one body for the model
//! and (in `lock-impl/tests/real_mysql.rs`) for Debian's real MariaDB.

use std::sync::Arc;

use lock_impl::testing::{Factory, MySqlBackend, mysql_server, run_all};
use sim::mysql::{MySqlConfig, spawn_tokio_mysql};

async fn conformance_on_model(name: &'static str) {
    let info = lock_impl::designs_on(lock_impl::Backend::MySql)
        .find(|d| d.name == name)
        .expect("a MySQL design");
    let (addr, _shared) = spawn_tokio_mysql(MySqlConfig::default())
        .await
        .expect("the model on a loopback port");
    let backend = MySqlBackend {
        server: mysql_server(addr),
    };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
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
    for d in lock_impl::designs_on(lock_impl::Backend::MySql) {
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

/// A dropped connection reaches the client with the client library's error numbers:
/// the statement that finds the server gone after it went out is 2013
/// (`CR_SERVER_LOST`), the next one on that connection 2006 (`CR_SERVER_GONE_ERROR`),
/// a dial that reaches nobody 2003 (`CR_CONN_HOST_ERROR`); a reconnect works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_2013_then_2006_and_a_refused_dial_2003() {
    use lock_impl::mysql::MySqlConn;
    use lock_impl::mysql::client::{CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST};
    let (addr, _shared) = spawn_tokio_mysql(MySqlConfig::default())
        .await
        .expect("the model on a loopback port");
    let server = mysql_server(addr);
    let clock: Arc<dyn lock_impl::Clock> = Arc::new(lock_impl::TokioClock::default());
    let mut conn = MySqlConn::connect(&server, clock.clone())
        .await
        .expect("connected");
    conn.query("SET SESSION wait_timeout = 1")
        .await
        .expect("set");
    // The server closes the idle connection after a second.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let lost = conn
        .query("SET SESSION wait_timeout = 5")
        .await
        .expect_err("the server closed it");
    assert_eq!(lost.client_errno(), Some(CR_SERVER_LOST), "{lost}");
    let gone = conn
        .query("SET SESSION wait_timeout = 5")
        .await
        .expect_err("still closed");
    assert_eq!(gone.client_errno(), Some(CR_SERVER_GONE_ERROR), "{gone}");
    let mut again = MySqlConn::connect(&server, clock.clone())
        .await
        .expect("reconnected");
    again
        .query("SET SESSION wait_timeout = 5")
        .await
        .expect("a fresh connection works");
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = listener.local_addr().expect("addr");
    drop(listener);
    let refused = MySqlConn::connect(&mysql_server(closed), clock)
        .await
        .expect_err("nobody listens");
    assert_eq!(
        refused.client_errno(),
        Some(CR_CONN_HOST_ERROR),
        "{refused}"
    );
}
