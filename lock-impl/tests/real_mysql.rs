//! The MySQL client and the MySQL designs against a real MariaDB (a private `mariadbd`
//! from Debian's `mariadb-server` 10.11 on a free loopback port, database and user
//! `locksim`, started once for this binary by `lock_impl::testing::real_mysql`): the
//! conformance bodies of `lock_impl::testing`, and the client's login and errors. Skips
//! without the package, unless `LOCKSIM_REQUIRE_MYSQL` is set.

use std::sync::Arc;

use lock_impl::mysql::{MySqlConn, MySqlError, Reply};
use lock_impl::testing::{Factory, MySqlBackend, mysql_server, real_mysql, run_all};
use lock_impl::{Clock, TokioClock};

async fn conformance(name: &'static str) {
    let Some(addr) = real_mysql() else {
        return;
    };
    let info = lock_impl::designs_on(lock_impl::Backend::MySql)
        .find(|d| d.name == name)
        .expect("a MySQL design");
    let backend = MySqlBackend {
        server: mysql_server(addr),
    };
    // The server is this binary's own and starts empty: no rows left by an earlier
    // run hold this run's keys (the bodies' keys are unique within the binary).
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
    println!("real-mysql conformance passed: design={name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_passes_the_conformance_bodies_on_real_mariadb() {
    conformance("mysql-unique-index").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_get_lock_passes_the_conformance_bodies_on_real_mariadb() {
    conformance("mysql-get-lock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_for_update_passes_the_conformance_bodies_on_real_mariadb() {
    conformance("mysql-for-update").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_expiry_passes_the_conformance_bodies_on_real_mariadb() {
    conformance("mysql-unique-index-expiry").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_unique_index_fenced_passes_the_conformance_bodies_on_real_mariadb() {
    conformance("mysql-unique-index-fenced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_logs_in_and_reports_server_errors() {
    let Some(addr) = real_mysql() else {
        return;
    };
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mut conn = MySqlConn::connect(&mysql_server(addr), clock.clone())
        .await
        .expect("login as locksim");
    assert!(
        conn.handshake().server_version.contains("MariaDB"),
        "{:?}",
        conn.handshake()
    );
    assert!(matches!(conn.ping().await, Ok(Reply::Ok(_))));
    match conn.query("FOO BAR").await {
        Err(MySqlError::Server(e)) => {
            assert_eq!((e.code, e.sql_state.as_str()), (1064, "42000"), "{e}")
        }
        other => panic!("a syntax error expected, got {other:?}"),
    }
    let wrong = lock_impl::mysql::MySqlServer {
        password: "not-the-password".into(),
        ..mysql_server(addr)
    };
    match MySqlConn::connect(&wrong, clock).await {
        Err(MySqlError::Server(e)) => assert_eq!(e.code, 1045, "{e}"),
        other => panic!("access denied expected, got {other:?}"),
    }
    conn.quit().await;
}
