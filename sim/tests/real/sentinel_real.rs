//! The Sentinel model against Debian's `redis-sentinel`: the same topology (a master and
//! three replicas of priorities 100, 10 and 0, on real `redis-server`s on loopback),
//! watched once by three real Sentinels and once by three model Sentinels running
//! over real TCP. Both must promote the same replica when the master dies, repoint
//! the others, and answer the same `SENTINEL` queries byte for byte.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::Conn;
use lock_impl::testing::{RealRedis, SentinelOptions, SentinelServer, binary_available};
use sim::redis::server::{SharedEngine, SystemClock, serve_tokio};
use sim::sentinel::driver::{SentinelEngine, local_spawn, run, tokio_dial};
use sim::sentinel::{Addr, Sentinel, SentinelConfig};

/// Above Sentinel's ping period (1 s). At `down-after-milliseconds 1000` real
/// Sentinels sometimes find the master they have just switched to down exactly one
/// second after the switch (`+sdown`, then `-sdown` 60 ms later: the new link's first
/// answered `PING` came after the down check), agree it is down and fail over again:
/// seen once in 20 runs here (priority-10 promoted, then priority-100), with the
/// Sentinels' logs. The test is about the choice and the answers, not that race.
const DOWN_AFTER_MS: u64 = 2_000;
const FAILOVER_TIMEOUT_MS: u64 = 5_000;

/// A master and three replicas (priorities 100, 10, 0), all synced.
struct Topology {
    master: RealRedis,
    replicas: Vec<RealRedis>,
}

impl Topology {
    fn start() -> Option<Self> {
        let master = RealRedis::start()?;
        let port = master.addr().port().to_string();
        let replicas: Vec<RealRedis> = ["100", "10", "0"]
            .iter()
            .map(|prio| {
                RealRedis::start_with(&[
                    "--replicaof",
                    "127.0.0.1",
                    &port,
                    "--replica-priority",
                    prio,
                ])
                .expect("redis-server started once")
            })
            .collect();
        let mut conn = Conn::open(master.addr());
        wait_for("the master to list three online replicas", 10, || {
            conn.text(&["INFO", "replication"])
                .contains("connected_slaves:3")
        });
        for r in &replicas {
            let mut c = Conn::open(r.addr());
            wait_for("a replica to sync", 10, || {
                c.text(&["INFO", "replication"])
                    .contains("master_link_status:up")
            });
        }
        Some(Self { master, replicas })
    }

    /// Which replica (by priority) listens on `port`.
    fn name_of(&self, port: u16) -> &'static str {
        ["priority-100", "priority-10", "priority-0"][self
            .replicas
            .iter()
            .position(|r| r.addr().port() == port)
            .unwrap_or_else(|| panic!("port {port} is no replica"))]
    }
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The master address a Sentinel gives.
fn master_port(sentinel: SocketAddr) -> Option<u16> {
    let mut c = Conn::open(sentinel);
    let reply = c.text(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
    reply.lines().nth(4).and_then(|p| p.trim().parse().ok())
}

/// The queries both kinds of Sentinel must answer alike, with the master's port
/// replaced by a placeholder.
fn queries(sentinel: SocketAddr, master: u16) -> Vec<(String, String)> {
    let mut c = Conn::open(sentinel);
    let m = master.to_string();
    let asks: Vec<Vec<&str>> = vec![
        vec!["PING"],
        vec!["ROLE"],
        vec!["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"],
        vec!["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuch"],
        vec![
            "SENTINEL",
            "IS-MASTER-DOWN-BY-ADDR",
            "127.0.0.1",
            &m,
            "0",
            "*",
        ],
        vec![
            "SENTINEL",
            "IS-MASTER-DOWN-BY-ADDR",
            "127.0.0.2",
            "1",
            "0",
            "*",
        ],
        vec!["SENTINEL", "GET-MASTER-ADDR-BY-NAME"],
        vec!["SENTINEL", "NOSUCHSUB"],
        vec!["SENTINEL", "MASTER", "nosuch"],
        vec!["NOSUCHCOMMAND", "x"],
    ];
    asks.iter()
        .map(|argv| {
            let reply = match c.call(argv) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).replace(&m, "<master-port>"),
                Err(e) => {
                    c = Conn::open(sentinel);
                    format!("<no reply: {e}>")
                }
            };
            (argv.join(" "), reply)
        })
        .collect()
}

