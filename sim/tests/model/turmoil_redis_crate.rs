//! The `redis` crate (what lock designs use) talking to the model over turmoil's
//! simulated network: connection setup, `SET NX PX`, `Script` (EVALSHA, NOSCRIPT,
//! SCRIPT LOAD, retry) and pub/sub with `PubSub`.
//!
//! These need the real command engine; against the stub engine they fail.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::StreamExt;
use redis::IntoConnectionInfo;
use redis::aio::{MultiplexedConnection, PubSub};
use sim::redis::{Engine, FixedClock, SharedEngine, active_expiry_loop, serve_turmoil};

const START_US: u64 = 1_700_000_000_000_000;

/// The driver future returned by `MultiplexedConnection::new` borrows the connection
/// info for the connection's whole life, so it lives in a static.
static INFO: LazyLock<redis::RedisConnectionInfo> = LazyLock::new(|| {
    "redis://redis:6379"
        .into_connection_info()
        .expect("valid url")
        .redis_settings()
        .clone()
});

fn info() -> &'static redis::RedisConnectionInfo {
    &INFO
}

fn sim_with_model(seed: u64) -> turmoil::Sim<'static> {
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .simulation_duration(Duration::from_secs(60))
        .build();
    sim.host("redis", || async {
        let shared = SharedEngine::new(Engine::new(), Arc::new(FixedClock(START_US)));
        tokio::spawn(active_expiry_loop(
            shared.clone(),
            Duration::from_millis(100),
        ));
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
        serve_turmoil(listener, shared).await;
        Ok(())
    });
    sim
}

async fn connect(
    info: &'static redis::RedisConnectionInfo,
) -> redis::RedisResult<MultiplexedConnection> {
    let stream = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
    let (conn, driver) = MultiplexedConnection::new(info, stream).await?;
    tokio::spawn(driver);
    Ok(conn)
}

#[test]
fn set_nx_px_takes_a_free_key_and_refuses_a_held_one() {
    let mut sim = sim_with_model(1);
    sim.client("client", async {
        let info = info();
        let mut conn = connect(info).await?;
        let first: Option<String> = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("NX")
            .arg("PX")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        assert_eq!(first.as_deref(), Some("OK"));
        let second: Option<String> = redis::cmd("SET")
            .arg("k")
            .arg("w")
            .arg("NX")
            .arg("PX")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        assert_eq!(second, None);
        let value: Option<String> = redis::cmd("GET").arg("k").query_async(&mut conn).await?;
        assert_eq!(value.as_deref(), Some("v"));
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_script_falls_back_from_evalsha_to_script_load_and_runs() {
    let mut sim = sim_with_model(2);
    sim.client("client", async {
        let info = info();
        let mut conn = connect(info).await?;
        let script = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let exists: Vec<i64> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(script.get_hash())
            .query_async(&mut conn)
            .await?;
        assert_eq!(exists, vec![0], "the script starts uncached (NOSCRIPT path)");
        let _: () = redis::cmd("SET")
            .arg("lock")
            .arg("me")
            .query_async(&mut conn)
            .await?;
        let removed: i64 = script.key("lock").arg("me").invoke_async(&mut conn).await?;
        assert_eq!(removed, 1);
        let exists: Vec<i64> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(script.get_hash())
            .query_async(&mut conn)
            .await?;
        assert_eq!(exists, vec![1], "SCRIPT LOAD cached it");
        let again: i64 = script.key("lock").arg("me").invoke_async(&mut conn).await?;
        assert_eq!(again, 0);
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_subscriber_receives_a_message_published_by_another_connection() {
    let mut sim = sim_with_model(3);
    sim.client("client", async {
        let info = info();
        let stream = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
        let mut pubsub = PubSub::new(info, stream).await?;
        pubsub.subscribe("unlocks").await?;
        let mut publisher = connect(info).await?;
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg("unlocks")
            .arg("released")
            .query_async(&mut publisher)
            .await?;
        assert_eq!(receivers, 1);
        let msg = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
            .await
            .expect("message within 5 s")
            .expect("stream open");
        assert_eq!(msg.get_channel_name(), "unlocks");
        assert_eq!(msg.get_payload::<String>()?, "released");
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_paused_subscriber_hears_nothing_until_its_pause_ends() {
    // The `redis` crate spawns the PubSub driver itself, outside any pause gate; the
    // gated stream under it is what freezes it with its host.
    let gate = sim::pause::PauseGate::new();
    let mut sim = sim_with_model(4);
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let (gate, heard) = (gate.clone(), heard.clone());
        sim.client("subscriber", async move {
            let stream = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
            let mut pubsub = PubSub::new(info(), gate.wrap_io(stream)).await?;
            pubsub.subscribe("unlocks").await?;
            let mut messages = pubsub.on_message();
            for _ in 0..3 {
                tokio::time::timeout(Duration::from_secs(5), messages.next())
                    .await
                    .expect("message within 5 s")
                    .expect("stream open");
                heard
                    .lock()
                    .unwrap()
                    .push(sim::clock::true_now().as_millis() as u64);
            }
            Ok(())
        });
    }
    sim.client("publisher", async move {
        let mut conn = connect(info()).await?;
        for (i, t) in [100u64, 300, 400].into_iter().enumerate() {
            let now = sim::clock::true_now().as_millis() as u64;
            tokio::time::sleep(Duration::from_millis(t.saturating_sub(now))).await;
            if i == 1 {
                // Freeze the subscriber from 300 ms to 700 ms.
                gate.pause_until(Duration::from_millis(700));
            }
            let _: i64 = redis::cmd("PUBLISH")
                .arg("unlocks")
                .arg("released")
                .query_async(&mut conn)
                .await?;
        }
        Ok(())
    });
    sim.run().unwrap();
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 3);
    assert!(heard[0] < 300, "first message before the pause: {heard:?}");
    assert!(
        heard[1] >= 700 && heard[2] >= 700,
        "messages published during the pause arrived before it ended: {heard:?}"
    );
}
