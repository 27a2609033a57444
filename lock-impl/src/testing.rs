//! Test support, behind the `testing` feature: launchers for private real servers
//! (`redis-server` here; Sentinel, ZooKeeper and MariaDB in [`servers`]) and the conformance
//! bodies that every backend (real Redis, the locksim model) must pass.
//!
//! One body, two backends: the same function runs against a `redis-server` started on
//! a free loopback port and against the simulator's model, so a difference between
//! them shows up as a failing test rather than as a wrong verdict later.

use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, Spawner, Task};

pub mod servers;

pub use servers::{
    EtcdCluster, EtcdProcess, LaunchError, MariaDbOptions, MariaDbServer, SentinelOptions,
    SentinelServer, ZkEnsembleServers, ZkOptions, ZkServer,
};

/// A `redis-server` child process on a free loopback port, stopped on drop.
pub struct RealRedis {
    child: Child,
    addr: SocketAddr,
    extra: Vec<String>,
    dir: std::path::PathBuf,
}

impl RealRedis {
    /// Starts `redis-server` (no persistence, loopback only), or returns `None` after
    /// printing one line that says why and how to install it. With the environment
    /// variable `LOCKSIM_REQUIRE_REDIS` set (CI sets it), a missing server panics
    /// instead, so CI can never pass by skipping.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// [`RealRedis::start`] with extra `redis-server` arguments (e.g. `--replicaof
    /// 127.0.0.1 6379`).
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        if !redis_server_available() {
            return None;
        }
        // Port 0 picks a free port; a small race with other processes is tolerated by
        // retrying on a fresh port.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("cannot bind a loopback port")
                .port();
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            if let Some((child, dir)) = spawn_listening(addr, extra) {
                return Some(Self {
                    child,
                    addr,
                    extra: extra.iter().map(|a| a.to_string()).collect(),
                    dir,
                });
            }
        }
        panic!("redis-server did not start listening after 5 attempts");
    }

    /// Kills the server (`SIGKILL`: it forgets everything, as it keeps no persistence)
    /// and starts a new one on the same port: a restarted server, for reconnection
    /// tests.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for _ in 0..50 {
            let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
            if let Some((child, dir)) = spawn_listening(self.addr, &extra) {
                let _ = std::fs::remove_dir_all(std::mem::replace(&mut self.dir, dir));
                self.child = child;
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not restart on {}", self.addr);
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

/// Whether `redis-server` is on `PATH`. If not, prints one `SKIPPED:` line saying how
/// to install it, or panics under `LOCKSIM_REQUIRE_REDIS` (CI sets it), so CI can never
/// pass by skipping.
pub fn redis_server_available() -> bool {
    binary_available("redis-server", "redis-server")
}

/// Whether `binary` (from Debian's `package`) is on `PATH`, with the same skip line or
/// panic as [`redis_server_available`].
pub fn binary_available(binary: &str, package: &str) -> bool {
    let found = Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        if std::env::var_os("LOCKSIM_REQUIRE_REDIS").is_some() {
            panic!("LOCKSIM_REQUIRE_REDIS is set but {binary} is not on PATH");
        }
        skipped(&format!(
            "{binary} is not on PATH; install it with `apt-get install -y {package}` \
             (CI does) to run the real-Redis tests"
        ));
    }
    found
}