fn start_real_sentinel(master: SocketAddr) -> SentinelServer {
    let opts = SentinelOptions {
        master_name: "mymaster".into(),
        quorum: 2,
        down_after_ms: DOWN_AFTER_MS,
        failover_timeout_ms: FAILOVER_TIMEOUT_MS,
    };
    SentinelServer::start(master, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Kills the master, waits for the Sentinels at `sentinels` to name another, and
/// returns (promoted replica, its port, how long it took).
fn fail_over(topo: &mut Topology, sentinels: &[SocketAddr]) -> (&'static str, u16, Duration) {
    let old = topo.master.addr().port();
    drop(std::mem::replace(
        &mut topo.master,
        RealRedis::start().expect("redis-server"),
    ));
    let start = Instant::now();
    let mut port = old;
    wait_for("every Sentinel to switch master", 40, || {
        let ports: Vec<Option<u16>> = sentinels.iter().map(|s| master_port(*s)).collect();
        match ports.first() {
            Some(Some(p)) if *p != old && ports.iter().all(|q| *q == Some(*p)) => {
                port = *p;
                true
            }
            _ => false,
        }
    });
    (topo.name_of(port), port, start.elapsed())
}

#[test]
fn real_and_model_sentinels_promote_the_same_replica_and_answer_alike() {
    if !binary_available("redis-sentinel", "redis-sentinel") {
        return;
    }
    // Real Sentinels.
    let Some(mut real_topo) = Topology::start() else {
        return;
    };
    let real: Vec<SentinelServer> = (0..3)
        .map(|_| start_real_sentinel(real_topo.master.addr()))
        .collect();
    let real_addrs: Vec<SocketAddr> = real.iter().map(SentinelServer::addr).collect();
    // They find each other through the master's hello channel.
    for s in &real_addrs {
        let mut c = Conn::open(*s);
        wait_for(
            "the real Sentinels to discover each other and the replicas",
            20,
            || {
                let sentinels = c.text(&["SENTINEL", "SENTINELS", "mymaster"]);
                let replicas = c.text(&["SENTINEL", "REPLICAS", "mymaster"]);
                sentinels.matches("runid").count() == 2
                    && replicas.matches("slave-priority").count() == 3
            },
        );
    }
    let (real_choice, real_port, real_took) = fail_over(&mut real_topo, &real_addrs);
    let real_answers = queries(real_addrs[0], real_port);

    // Model Sentinels over real TCP, against a fresh copy of the topology.
    let mut model_topo = Topology::start().expect("redis-server started once");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<Addr> = ports.iter().map(|p| Addr::new("127.0.0.1", *p)).collect();
    let master = Addr::new("127.0.0.1", model_topo.master.addr().port());
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn({
        let peers = peers.clone();
        move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                for (i, me) in peers.iter().enumerate() {
                    let cfg = SentinelConfig {
                        master_name: "mymaster".into(),
                        master: master.clone(),
                        quorum: 2,
                        down_after_ms: DOWN_AFTER_MS,
                        failover_timeout_ms: FAILOVER_TIMEOUT_MS,
                        parallel_syncs: 1,
                        known_replicas: Vec::new(),
                        me: me.clone(),
                        peers: peers.clone(),
                        seed: 0x5E47 + i as u64,
                    };
                    let now = sim::redis::ServerClock::now_us(&SystemClock) / 1000;
                    let shared = SharedEngine::new(
                        SentinelEngine::new(Sentinel::new(cfg, now)),
                        std::sync::Arc::new(SystemClock),
                    );
                    let listener = tokio::net::TcpListener::bind(("127.0.0.1", me.port))
                        .await
                        .expect("bind a model Sentinel");
                    tokio::spawn(serve_tokio(listener, shared.clone()));
                    tokio::task::spawn_local(run(shared, tokio_dial(), local_spawn()));
                }
                let _ = tx.send(());
                // Serve until the test process ends.
                std::future::pending::<()>().await;
            });
        }
    });
    rx.recv().expect("the model Sentinels started");
    let model_addrs: Vec<SocketAddr> = ports.iter().map(|p| ([127, 0, 0, 1], *p).into()).collect();
    for s in &model_addrs {
        let mut c = Conn::open(*s);
        wait_for("the model Sentinels to discover the replicas", 20, || {
            c.text(&["SENTINEL", "REPLICAS", "mymaster"])
                .matches("slave-priority")
                .count()
                == 3
        });
    }
    let (model_choice, model_port, model_took) = fail_over(&mut model_topo, &model_addrs);
    let model_answers = queries(model_addrs[0], model_port);
    drop(handle);

    eprintln!(
        "real Sentinels promoted {real_choice} in {real_took:?}; the model {model_choice} in {model_took:?}"
    );
    assert_eq!(
        real_choice, "priority-10",
        "the lowest non-zero priority wins"
    );
    assert_eq!(model_choice, real_choice);
    for ((ask, real), (_, model)) in real_answers.iter().zip(&model_answers) {
        assert_eq!(
            model, real,
            "the model answers `{ask}` as redis-sentinel does"
        );
    }
    // The other replicas follow the new master on both sides.
    for (side, topo, port, sentinels) in [
        ("real", &real_topo, real_port, &real_addrs),
        ("model", &model_topo, model_port, &model_addrs),
    ] {
        eprintln!("checking the {side} side");
        for r in topo.replicas.iter().filter(|r| r.addr().port() != port) {
            // A fresh connection each time: the SLAVEOF transaction kills clients.
            // Real Sentinel repoints one replica at a time (`parallel-syncs 1`), each
            // after the one before has synced; on a loaded machine that took over 20 s
            // once, so the bound is generous (it costs nothing when all goes well).
            let repointed = || {
                Conn::open(r.addr())
                    .call(&["INFO", "replication"])
                    .is_ok_and(|b| {
                        String::from_utf8_lossy(&b).contains(&format!("master_port:{port}"))
                    })
            };
            let start = Instant::now();
            while !repointed() {
                if start.elapsed() > Duration::from_secs(60) {
                    panic!(
                        "timed out after 60 s waiting for the {side} replica {} to be \
                         repointed at the new master {port}\n{}",
                        topo.name_of(r.addr().port()),
                        diagnose(topo, sentinels, if side == "real" { &real } else { &[] }),
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// What the replicas and the Sentinels say, and the end of each real Sentinel's log:
/// printed when a replica is not repointed, so a failure in CI explains itself.
fn diagnose(topo: &Topology, sentinels: &[SocketAddr], real: &[SentinelServer]) -> String {
    let mut out = String::new();
    let ask = |addr: SocketAddr, argv: &[&str]| -> String {
        match std::net::TcpStream::connect(addr) {
            Ok(_) => Conn::open(addr)
                .call(argv)
                .map(|b| String::from_utf8_lossy(&b).replace("\r\n", " "))
                .unwrap_or_else(|e| format!("<no reply: {e}>")),
            Err(e) => format!("<no connection: {e}>"),
        }
    };
    for r in &topo.replicas {
        out += &format!(
            "replica {} ({}): {}\n",
            topo.name_of(r.addr().port()),
            r.addr(),
            ask(r.addr(), &["INFO", "replication"])
        );
    }
    for s in sentinels {
        out += &format!(
            "sentinel {s}: master {} replicas {}\n",
            ask(*s, &["SENTINEL", "MASTER", "mymaster"]),
            ask(*s, &["SENTINEL", "REPLICAS", "mymaster"])
        );
    }
    for s in real {
        let log = std::fs::read_to_string(s.log_path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        out += &format!("log of sentinel {}:\n", s.addr());
        for line in tail.iter().rev() {
            out += &format!("  {line}\n");
        }
    }
    out
}
