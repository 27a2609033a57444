//! A three-server ZooKeeper ensemble of the model inside a turmoil simulation, driven
//! by locksim's own ZooKeeper client: one leader elected, writes committed by a quorum
//! and applied by every server, a crashed leader replaced by the server with the
//! highest zxid, a restarted server rebuilt from its log and synced, a session moved to
//! another server within its timeout, and a session expired by the leader.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::SeededEntropy;
use lock_impl::zk::proto::create_mode;
use lock_impl::zk::{StreamDial, StreamDialer, ZkClient, ZkEnsemble, ZkStream};
use sim::clock::{ClockSpec, HostClock, SimClock};
use sim::net::NetFaults;
use sim::pause::PauseGate;
use sim::zk::ensemble::{EnsembleConfig, PeerState, SharedDisk};
use sim::zk::peer_host::{PeerHost, SharedPeer};
use sim::zk::{ServerEvent, ZK_PORT, ZkConfig};

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

type Slots = Arc<Mutex<BTreeMap<u64, SharedPeer>>>;

/// Three servers `zk-1..3` (tick 50 ms); returns their live handles and disks.
fn ensemble(sim: &mut turmoil::Sim<'_>) -> (Slots, BTreeMap<u64, SharedDisk>) {
    let (slots, disks, _) = ensemble_on(sim, NetFaults::new());
    (slots, disks)
}

/// [`ensemble`] with its links through `net`.
fn ensemble_on(
    sim: &mut turmoil::Sim<'_>,
    net: NetFaults,
) -> (Slots, BTreeMap<u64, SharedDisk>, NetFaults) {
    ensemble_of(sim, net, 3)
}

/// `n` servers `zk-1..n` with their links through `net`.
fn ensemble_of(
    sim: &mut turmoil::Sim<'_>,
    net: NetFaults,
    n: u64,
) -> (Slots, BTreeMap<u64, SharedDisk>, NetFaults) {
    let slots: Slots = Arc::default();
    let names: BTreeMap<u64, String> = (1..=n).map(|i| (i, format!("zk-{i}"))).collect();
    let zk = ZkConfig {
        tick_time_ms: 50,
        ..ZkConfig::default()
    };
    let cfg = EnsembleConfig::of(n, zk);
    let mut disks = BTreeMap::new();
    for (sid, name) in &names {
        let disk: SharedDisk = Arc::default();
        disks.insert(*sid, disk.clone());
        let (slots, names, cfg, net, sid) =
            (slots.clone(), names.clone(), cfg.clone(), net.clone(), *sid);
        sim.host(name.as_str(), move || {
            let host = PeerHost {
                cfg: cfg.clone(),
                me: sid,
                names: names.clone(),
                disk: disk.clone(),
                clock: Arc::new(HostClock::new(ClockSpec::default())),
                net: net.clone(),
                gate: PauseGate::new(),
            };
            let slots = slots.clone();
            async move {
                host.run(move |s| {
                    slots.lock().unwrap().insert(sid, s);
                })
                .await
            }
        });
    }
    (slots, disks, net)
}

fn states(slots: &Slots) -> BTreeMap<u64, (PeerState, bool, i64)> {
    slots
        .lock()
        .unwrap()
        .iter()
        .map(|(sid, p)| {
            (
                *sid,
                p.with(|p, _| (p.state(), p.serving(), p.tree().last_zxid())),
            )
        })
        .collect()
}

fn leader_of(slots: &Slots, alive: &[u64]) -> Option<u64> {
    let s = states(slots);
    let leaders: Vec<u64> = s
        .iter()
        .filter(|(sid, (st, serving, _))| {
            alive.contains(sid) && *st == PeerState::Leading && *serving
        })
        .map(|(sid, _)| *sid)
        .collect();
    assert!(leaders.len() <= 1, "two serving leaders: {s:?}");
    leaders.first().copied()
}

