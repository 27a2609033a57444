//! `reentrant-watchdog` and `fenced` against a real `redis-server`: reentrancy, watchdog
//! renewal and its end, a crashed watchdog, pub/sub waiting, fencing tokens and the
//! typed errors. Server state is read with plain commands on a separate connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_impl::designs::{Fenced, ReentrantWatchdog};
use lock_impl::testing::{Backend, RealRedis, UrlBackend, fresh_key};
use lock_impl::{
    Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, Spawner, Task,
};
use redis::aio::MultiplexedConnection;

struct Server {
    _server: RealRedis,
    backend: UrlBackend,
    inspect: MultiplexedConnection,
}

async fn server() -> Option<Server> {
    let server = RealRedis::start()?;
    let url = server.url();
    let inspect = lock_impl::connect(&url, Duration::from_secs(5))
        .await
        .expect("connect");
    Some(Server {
        _server: server,
        backend: UrlBackend { url },
        inspect,
    })
}

impl Server {
    async fn deps(&self) -> Deps {
        self.backend.deps().await
    }

    async fn reentrant(&self) -> ReentrantWatchdog {
        ReentrantWatchdog::new(self.deps().await)
    }

    async fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.inspect.clone())
            .await
            .unwrap()
    }

    async fn hget(&self, key: &str, field: &str) -> Option<u64> {
        redis::cmd("HGET")
            .arg(key)
            .arg(field)
            .query_async(&mut self.inspect.clone())
            .await
            .unwrap()
    }

    async fn hgetall(&self, key: &str) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut self.inspect.clone())
            .await
            .unwrap();
        all.sort();
        all
    }

    async fn exists(&self, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<i64>(&mut self.inspect.clone())
            .await
            .unwrap()
            == 1
    }
}

fn acquired(outcome: Result<Acquire, LockError>, what: &str) -> Guard {
    match outcome {
        Ok(Acquire::Acquired(g)) => g,
        other => panic!("{what}: expected Acquired, got {other:?}"),
    }
}