/// Says that a test skipped, and why, where the person running `cargo test` sees it:
/// straight to the process's standard error, which the test harness does not capture
/// (it captures `eprintln!`, and shows it only for a failing test, so a skip read as a
/// pass).
pub fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// Starts `redis-server` (no persistence, loopback only) on `addr` and waits until it
/// listens; `None` if it exits first (the port was taken). Spawned through
/// [`servers::spawn_kept`], so it dies with this process however it ends.
fn spawn_listening(addr: SocketAddr, extra: &[&str]) -> Option<(Child, std::path::PathBuf)> {
    // Its own working directory: a replica saves the dataset it received as
    // `dump.rdb` there, and a server started in a directory holding one loads it.
    let dir = servers::server_dir("redis");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--dir", &dir.to_string_lossy()])
        .args(["--port", &addr.port().to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = servers::spawn_kept(cmd).expect("redis-server is on PATH but failed to start");
    for _ in 0..200 {
        if let Ok(stream) = TcpStream::connect(addr) {
            // Something listens: make sure it is *this* server. Tests start servers in
            // parallel, and two can pick the same free port: the loser exits, and
            // without this check it would take the winner's port for its own (and see
            // "connection refused" once the winner's test ends).
            if served_by(stream, child.id()) {
                return Some((child, dir));
            }
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    None
}

/// Whether the server at the other end of `stream` is the process `pid` (by its
/// `INFO server` reply's `process_id`): tests that start servers on a free port use it
/// to tell their own server from another test's that took the same port.
pub fn served_by(mut stream: TcpStream, pid: u32) -> bool {
    use std::io::{Read, Write};
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    // A bulk string: `$LEN\r\n` then LEN bytes and `\r\n`.
    let complete = |r: &[u8]| {
        let Some(end) = r.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let len = std::str::from_utf8(&r[1..end])
            .ok()
            .and_then(|l| l.parse::<usize>().ok());
        len.is_none_or(|len| r.len() >= end + 2 + len + 2)
    };
    while !complete(&reply) {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&reply);
    text.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        == Some(pid)
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds one design over fresh dependencies: how a conformance body makes clients.
pub type Factory = Arc<dyn Fn(Deps) -> Arc<dyn LockDesign> + Send + Sync>;

/// Where conformance bodies get their clients' dependencies from.
pub trait Backend: Send + Sync {
    /// Dependencies for a new client (its own connection, clock and entropy).
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>>;

    /// The shortest lease the system honours as asked, for the bodies that wait for
    /// one to run out: 150 ms, or a system's own minimum (etcd grants whole seconds,
    /// and at least its minimum TTL: 2 s at its defaults).
    fn shortest_lease(&self) -> Duration {
        Duration::from_millis(150)
    }
}

/// A backend over a Redis URL with tokio's clock and OS entropy.
pub struct UrlBackend {
    /// The server.
    pub url: String,
}

impl Backend for UrlBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move {
            crate::production_deps(&self.url, Duration::from_secs(5))
                .await
                .expect("connect to the test server")
        })
    }
}

/// A backend over several independent servers (Redlock): `Deps::servers` reaches each
/// URL, in order; `Deps::conn` the first.
pub struct MultiUrlBackend {
    /// The servers.
    pub urls: Vec<String>,
}

/// Five real `redis-server` processes on loopback (the Redlock world) and a backend
/// over them; `None` (the test skips) without `redis-server`.
pub fn five_real_masters() -> Option<(Vec<RealRedis>, MultiUrlBackend)> {
    let servers = (0..crate::REDLOCK_MASTERS)
        .map(|_| RealRedis::start())
        .collect::<Option<Vec<_>>>()?;
    let backend = MultiUrlBackend {
        urls: servers.iter().map(RealRedis::url).collect(),
    };
    Some((servers, backend))
}

impl Backend for MultiUrlBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move {
            let urls: Vec<&str> = self.urls.iter().map(String::as_str).collect();
            crate::production_deps_multi(&urls, Duration::from_secs(5))
                .await
                .expect("connect to the test servers")
        })
    }
}

/// A spawner that drops every task it is given: the background tasks (a watchdog) of a
/// client that died right after starting them, as in a crash.
#[derive(Debug, Default, Clone, Copy)]
pub struct DroppingSpawner;

impl Spawner for DroppingSpawner {
    fn spawn(&self, task: Task) {
        drop(task);
    }
}

static KEYS: AtomicU64 = AtomicU64::new(0);

/// A key no other body in this process uses, so bodies can share one server.
pub fn fresh_key(body: &str) -> String {
    format!("lock:{body}:{}", KEYS.fetch_add(1, Ordering::Relaxed))
}

fn acquired(outcome: Acquire, what: &str) -> Guard {
    match outcome {
        Acquire::Acquired(g) => g,
        other => panic!("{what}: expected Acquired, got {other:?}"),
    }
}

async fn client(backend: &dyn Backend, factory: &Factory) -> Arc<dyn LockDesign> {
    factory(backend.deps().await)
}

