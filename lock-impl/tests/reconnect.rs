//! The reconnecting connection against a real `redis-server` that is killed and
//! restarted: the command in flight fails, the next one dials again, and a design
//! acquires again with no help from its caller.

use std::time::Duration;

use lock_impl::testing::RealRedis;
use lock_impl::{Acquire, AcquireOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_acquires_again_after_its_server_restarted() {
    let Some(mut server) = RealRedis::start() else {
        return;
    };
    let deps = lock_impl::production_deps(&server.url(), Duration::from_secs(2))
        .await
        .expect("connect");
    let design = lock_impl::build("set-nx-px-lua", deps.clone()).expect("built-in");
    let options = AcquireOptions::new(10_000, 0).expect("valid");
    let Acquire::Acquired(_) = design.acquire("reconnect:a", options).await.unwrap() else {
        panic!("the first acquisition must succeed on an empty server");
    };

    server.restart();

    // The old connection is dead: the first command after the restart fails (an
    // unknown outcome or a failed dial, never a hang) ...
    let first = design.acquire("reconnect:b", options).await;
    let failed_first = !matches!(first, Ok(Acquire::Acquired(_)));
    // ... and the next one dials again and works: the restarted server forgot the
    // first lock, so even its key is free.
    let mut acquired = false;
    for _ in 0..20 {
        if let Ok(Acquire::Acquired(_)) = design.acquire("reconnect:a", options).await {
            acquired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        acquired,
        "the design never acquired again after the restart (first try after it: {first:?})"
    );
    assert!(
        failed_first,
        "the first command after a restart cannot have used the dead connection: {first:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_to_a_dead_server_fails_as_not_connected_without_running_the_command() {
    let Some(server) = RealRedis::start() else {
        return;
    };
    let url = server.url();
    let deps = lock_impl::production_deps(&url, Duration::from_secs(2))
        .await
        .expect("connect");
    drop(server);
    let mut conn = deps.conn.clone();
    // The established connection breaks first ...
    let _ = redis::cmd("PING").query_async::<String>(&mut conn).await;
    // ... then a dial is refused: a client error saying the command was never sent.
    let err = redis::cmd("PING")
        .query_async::<String>(&mut conn)
        .await
        .expect_err("the server is gone");
    assert_eq!(err.kind(), redis::ErrorKind::Client, "{err}");
    assert!(err.to_string().contains("not connected"), "{err}");
}
