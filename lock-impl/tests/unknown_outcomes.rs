//! An acquisition whose first command took the lock and whose second failed is an
//! unknown outcome, whatever the second failed with.

use std::time::Duration;

use lock_impl::testing::RealRedis;
use lock_impl::{Acquire, AcquireOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_expire_reports_unknown_when_pexpire_is_refused_after_setnx_took_the_lock() {
    let Some(server) = RealRedis::start() else {
        return;
    };
    // A user that may SETNX but not PEXPIRE: the server refuses the second command
    // with NOPERM, after the first one already set the key.
    let admin = lock_impl::production_deps(&server.url(), Duration::from_secs(2))
        .await
        .expect("connect");
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "limited",
            "on",
            ">secret",
            "~*",
            "+@connection",
            "+setnx",
            "+get",
            "+del",
        ])
        .query_async(&mut admin.conn.clone())
        .await
        .expect("ACL SETUSER");
    let url = format!("redis://limited:secret@{}", server.addr());
    let deps = lock_impl::production_deps(&url, Duration::from_secs(2))
        .await
        .expect("connect as the limited user");
    let design = lock_impl::build("setnx-expire", deps).expect("built-in");
    let outcome = design
        .acquire(
            "unknown:setnx",
            AcquireOptions::new(1_000, 0).expect("valid"),
        )
        .await;
    assert!(
        matches!(outcome, Ok(Acquire::Unknown(ref why)) if why.contains("PEXPIRE")),
        "{outcome:?}"
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg("unknown:setnx")
        .query_async(&mut admin.conn.clone())
        .await
        .expect("PTTL");
    assert_eq!(
        ttl, -1,
        "the key is held with no expiry: exactly why it is unknown"
    );
}
