//! The private-server launchers (`lock_impl::testing::servers`): a ZooKeeper server
//! and ensemble from Debian's jars and a MariaDB from Debian's `mariadb-server`, each on
//! free loopback ports with its own directory, and gone, process and directory, on every
//! exit path: a drop, a panic, the process's normal exit, and the process being killed.
//! Skip without the packages, unless `LOCKSIM_REQUIRE_ZK` / `LOCKSIM_REQUIRE_MYSQL`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_impl::mysql::MySqlConn;
use lock_impl::testing::{
    LaunchError, MariaDbServer, ZkEnsembleServers, ZkServer, mysql_server, skipped,
};
use lock_impl::{Clock, TokioClock};

fn zk_or_skip<T>(started: Result<T, LaunchError>) -> Option<T> {
    or_skip(started, "LOCKSIM_REQUIRE_ZK")
}

fn mariadb_or_skip<T>(started: Result<T, LaunchError>) -> Option<T> {
    or_skip(started, "LOCKSIM_REQUIRE_MYSQL")
}

fn or_skip<T>(started: Result<T, LaunchError>, require: &str) -> Option<T> {
    match started {
        Ok(s) => Some(s),
        Err(e @ LaunchError::Missing { .. }) if std::env::var_os(require).is_none() => {
            skipped(&e.to_string());
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Whether `pid` is a running process (not gone, not a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn srvr(addr: std::net::SocketAddr) -> String {
    lock_impl::testing::servers::four_letter_word(addr, "srvr").unwrap_or_default()
}

#[test]
fn a_private_zookeeper_serves_on_its_own_port_and_is_gone_after_drop() {
    let started = Instant::now();
    let Some(server) = zk_or_skip(ZkServer::start()) else {
        return;
    };
    println!("zookeeper standalone up in {:?}", started.elapsed());
    let (pid, dir) = (server.pid(), server.dir().to_path_buf());
    assert_ne!(server.port(), 2181, "a free port, not the system service's");
    assert_eq!(server.mode().as_deref(), Some("standalone"));
    assert!(server.log_path().starts_with(&dir) && server.data_dir().starts_with(&dir));
    let conf = lock_impl::testing::servers::four_letter_word(server.addr(), "conf").unwrap();
    assert!(conf.contains("tickTime=2000"), "{conf}");
    assert!(alive(pid) && dir.is_dir());
    drop(server);
    assert!(!alive(pid), "the JVM {pid} outlived its handle");
    assert!(!dir.exists(), "{} outlived its handle", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_zookeeper_keeps_its_port_and_its_data() {
    let Some(mut server) = zk_or_skip(ZkServer::start()) else {
        return;
    };
    let ensemble = lock_impl::zk::ZkEnsemble {
        servers: vec![("127.0.0.1".into(), server.port())],
        dialer: Arc::new(lock_impl::zk::TokioDialer),
        session_timeout_ms: 10_000,
        scale: lock_impl::TimeScale::REAL,
    };
    let connect = || {
        lock_impl::zk::ZkClient::connect(
            &ensemble,
            Arc::new(TokioClock::new()),
            Arc::new(lock_impl::OsEntropy),
            Duration::from_secs(5),
        )
    };
    let c = connect().await.expect("a session");
    c.create(
        "/kept",
        Some(b"x"),
        lock_impl::zk::proto::create_mode::PERSISTENT,
    )
    .await
    .unwrap();
    c.close().await.unwrap();
    let old = server.pid();
    tokio::task::block_in_place(|| server.restart()).expect("restart");
    assert_ne!(server.pid(), old);
    assert!(!alive(old));
    let c = connect().await.expect("a session after the restart");
    assert!(
        c.exists("/kept").await.unwrap().is_some(),
        "the data survives"
    );
    c.close().await.unwrap();
}

#[test]
fn servers_started_at_once_get_distinct_ports_and_directories() {
    let threads: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(|| zk_or_skip(ZkServer::start())))
        .collect();
    let servers: Vec<ZkServer> = threads
        .into_iter()
        .filter_map(|t| t.join().unwrap())
        .collect();
    if servers.is_empty() {
        return;
    }
    let mut ports: Vec<u16> = servers.iter().map(ZkServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3);
    for s in &servers {
        assert!(srvr(s.addr()).contains("Mode: standalone"));
    }
}

#[test]
fn a_three_server_ensemble_elects_one_leader_and_survives_losing_it() {
    let started = Instant::now();
    let Some(mut ensemble) = zk_or_skip(ZkEnsembleServers::start(3)) else {
        return;
    };
    println!("zookeeper ensemble of 3 up in {:?}", started.elapsed());
    let leader = ensemble.leader().expect("a leader");
    let modes: Vec<Option<String>> = ensemble.members().iter().map(ZkServer::mode).collect();
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("follower"))
            .count(),
        2,
        "{modes:?}"
    );
    assert_eq!(ensemble.connect_string().split(',').count(), 3);
    // Kill the leader: the other two elect a new one; the old one rejoins as follower.
    ensemble.member_mut(leader).kill();
    wait_until("a new leader", || {
        ensemble.leader().is_some_and(|l| l != leader)
    });
    ensemble.member_mut(leader).restart().expect("rejoin");
    ensemble
        .wait_serving(Duration::from_secs(60))
        .expect("all three serve again");
    let dirs: Vec<PathBuf> = ensemble
        .members()
        .iter()
        .map(|m| m.dir().to_path_buf())
        .collect();
    let pids: Vec<u32> = ensemble.members().iter().map(ZkServer::pid).collect();
    drop(ensemble);
    assert!(pids.iter().all(|p| !alive(*p)) && dirs.iter().all(|d| !d.exists()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_mariadb_has_the_locksim_account_and_survives_a_crash() {
    let started = Instant::now();
    let Some(mut server) = mariadb_or_skip(tokio::task::block_in_place(MariaDbServer::start))
    else {
        return;
    };
    println!("mariadb up in {:?}", started.elapsed());
    assert_ne!(server.port(), 3306, "a free port, not the system service's");
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mut conn = MySqlConn::connect(&mysql_server(server.addr()), clock.clone())
        .await
        .expect("login as locksim");
    assert!(conn.handshake().server_version.contains("MariaDB"));
    conn.query("CREATE TABLE kept (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    conn.query("INSERT INTO kept VALUES (7)").await.unwrap();
    conn.quit().await;
    let (old, dir) = (server.pid(), server.dir().to_path_buf());
    tokio::task::block_in_place(|| server.restart()).expect("restart");
    assert!(!alive(old));
    let mut conn = MySqlConn::connect(&mysql_server(server.addr()), clock.clone())
        .await
        .expect("login after the crash");
    let rows = format!("{:?}", conn.query("SELECT id FROM kept").await.unwrap());
    assert!(
        rows.contains("Some([55])"),
        "the committed row 7 survives: {rows}"
    );
    conn.quit().await;
    // A second server beside it: its own port and data (the table is not there).
    let started = Instant::now();
    let other = tokio::task::block_in_place(MariaDbServer::start).expect("a second server");
    println!("a second mariadb up in {:?}", started.elapsed());
    assert_ne!(other.port(), server.port());
    let mut conn = MySqlConn::connect(&mysql_server(other.addr()), clock)
        .await
        .expect("login to the second server");
    assert!(conn.query("SELECT id FROM kept").await.is_err());
    conn.quit().await;
    let pids = [server.pid(), other.pid()];
    drop((server, other));
    assert!(pids.iter().all(|p| !alive(*p)) && !dir.exists());
}

#[test]
fn a_panicking_test_still_stops_its_server() {
    let mut seen = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(server) = zk_or_skip(ZkServer::start()) else {
            return;
        };
        seen = Some((server.pid(), server.dir().to_path_buf()));
        panic!("the test fails while it holds a server");
    }));
    let Some((pid, dir)) = seen else {
        return;
    };
    assert!(result.is_err());
    assert!(!alive(pid) && !dir.exists());
}

/// A probe process, killed if the test fails before it does.
struct Probe(std::process::Child);

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs this binary again on `probe` with `mode`, and returns its stdout once the
/// probe printed `ready` (`hold`) or exited (`exit`), with the child if it still runs.
fn run_probe(mode: &str) -> (String, Option<Probe>) {
    let mut child = Probe(
        Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "probe", "--test-threads", "1", "--nocapture"])
            .env("LOCKSIM_SERVER_PROBE", mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the probe"),
    );
    use std::io::BufRead;
    let mut out = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let mut text = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.0.wait();
            return (text, None);
        }
        text.push_str(&line);
        if line.starts_with("ready") && mode == "hold" {
            return (text, Some(child));
        }
    }
}

/// `pid=N dir=D` pairs the probe printed.
fn probed(text: &str) -> Vec<(u32, PathBuf)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("server pid=")?;
            let (pid, dir) = rest.split_once(" dir=")?;
            Some((pid.parse().ok()?, PathBuf::from(dir)))
        })
        .collect()
}

