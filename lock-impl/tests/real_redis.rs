//! The conformance bodies of `lock_impl::testing`, run on every design against a real
//! `redis-server` that the test starts on a free loopback port.

use std::sync::Arc;

use lock_impl::testing::{Factory, RealRedis, UrlBackend, run_all};
use lock_impl::{AcquireOptions, LockDesign, LockError, designs};

#[allow(dead_code)]
#[path = "../examples/custom_design.rs"]
mod custom;

fn backend() -> Option<(RealRedis, UrlBackend)> {
    let server = RealRedis::start()?;
    let url = server.url();
    Some((server, UrlBackend { url }))
}

fn builtin(name: &'static str) -> Factory {
    Arc::new(move |deps| lock_impl::build(name, deps).expect("built-in design"))
}

async fn conformance(name: &'static str) {
    let info = lock_impl::DESIGNS
        .iter()
        .find(|d| d.name == name)
        .expect("built-in");
    let Some((_server, backend)) = backend() else {
        return;
    };
    run_all(
        &backend,
        &builtin(name),
        info.expires,
        info.release_checks_owner,
    )
    .await;
    println!("real-redis conformance passed: design={name}");
}

/// The Redlock designs against five real `redis-server` processes on loopback.
async fn conformance_on_five(name: &'static str) {
    let info = lock_impl::DESIGNS
        .iter()
        .find(|d| d.name == name)
        .expect("built-in");
    assert_eq!(info.masters, lock_impl::REDLOCK_MASTERS);
    let Some((servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    run_all(
        &backend,
        &builtin(name),
        info.expires,
        info.release_checks_owner,
    )
    .await;
    // The lock really lives on a majority of the five: after an acquisition, at least
    // three servers hold the key with the guard's owner.
    let lock = builtin(name)(lock_impl::testing::Backend::deps(&backend).await);
    let key = lock_impl::testing::fresh_key("majority");
    let Ok(lock_impl::Acquire::Acquired(guard)) = lock
        .acquire(&key, AcquireOptions::new(10_000, 0).unwrap())
        .await
    else {
        panic!("design={name}: a free lock on five live masters is granted");
    };
    let mut holding = 0;
    for server in &servers {
        let mut conn = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let held = match kind.as_str() {
            "string" => {
                let v: String = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                v == guard.owner
            }
            "hash" => {
                let n: i64 = redis::cmd("HEXISTS")
                    .arg(&key)
                    .arg(&guard.owner)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                n == 1
            }
            _ => false,
        };
        holding += usize::from(held);
    }
    assert!(
        holding >= 3,
        "design={name}: only {holding} of 5 masters hold the lock"
    );
    lock.release(&guard).await.unwrap();
    println!("real-redis conformance passed on five masters: design={name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::Redlock::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_unsigned_validity_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::Redlock::UNSIGNED_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_redlock_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::RedissonRedlock::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_del_passes_conformance_on_real_redis() {
    conformance(designs::SetnxDel::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_expire_passes_conformance_on_real_redis() {
    conformance(designs::SetnxExpire::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_getset_passes_conformance_on_real_redis() {
    conformance(designs::SetnxGetset::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_px_del_passes_conformance_on_real_redis() {
    conformance(designs::SetNxPxDel::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_px_check_del_passes_conformance_on_real_redis() {
    conformance(designs::SetNxPxCheckDel::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_nx_px_lua_passes_conformance_on_real_redis() {
    conformance(designs::SetNxPxLua::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_watchdog_passes_conformance_on_real_redis() {
    conformance(designs::ReentrantWatchdog::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_passes_conformance_on_real_redis() {
    conformance(designs::Fenced::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_written_design_passes_the_same_conformance() {
    let factory: Factory = Arc::new(|deps| Arc::new(custom::SetNxExLua::new(deps)));
    // Its lease is rounded up to whole seconds, so the expiry body (150 ms lease, 400 ms
    // wait) would see it still held: run the bodies that do not depend on the rounding.
    let Some((_server, backend)) = backend() else {
        return;
    };
    lock_impl::testing::exclusive_between_two_owners(&backend, &factory).await;
    lock_impl::testing::release_by_owner_frees_the_lock(&backend, &factory).await;
    lock_impl::testing::foreign_release_leaves_the_lock(&backend, &factory).await;
    lock_impl::testing::contention_keeps_a_counter_exact(&backend, &factory).await;
    println!(
        "real-redis conformance passed: design={}",
        custom::SetNxExLua::NAME
    );
}

#[tokio::test]
async fn bad_input_gives_typed_errors_that_name_the_problem() {
    let err = AcquireOptions::new(0, 0).unwrap_err();
    assert!(matches!(err, LockError::InvalidLease { lease_ms: 0 }));
    assert!(err.to_string().contains("lease_ms=0"), "{err}");
    let err = AcquireOptions::new(-5, 0).unwrap_err();
    assert!(err.to_string().contains("lease_ms=-5"), "{err}");
    let err = AcquireOptions::new(100, -1).unwrap_err();
    assert!(err.to_string().contains("wait_ms=-1"), "{err}");

    // An unreachable server: a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let err = lock_impl::connect(&url, std::time::Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&url), "{err}");

    let Some((_server, backend)) = backend() else {
        return;
    };
    let deps = lock_impl::testing::Backend::deps(&backend).await;
    let err = lock_impl::build("setnx-everything", deps.clone())
        .err()
        .expect("unknown design");
    assert!(err.to_string().contains("setnx-everything"), "{err}");
    assert!(
        err.to_string().contains("set-nx-px-lua"),
        "lists the allowed names: {err}"
    );
    for design in lock_impl::DESIGNS.iter().filter(|d| d.on_redis()) {
        let lock = lock_impl::build(design.name, deps.clone()).unwrap();
        let err = lock
            .acquire("", AcquireOptions::new(100, 0).unwrap())
            .await
            .unwrap_err();
        assert!(
            matches!(err, LockError::EmptyKey),
            "design={} {err:?}",
            design.name
        );
        assert!(err.to_string().contains("key"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_synced_passes_conformance_on_real_redis() {
    conformance(designs::WaitSynced::NAME).await;
}

/// With a real replica: a grant means the replica has the lock; a replica that cannot
/// acknowledge (asleep in `DEBUG SLEEP`) makes the acquisition fail and the master
/// give the lock back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_synced_grants_only_what_the_replica_acknowledged() {
    use lock_impl::Acquire;
    use redis::AsyncCommands;
    let Some(master) = RealRedis::start() else {
        return;
    };
    let port = master.addr().port().to_string();
    let Some(replica) = RealRedis::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--enable-debug-command",
        "local",
    ]) else {
        return;
    };
    let client = redis::Client::open(replica.url()).unwrap();
    let mut on_replica = client.get_multiplexed_async_connection().await.unwrap();
    // Ready when the *master* lists the replica as online: only then does `ROLE` name
    // it (after a diskless sync that is the replica's first ACK, up to a second after
    // the replica itself reports its link up), and only then does `wait-synced` wait.
    let mut on_master = redis::Client::open(master.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut online = false;
    for _ in 0..200 {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut on_master)
            .await
            .unwrap();
        if info.contains("state=online") {
            online = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(online, "the replica never came online at the master");
    let backend = UrlBackend { url: master.url() };
    let deps = lock_impl::testing::Backend::deps(&backend).await;
    let lock = lock_impl::build(designs::WaitSynced::NAME, deps).unwrap();
    // A generous lease for the granted case: `WAIT` then has 2.5 s (lease / 4), which a
    // live replica meets even on a machine loaded by the parallel test suite (500 ms
    // once did not, in CI).
    let generous = AcquireOptions::new(10_000, 0).unwrap();
    let options = AcquireOptions::new(2_000, 0).unwrap();
    let Acquire::Acquired(guard) = lock.acquire("lock:synced", generous).await.unwrap() else {
        panic!("a lock nobody holds, with a live replica, is granted");
    };
    let on_replica_value: Option<String> = on_replica.get("lock:synced").await.unwrap();
    assert_eq!(on_replica_value.as_deref(), Some(guard.owner.as_str()));
    lock.release(&guard).await.unwrap();

    // The replica sleeps for a second: it cannot acknowledge within lease / 4.
    let sleeper = tokio::spawn(async move {
        let _: redis::RedisResult<String> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1")
            .query_async(&mut on_replica)
            .await;
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let outcome = lock.acquire("lock:unsynced", options).await.unwrap();
    assert!(
        matches!(outcome, Acquire::NotAcquired),
        "an unacknowledged lock is refused: {outcome:?}"
    );
    let left: Option<String> = on_master.get("lock:unsynced").await.unwrap();
    assert_eq!(left, None, "the refused lock was given back");
    sleeper.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_passes_conformance_on_real_redis() {
    conformance(designs::RedisPy::NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_3_passes_conformance_on_real_redis() {
    conformance(designs::RedisPy::V3_NAME).await;
}

async fn pttl(url: &str, key: &str) -> i64 {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// redis-py's extend and reacquire scripts, as `Lock.extend` / `Lock.reacquire` use
/// them: adding to the TTL, replacing it, resetting it to the lease, and
/// `LockNotOwnedError` (here `false`) once the lock is another owner's or gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_extend_and_reacquire_follow_the_scripts() {
    let Some((server, backend)) = backend() else {
        return;
    };
    let deps = lock_impl::testing::Backend::deps(&backend).await;
    let lock = designs::RedisPy::new(deps.clone());
    let key = lock_impl::testing::fresh_key("redis-py-extend");
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let Ok(lock_impl::Acquire::Acquired(guard)) =
        lock_impl::LockDesign::acquire(&lock, &key, opts).await
    else {
        panic!("a free lock is granted");
    };
    // extend(20 s), replace_ttl=False: the TTL grows to about 30 s.
    assert!(lock.extend(&guard, 20_000, false).await.unwrap());
    let t = pttl(&server.url(), &key).await;
    assert!((25_000..=30_000).contains(&t), "added to the TTL: {t}");
    // extend(5 s, replace_ttl=True): the TTL is 5 s.
    assert!(lock.extend(&guard, 5_000, true).await.unwrap());
    let t = pttl(&server.url(), &key).await;
    assert!((4_000..=5_000).contains(&t), "replaced the TTL: {t}");
    // reacquire(): back to the lease.
    assert!(lock.reacquire(&guard, 10_000).await.unwrap());
    let t = pttl(&server.url(), &key).await;
    assert!((9_000..=10_000).contains(&t), "reset to the lease: {t}");
    // Someone else's token: LockNotOwnedError, and the TTL is untouched.
    let forged = lock_impl::Guard {
        owner: "not-mine".into(),
        ..guard.clone()
    };
    assert!(!lock.extend(&forged, 50_000, true).await.unwrap());
    assert!(!lock.reacquire(&forged, 50_000).await.unwrap());
    assert!(pttl(&server.url(), &key).await <= 10_000);
    // A guard of another design is refused, naming both.
    let foreign = lock_impl::Guard {
        design: designs::SetNxPxLua::NAME.into(),
        ..guard.clone()
    };
    let err = lock.extend(&foreign, 1, true).await.unwrap_err();
    assert!(matches!(err, LockError::ForeignGuard { .. }), "{err:?}");
    assert_eq!(
        lock_impl::LockDesign::release(&lock, &guard).await.unwrap(),
        lock_impl::Release::Removed
    );
    // Released: extend and release both report "no longer owned".
    assert!(!lock.extend(&guard, 1_000, false).await.unwrap());
    assert_eq!(
        lock_impl::LockDesign::release(&lock, &guard).await.unwrap(),
        lock_impl::Release::NotRemoved
    );
}

/// redis-py's blocking loop: a fixed 0.1 s sleep, and no try whose `next_try_at` would
/// fall past `stop_trying_at`: a 250 ms budget on a held lock makes three tries (at 0,
/// 100 and 200 ms) and gives up after about 200 ms, not 250.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_blocks_in_fixed_sleeps_within_blocking_timeout() {
    let Some((_server, backend)) = backend() else {
        return;
    };
    let holder = designs::RedisPy::new(lock_impl::testing::Backend::deps(&backend).await);
    let waiter = designs::RedisPy::new(lock_impl::testing::Backend::deps(&backend).await);
    let key = lock_impl::testing::fresh_key("redis-py-blocking");
    let Ok(lock_impl::Acquire::Acquired(guard)) =
        lock_impl::LockDesign::acquire(&holder, &key, AcquireOptions::new(10_000, 0).unwrap())
            .await
    else {
        panic!("a free lock is granted");
    };
    let started = std::time::Instant::now();
    let outcome =
        lock_impl::LockDesign::acquire(&waiter, &key, AcquireOptions::new(10_000, 250).unwrap())
            .await
            .unwrap();
    let took = started.elapsed();
    assert_eq!(outcome, lock_impl::Acquire::NotAcquired);
    assert!(
        took >= std::time::Duration::from_millis(200)
            && took < std::time::Duration::from_millis(250),
        "gave up after {took:?}"
    );
    lock_impl::LockDesign::release(&holder, &guard)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redsync_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::Redsync::NAME).await;
}

/// redsync's `Extend`: `touchScript` re-arms the key where it is ours; with
/// `WithSetNXOnExtend`, `touchWithSetNXScript` also re-creates it on a master that lost
/// it (here: deleted behind the client's back), which `touchScript` does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redsync_extend_and_set_nx_on_extend_follow_the_scripts() {
    let Some((servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let lock = designs::Redsync::new(lock_impl::testing::Backend::deps(&backend).await);
    let key = lock_impl::testing::fresh_key("redsync-extend");
    let Ok(lock_impl::Acquire::Acquired(guard)) =
        lock_impl::LockDesign::acquire(&lock, &key, AcquireOptions::new(10_000, 0).unwrap()).await
    else {
        panic!("a free lock on five masters is granted");
    };
    // Three masters lose the key: touchScript reaches only two, below the quorum.
    for server in &servers[..3] {
        let mut conn = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: i64 = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    assert_eq!(lock.extend(&guard, 20_000, false).await.unwrap(), None);
    // WithSetNXOnExtend re-creates it on the three: a quorum, a later `until`.
    let extended = lock
        .extend(&guard, 20_000, true)
        .await
        .unwrap()
        .expect("touchWithSetNXScript re-creates the lost keys");
    assert!(extended.valid_until > guard.valid_until);
    for server in &servers {
        let t = pttl(&server.url(), &key).await;
        assert!((15_000..=20_000).contains(&t), "every master re-armed: {t}");
    }
    // Another owner's value is refused by both scripts.
    let forged = lock_impl::Guard {
        owner: "not-mine".into(),
        ..guard.clone()
    };
    assert_eq!(lock.extend(&forged, 1_000, false).await.unwrap(), None);
    assert_eq!(lock.extend(&forged, 1_000, true).await.unwrap(), None);
    assert_eq!(
        lock_impl::LockDesign::release(&lock, &guard).await.unwrap(),
        lock_impl::Release::Removed
    );
    // Released everywhere: every master says -1 (ErrLockAlreadyExpired).
    assert_eq!(
        lock_impl::LockDesign::release(&lock, &guard).await.unwrap(),
        lock_impl::Release::NotFound
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::NodeRedlock::NAME).await;
}

/// node-redlock's acquire script refuses a key that exists whatever its value, its
/// extend script re-`SET`s the key with the new duration, and an extension of a lock
/// whose expiration has passed is refused without a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_extend_follows_the_script() {
    let Some((servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let lock = designs::NodeRedlock::new(lock_impl::testing::Backend::deps(&backend).await);
    let key = lock_impl::testing::fresh_key("node-redlock-extend");
    let Ok(lock_impl::Acquire::Acquired(guard)) =
        lock_impl::LockDesign::acquire(&lock, &key, AcquireOptions::new(10_000, 0).unwrap()).await
    else {
        panic!("a free lock on five masters is granted");
    };
    // expiration = start + 10000 - (100 + 2): the guard's validity is just under that
    // (within a millisecond: the guard converts the wall-clock expiration to the
    // monotonic clock with two readings of the real clocks, microseconds apart on a
    // busy machine).
    let left = guard.valid_until.unwrap() - guard.acquired_at;
    assert!(
        left <= std::time::Duration::from_millis(10_000 - 102 + 1),
        "validity {left:?}"
    );
    let extended = lock
        .extend(&guard, 30_000)
        .await
        .unwrap()
        .expect("a live lock extends");
    assert!(extended.valid_until > guard.valid_until);
    // `_execute` returns at the first quorum: the other masters' extensions may still
    // be on their way, so at least three hold the new duration.
    let mut extended_on = 0;
    for server in &servers {
        let t = pttl(&server.url(), &key).await;
        extended_on += usize::from((25_000..=30_000).contains(&t));
    }
    assert!(extended_on >= 3, "re-SET on a quorum: {extended_on} of 5");
    // A lock whose expiration passed: refused before any command.
    let expired = lock_impl::Guard {
        valid_until: Some(guard.acquired_at),
        ..guard.clone()
    };
    assert_eq!(lock.extend(&expired, 30_000).await.unwrap(), None);
    assert_eq!(
        lock_impl::LockDesign::release(&lock, &extended)
            .await
            .unwrap(),
        lock_impl::Release::Removed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_fenced_passes_conformance_on_real_redis() {
    conformance(designs::ReentrantWatchdog::FENCED_NAME).await;
}

/// Redisson's fenced lock script: every grant `INCR`s `redisson_lock_token:{key}` and
/// the guard carries the new value; tokens grow across owners, and the counter is the
/// server's (read back with `GET`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_fenced_tokens_come_from_the_lock_script() {
    let Some((server, backend)) = backend() else {
        return;
    };
    let a = lock_impl::build(
        designs::ReentrantWatchdog::FENCED_NAME,
        lock_impl::testing::Backend::deps(&backend).await,
    )
    .unwrap();
    let b = lock_impl::build(
        designs::ReentrantWatchdog::FENCED_NAME,
        lock_impl::testing::Backend::deps(&backend).await,
    )
    .unwrap();
    let key = lock_impl::testing::fresh_key("redisson-fenced");
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let lock_impl::Acquire::Acquired(ga) = a.acquire(&key, opts).await.unwrap() else {
        panic!("a free lock is granted");
    };
    assert_eq!(ga.token, Some(1));
    assert_eq!(
        b.acquire(&key, opts).await.unwrap(),
        lock_impl::Acquire::NotAcquired
    );
    assert_eq!(a.release(&ga).await.unwrap(), lock_impl::Release::Removed);
    let lock_impl::Acquire::Acquired(gb) = b.acquire(&key, opts).await.unwrap() else {
        panic!("a released lock is granted");
    };
    assert_eq!(gb.token, Some(2), "the refused attempt did not INCR");
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let counter: u64 = redis::cmd("GET")
        .arg(designs::ReentrantWatchdog::token_key(&key))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(counter, 2);
    assert_eq!(
        designs::ReentrantWatchdog::token_key("a{b}"),
        "redisson_lock_token:a{b}",
        "prefixName keeps a hash tag"
    );
    assert_eq!(b.release(&gb).await.unwrap(), lock_impl::Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_rw_passes_conformance_on_real_redis() {
    conformance(designs::RedissonRw::NAME).await;
}

/// Redisson's read-write lock on a real server: readers share, a writer excludes, a
/// reader waits for a writer, a non-holder's release does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_rw_read_write_bodies_on_real_redis() {
    let Some((_server, backend)) = backend() else {
        return;
    };
    lock_impl::testing::read_write_bodies(&backend, &builtin(designs::RedissonRw::NAME)).await;
    println!("real-redis read-write bodies passed: design=redisson-rw");
}

/// The hash and the timeout keys are Redisson's: `mode`, one count per holder (a write
/// holder's field ends in `:write`), `{key}:<lock name>:rwlock_timeout:<n>` per read
/// hold; a design with one mode refuses a read acquisition before sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_rw_keeps_redissons_hash_and_timeout_keys() {
    let Some((server, backend)) = backend() else {
        return;
    };
    let deps = || lock_impl::testing::Backend::deps(&backend);
    let a = designs::RedissonRw::new(deps().await);
    let key = lock_impl::testing::fresh_key("redisson-rw");
    let lock_impl::Acquire::Acquired(ga) = a.read_with_watchdog(&key, 10_000, 0, 7).await.unwrap()
    else {
        panic!("a free read lock is granted");
    };
    assert_eq!(ga.owner, format!("{}:7", a.client_id()));
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let hash: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        hash,
        vec![
            ("mode".to_string(), "read".to_string()),
            (ga.owner.clone(), "1".to_string())
        ]
    );
    let timeout_key = format!("{}:1", designs::timeout_prefix(&key, &ga.owner));
    assert_eq!(
        timeout_key,
        format!("{{{key}}}:{}:rwlock_timeout:1", ga.owner)
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&timeout_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=10_000).contains(&ttl), "timeout key armed: {ttl}");
    assert!(a.watchdog_running(&key, 7, false));
    assert_eq!(
        lock_impl::LockDesign::release(&a, &ga).await.unwrap(),
        lock_impl::Release::Removed
    );
    assert!(!a.watchdog_running(&key, 7, false));
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .arg(&timeout_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        exists, 0,
        "the last reader's unlock deletes the hash and its key"
    );
    let lock_impl::Acquire::Acquired(gw) = a.write_with_watchdog(&key, 10_000, 0, 7).await.unwrap()
    else {
        panic!("a free write lock is granted");
    };
    assert_eq!(gw.owner, format!("{}:7:write", a.client_id()));
    let mode: String = redis::cmd("HGET")
        .arg(&key)
        .arg("mode")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "write");
    assert_eq!(
        lock_impl::LockDesign::release(&a, &gw).await.unwrap(),
        lock_impl::Release::Removed
    );
    let exclusive = lock_impl::build(designs::SetNxPxLua::NAME, deps().await).unwrap();
    let refused = exclusive
        .acquire_read(&key, AcquireOptions::new(1_000, 0).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(refused, LockError::NoReadMode { .. }), "{refused}");
    assert!(refused.nothing_sent());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_using_passes_conformance_on_five_real_masters() {
    conformance_on_five(designs::NodeRedlockUsing::NAME).await;
}

/// node-redlock's `using()`: the timer extends the lock before its expiration for as
/// long as the holder lives, so a 200 ms lock is still held after a second; release
/// stops the timer and frees it; a lease too short for the threshold is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_using_extends_until_released() {
    let Some((_servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let deps = || lock_impl::testing::Backend::deps(&backend);
    let (a, b) = (
        designs::NodeRedlockUsing::new(deps().await),
        designs::NodeRedlockUsing::new(deps().await),
    );
    let key = lock_impl::testing::fresh_key("node-redlock-using");
    let opts = AcquireOptions::new(200, 0).unwrap();
    let Ok(lock_impl::Acquire::Acquired(guard)) = a.acquire(&key, opts).await else {
        panic!("a free lock on five masters is granted");
    };
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    assert_eq!(
        b.acquire(&key, opts).await.unwrap(),
        lock_impl::Acquire::NotAcquired,
        "five leases later the extended lock is still held"
    );
    assert_eq!(
        a.release(&guard).await.unwrap(),
        lock_impl::Release::Removed
    );
    let Ok(lock_impl::Acquire::Acquired(other)) = b.acquire(&key, opts).await else {
        panic!("released, the lock is free");
    };
    // The first holder's timer is stopped: the second holder's lock expires on its
    // own once its own timer is stopped by its release, and nothing re-arms the
    // first's value.
    assert_eq!(
        b.release(&other).await.unwrap(),
        lock_impl::Release::Removed
    );
    let short = a
        .acquire(&key, AcquireOptions::new(100, 0).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(
            short,
            LockError::LeaseTooShortForWatchdog { lease_ms: 100, .. }
        ),
        "{short:?}"
    );
}
