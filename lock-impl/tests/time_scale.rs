//! One clock scale per world, on the published Redis clients: in a world whose lease is
//! 200 ms (1/150 of real time, `TimeScale::for_lease(200)`), a waiter pauses between
//! tries for its library's pause at that scale, not the real one, and says so in its
//! retry horizon. Against real `redis-server` processes on loopback (skipped without
//! `redis-server`); the designs' sleeps are recorded by a clock that wraps tokio's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::testing::{Backend, RealRedis, UrlBackend, fresh_key};
use lock_impl::{
    Acquire, AcquireOptions, Clock, Deps, LockDesign, Release, Sleep, TimeScale, TokioClock,
    designs,
};

/// Tokio's clock, remembering every sleep a design asks of it.
#[derive(Default)]
struct RecordingClock {
    inner: TokioClock,
    sleeps: Mutex<Vec<Duration>>,
}

impl RecordingClock {
    fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().unwrap().clone()
    }
}

impl Clock for RecordingClock {
    fn now(&self) -> Duration {
        self.inner.now()
    }
    fn wall(&self) -> Duration {
        self.inner.wall()
    }
    fn sleep(&self, duration: Duration) -> Sleep {
        self.sleeps.lock().unwrap().push(duration);
        self.inner.sleep(duration)
    }
}

/// The catalog's scale: a 200 ms lease stands for 30 s.
const LEASE_MS: u64 = 200;

/// `deps` at the catalog's scale, sleeping on a recording clock.
fn scaled(mut deps: Deps) -> (Deps, Arc<RecordingClock>) {
    let clock = Arc::new(RecordingClock::default());
    deps.clock = clock.clone();
    deps.scale = TimeScale::for_lease(LEASE_MS);
    (deps, clock)
}

fn one_server() -> Option<(RealRedis, UrlBackend)> {
    let server = RealRedis::start()?;
    let url = server.url();
    Some((server, UrlBackend { url }))
}

/// A holder takes `key`; a scaled waiter then waits `wait_ms` for it, in vain; the
/// holder releases. The waiter's recorded sleeps.
async fn waiter_pauses(
    holder: &dyn LockDesign,
    waiter: &dyn LockDesign,
    clock: &RecordingClock,
    key: &str,
    wait_ms: i64,
) -> Vec<Duration> {
    let Acquire::Acquired(guard) = holder
        .acquire(key, AcquireOptions::new(10_000, 0).unwrap())
        .await
        .unwrap()
    else {
        panic!("a free lock is granted");
    };
    let outcome = waiter
        .acquire(key, AcquireOptions::new(10_000, wait_ms).unwrap())
        .await
        .unwrap();
    assert_eq!(outcome, Acquire::NotAcquired, "design={}", waiter.name());
    assert_eq!(holder.release(&guard).await.unwrap(), Release::Removed);
    clock.sleeps()
}

/// Every pause is within `lo..=hi` ms, and there are at least `n` of them.
fn assert_pauses(design: &str, pauses: &[Duration], n: usize, lo: u64, hi: u64) {
    assert!(
        pauses.len() >= n,
        "{design}: {} pauses between tries, expected at least {n}: {pauses:?}",
        pauses.len()
    );
    for p in pauses {
        assert!(
            (Duration::from_millis(lo)..=Duration::from_millis(hi)).contains(p),
            "{design}: a pause of {p:?}, not {lo}-{hi} ms (the library's pause at 1/150): \
             {pauses:?}"
        );
    }
}

/// redis-py's `sleep=0.1` is 1 ms at 1/150 (0.67 ms, never below 1 ms): a 150 ms wait
/// tries many times, where the real 100 ms pause would allow one pause at most (five
/// asked: a try's round trip on a loaded machine is a few ms, not 30).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_pauses_its_scaled_sleep_between_tries_in_a_scaled_world() {
    let Some((_server, backend)) = one_server() else {
        return;
    };
    let holder = designs::RedisPy::new(backend.deps().await);
    let (deps, clock) = scaled(backend.deps().await);
    let waiter = designs::RedisPy::new(deps);
    assert_eq!(waiter.retry_horizon(), Duration::from_millis(1));
    let key = fresh_key("scaled-redis-py");
    let pauses = waiter_pauses(&holder, &waiter, &clock, &key, 150).await;
    assert_pauses("redis-py", &pauses, 5, 1, 1);
    // At real scale the horizon is the library's 100 ms.
    assert_eq!(holder.retry_horizon(), Duration::from_millis(100));
}