/// Two owners: while A holds the lock, B neither gets it at once nor within a wait.
pub async fn exclusive_between_two_owners(backend: &dyn Backend, factory: &Factory) {
    let key = fresh_key("exclusive");
    let (a, b) = (
        client(backend, factory).await,
        client(backend, factory).await,
    );
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let ga = acquired(a.acquire(&key, opts).await.unwrap(), "first owner");
    assert_eq!(
        b.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={}",
        a.name()
    );
    let wait = AcquireOptions::new(10_000, 150).unwrap();
    assert_eq!(
        b.acquire(&key, wait).await.unwrap(),
        Acquire::NotAcquired,
        "design={}",
        a.name()
    );
    assert_eq!(
        a.release(&ga).await.unwrap(),
        Release::Removed,
        "design={}",
        a.name()
    );
}

/// The owner's release frees the lock for the next owner at once.
pub async fn release_by_owner_frees_the_lock(backend: &dyn Backend, factory: &Factory) {
    let key = fresh_key("release");
    let (a, b) = (
        client(backend, factory).await,
        client(backend, factory).await,
    );
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let ga = acquired(a.acquire(&key, opts).await.unwrap(), "first owner");
    assert_eq!(
        a.release(&ga).await.unwrap(),
        Release::Removed,
        "design={}",
        a.name()
    );
    let gb = acquired(
        b.acquire(&key, opts).await.unwrap(),
        "second owner after release",
    );
    assert_ne!(ga.owner, gb.owner, "owner values must be unique");
    assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
}

/// After the lease (plus margin) a second owner acquires, if and only if the design
/// expires (`expires`); a design without expiry keeps the lock.
///
/// The first owner stands for a holder that died after acquiring: its background tasks
/// never run ([`DroppingSpawner`]), so a design whose watchdog renews a live holder's
/// lease is checked for what the lease is for, the dead holder. (Designs without
/// background tasks are unaffected.)
pub async fn lease_expiry(backend: &dyn Backend, factory: &Factory, expires: bool) {
    let key = fresh_key("expiry");
    let lease = backend.shortest_lease();
    let mut dead_deps = backend.deps().await;
    dead_deps.spawner = Arc::new(DroppingSpawner);
    let (a, b) = (factory(dead_deps), client(backend, factory).await);
    let ga = acquired(
        a.acquire(
            &key,
            AcquireOptions::new(lease.as_millis() as i64, 0).unwrap(),
        )
        .await
        .unwrap(),
        "first owner",
    );
    // The lease, run out with a margin as long again (and 100 ms): 400 ms at 150 ms.
    tokio::time::sleep(lease * 2 + Duration::from_millis(100)).await;
    let second = b
        .acquire(&key, AcquireOptions::new(10_000, 0).unwrap())
        .await
        .unwrap();
    if expires {
        let gb = acquired(second, "second owner after the lease");
        assert_eq!(b.release(&gb).await.unwrap(), Release::Removed);
    } else {
        assert_eq!(
            second,
            Acquire::NotAcquired,
            "design={} must not expire",
            a.name()
        );
        assert_eq!(a.release(&ga).await.unwrap(), Release::Removed);
    }
}

/// A release with someone else's owner value leaves the lock in place (for designs
/// that check ownership). The release reports `NotRemoved` or `HeldByOther`, or fails
/// with [`LockError::NotOwner`] naming the key and the forged owner (Redisson's
/// `IllegalMonitorStateException`); either way the lock must still be held.
pub async fn foreign_release_leaves_the_lock(backend: &dyn Backend, factory: &Factory) {
    let key = fresh_key("foreign");
    let (a, b) = (
        client(backend, factory).await,
        client(backend, factory).await,
    );
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let ga = acquired(a.acquire(&key, opts).await.unwrap(), "first owner");
    let forged = Guard {
        owner: format!("{}-not-mine", ga.owner),
        ..ga.clone()
    };
    match b.release(&forged).await {
        Ok(Release::NotRemoved | Release::HeldByOther) => {}
        Err(LockError::NotOwner { key: k, owner }) => {
            assert_eq!(
                (k.as_str(), owner.as_str()),
                (key.as_str(), forged.owner.as_str()),
                "design={} NotOwner must name the key and the forged owner",
                a.name()
            );
        }
        other => panic!("design={} foreign release gave {other:?}", a.name()),
    }
    assert_eq!(
        b.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "lock must still be held"
    );
    assert_eq!(a.release(&ga).await.unwrap(), Release::Removed);
}

