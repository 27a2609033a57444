//! A private Redis Sentinel (Debian's `redis-sentinel`).

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

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
                if crate::testing::served_by(stream, self.child.id()) {
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