/// redsync's `rand.Intn(250-50)+50` ms is drawn and then scaled: 1 ms at 1/150.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redsync_pauses_its_scaled_delay_between_tries_in_a_scaled_world() {
    let Some((_servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let holder = designs::Redsync::new(backend.deps().await);
    let (deps, clock) = scaled(backend.deps().await);
    let waiter = designs::Redsync::new(deps);
    assert_eq!(waiter.retry_horizon(), Duration::from_millis(1));
    assert_eq!(holder.retry_horizon(), Duration::from_millis(250));
    let key = fresh_key("scaled-redsync");
    // Long enough for redsync's 32 tries at the scaled delay.
    let pauses = waiter_pauses(&holder, &waiter, &clock, &key, 2_000).await;
    assert_pauses("redsync", &pauses, 31, 1, 1);
}

/// node-redlock's `200 ± 100` ms is drawn and then scaled: 1-2 ms at 1/150; a wait
/// budget is spent in scaled `retryDelay`s, and no retry starts once it has passed (so
/// a 60 ms budget on real servers makes a handful of tries, not one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_pauses_its_scaled_retry_delay_in_a_scaled_world() {
    let Some((_servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let holder = designs::NodeRedlock::new(backend.deps().await);
    let (deps, clock) = scaled(backend.deps().await);
    let waiter = designs::NodeRedlock::new(deps);
    assert_eq!(waiter.retry_horizon(), Duration::from_millis(2));
    assert_eq!(holder.retry_horizon(), Duration::from_millis(300));
    let key = fresh_key("scaled-node-redlock");
    // Retries of the scaled 1-2 ms `retryDelay` until the 60 ms budget has passed
    // (each try costs a round trip to five real servers), then one release attempt.
    let pauses = waiter_pauses(&holder, &waiter, &clock, &key, 60).await;
    assert_pauses("node-redlock", &pauses, 3, 1, 2);
    assert!(pauses.len() <= 60, "{pauses:?}");
}

/// node-redlock `using()`'s `automaticExtensionThreshold` is kept real in every world
/// (it races an extension's round trip, which no world scales): a 2 s lock in a world
/// of 2 s leases (1/15) fires its first timer 500 ms before the expiration, about
/// 1,478 ms after the grant (2,000 − the 22 ms drift − 500), and is still extended past
/// its first lease; at the catalog's 200 ms lease the threshold is a quarter of it,
/// 50 ms, as the default would throw there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redlock_using_keeps_its_real_threshold_in_a_scaled_world() {
    let Some((_servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    const LEASE_MS: u64 = 2_000;
    let (mut deps, clock) = scaled(backend.deps().await);
    deps.scale = TimeScale::for_lease(LEASE_MS);
    let holder = designs::NodeRedlockUsing::new(deps);
    assert_eq!(holder.threshold_ms(LEASE_MS).unwrap(), 500);
    let (catalog, _) = scaled(backend.deps().await);
    assert_eq!(
        designs::NodeRedlockUsing::new(catalog)
            .threshold_ms(200)
            .unwrap(),
        50
    );
    let other = designs::NodeRedlockUsing::new(backend.deps().await);
    let key = fresh_key("scaled-node-redlock-using");
    let opts = AcquireOptions::new(LEASE_MS as i64, 0).unwrap();
    let Acquire::Acquired(guard) = holder.acquire(&key, opts).await.unwrap() else {
        panic!("a free lock on five masters is granted");
    };
    tokio::time::sleep(Duration::from_millis(LEASE_MS + LEASE_MS / 4)).await;
    assert_eq!(
        other.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "past its first lease the extended lock is still held"
    );
    assert_eq!(holder.release(&guard).await.unwrap(), Release::Removed);
    let timers = clock.sleeps();
    assert!(
        timers.first().is_some_and(|t| {
            (Duration::from_millis(1_430)..=Duration::from_millis(1_479)).contains(t)
        }),
        "the extension timer waits until 500 ms before the expiration: {timers:?}"
    );
}

/// `redisson-redlock` looks again at a held node lock every 50 ms at real scale, 1 ms
/// at 1/150 (its stand-in for Redisson's unlock message). A 300 ms wait: the real
/// 50 ms pause would fit at most six pauses in it, the scaled one ten or more even when
/// each try's round trips to five real servers take 30 ms (a loaded CI machine gave 17
/// tries in a 100 ms wait, about 6 ms a try, where 20 were asked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_redlock_polls_a_held_node_at_the_scaled_interval_in_a_scaled_world() {
    let Some((_servers, backend)) = lock_impl::testing::five_real_masters() else {
        return;
    };
    let holder = designs::RedissonRedlock::new(backend.deps().await);
    let (deps, clock) = scaled(backend.deps().await);
    let waiter = designs::RedissonRedlock::new(deps);
    assert_eq!(waiter.retry_horizon(), Duration::from_millis(1));
    assert_eq!(holder.retry_horizon(), Duration::from_millis(50));
    let key = fresh_key("scaled-redisson-redlock");
    let pauses = waiter_pauses(&holder, &waiter, &clock, &key, 300).await;
    assert_pauses("redisson-redlock", &pauses, 10, 1, 1);
}