/// Eight tasks contend for one lock; each increments a shared counter with a read, a
/// pause and a write inside the critical section. The count ends exact and no two
/// tasks are ever inside at once.
///
/// The lease is 3 s and a waiter waits up to 30 s: a Redlock client that keeps the keys
/// a failed attempt set on a minority of masters while it retries (node-redlock, as
/// published) can leave no quorum for anyone until they expire, so each such stall
/// lasts a lease. With a 10 s lease, three stalls in a row (seen under a loaded CI
/// machine) outlasted the wait; with 3 s, ten fit.
pub async fn contention_keeps_a_counter_exact(backend: &dyn Backend, factory: &Factory) {
    const TASKS: u64 = 8;
    const ROUNDS: u64 = 10;
    const LEASE_MS: i64 = 3_000;
    let key = fresh_key("contention");
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let contended = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let lock = client(backend, factory).await;
        let (key, counter, inside, contended) = (
            key.clone(),
            counter.clone(),
            inside.clone(),
            contended.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let first = lock
                    .acquire(&key, AcquireOptions::new(LEASE_MS, 0).unwrap())
                    .await
                    .unwrap();
                let guard = match first {
                    Acquire::Acquired(g) => g,
                    _ => {
                        contended.fetch_add(1, Ordering::Relaxed);
                        let wait = AcquireOptions::new(LEASE_MS, 30_000).unwrap();
                        acquired(lock.acquire(&key, wait).await.unwrap(), "contending task")
                    }
                };
                assert!(
                    !inside.swap(true, Ordering::SeqCst),
                    "two tasks inside at once"
                );
                let read = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                counter.store(read + 1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                assert_eq!(lock.release(&guard).await.unwrap(), Release::Removed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("contending task panicked");
    }
    assert_eq!(counter.load(Ordering::SeqCst), TASKS * ROUNDS);
    assert!(
        contended.load(Ordering::Relaxed) > 0,
        "the lock was never contended"
    );
}

/// The read-write bodies, for a design with a read mode ([`LockDesign::acquire_read`]):
/// readers share; a writer excludes readers and writers, and readers exclude a writer;
/// a reader waiting on a writer gets the lock once the writer releases, not before; a
/// release by a non-holder does nothing; a dead reader's hold expires with its lease.
pub async fn read_write_bodies(backend: &dyn Backend, factory: &Factory) {
    let key = fresh_key("rw");
    let (a, b, w) = (
        client(backend, factory).await,
        client(backend, factory).await,
        client(backend, factory).await,
    );
    let name = a.name().to_string();
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    // Readers share.
    let ra = acquired(a.acquire_read(&key, opts).await.unwrap(), "first reader");
    let rb = acquired(b.acquire_read(&key, opts).await.unwrap(), "second reader");
    assert_ne!(
        ra.owner, rb.owner,
        "design={name}: readers are distinct holders"
    );
    // Readers exclude a writer, at once and within a wait.
    assert_eq!(
        w.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a writer while two read"
    );
    let short_wait = AcquireOptions::new(10_000, 150).unwrap();
    assert_eq!(
        w.acquire(&key, short_wait).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a writer waiting while two read"
    );
    // One reader gone: the other still excludes the writer.
    assert_eq!(
        a.release(&ra).await.unwrap(),
        Release::Removed,
        "design={name}"
    );
    assert_eq!(
        w.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a writer while one reads"
    );
    assert_eq!(
        b.release(&rb).await.unwrap(),
        Release::Removed,
        "design={name}"
    );
    // A writer excludes readers and writers.
    let gw = acquired(
        w.acquire(&key, opts).await.unwrap(),
        "writer on a free lock",
    );
    assert_eq!(
        a.acquire_read(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a reader while one writes"
    );
    assert_eq!(
        b.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a second writer"
    );
    // A release by a non-holder does nothing.
    let forged = Guard {
        owner: format!("{}-not-mine", gw.owner),
        ..gw.clone()
    };
    match b.release(&forged).await {
        Ok(Release::NotRemoved | Release::HeldByOther) | Err(LockError::NotOwner { .. }) => {}
        other => panic!("design={name}: a non-holder's release gave {other:?}"),
    }
    assert_eq!(
        a.acquire_read(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: the writer still holds after a non-holder's release"
    );
    // A reader waiting on the writer gets the lock once it releases, not before.
    let released = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (a, key, released) = (a.clone(), key.clone(), released.clone());
        tokio::spawn(async move {
            let wait = AcquireOptions::new(10_000, 5_000).unwrap();
            let got = a.acquire_read(&key, wait).await.unwrap();
            (got, released.load(Ordering::SeqCst))
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    released.store(true, Ordering::SeqCst);
    assert_eq!(
        w.release(&gw).await.unwrap(),
        Release::Removed,
        "design={name}"
    );
    let (got, after) = waiter.await.expect("waiting reader");
    let ra = acquired(got, "reader waiting on the writer");
    assert!(
        after,
        "design={name}: the reader got the lock before the writer released"
    );
    assert_eq!(
        a.release(&ra).await.unwrap(),
        Release::Removed,
        "design={name}"
    );
    // A dead reader (its watchdog never runs) holds only for its lease.
    let mut dead_deps = backend.deps().await;
    dead_deps.spawner = Arc::new(DroppingSpawner);
    let dead = factory(dead_deps);
    let _ = acquired(
        dead.acquire_read(&key, AcquireOptions::new(150, 0).unwrap())
            .await
            .unwrap(),
        "reader that dies",
    );
    assert_eq!(
        w.acquire(&key, opts).await.unwrap(),
        Acquire::NotAcquired,
        "design={name}: a writer under a live read lease"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let gw = acquired(
        w.acquire(&key, opts).await.unwrap(),
        "writer after a dead reader's lease",
    );
    assert_eq!(
        w.release(&gw).await.unwrap(),
        Release::Removed,
        "design={name}"
    );
}

/// Every body in turn, for one design.
pub async fn run_all(backend: &dyn Backend, factory: &Factory, expires: bool, checks_owner: bool) {
    exclusive_between_two_owners(backend, factory).await;
    release_by_owner_frees_the_lock(backend, factory).await;
    lease_expiry(backend, factory, expires).await;
    if checks_owner {
        foreign_release_leaves_the_lock(backend, factory).await;
    }
    contention_keeps_a_counter_exact(backend, factory).await;
}

/// The real ZooKeeper the tests use: a private server ([`ZkServer`], `tickTime` 2000
/// as Debian's `zoo.cfg`) started from Debian's installed jars on a free loopback port,
/// once per test binary and shared by its tests; it is killed and its directory removed
/// when the binary exits. Without the package, prints one `SKIPPED:` line saying how to
/// install it, or panics under `LOCKSIM_REQUIRE_ZK` (CI sets it), so CI cannot pass by
/// skipping; an installed server that does not start fails the test.
pub fn real_zookeeper() -> Option<SocketAddr> {
    static SHARED: std::sync::OnceLock<Option<ZkServer>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| match ZkServer::start() {
            Ok(server) => Some(server),
            Err(e @ LaunchError::Missing { .. }) => {
                if std::env::var_os("LOCKSIM_REQUIRE_ZK").is_some() {
                    panic!("LOCKSIM_REQUIRE_ZK is set but {e}");
                }
                skipped(&format!("{e}, to run the real-ZooKeeper tests"));
                None
            }
            Err(e) => panic!("{e}"),
        })
        .as_ref()
        .map(ZkServer::addr)
}

/// A backend over ZooKeeper servers (`host:port`): each client its own session.
pub struct ZkBackend {
    /// The servers.
    pub servers: Vec<String>,
    /// The session timeout each client asks for, ms.
    pub session_timeout_ms: u32,
}

impl Backend for ZkBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move {
            let servers: Vec<&str> = self.servers.iter().map(String::as_str).collect();
            crate::production_zk_deps(&servers, self.session_timeout_ms)
                .expect("valid ZooKeeper addresses")
        })
    }
}

/// The real MariaDB the tests use: a private `mariadbd` ([`MariaDbServer`], Debian's
/// `mariadb-server` 10.11, with the database `locksim` and the user `locksim`/`locksim`)
/// initialised into a temporary directory and listening on a free loopback port, once
/// per test binary and shared by its tests; it is killed and its directory removed when
/// the binary exits. Without the package, prints one `SKIPPED:` line saying how to
/// install it, or panics under `LOCKSIM_REQUIRE_MYSQL` (CI sets it), so CI cannot pass
/// by skipping; an installed server that does not start fails the test.
pub fn real_mysql() -> Option<SocketAddr> {
    static SHARED: std::sync::OnceLock<Option<MariaDbServer>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| match MariaDbServer::start() {
            Ok(server) => Some(server),
            Err(e @ LaunchError::Missing { .. }) => {
                if std::env::var_os("LOCKSIM_REQUIRE_MYSQL").is_some() {
                    panic!("LOCKSIM_REQUIRE_MYSQL is set but {e}");
                }
                skipped(&format!("{e}, to run the real-MariaDB tests"));
                None
            }
            Err(e) => panic!("{e}"),
        })
        .as_ref()
        .map(MariaDbServer::addr)
}

/// The account the MySQL tests log in with (the one [`MariaDbServer`] creates).
pub fn mysql_server(addr: SocketAddr) -> crate::mysql::MySqlServer {
    crate::mysql::MySqlServer {
        host: addr.ip().to_string(),
        port: addr.port(),
        user: servers::MARIADB_USER.into(),
        password: servers::MARIADB_PASSWORD.into(),
        database: servers::MARIADB_DATABASE.into(),
        dialer: Arc::new(crate::zk::TokioDialer),
        timeout_ms: 5_000,
    }
}

/// A backend over a MySQL server: each client its own connection.
pub struct MySqlBackend {
    /// The server.
    pub server: crate::mysql::MySqlServer,
}

impl Backend for MySqlBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move { crate::production_mysql_deps(self.server.clone()) })
    }
}

