//! Private servers: a ZooKeeper 3.8 server or ensemble and a MariaDB 10.11 server, each
//! started from Debian's installed packages as a child process on free loopback ports,
//! with its own configuration, data directory and log in a temporary directory, and
//! stopped (`SIGKILL`) with its directory removed when its handle drops.
//!
//! The tests use them through [`super::real_zookeeper`] and [`super::real_mysql`] (one
//! server per test binary), so a fresh clone with the packages installed runs every
//! real-server test without a system service; the real-process runner can use the
//! handles directly ([`ZkServer::start`], [`ZkEnsembleServers::start`],
//! [`MariaDbServer::start`]: address, data directory, log path, `pid()` for
//! `SIGSTOP`/`SIGKILL`, `restart()` on the same port and data).
//!
//! No process is left behind on any exit path this process can see:
//! - a handle's `Drop` kills its process and removes its directory (a panicking test
//!   still drops its locals while unwinding);
//! - every child is spawned by one long-lived thread with `PR_SET_PDEATHSIG = SIGKILL`
//!   (Linux), so the kernel kills it when this process dies in any way (an abort,
//!   `SIGKILL`, Ctrl-C);
//! - servers shared through a `static` (never dropped) are killed and their directories
//!   removed by an `atexit` handler when the process exits normally (as the test
//!   harness does, pass or fail);
//! - a directory left by a process that died abruptly is removed by the next launch in
//!   any process (its name carries the pid of the process that made it).

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// How long a server may take to answer after it is spawned (a JVM on a loaded
/// two-core machine can take seconds).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How many fresh ports a launch tries when another process takes its port first.
const PORT_ATTEMPTS: usize = 5;

/// Why a private server could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LaunchError {
    /// A binary or jar the server needs is not installed.
    #[error(
        "{what} is not installed ({path} is missing); install it with \
         `apt-get install -y {package}` (Debian)"
    )]
    Missing {
        /// What is missing, for people.
        what: &'static str,
        /// The file looked for.
        path: String,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The server is installed but did not come up.
    #[error("{what} did not start: {reason}\n--- the end of {log} ---\n{tail}")]
    Failed {
        /// Which server.
        what: &'static str,
        /// What went wrong.
        reason: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },
}

impl LaunchError {
    fn failed(what: &'static str, reason: impl Into<String>, log: &Path) -> Self {
        let text = fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        Self::Failed {
            what,
            reason: reason.into(),
            log: log.to_path_buf(),
            tail,
        }
    }
}

// ---------------------------------------------------------------------------------
// Process keeping: one spawner thread, a registry for the `atexit` sweep, and
// directories named after the pid that made them.

type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from one thread that lives as long as the process, with the kernel
/// told to `SIGKILL` the child when that thread (so the process) dies. The parent-death
/// signal follows the thread that forked, not the process: spawned from a test's own
/// thread, a server shared by the binary would die with the first test that started it.
pub fn spawn_kept(mut cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("locksim-server-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the server keeper thread");
        tx
    });
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes two system
        // calls (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the prctl: do not outlive it.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("the parent process is gone"));
                }
                Ok(())
            });
        }
    }
    let (tx, rx) = mpsc::channel();
    keeper
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?
}

/// Servers alive in this process (`pid`, directory; pid 0 for a directory alone): what
/// the `atexit` sweep kills and removes.
static LIVE: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<(u32, PathBuf)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(pid: u32, dir: &Path) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function.
        unsafe {
            libc::atexit(kill_live_at_exit);
        }
    });
    live().push((pid, dir.to_path_buf()));
}

fn unregister(pid: u32) {
    live().retain(|(p, _)| *p != pid || pid == 0);
}

