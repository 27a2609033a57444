//! The ZooKeeper designs against the model: the conformance bodies of
//! `lock_impl::testing` with the model on a real loopback port (real clock), and a
//! lock held across a session expiry inside a turmoil simulation (simulated clock).

use std::sync::Arc;
use std::time::Duration;

use lock_impl::testing::{Factory, ZkBackend, run_all};
use lock_impl::zk::{StreamDial, StreamDialer, ZkEnsemble, ZkStream};
use lock_impl::{Acquire, AcquireOptions, Release, SeededEntropy};
use sim::clock::{ClockSpec, HostClock, SimClock};
use sim::zk::{ServerEvent, SharedZk, ZK_PORT, ZkConfig, spawn_tokio_zk, zk_host};

async fn conformance_on_model(name: &'static str) {
    let info = lock_impl::designs_on(lock_impl::Backend::ZooKeeper)
        .find(|d| d.name == name)
        .expect("a ZooKeeper design");
    let (addr, _shared) = spawn_tokio_zk(ZkConfig::default()).await.unwrap();
    let backend = ZkBackend {
        servers: vec![addr.to_string()],
        session_timeout_ms: 10_000,
    };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_curator_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("zk-curator").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_curator_fenced_passes_the_conformance_bodies_on_the_model() {
    conformance_on_model("zk-curator-fenced").await;
}

/// turmoil TCP, and `spawn_local` for the client's driver (turmoil hosts run a
/// `LocalSet`).
struct TurmoilDialer;

impl StreamDialer for TurmoilDialer {
    fn dial(&self, host: &str, port: u16) -> StreamDial<'_> {
        let host = host.to_string();
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect((host.as_str(), port)).await?;
            Ok(Box::new(s) as ZkStream)
        })
    }

    fn spawn(&self, task: lock_impl::Task) {
        tokio::task::spawn_local(task);
    }
}

fn sim_deps(seed: u64, name: &str) -> lock_impl::Deps {
    lock_impl::zookeeper_deps(
        ZkEnsemble {
            servers: vec![("zk-1".into(), ZK_PORT)],
            dialer: Arc::new(TurmoilDialer),
            session_timeout_ms: 4_000,
            scale: lock_impl::TimeScale::REAL,
        },
        Arc::new(SimClock::new(HostClock::new(ClockSpec::default()))),
        Arc::new(SeededEntropy::new(seed, name)),
        Arc::new(lock_impl::TokioSpawner),
    )
}

/// One run: client-1 takes the lock, then its host is cut off from zk-1 for longer
/// than its session timeout; the server expires the session and deletes the node, so
/// client-2 gets the lock while client-1 still believes it holds it. Returns what the
/// run saw, for the determinism check.
fn run_expiry(seed: u64) -> Vec<String> {
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let server: Arc<std::sync::Mutex<Option<SharedZk>>> = Arc::default();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(60))
        .rng_seed(seed)
        .build();
    let slot = server.clone();
    sim.host(
        "zk-1",
        zk_host(
            ZkConfig::default(),
            HostClock::new(ClockSpec::default()),
            move |s| *slot.lock().unwrap() = Some(s),
        ),
    );
    let (l1, l2) = (log.clone(), log.clone());
    sim.client("client-1", async move {
        let lock = lock_impl::build("zk-curator-fenced", sim_deps(seed, "client-1")).unwrap();
        let opts = AcquireOptions::new(10_000, 0).unwrap();
        let Acquire::Acquired(g) = lock.acquire("k", opts).await.unwrap() else {
            panic!("client-1 gets a free lock");
        };
        l1.lock()
            .unwrap()
            .push(format!("client-1 holds {} token {:?}", g.owner, g.token));
        tokio::time::sleep(Duration::from_secs(20)).await;
        let released = lock.release(&g).await.unwrap();
        l1.lock()
            .unwrap()
            .push(format!("client-1 release: {released:?}"));
        Ok(())
    });
    sim.client("client-2", async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let lock = lock_impl::build("zk-curator-fenced", sim_deps(seed + 1, "client-2")).unwrap();
        let opts = AcquireOptions::new(10_000, 15_000).unwrap();
        match lock.acquire("k", opts).await.unwrap() {
            Acquire::Acquired(g) => {
                l2.lock().unwrap().push(format!(
                    "client-2 holds {} token {:?} at {:?}",
                    g.owner,
                    g.token,
                    turmoil::sim_elapsed().map(|d| d.as_millis())
                ));
                assert_eq!(lock.release(&g).await.unwrap(), Release::Removed);
            }
            other => panic!("client-2 after client-1's session expired: {other:?}"),
        }
        Ok(())
    });
    // Cut client-1 off from 1 s to 9 s: no pings reach zk-1 for longer than 4 s.
    let mut partitioned = false;
    while !sim.step().unwrap() {
        let t = sim.elapsed();
        if !partitioned && t >= Duration::from_secs(1) && t < Duration::from_secs(9) {
            sim.partition("client-1", "zk-1");
            partitioned = true;
        }
        if partitioned && t >= Duration::from_secs(9) {
            sim.repair("client-1", "zk-1");
            partitioned = false;
        }
    }
    let events = server.lock().unwrap().as_ref().unwrap().take_events();
    let expired: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::SessionExpired { ephemerals, .. } => {
                Some(format!("expired {ephemerals:?}"))
            }
            _ => None,
        })
        .collect();
    let mut out = log.lock().unwrap().clone();
    out.extend(expired);
    out
}

#[test]
fn a_holder_cut_off_past_its_session_timeout_loses_the_lock_to_the_next_client() {
    let seen = run_expiry(7);
    assert!(
        seen.iter()
            .any(|l| l.starts_with("expired [\"/locksim/k/_c_")),
        "client-1's session expired with its lock node: {seen:?}"
    );
    assert!(
        seen.iter().any(|l| l.starts_with("client-2 holds")),
        "client-2 got the lock: {seen:?}"
    );
    // client-1 still believed it held the lock; its delete finds its node gone.
    assert!(
        seen.iter().any(|l| l == "client-1 release: NotFound"),
        "{seen:?}"
    );
    assert_eq!(run_expiry(7), seen, "one seed, one history");
}