fn client(
    seed: u64,
    servers: &[&str],
    timeout_ms: u32,
) -> (ZkEnsemble, Arc<SimClock>, Arc<SeededEntropy>) {
    (
        ZkEnsemble {
            servers: servers.iter().map(|s| (s.to_string(), ZK_PORT)).collect(),
            dialer: Arc::new(TurmoilDialer),
            session_timeout_ms: timeout_ms,
            scale: lock_impl::TimeScale::REAL,
        },
        Arc::new(SimClock::new(HostClock::new(ClockSpec::default()))),
        Arc::new(SeededEntropy::new(seed, "client")),
    )
}

fn has_node(slots: &Slots, sid: u64, path: &str) -> bool {
    let slots = slots.lock().unwrap();
    slots
        .get(&sid)
        .is_some_and(|p| p.with(|p, _| p.tree().get(path).is_some()))
}

fn step_for(sim: &mut turmoil::Sim<'_>, ms: u64) {
    let end = sim.elapsed() + Duration::from_millis(ms);
    while sim.elapsed() < end {
        sim.step().unwrap();
    }
}

#[test]
fn three_servers_elect_one_leader_and_every_server_applies_a_committed_create() {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(1)
        .build();
    let (slots, _) = ensemble(&mut sim);
    let path = Arc::new(Mutex::new(String::new()));
    let p = path.clone();
    sim.client("client-1", async move {
        let (e, clock, entropy) = client(1, &["zk-1", "zk-2", "zk-3"], 2_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .expect("a session with the ensemble");
        zk.create("/a", None, create_mode::PERSISTENT)
            .await
            .unwrap();
        let made = zk
            .create("/a/n-", Some(b"x"), create_mode::EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let (children, _) = zk.get_children2("/a").await.unwrap();
        assert_eq!(children.len(), 1, "the server answering saw its own create");
        *p.lock().unwrap() = made;
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(())
    });
    step_for(&mut sim, 3_000);
    let leader = leader_of(&slots, &[1, 2, 3]).expect("a leader serves");
    let s = states(&slots);
    assert_eq!(
        s.values()
            .filter(|(st, serving, _)| *st == PeerState::Following && *serving)
            .count(),
        2,
        "{s:?}"
    );
    let made = path.lock().unwrap().clone();
    assert!(made.starts_with("/a/n-"), "{made}");
    for sid in 1..=3 {
        assert!(
            has_node(&slots, sid, &made),
            "zk-{sid} (leader zk-{leader}) lacks {made}"
        );
    }
    // zxids carry the epoch in their high half.
    assert!(s[&leader].2 >> 32 >= 1, "{s:?}");
}

#[test]
fn a_crashed_leader_is_replaced_by_a_server_with_its_commits_and_rejoins_from_its_log() {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(2)
        .build();
    let (slots, disks) = ensemble(&mut sim);
    sim.client("client-1", async move {
        let (e, clock, entropy) = client(2, &["zk-1", "zk-2", "zk-3"], 4_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        zk.create("/kept", Some(b"v"), create_mode::PERSISTENT)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        Ok(())
    });
    step_for(&mut sim, 2_000);
    let old = leader_of(&slots, &[1, 2, 3]).expect("a leader");
    assert!(has_node(&slots, old, "/kept"));
    let old_name = format!("zk-{old}");
    sim.crash(old_name.as_str());
    let alive: Vec<u64> = (1..=3).filter(|s| *s != old).collect();
    step_for(&mut sim, 2_000);
    let new = leader_of(&slots, &alive).expect("the two survivors elect a leader");
    assert_ne!(new, old);
    assert!(
        has_node(&slots, new, "/kept"),
        "the committed create survived"
    );
    // The crashed server's disk held the create; it restarts, rebuilds, and syncs.
    assert!(
        disks[&old].lock().unwrap().log.len() >= 2,
        "the log holds the session and the create"
    );
    sim.bounce(old_name.as_str());
    step_for(&mut sim, 2_000);
    let s = states(&slots);
    assert_eq!(s[&old].0, PeerState::Following, "{s:?}");
    assert!(s[&old].1, "the restarted server serves again: {s:?}");
    assert!(has_node(&slots, old, "/kept"));
    assert_eq!(s[&old].2, s[&new].2, "synced to the leader's zxid: {s:?}");
}

#[test]
fn a_session_moves_to_another_server_when_its_server_crashes_and_keeps_its_node() {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(3)
        .build();
    let (slots, _) = ensemble(&mut sim);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    sim.client("client-1", async move {
        let (e, clock, entropy) = client(3, &["zk-1", "zk-2", "zk-3"], 3_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        let node = zk.create("/e", None, create_mode::EPHEMERAL).await.unwrap();
        let first = format!("{:?}", zk.state());
        s2.lock().unwrap().push(first);
        tokio::time::sleep(Duration::from_secs(4)).await;
        let again = zk.exists(&node).await;
        s2.lock().unwrap().push(format!("{:?}", zk.state()));
        s2.lock().unwrap().push(format!("{again:?}"));
        Ok(())
    });
    step_for(&mut sim, 1_000);
    let first = seen.lock().unwrap()[0].clone();
    let server = (1..=3)
        .find(|i| first.contains(&format!("zk-{i}:")))
        .expect("connected to one of them");
    sim.crash(format!("zk-{server}").as_str());
    step_for(&mut sim, 5_000);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        !seen[1].contains(&format!("zk-{server}:")) && seen[1].contains("Connected"),
        "the client moved: {seen:?}"
    );
    assert!(
        seen[2].starts_with("Ok(Some("),
        "its ephemeral node lives: {seen:?}"
    );
    let _ = slots;
}

#[test]
fn the_leader_expires_a_silent_session_and_every_server_drops_its_ephemeral_node() {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(4)
        .build();
    let (slots, _) = ensemble(&mut sim);
    // A host, not a client: it can crash.
    sim.host("client-1", || async move {
        let (e, clock, entropy) = client(4, &["zk-1", "zk-2", "zk-3"], 500);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        zk.create("/gone", None, create_mode::EPHEMERAL)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        Ok(())
    });
    // The first dial may come before the election ends: the client retries.
    for _ in 0..50 {
        if (1..=3).all(|s| has_node(&slots, s, "/gone")) {
            break;
        }
        step_for(&mut sim, 100);
    }
    assert!(
        (1..=3).all(|s| has_node(&slots, s, "/gone")),
        "{:?}",
        states(&slots)
    );
    sim.crash("client-1");
    step_for(&mut sim, 2_000);
    let leader = leader_of(&slots, &[1, 2, 3]).expect("a leader");
    let mut expired = Vec::new();
    for (sid, p) in slots.lock().unwrap().iter() {
        for e in p.with(|p, _| p.take_events()) {
            if let ServerEvent::SessionExpired { ephemerals, .. } = e {
                expired.push((*sid, ephemerals));
            }
        }
    }
    assert_eq!(expired, vec![(leader, vec!["/gone".to_string()])]);
    for s in 1..=3 {
        assert!(!has_node(&slots, s, "/gone"), "zk-{s} still has the node");
    }
}

#[test]
fn a_follower_cut_off_from_its_leader_serves_a_stale_read_then_catches_up() {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(5)
        .build();
    let (slots, _, net) = ensemble_on(&mut sim, NetFaults::new());
    step_for(&mut sim, 1_000);
    let leader = leader_of(&slots, &[1, 2, 3]).expect("a leader");
    let follower = (1..=3).find(|s| *s != leader).unwrap();
    let (leader_name, follower_name) = (format!("zk-{leader}"), format!("zk-{follower}"));
    // 0: connecting; 1: the test holds the link, write; 2: written; 3: read stale;
    // 4: the test released the link.
    let phase = Arc::new(AtomicU8::new(0));
    let connected = Arc::new(AtomicU8::new(0));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let wait_for = |phase: Arc<AtomicU8>, at: u8| async move {
        while phase.load(Ordering::SeqCst) < at {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let (p1, c1, s1, fname) = (
        phase.clone(),
        connected.clone(),
        seen.clone(),
        follower_name.clone(),
    );
    sim.client("reader", async move {
        let (e, clock, entropy) = client(6, &[fname.as_str()], 2_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        c1.fetch_add(1, Ordering::SeqCst);
        wait_for(p1.clone(), 2).await;
        let read = format!("{:?}", zk.exists("/x").await.map(|s| s.is_some()));
        s1.lock().unwrap().push(read);
        p1.store(3, Ordering::SeqCst);
        wait_for(p1.clone(), 4).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let read = format!("{:?}", zk.exists("/x").await.map(|s| s.is_some()));
        s1.lock().unwrap().push(read);
        Ok(())
    });
    let (p2, c2, lname) = (phase.clone(), connected.clone(), leader_name.clone());
    sim.client("writer", async move {
        let (e, clock, entropy) = client(7, &[lname.as_str()], 2_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        c2.fetch_add(1, Ordering::SeqCst);
        wait_for(p2.clone(), 1).await;
        zk.create("/x", None, create_mode::PERSISTENT)
            .await
            .unwrap();
        p2.store(2, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(())
    });
    for _ in 0..2_000 {
        if connected.load(Ordering::SeqCst) == 2 {
            break;
        }
        step_for(&mut sim, 1);
    }
    // The leader's messages to the follower are held (under syncLimit, 250 ms: it
    // keeps serving) while the write commits on the leader and the other follower.
    net.hold(
        0,
        std::slice::from_ref(&leader_name),
        std::slice::from_ref(&follower_name),
    );
    phase.store(1, Ordering::SeqCst);
    let mut held_ms = 0;
    while phase.load(Ordering::SeqCst) < 3 && held_ms < 200 {
        step_for(&mut sim, 1);
        held_ms += 1;
    }
    net.release(0);
    phase.store(4, Ordering::SeqCst);
    step_for(&mut sim, 1_000);
    let s = states(&slots);
    assert_eq!(
        s[&follower].0,
        PeerState::Following,
        "it kept following: {s:?}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["Ok(false)", "Ok(true)"],
        "{follower_name} answered from its stale tree while held {held_ms} ms, then caught up"
    );
}

#[test]
fn five_servers_keep_committing_after_two_crashes_and_not_after_three() {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(30))
        .rng_seed(8)
        .build();
    let (slots, _, _) = ensemble_of(&mut sim, NetFaults::new(), 5);
    let made = Arc::new(Mutex::new(Vec::<String>::new()));
    let m = made.clone();
    sim.client("client-1", async move {
        let servers = ["zk-1", "zk-2", "zk-3", "zk-4", "zk-5"];
        let (e, clock, entropy) = client(8, &servers, 1_000);
        let zk = ZkClient::connect(&e, clock, entropy, Duration::from_secs(5))
            .await
            .unwrap();
        for i in 0..40 {
            // Each create is retried across connection losses until it is known.
            for _ in 0..20 {
                match zk
                    .create(&format!("/n{i}"), None, create_mode::PERSISTENT)
                    .await
                {
                    Ok(p) => {
                        m.lock().unwrap().push(p);
                        break;
                    }
                    Err(e) if e.code() == lock_impl::zk::proto::ErrorCode::NODE_EXISTS => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    });
    step_for(&mut sim, 1_000);
    let all: Vec<u64> = (1..=5).collect();
    let first = leader_of(&slots, &all).expect("a leader of five");
    // Two crashes, the leader first: three of five are a quorum.
    let second = all.iter().copied().find(|s| *s != first).unwrap();
    for s in [first, second] {
        sim.crash(format!("zk-{s}").as_str());
    }
    let alive: Vec<u64> = all
        .iter()
        .copied()
        .filter(|s| *s != first && *s != second)
        .collect();
    let before = made.lock().unwrap().len();
    step_for(&mut sim, 2_000);
    let leader = leader_of(&slots, &alive).expect("three survivors elect a leader");
    let after = made.lock().unwrap().len();
    assert!(
        after > before,
        "writes go on with three of five ({before} -> {after})"
    );
    // A third crash leaves two of five: no quorum, no leader, no write.
    sim.crash(format!("zk-{leader}").as_str());
    let two: Vec<u64> = alive.iter().copied().filter(|s| *s != leader).collect();
    step_for(&mut sim, 1_000);
    let stuck = made.lock().unwrap().len();
    step_for(&mut sim, 1_000);
    assert_eq!(leader_of(&slots, &two), None, "two of five elect nobody");
    assert_eq!(made.lock().unwrap().len(), stuck, "and commit nothing");
}
