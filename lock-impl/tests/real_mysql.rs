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

/// On real MariaDB, three nested `GET_LOCK`s by `mysql-get-lock` are three holds: each
/// `RELEASE_LOCK` answers `1`, the design reports the holds left, and another client
/// gets the lock only after the third release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_get_lock_counts_nested_holds_as_real_mariadb_does() {
    use lock_impl::{Acquire, AcquireOptions, Release, testing::Backend};
    let Some(addr) = real_mysql() else {
        return;
    };
    let info = lock_impl::designs_on(lock_impl::Backend::MySql)
        .find(|d| d.name == "mysql-get-lock")
        .expect("the design");
    let backend = MySqlBackend {
        server: mysql_server(addr),
    };
    let (a, b) = ((info.build)(backend.deps().await), (info.build)(backend.deps().await));
    let key = lock_impl::testing::fresh_key("nested");
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let mut guards = Vec::new();
    for _ in 0..3 {
        match a.acquire(&key, opts).await.unwrap() {
            Acquire::Acquired(g) => guards.push(g),
            other => panic!("nested acquire: {other:?}"),
        }
    }
    let mut said = Vec::new();
    while let Some(g) = guards.pop() {
        let other = matches!(b.acquire(&key, opts).await.unwrap(), Acquire::Acquired(_));
        assert!(!other, "another client got the lock with {} holds left", guards.len() + 1);
        said.push(a.release(&g).await.unwrap());
    }
    assert_eq!(
        said,
        [
            Release::StillHeld { count: 2 },
            Release::StillHeld { count: 1 },
            Release::Removed
        ]
    );
    match b.acquire(&key, opts).await.unwrap() {
        Acquire::Acquired(g) => assert_eq!(b.release(&g).await.unwrap(), Release::Removed),
        other => panic!("after the last release: {other:?}"),
    }
}