/// One private etcd member for this test binary (`servers::EtcdProcess`), started at
/// the first call: its client address. `None` (the test skips, saying so) if
/// Debian's `etcd-server` is not installed, or panics under `LOCKSIM_REQUIRE_ETCD`
/// (CI sets it), so CI cannot pass by skipping; an installed member that does not
/// start fails the test.
pub fn real_etcd() -> Option<SocketAddr> {
    static SHARED: std::sync::OnceLock<Option<EtcdProcess>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| match EtcdProcess::start() {
            Ok(server) => Some(server),
            Err(e @ LaunchError::Missing { .. }) => {
                if std::env::var_os("LOCKSIM_REQUIRE_ETCD").is_some() {
                    panic!("LOCKSIM_REQUIRE_ETCD is set but {e}");
                }
                skipped(&format!("{e}, to run the real-etcd tests"));
                None
            }
            Err(e) => panic!("{e}"),
        })
        .as_ref()
        .map(EtcdProcess::addr)
}

/// A backend over one etcd member: each client its own channel.
pub struct EtcdBackend {
    /// The member's host.
    pub host: String,
    /// Its client port.
    pub port: u16,
}

impl Backend for EtcdBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move { crate::production_etcd_deps(&self.host, self.port) })
    }

    /// etcd's minimum TTL at its defaults (`ceil(1.5 × election timeout)`).
    fn shortest_lease(&self) -> Duration {
        Duration::from_secs(2)
    }
}

/// A backend over a MongoDB replica set: each client its own connection to the
/// primary.
pub struct MongoBackend {
    /// The members.
    pub server: crate::mongo::MongoServer,
}

impl Backend for MongoBackend {
    fn deps(&self) -> Pin<Box<dyn Future<Output = Deps> + Send + '_>> {
        Box::pin(async move { crate::production_mongo_deps(self.server.clone()) })
    }
}
