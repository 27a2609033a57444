//! A private ZooKeeper server or ensemble from Debian's jars.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

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
/// `dump` (the ephemeral nodes of each session: the real runner names the client of a
/// session the server expires by them), and the usual read-only ones for people.
const FOUR_LETTER_WORDS: &str = "srvr,envi,conf,stat,ruok,mntr,cons,dump";

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

/// The ZooKeeper install that `jar` belongs to, or which package to install.
pub fn zookeeper_install_from(jar: &Path) -> Result<(PathBuf, String), LaunchError> {
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
