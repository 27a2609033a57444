//! The Redis model expires keys by its own host's clock: a clock that runs fast expires
//! keys early in true time, and one that runs slow, late.

use std::sync::Arc;
use std::time::Duration;

use sim::clock::ClockSpec;
use sim::redis::{Engine, SharedEngine};

/// True time after which a key set with `PX 1000` on a server with `drift_ppm` has
/// gone, polled every 5 ms by a client over turmoil TCP.
fn expiry_in_true_time(drift_ppm: i64) -> Duration {
    let mut sim = turmoil::Builder::new()
        .rng_seed(1)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(1))
        .build();
    let clock = ClockSpec {
        offset_ms: 0,
        drift_ppm,
    };
    sim.host("redis", move || async move {
        let shared = SharedEngine::new(Engine::new(), Arc::new(clock));
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
        sim::redis::serve_turmoil(listener, shared).await;
        Ok(())
    });
    let gone_at = Arc::new(std::sync::Mutex::new(None));
    let out = gone_at.clone();
    sim.client("client", async move {
        static INFO: std::sync::LazyLock<redis::RedisConnectionInfo> =
            std::sync::LazyLock::new(|| {
                redis::IntoConnectionInfo::into_connection_info("redis://redis:6379")
                    .unwrap()
                    .redis_settings()
                    .clone()
            });
        let stream = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
        let (mut conn, driver) = redis::aio::MultiplexedConnection::new(&INFO, stream).await?;
        tokio::spawn(driver);
        let set_at = turmoil::sim_elapsed().unwrap();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("PX")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        loop {
            let exists: i64 = redis::cmd("EXISTS").arg("k").query_async(&mut conn).await?;
            if exists == 0 {
                *out.lock().unwrap() = Some(turmoil::sim_elapsed().unwrap() - set_at);
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    sim.run().unwrap();
    let gone = *gone_at.lock().unwrap();
    gone.expect("the key expired")
}

#[test]
fn a_fast_server_clock_expires_keys_early_in_true_time() {
    let perfect = expiry_in_true_time(0);
    let fast = expiry_in_true_time(1_000_000); // twice as fast
    let slow = expiry_in_true_time(-500_000); // half as fast
    let ms = |d: Duration| d.as_millis() as i64;
    assert!(
        (ms(perfect) - 1000).abs() <= 10,
        "perfect clock: {perfect:?}"
    );
    assert!((ms(fast) - 500).abs() <= 10, "2x fast clock: {fast:?}");
    assert!((ms(slow) - 2000).abs() <= 10, "half-speed clock: {slow:?}");
}