/// Kills every server still registered (those shared through a `static`, which never
/// drops) and removes its directory, as the process exits.
extern "C" fn kill_live_at_exit() {
    // `try_lock`: a thread that held the lock when `exit` was called will never let it
    // go; then the parent-death signal still kills the servers and the next launch
    // removes their directories.
    let Ok(mut list) = LIVE.try_lock() else {
        return;
    };
    for (pid, dir) in list.drain(..) {
        // Pid 0: a directory without a process (a template).
        if pid != 0 {
            // SAFETY: plain system calls on a child's pid.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        let _ = fs::remove_dir_all(dir);
    }
}

/// A new empty directory `$TMPDIR/locksim-<kind>-<pid>-<n>` for one server. The first
/// call in a process first removes directories of this form whose process is gone.
pub fn server_dir(kind: &str) -> PathBuf {
    static SWEEP: Once = Once::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    SWEEP.call_once(sweep_orphaned_dirs_now);
    let dir = std::env::temp_dir().join(format!(
        "locksim-{kind}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Removes `$TMPDIR/locksim-<kind>-<pid>-<n>` directories whose pid is not alive (a
/// test process killed before it could clean up). Linux only (reads `/proc`). The first
/// [`server_dir`] in a process calls it.
pub fn sweep_orphaned_dirs_now() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("locksim-")) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('-').collect();
        let [kind, pid, n] = parts.as_slice() else {
            continue;
        };
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        if !numeric(pid) || !numeric(n) || Path::new("/proc").join(pid).exists() {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// `count` distinct free loopback ports (each bound at once, then all released).
pub fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("cannot bind a loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("a bound address").port())
        .collect()
}

/// The first of `name` on `PATH`, then in `extra` directories.
fn find_binary(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    // SAFETY: a system call without arguments.
    unsafe { libc::geteuid() == 0 }
}

fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------
// ZooKeeper.

/// Debian's ZooKeeper jar (package `libzookeeper-java`, which `zookeeper` depends on).
/// Its manifest's `Class-Path` names every other jar it needs in `/usr/share/java`;
/// Debian's `zkEnv.sh` and `/etc/zookeeper/conf/environment` run the server with
/// `CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar` and
/// `org.apache.zookeeper.server.quorum.QuorumPeerMain <zoo.cfg>`, as we do (with our
/// own directory in place of `/etc/zookeeper/conf`).
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An SLF4J binding that writes to standard error (Debian's `libslf4j-java`, a
/// dependency of `libzookeeper-java`): without one the server logs nothing.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// The four-letter words the servers answer: `srvr` (readiness and mode), `envi`
/// (which server answers: its `user.dir` is its own directory, even before it serves),
/// and the usual read-only ones for people.
const FOUR_LETTER_WORDS: &str = "srvr,envi,conf,stat,ruok,mntr,cons";

/// Settings of a private ZooKeeper server.
#[derive(Debug, Clone)]
pub struct ZkOptions {
    /// `tickTime`, ms: Debian's `zoo.cfg` has 2000, and the tests' session timeouts
    /// (the server bounds them to 2..20 ticks) assume it.
    pub tick_time_ms: u32,
    /// More `zoo.cfg` lines (`key=value`).
    pub extra_config: Vec<String>,
}

impl Default for ZkOptions {
    fn default() -> Self {
        Self {
            tick_time_ms: 2000,
            extra_config: Vec::new(),
        }
    }
}

/// A private ZooKeeper server (standalone, or one member of a [`ZkEnsembleServers`]):
/// a JVM child process running Debian's jars, killed and its directory removed on drop.
#[derive(Debug)]
pub struct ZkServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    cfg: PathBuf,
    /// A standalone server must serve to be ready; an ensemble member only listen
    /// (it serves once a quorum forms, which may need the others).
    standalone: bool,
    keep_files: bool,
}

/// The Java runtime and the jars, or the package that is missing.
fn zookeeper_install() -> Result<(PathBuf, String), LaunchError> {
    zookeeper_install_from(Path::new(ZOOKEEPER_JAR))
}

fn zookeeper_install_from(jar: &Path) -> Result<(PathBuf, String), LaunchError> {
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.is_file())
        .or_else(|| find_binary("java", &["/usr/bin"]))
        .ok_or(LaunchError::Missing {
            what: "Java (for ZooKeeper)",
            path: "java on PATH".into(),
            package: "zookeeper",
        })?;
    if !jar.is_file() {
        return Err(LaunchError::Missing {
            what: "ZooKeeper",
            path: jar.display().to_string(),
            package: "zookeeper",
        });
    }
    let mut classpath = jar.display().to_string();
    if Path::new(SLF4J_SIMPLE_JAR).is_file() {
        classpath = format!("{classpath}:{SLF4J_SIMPLE_JAR}");
    }
    Ok((java, classpath))
}

/// Sends a four-letter word and returns the reply (empty if the server closed at once).
pub fn four_letter_word(addr: SocketAddr, word: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

impl ZkServer {
    /// A standalone server (`tickTime` 2000, as Debian's `zoo.cfg`) on a free port,
    /// answering when this returns.
    pub fn start() -> Result<Self, LaunchError> {
        Self::start_with(&ZkOptions::default())
    }

    /// [`ZkServer::start`] with other settings.
    pub fn start_with(opts: &ZkOptions) -> Result<Self, LaunchError> {
        let install = zookeeper_install()?;
        let dir = server_dir("zk");
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_ports(1)[0];
            let cfg = zoo_cfg(&dir, opts, port, &[]);
            match Self::spawn(&install, &dir, cfg, port, true) {
                Ok(mut server) => match server.wait_ready(READY_TIMEOUT) {
                    Ok(()) => return Ok(server),
                    Err(e) => last = Some(e),
                },
                Err(e) => last = Some(e),
            }
        }
        let err = last.expect("at least one attempt");
        let _ = fs::remove_dir_all(&dir);
        Err(err)
    }

    fn spawn(
        (java, classpath): &(PathBuf, String),
        dir: &Path,
        cfg_text: String,
        port: u16,
        standalone: bool,
    ) -> Result<Self, LaunchError> {
        let data_dir = dir.join("data");
        fs::create_dir_all(&data_dir).expect("create the ZooKeeper data directory");
        let cfg = dir.join("zoo.cfg");
        fs::write(&cfg, cfg_text).expect("write zoo.cfg");
        let log = dir.join("zookeeper.log");
        let server = Self {
            child: spawn_zk(java, classpath, dir, &cfg, &log)?,
            addr: ([127, 0, 0, 1], port).into(),
            dir: dir.to_path_buf(),
            data_dir,
            log,
            cfg,
            standalone,
            keep_files: false,
        };
        register(server.child.id(), &server.dir);
        Ok(server)
    }

    /// Waits until the server answers `srvr` (standalone: and serves; an ensemble
    /// member serves only once a quorum forms), and checks by `envi` that the answer is
    /// this server's (its working directory is its own): another process may have taken
    /// the port first, and then this one exits and the caller retries elsewhere.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        let mine = format!("user.dir={}", self.dir.display());
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::failed(
                    "ZooKeeper",
                    format!("the server exited ({status}) on port {}", self.addr.port()),
                    &self.log,
                ));
            }
            if let Some(reply) = four_letter_word(self.addr, "srvr") {
                let serving = reply.contains("Zookeeper version");
                if serving || (!self.standalone && reply.contains("not currently serving")) {
                    match four_letter_word(self.addr, "envi") {
                        Some(env) if env.lines().any(|l| l.trim() == mine) => return Ok(()),
                        Some(env) if env.contains("user.dir=") => {
                            return Err(LaunchError::failed(
                                "ZooKeeper",
                                format!("port {} is another server's", self.addr.port()),
                                &self.log,
                            ));
                        }
                        _ => {}
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LaunchError::failed(
            "ZooKeeper",
            format!("no answer on {} within {timeout:?}", self.addr),
            &self.log,
        ))
    }

    /// `127.0.0.1:PORT`, its client address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its client port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its directory: `zoo.cfg`, `data/` and `zookeeper.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `dataDir` (snapshots and the transaction log; `myid` in an ensemble).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Its log (the JVM's standard output and error; kept across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The JVM's process id (for `SIGSTOP`/`SIGCONT`/`SIGKILL`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its `srvr` mode: `standalone`, `leader`, `follower`, or `None` while it does not
    /// serve.
    pub fn mode(&self) -> Option<String> {
        let reply = four_letter_word(self.addr, "srvr")?;
        reply
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_string())
    }

    /// Keeps its directory (config, data, log) after it stops, e.g. to read its log
    /// after a failed run.
    pub fn keep_files(&mut self, keep: bool) {
        self.keep_files = keep;
    }

    /// Kills it (`SIGKILL`, a crash) and starts it again on the same port with the same
    /// data; returns when it answers (a standalone server when it serves).
    pub fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        let install = zookeeper_install()?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.child = spawn_zk(&install.0, &install.1, &self.dir, &self.cfg, &self.log)?;
            register(self.child.id(), &self.dir);
            match self.wait_ready(READY_TIMEOUT) {
                Ok(()) => return Ok(()),
                // The old socket may linger a moment; try again on the same port.
                Err(_) if Instant::now() < deadline => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Kills the process (`SIGKILL`) and reaps it; its files stay.
    pub fn kill(&mut self) {
        unregister(self.child.id());
        kill_child(&mut self.child);
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_files {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn zoo_cfg(dir: &Path, opts: &ZkOptions, client_port: u16, peers: &[String]) -> String {
    let mut cfg = format!(
        "tickTime={}\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={client_port}\n\
         clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
         4lw.commands.whitelist={FOUR_LETTER_WORDS}\n",
        opts.tick_time_ms,
        dir.join("data").display(),
    );
    for line in peers.iter().chain(&opts.extra_config) {
        cfg.push_str(line);
        cfg.push('\n');
    }
    cfg
}

fn spawn_zk(
    java: &Path,
    classpath: &str,
    dir: &Path,
    cfg: &Path,
    log: &Path,
) -> Result<Child, LaunchError> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the ZooKeeper log");
    let err = out.try_clone().expect("clone the log handle");
    let mut cmd = Command::new(java);
    cmd.current_dir(dir)
        .arg("-XX:-UsePerfData")
        .arg("-Xmx512m")
        .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
        .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
        .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS")
        .arg("-cp")
        .arg(format!("{}:{classpath}", dir.display()))
        .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
        .arg(cfg)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    spawn_kept(cmd).map_err(|e| LaunchError::failed("ZooKeeper", format!("spawn java: {e}"), log))
}

/// A private ZooKeeper ensemble: `n` servers on loopback, each its own process, config
/// (`server.1..n` with its own quorum and election ports), `myid` and data directory.
#[derive(Debug)]
pub struct ZkEnsembleServers {
    members: Vec<ZkServer>,
}

impl ZkEnsembleServers {
    /// Starts `n` servers (`tickTime` 2000) and returns once every one serves (a leader
    /// is elected and the others follow it).
    pub fn start(n: usize) -> Result<Self, LaunchError> {
        Self::start_with(n, &ZkOptions::default())
    }

    /// [`ZkEnsembleServers::start`] with other settings.
    pub fn start_with(n: usize, opts: &ZkOptions) -> Result<Self, LaunchError> {
        assert!(n >= 1, "an ensemble has at least one server");
        let install = zookeeper_install()?;
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            // Client, quorum and election port per server.
            let ports = free_ports(3 * n);
            let peers: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        "server.{}=127.0.0.1:{}:{}",
                        i + 1,
                        ports[3 * i + 1],
                        ports[3 * i + 2]
                    )
                })
                .collect();
            let mut members = Vec::new();
            let mut failed = None;
            for i in 0..n {
                let dir = server_dir("zk");
                fs::create_dir_all(dir.join("data")).expect("create a data directory");
                fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).expect("write myid");
                let cfg = zoo_cfg(&dir, opts, ports[3 * i], &peers);
                match ZkServer::spawn(&install, &dir, cfg, ports[3 * i], false) {
                    Ok(s) => members.push(s),
                    Err(e) => {
                        let _ = fs::remove_dir_all(&dir);
                        failed = Some(e);
                        break;
                    }
                }
            }
            if failed.is_none() {
                let mut ensemble = Self { members };
                match ensemble.wait_serving(READY_TIMEOUT) {
                    Ok(()) => return Ok(ensemble),
                    Err(e) => failed = Some(e),
                }
            }
            last = failed;
        }
        Err(last.expect("at least one attempt"))
    }

    /// Waits until every member serves as leader or follower, with one leader.
    pub fn wait_serving(&mut self, timeout: Duration) -> Result<(), LaunchError> {
        for m in &mut self.members {
            m.wait_ready(timeout)?;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let modes: Vec<Option<String>> = self.members.iter().map(ZkServer::mode).collect();
            let leaders = modes
                .iter()
                .filter(|m| m.as_deref() == Some("leader"))
                .count();
            let serving = modes
                .iter()
                .all(|m| matches!(m.as_deref(), Some("leader" | "follower" | "standalone")));
            if serving && leaders <= 1 && (leaders == 1 || self.members.len() == 1) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LaunchError::failed(
                    "ZooKeeper ensemble",
                    format!("modes {modes:?} after {timeout:?}"),
                    &self.members[0].log,
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The members, in `myid` order (member `i` is `server.{i+1}`).
    pub fn members(&self) -> &[ZkServer] {
        &self.members
    }

    /// One member, to stop, kill or restart.
    pub fn member_mut(&mut self, i: usize) -> &mut ZkServer {
        &mut self.members[i]
    }

    /// The members' client addresses.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.members.iter().map(ZkServer::addr).collect()
    }

    /// `127.0.0.1:P1,127.0.0.1:P2,...`, a client's connect string.
    pub fn connect_string(&self) -> String {
        self.addrs()
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the member that is leader now, if one is.
    pub fn leader(&self) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.mode().as_deref() == Some("leader"))
    }
}