fn opts(lease_ms: i64, wait_ms: i64) -> AcquireOptions {
    AcquireOptions::new(lease_ms, wait_ms).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_acquisition_counts_up_rearms_the_lease_and_each_release_counts_down() {
    let Some(s) = server().await else { return };
    let key = fresh_key("reentrant");
    let (a, b) = (s.reentrant().await, s.reentrant().await);
    let field = a.owner_field(ReentrantWatchdog::DEFAULT_TASK);

    let g1 = acquired(a.acquire_with_lease(&key, 5_000, 0, 1).await, "first");
    assert_eq!(g1.owner, field);
    assert_eq!(s.hget(&key, &field).await, Some(1));
    assert!(s.pttl(&key).await <= 5_000);
    let g2 = acquired(a.acquire_with_lease(&key, 20_000, 0, 1).await, "re-entry");
    assert_eq!(
        g2.owner, g1.owner,
        "a nested acquisition has the same owner"
    );
    assert_eq!(s.hget(&key, &field).await, Some(2));
    let pttl = s.pttl(&key).await;
    assert!(pttl > 5_000, "the re-entry re-armed the lease: PTTL {pttl}");
    assert_eq!(a.hold_count(&key, 1), 2);

    // Another instance is refused meanwhile.
    assert_eq!(
        b.acquire_with_lease(&key, 5_000, 0, 1).await.unwrap(),
        Acquire::NotAcquired
    );

    assert_eq!(
        a.release(&g2).await.unwrap(),
        Release::StillHeld { count: 1 }
    );
    assert!(s.exists(&key).await, "still held after the first release");
    assert_eq!(s.hget(&key, &field).await, Some(1));
    assert_eq!(a.release(&g1).await.unwrap(), Release::Removed);
    assert!(!s.exists(&key).await, "gone after the last release");

    let gb = acquired(b.acquire_with_lease(&key, 5_000, 0, 1).await, "next owner");
    assert_ne!(gb.owner, g1.owner);
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tasks_of_one_instance_are_two_owners() {
    let Some(s) = server().await else { return };
    let key = fresh_key("tasks");
    let a = s.reentrant().await;
    let g1 = acquired(a.acquire_with_lease(&key, 5_000, 0, 1).await, "task 1");
    assert_eq!(
        a.acquire_with_lease(&key, 5_000, 0, 2).await.unwrap(),
        Acquire::NotAcquired,
        "task 2 is another owner"
    );
    assert_eq!(a.release(&g1).await.unwrap(), Release::Removed);
    let g2 = acquired(a.acquire_with_lease(&key, 5_000, 0, 2).await, "task 2");
    assert_eq!(g2.owner, a.owner_field(2));
    assert_eq!(a.release(&g2).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_reentry_starts_no_second_watchdog_and_the_last_release_stops_it() {
    let Some(s) = server().await else { return };
    let key = fresh_key("watchdog-reentry");
    let a = s.reentrant().await;
    let g1 = acquired(a.acquire(&key, opts(300, 0)).await, "first");
    let g2 = acquired(a.acquire(&key, opts(300, 0)).await, "re-entry");
    assert_eq!(s.hget(&key, &g1.owner).await, Some(2));
    assert!(a.watchdog_running(&key, 1));
    assert_eq!(
        a.release(&g2).await.unwrap(),
        Release::StillHeld { count: 1 }
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(a.watchdog_running(&key, 1), "one hold left: still renewing");
    assert_eq!(
        s.hget(&key, &g1.owner).await,
        Some(1),
        "kept past the lease"
    );
    assert_eq!(a.release(&g1).await.unwrap(), Release::Removed);
    assert!(!a.watchdog_running(&key, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_300ms_lease_alive_for_a_second_and_stops_after_release() {
    let Some(s) = server().await else { return };
    let key = fresh_key("watchdog");
    let (a, b) = (s.reentrant().await, s.reentrant().await);
    let ga = acquired(a.acquire(&key, opts(300, 0)).await, "holder");
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let pttl = s.pttl(&key).await;
        assert!(
            pttl > 0,
            "PTTL {pttl} at {:?}: the watchdog renews",
            start.elapsed()
        );
        assert_eq!(s.hget(&key, &ga.owner).await, Some(1));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(a.watchdog_running(&key, 1));
    assert_eq!(a.release(&ga).await.unwrap(), Release::Removed);
    assert!(!a.watchdog_running(&key, 1), "release stops the watchdog");

    let gb = acquired(b.acquire_with_lease(&key, 10_000, 0, 1).await, "next");
    // Several of A's renewal periods later, only B's field is there.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.hgetall(&key).await, vec![(gb.owner.clone(), 1)]);
    assert_eq!(s.hget(&key, &ga.owner).await, None);
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!s.exists(&key).await, "nothing resurrected the lock");
}

/// Drops every task, counting them: a client whose watchdog died in a crash.
struct CrashedSpawner(AtomicU64);

impl Spawner for CrashedSpawner {
    fn spawn(&self, task: Task) {
        self.0.fetch_add(1, Ordering::SeqCst);
        drop(task);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_watchdog_lets_the_lock_expire_after_the_lease() {
    let Some(s) = server().await else { return };
    let key = fresh_key("crashed");
    let spawner = Arc::new(CrashedSpawner(AtomicU64::new(0)));
    let mut deps = s.deps().await;
    deps.spawner = spawner.clone();
    let a = ReentrantWatchdog::new(deps);
    let b = s.reentrant().await;
    let _ga = acquired(a.acquire(&key, opts(300, 0)).await, "holder");
    assert_eq!(
        spawner.0.load(Ordering::SeqCst),
        1,
        "a watchdog was spawned"
    );
    assert!(!a.watchdog_running(&key, 1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!s.exists(&key).await, "expired after the lease");
    let gb = acquired(b.acquire(&key, opts(10_000, 0)).await, "next");
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_the_unlock_message_long_before_the_holders_lease_runs_out() {
    let Some(s) = server().await else { return };
    let key = fresh_key("pubsub");
    let a = s.reentrant().await;
    let b = Arc::new(s.reentrant().await);
    let ga = acquired(a.acquire_with_lease(&key, 10_000, 0, 1).await, "holder");
    let waiter = {
        let (b, key) = (b.clone(), key.clone());
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let outcome = b.acquire(&key, opts(10_000, 2_000)).await;
            (outcome, start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.release(&ga).await.unwrap(), Release::Removed);
    let (outcome, waited) = waiter.await.unwrap();
    let gb = acquired(outcome, "waiter");
    assert!(
        waited < Duration::from_millis(1_000),
        "woken by the unlock message, not by the 10 s TTL or the 2 s budget: {waited:?}"
    );
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_subscriber_a_waiter_sleeps_out_the_holders_ttl() {
    let Some(s) = server().await else { return };
    let key = fresh_key("no-pubsub");
    let a = s.reentrant().await;
    let mut deps = s.deps().await;
    deps.pubsub = None;
    let b = ReentrantWatchdog::new(deps);
    let _ga = acquired(a.acquire_with_lease(&key, 300, 0, 1).await, "holder");
    let start = tokio::time::Instant::now();
    let gb = acquired(b.acquire(&key, opts(10_000, 2_000)).await, "waiter");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(1_500),
        "{waited:?}"
    );
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_lock_not_held_by_this_owner_is_a_not_owner_error_naming_key_and_owner() {
    let Some(s) = server().await else { return };
    let key = fresh_key("not-owner");
    let (a, b) = (s.reentrant().await, s.reentrant().await);
    let ga = acquired(a.acquire_with_lease(&key, 10_000, 0, 1).await, "holder");
    let forged = Guard {
        owner: b.owner_field(1),
        ..ga.clone()
    };
    let err = b.release(&forged).await.unwrap_err();
    assert!(
        matches!(&err, LockError::NotOwner { key: k, owner } if *k == key && *owner == forged.owner),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&key) && text.contains(&forged.owner),
        "{text}"
    );
    assert!(text.contains("not locked by owner"), "{text}");
    assert_eq!(s.hget(&key, &ga.owner).await, Some(1), "left in place");

    assert_eq!(a.release(&ga).await.unwrap(), Release::Removed);
    let err = a.release(&ga).await.unwrap_err();
    assert!(
        matches!(err, LockError::NotOwner { .. }),
        "released twice: {err:?}"
    );
    let never = Guard {
        key: fresh_key("never-taken"),
        ..ga.clone()
    };
    let err = a.release(&never).await.unwrap_err();
    assert!(
        err.to_string().contains(&never.key),
        "a lock never taken: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reentrant_input_gives_typed_errors() {
    let Some(s) = server().await else { return };
    let key = fresh_key("bad-input");
    let a = s.reentrant().await;
    let err = a.acquire(&key, opts(2, 0)).await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::LeaseTooShortForWatchdog {
                lease_ms: 2,
                min_ms: 3
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("lease_ms=2"), "{err}");
    assert!(err.to_string().contains("at least 3 ms"), "{err}");
    assert!(!s.exists(&key).await, "nothing was sent");
    let err = a.acquire_with_watchdog(&key, 0, 0, 1).await.unwrap_err();
    assert!(matches!(err, LockError::LeaseTooShortForWatchdog { .. }));

    let err = a.lock_waiting(&key, 0, 1).await.unwrap_err();
    assert!(
        matches!(err, LockError::InvalidWait { wait_ms: 0 }),
        "{err:?}"
    );
    assert!(err.to_string().contains("wait_ms=0"), "{err}");
    let err = a.acquire_with_lease(&key, 0, 0, 1).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidLease { lease_ms: 0 }));
    let err = a.acquire_with_lease("", 100, 0, 1).await.unwrap_err();
    assert!(matches!(err, LockError::EmptyKey));

    // The smallest watchdog lease is accepted and taken. (On a real server in real
    // time, a 3 ms lease can lapse before the release on a loaded machine, whatever
    // the watchdog does: the release may then find it gone.)
    let g = acquired(a.acquire(&key, opts(3, 0)).await, "3 ms lease");
    match a.release(&g).await {
        Ok(Release::Removed) | Err(LockError::NotOwner { .. }) => {}
        other => panic!("releasing the 3 ms lease: {other:?}"),
    }
    let g = acquired(a.lock_waiting(&key, 100, 1).await, "lock_waiting");
    let pttl = s.pttl(&key).await;
    assert!(pttl > 20_000, "the default 30 s watchdog lease: {pttl}");
    assert_eq!(a.release(&g).await.unwrap(), Release::Removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_increase_strictly_across_holders() {
    let Some(s) = server().await else { return };
    let key = fresh_key("fenced");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Fenced::new(s.deps().await));
    }
    let mut last = 0;
    for round in 0..9 {
        let lock = &clients[round % clients.len()];
        let g = acquired(lock.acquire(&key, opts(10_000, 0)).await, "holder");
        let token = g.token.expect("fenced guards carry a token");
        assert!(token > last, "round {round}: token {token} after {last}");
        last = token;
        // Held: the next one is refused and takes no token.
        let other = &clients[(round + 1) % clients.len()];
        assert_eq!(
            other.acquire(&key, opts(10_000, 0)).await.unwrap(),
            Acquire::NotAcquired
        );
        assert_eq!(lock.release(&g).await.unwrap(), Release::Removed);
    }
    let counter: u64 = redis::cmd("GET")
        .arg(Fenced::token_key(&key))
        .query_async(&mut s.inspect.clone())
        .await
        .unwrap();
    assert_eq!(counter, last, "refused attempts do not consume tokens");
    assert_eq!(last, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lock_taken_after_expiry_gets_a_higher_token_than_the_stale_holder() {
    let Some(s) = server().await else { return };
    let key = fresh_key("fenced-expiry");
    let (a, b) = (Fenced::new(s.deps().await), Fenced::new(s.deps().await));
    let ga = acquired(a.acquire(&key, opts(100, 0)).await, "first");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let gb = acquired(b.acquire(&key, opts(10_000, 0)).await, "after expiry");
    assert!(gb.token > ga.token, "{:?} vs {:?}", gb.token, ga.token);
    assert_eq!(a.release(&ga).await.unwrap(), Release::NotRemoved);
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

/// A server count gone astray (an unlock whose reply was lost, then a re-entry): the
/// holder's outermost release finds the server still holding the lock. Like Redisson
/// 3.20's `unlockAsync`, whose `cancelExpirationRenewal` runs on any reply, the client
/// counts its own hold down and stops its watchdog, so the lock expires a lease later
/// (it was renewed for ever; issue 23, item 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_still_held_outermost_release_stops_the_watchdog_and_the_lock_expires() {
    let Some(s) = server().await else { return };
    let key = fresh_key("astray");
    let a = s.reentrant().await;
    let g = acquired(a.acquire(&key, opts(300, 0)).await, "holder");
    assert!(a.watchdog_running(&key, 1));
    // The server's count one above the client's.
    let _: i64 = redis::cmd("HINCRBY")
        .arg(&key)
        .arg(&g.owner)
        .arg(1)
        .query_async(&mut s.inspect.clone())
        .await
        .unwrap();
    assert_eq!(
        a.release(&g).await.unwrap(),
        Release::StillHeld { count: 0 },
        "the server still holds it; the client is done"
    );
    assert!(
        !a.watchdog_running(&key, 1),
        "no renewal once the client is done"
    );
    assert_eq!(s.hget(&key, &g.owner).await, Some(1));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!s.exists(&key).await, "expired a lease after the release");
}