#[test]
fn servers_shared_by_a_test_binary_are_gone_when_it_exits() {
    let (text, child) = run_probe("exit");
    assert!(child.is_none());
    let servers = probed(&text);
    if servers.is_empty() {
        return; // skipped: the packages are missing
    }
    for (pid, dir) in servers {
        assert!(!alive(pid), "server {pid} outlived the test binary");
        assert!(!dir.exists(), "{} outlived the test binary", dir.display());
    }
}

#[test]
fn servers_of_a_killed_test_binary_die_with_it_and_their_directories_are_swept() {
    let (text, child) = run_probe("hold");
    let servers = probed(&text);
    let Some(mut child) = child else {
        assert!(servers.is_empty(), "the probe exited: {text}");
        return;
    };
    assert!(!servers.is_empty(), "{text}");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    for (pid, _) in &servers {
        wait_until(&format!("server {pid} to die with its parent"), || {
            !alive(*pid)
        });
    }
    // Nothing ran the killed process's cleanup: its directories are left until the
    // next launch in any process sweeps them.
    lock_impl::testing::servers::sweep_orphaned_dirs_now();
    for (_, dir) in &servers {
        assert!(!Path::new(dir).exists(), "{} was not swept", dir.display());
    }
}

/// Starts the shared ZooKeeper and MariaDB as the real-server tests do, prints their
/// pids and directories, and then exits (`exit`) or waits to be killed (`hold`). Only
/// when asked to by the tests above; alone it does nothing.
#[test]
fn probe() {
    let Some(mode) = std::env::var_os("LOCKSIM_SERVER_PROBE") else {
        return;
    };
    let mut servers = Vec::new();
    if let Some(zk) = zk_or_skip(ZkServer::start()) {
        servers.push((zk.pid(), zk.dir().to_path_buf()));
        // Shared, as `real_zookeeper()` shares it: a static never drops.
        Box::leak(Box::new(zk));
    }
    if let Some(db) = mariadb_or_skip(MariaDbServer::start()) {
        servers.push((db.pid(), db.dir().to_path_buf()));
        Box::leak(Box::new(db));
    }
    for (pid, dir) in &servers {
        println!("server pid={pid} dir={}", dir.display());
    }
    println!("ready");
    if mode == "hold" {
        std::thread::sleep(Duration::from_secs(120));
    }
}