// ---------------------------------------------------------------------------------
// Redis Sentinel.

/// Settings of a private Sentinel (`sentinel monitor <master_name> <master> <quorum>`).
#[derive(Debug, Clone)]
pub struct SentinelOptions {
    /// The monitored master's name.
    pub master_name: String,
    /// Sentinels that must agree the master is down.
    pub quorum: u32,
    /// `down-after-milliseconds` (Redis's default is 30000).
    pub down_after_ms: u64,
    /// `failover-timeout` (Redis's default is 180000).
    pub failover_timeout_ms: u64,
}

impl Default for SentinelOptions {
    fn default() -> Self {
        Self {
            master_name: "mymaster".into(),
            quorum: 2,
            down_after_ms: 30_000,
            failover_timeout_ms: 180_000,
        }
    }
}

/// A private `redis-sentinel` (Debian's `redis-sentinel`) on a free loopback port,
/// with its own directory, config (which it rewrites as it learns the topology, as a
/// real one does) and log; killed and its directory removed on drop.
#[derive(Debug)]
pub struct SentinelServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
    conf: PathBuf,
    log: PathBuf,
    keep_files: bool,
}

impl SentinelServer {
    /// Starts a Sentinel monitoring `master`; returns when it answers.
    pub fn start(master: SocketAddr, opts: &SentinelOptions) -> Result<Self, LaunchError> {
        let binary = find_binary("redis-sentinel", &["/usr/bin"]).ok_or(LaunchError::Missing {
            what: "Redis Sentinel",
            path: "redis-sentinel on PATH".into(),
            package: "redis-sentinel",
        })?;
        let dir = server_dir("sentinel");
        let conf = dir.join("sentinel.conf");
        let log = dir.join("sentinel.log");
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_ports(1)[0];
            fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {}\nlogfile {}\n\
                     sentinel monitor {} {} {} {}\n\
                     sentinel down-after-milliseconds {} {}\n\
                     sentinel failover-timeout {} {}\n",
                    dir.display(),
                    log.display(),
                    opts.master_name,
                    master.ip(),
                    master.port(),
                    opts.quorum,
                    opts.master_name,
                    opts.down_after_ms,
                    opts.master_name,
                    opts.failover_timeout_ms,
                ),
            )
            .expect("write sentinel.conf");
            let mut server = Self {
                child: spawn_sentinel(&binary, &conf, &log)?,
                addr: ([127, 0, 0, 1], port).into(),
                dir: dir.clone(),
                conf: conf.clone(),
                log: log.clone(),
                keep_files: true,
            };
            register(server.child.id(), &dir);
            match server.wait_ready() {
                Ok(()) => {
                    server.keep_files = false;
                    return Ok(server);
                }
                Err(e) => last = Some(e),
            }
        }
        let _ = fs::remove_dir_all(&dir);
        Err(last.expect("at least one attempt"))
    }

    /// Waits until this process (by `INFO server`'s `process_id`) answers on the port.
    fn wait_ready(&mut self) -> Result<(), LaunchError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::failed(
                    "Redis Sentinel",
                    format!("it exited ({status}) on port {}", self.addr.port()),
                    &self.log,
                ));
            }
            if let Ok(stream) = TcpStream::connect(self.addr) {
                if super::served_by(stream, self.child.id()) {
                    return Ok(());
                }
                return Err(LaunchError::failed(
                    "Redis Sentinel",
                    format!("port {} is another server's", self.addr.port()),
                    &self.log,
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(LaunchError::failed(
            "Redis Sentinel",
            format!("no answer on {} within {READY_TIMEOUT:?}", self.addr),
            &self.log,
        ))
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its directory: `sentinel.conf` and `sentinel.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its log.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its process id (for `SIGSTOP`/`SIGCONT`/`SIGKILL`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Keeps its directory after it stops.
    pub fn keep_files(&mut self, keep: bool) {
        self.keep_files = keep;
    }

    /// Kills it (`SIGKILL`) and starts it again on the same port from the config it
    /// rewrote (what it had learned of the topology); returns when it answers.
    pub fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        let binary = find_binary("redis-sentinel", &["/usr/bin"]).ok_or(LaunchError::Missing {
            what: "Redis Sentinel",
            path: "redis-sentinel on PATH".into(),
            package: "redis-sentinel",
        })?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.child = spawn_sentinel(&binary, &self.conf, &self.log)?;
            register(self.child.id(), &self.dir);
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Kills the process (`SIGKILL`) and reaps it; its files stay.
    pub fn kill(&mut self) {
        unregister(self.child.id());
        kill_child(&mut self.child);
    }
}

impl Drop for SentinelServer {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_files {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn spawn_sentinel(binary: &Path, conf: &Path, log: &Path) -> Result<Child, LaunchError> {
    let mut cmd = Command::new(binary);
    cmd.arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spawn_kept(cmd).map_err(|e| LaunchError::failed("Redis Sentinel", format!("spawn: {e}"), log))
}

// ---------------------------------------------------------------------------------
// MariaDB.

/// The database, user and password a private MariaDB is set up with (the account the
/// tests log in with; `.ci/run` used to create the same on the system server).
pub const MARIADB_DATABASE: &str = "locksim";
/// See [`MARIADB_DATABASE`].
pub const MARIADB_USER: &str = "locksim";
/// See [`MARIADB_DATABASE`].
pub const MARIADB_PASSWORD: &str = "locksim";

/// Run by the server at each start (`--init-file`): the database and the user, over TCP
/// from `127.0.0.1` and over the socket, with `mysql_native_password` (what the
/// client speaks).
const MARIADB_INIT_SQL: &str = "\
CREATE DATABASE IF NOT EXISTS locksim;
CREATE USER IF NOT EXISTS 'locksim'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('locksim');
CREATE USER IF NOT EXISTS 'locksim'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('locksim');
GRANT ALL PRIVILEGES ON locksim.* TO 'locksim'@'127.0.0.1';
GRANT ALL PRIVILEGES ON locksim.* TO 'locksim'@'localhost';
";

/// Settings of a private MariaDB server.
#[derive(Debug, Clone, Default)]
pub struct MariaDbOptions {
    /// More `mariadbd` options (`--innodb-flush-log-at-trx-commit=2`, ...).
    pub extra_args: Vec<String>,
}

/// A private MariaDB server: `mariadbd` (Debian's `mariadb-server`) with a data
/// directory made by `mariadb-install-db`, on a free loopback port and its own socket,
/// with the database and user `locksim`/`locksim`; killed and its directory removed
/// on drop.
#[derive(Debug)]
pub struct MariaDbServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
    data_dir: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    mariadbd: PathBuf,
    args: Vec<OsString>,
    keep_files: bool,
}

/// `mariadbd` and `mariadb-install-db`, or the package that is missing.
fn mariadb_install() -> Result<(PathBuf, PathBuf), LaunchError> {
    mariadb_install_named("mariadbd")
}

fn mariadb_install_named(mariadbd: &str) -> Result<(PathBuf, PathBuf), LaunchError> {
    let missing = |path: &str| LaunchError::Missing {
        what: "MariaDB",
        path: path.into(),
        package: "mariadb-server",
    };
    let server =
        find_binary(mariadbd, &["/usr/sbin", "/usr/local/sbin"]).ok_or(missing(mariadbd))?;
    let install = find_binary("mariadb-install-db", &["/usr/bin", "/usr/local/bin"])
        .or_else(|| find_binary("mysql_install_db", &["/usr/bin", "/usr/local/bin"]))
        .ok_or(missing("mariadb-install-db"))?;
    Ok((server, install))
}

impl MariaDbServer {
    /// A server with Debian's character set settings (`utf8mb4`,
    /// `utf8mb4_general_ci`, from its `50-server.cnf`) and otherwise MariaDB's
    /// defaults, answering when this returns.
    pub fn start() -> Result<Self, LaunchError> {
        Self::start_with(&MariaDbOptions::default())
    }

    /// [`MariaDbServer::start`] with more `mariadbd` options.
    pub fn start_with(opts: &MariaDbOptions) -> Result<Self, LaunchError> {
        let (mariadbd, install_db) = mariadb_install()?;
        let dir = server_dir("mariadb");
        let data_dir = dir.join("data");
        let log = dir.join("mariadb.log");
        let root = is_root();
        let template = match mariadb_template(&install_db) {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        if let Err(e) = copy_dir(template, &data_dir) {
            let _ = fs::remove_dir_all(&dir);
            return Err(LaunchError::failed(
                "MariaDB",
                format!("copy {} to {}: {e}", template.display(), data_dir.display()),
                &template.with_file_name("install.log"),
            ));
        }
        let init = dir.join("init.sql");
        fs::write(&init, MARIADB_INIT_SQL).expect("write init.sql");
        // A Unix socket path is at most 107 bytes.
        let mut socket = dir.join("mysqld.sock");
        if socket.as_os_str().len() > 100 {
            socket = PathBuf::from(format!(
                "/tmp/locksim-{}.sock",
                dir.file_name().unwrap().to_string_lossy()
            ));
        }
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_ports(1)[0];
            let mut args: Vec<OsString> = vec!["--no-defaults".into()];
            if root {
                args.push("--user=root".into());
            }
            for a in [
                format!("--datadir={}", data_dir.display()),
                format!("--socket={}", socket.display()),
                format!("--port={port}"),
                "--bind-address=127.0.0.1".into(),
                format!("--pid-file={}", dir.join("mariadbd.pid").display()),
                format!("--log-error={}", log.display()),
                "--character-set-server=utf8mb4".into(),
                "--collation-server=utf8mb4_general_ci".into(),
                format!("--init-file={}", init.display()),
                "--innodb-log-file-size=8M".into(),
            ]
            .into_iter()
            .chain(opts.extra_args.iter().cloned())
            {
                args.push(a.into());
            }
            // Only what this attempt writes counts (an earlier one may have failed).
            let from = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            let child = match spawn_mariadbd(&mariadbd, &args, &log) {
                Ok(c) => c,
                Err(e) => {
                    let _ = fs::remove_dir_all(&dir);
                    return Err(e);
                }
            };
            let mut server = Self {
                child,
                addr: ([127, 0, 0, 1], port).into(),
                dir: dir.clone(),
                data_dir: data_dir.clone(),
                socket: socket.clone(),
                log: log.clone(),
                mariadbd: mariadbd.clone(),
                args,
                keep_files: false,
            };
            register(server.child.id(), &dir);
            match server.wait_ready(from) {
                Ok(()) => return Ok(server),
                Err(e) => {
                    // Leave the directory (the data) to the next attempt.
                    server.keep_files = true;
                    drop(server);
                    last = Some(e);
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        Err(last.expect("at least one attempt"))
    }

    /// Waits until the server wrote (past `from` in its log) that it is ready on its
    /// port, which only it can have bound, and answers there.
    fn wait_ready(&mut self, from: u64) -> Result<(), LaunchError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let ready = format!("port: {}", self.addr.port());
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::failed(
                    "MariaDB",
                    format!("mariadbd exited ({status}) on port {}", self.addr.port()),
                    &self.log,
                ));
            }
            let text = fs::read(&self.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]);
            if text.contains("ready for connections")
                && text.contains(&ready)
                && TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err(LaunchError::failed(
            "MariaDB",
            format!("not ready on {} within {READY_TIMEOUT:?}", self.addr),
            &self.log,
        ))
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its TCP port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its Unix socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Its directory: `data/`, `mariadb.log`, `init.sql`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `datadir`.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Its error log (`--log-error`; kept across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `mariadbd`'s process id (for `SIGSTOP`/`SIGCONT`/`SIGKILL`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Keeps its directory after it stops.
    pub fn keep_files(&mut self, keep: bool) {
        self.keep_files = keep;
    }

    /// Kills it (`SIGKILL`, a crash: InnoDB recovers from its redo log at the next
    /// start) and starts it again on the same port and data; returns when it answers.
    pub fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let from = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
            self.child = spawn_mariadbd(&self.mariadbd, &self.args, &self.log)?;
            register(self.child.id(), &self.dir);
            match self.wait_ready(from) {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Kills the process (`SIGKILL`) and reaps it; its files stay.
    pub fn kill(&mut self) {
        unregister(self.child.id());
        kill_child(&mut self.child);
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_files {
            let _ = fs::remove_dir_all(&self.dir);
            if !self.socket.starts_with(&self.dir) {
                let _ = fs::remove_file(&self.socket);
            }
        }
    }
}

/// A data directory fresh from `mariadb-install-db`, made once per process and copied
/// for each server (the install runs a bootstrap server over the system tables' SQL:
/// about 0.5 s on an idle machine, 3 to 5 s on a loaded one; a copy takes milliseconds).
///
/// It has the accounts Debian's postinst makes (`mysql_install_db --user=mysql
/// --skip-test-db`: `root@localhost` and `mysql@localhost`, each by `unix_socket` or an
/// invalid password, and `mariadb.sys`), whoever runs this: a login as an unknown user
/// fails the way the account the server picks to fake it fails (MariaDB 10.11
/// `sql/sql_acl.cc`, `find_mpvio_user`), so the set of accounts shows in the error the
/// client sees. A small redo log, as nothing here needs Debian's 96 MiB.
fn mariadb_template(install_db: &Path) -> Result<&'static Path, LaunchError> {
    static TEMPLATE: OnceLock<Result<PathBuf, LaunchError>> = OnceLock::new();
    let made = TEMPLATE.get_or_init(|| {
        let dir = server_dir("mariadbtpl");
        // No process; the `atexit` sweep removes the directory.
        register(0, &dir);
        let data_dir = dir.join("data");
        let install_log = dir.join("install.log");
        let out = fs::File::create(&install_log).expect("create the install log");
        let mut cmd = Command::new(install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data_dir.display()))
            .arg("--auth-root-authentication-method=socket")
            .arg("--auth-root-socket-user=mysql")
            .arg("--skip-test-db")
            .arg("--innodb-log-file-size=8M")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the log handle"))
            .stderr(out);
        if is_root() {
            cmd.arg("--user=root");
        }
        match spawn_kept(cmd).and_then(|mut c| c.wait()) {
            Ok(s) if s.success() => Ok(data_dir),
            other => Err(LaunchError::failed(
                "MariaDB",
                format!("mariadb-install-db: {other:?}"),
                &install_log,
            )),
        }
    });
    match made {
        Ok(dir) => Ok(dir.as_path()),
        Err(e) => Err(e.clone()),
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn spawn_mariadbd(mariadbd: &Path, args: &[OsString], log: &Path) -> Result<Child, LaunchError> {
    let mut cmd = Command::new(mariadbd);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spawn_kept(cmd).map_err(|e| LaunchError::failed("MariaDB", format!("spawn mariadbd: {e}"), log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_is_named_with_the_debian_package_to_install() {
        let zk = zookeeper_install_from(Path::new("/nonexistent/zookeeper.jar")).unwrap_err();
        assert!(
            matches!(
                zk,
                LaunchError::Missing {
                    package: "zookeeper",
                    ..
                }
            ),
            "{zk:?}"
        );
        assert_eq!(
            zk.to_string(),
            "ZooKeeper is not installed (/nonexistent/zookeeper.jar is missing); install it \
             with `apt-get install -y zookeeper` (Debian)"
        );
        let db = mariadb_install_named("locksim-no-such-mariadbd").unwrap_err();
        assert!(
            db.to_string().contains(
                "locksim-no-such-mariadbd is missing); install it with \
                 `apt-get install -y mariadb-server`"
            ),
            "{db}"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(9);
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 9, "{ports:?}");
    }
}
