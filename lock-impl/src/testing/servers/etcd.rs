//! A private etcd member from Debian's `etcd-server` (3.4.23).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// Debian's etcd binary (package `etcd-server`).
pub const ETCD_BINARY: &str = "/usr/bin/etcd";

/// A private single-member etcd cluster on free loopback ports (client and peer),
/// with its data directory and log in its own directory: killed and the directory
/// removed on drop.
#[derive(Debug)]
pub struct EtcdProcess {
    child: Child,
    addr: SocketAddr,
    peer_port: u16,
    dir: PathBuf,
    log: PathBuf,
}

impl EtcdProcess {
    /// A member at etcd's defaults (heartbeat 100 ms, election timeout 1 s: leases of
    /// at least 2 s) on free ports, serving when this returns.
    pub fn start() -> Result<Self, LaunchError> {
        if !Path::new(ETCD_BINARY).exists() {
            return Err(LaunchError::Missing {
                what: "etcd",
                path: ETCD_BINARY.into(),
                package: "etcd-server",
            });
        }
        let dir = server_dir("etcd");
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let ports = free_ports(2);
            let initial = format!("locksim=http://127.0.0.1:{}", ports[1]);
            match Self::spawn(&dir, "locksim", &initial, ports[0], ports[1]) {
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
        dir: &Path,
        name: &str,
        initial_cluster: &str,
        client: u16,
        peer: u16,
    ) -> Result<Self, LaunchError> {
        let data = dir.join("data");
        let _ = fs::remove_dir_all(&data);
        let log = dir.join("etcd.log");
        let out = fs::File::create(&log).expect("create the etcd log");
        let err = out.try_clone().expect("clone the etcd log");
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(ETCD_BINARY);
        cmd.arg("--name")
            .arg(name)
            .arg("--data-dir")
            .arg(&data)
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(initial_cluster)
            .arg("--initial-cluster-token")
            .arg("locksim")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = spawn_kept(cmd).map_err(|e| {
            LaunchError::failed("etcd", format!("cannot spawn {ETCD_BINARY}: {e}"), &log)
        })?;
        register(child.id(), dir);
        Ok(Self {
            child,
            addr: ([127, 0, 0, 1], client).into(),
            peer_port: peer,
            dir: dir.to_path_buf(),
            log,
        })
    }

    /// Waits until the member answers `GET /health` with `"health":"true"` (it has
    /// elected itself leader and serves).
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                unregister(self.child.id());
                return Err(LaunchError::failed(
                    "etcd",
                    format!("the member exited ({status}) on port {}", self.addr.port()),
                    &self.log,
                ));
            }
            if health(self.addr).is_some_and(|h| h.contains("\"health\":\"true\"")) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LaunchError::failed(
            "etcd",
            format!("no healthy answer on {} within {timeout:?}", self.addr),
            &self.log,
        ))
    }

    /// `127.0.0.1:PORT`, its client address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its peer port.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// Its directory (data, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The process id (for `SIGSTOP`/`SIGKILL`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The body of `GET /health` on `addr`, if it answers.
fn health(addr: SocketAddr) -> Option<String> {
    http_get(addr, "/health")
}

/// The reply to `GET path` on `addr`, if it answers.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// A private cluster of `n` etcd members from Debian's `etcd-server` on free loopback
/// ports (`m1` … `mN`), at etcd's defaults; each member killed (`SIGKILL`) on
/// [`EtcdCluster::kill`] or on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Option<EtcdProcess>>,
    addrs: Vec<SocketAddr>,
}

impl EtcdCluster {
    /// `n` members, every one healthy (a leader elected) when this returns.
    pub fn start(n: usize) -> Result<Self, LaunchError> {
        if !Path::new(ETCD_BINARY).exists() {
            return Err(LaunchError::Missing {
                what: "etcd",
                path: ETCD_BINARY.into(),
                package: "etcd-server",
            });
        }
        let mut last = None;
        'attempt: for _ in 0..PORT_ATTEMPTS {
            let ports = free_ports(2 * n);
            let initial = (0..n)
                .map(|i| format!("m{}=http://127.0.0.1:{}", i + 1, ports[2 * i + 1]))
                .collect::<Vec<_>>()
                .join(",");
            let mut members = Vec::new();
            for i in 0..n {
                let dir = server_dir("etcd");
                let name = format!("m{}", i + 1);
                match EtcdProcess::spawn(&dir, &name, &initial, ports[2 * i], ports[2 * i + 1]) {
                    Ok(p) => members.push(p),
                    Err(e) => {
                        last = Some(e);
                        continue 'attempt;
                    }
                }
            }
            for m in &mut members {
                if let Err(e) = m.wait_ready(READY_TIMEOUT) {
                    last = Some(e);
                    continue 'attempt;
                }
            }
            let addrs = members.iter().map(EtcdProcess::addr).collect();
            return Ok(EtcdCluster {
                members: members.into_iter().map(Some).collect(),
                addrs,
            });
        }
        Err(last.expect("at least one attempt"))
    }

    /// Every member's client address, by index.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Kills member `i` (`SIGKILL`: no clean shutdown, as a crash).
    pub fn kill(&mut self, i: usize) {
        if let Some(m) = self.members.get_mut(i) {
            m.take();
        }
    }

    /// The running member that leads now, by its own metrics (`etcd_server_is_leader`).
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().enumerate().find_map(|(i, m)| {
            let m = m.as_ref()?;
            let metrics = http_get(m.addr(), "/metrics")?;
            metrics
                .lines()
                .any(|l| l.trim() == "etcd_server_is_leader 1")
                .then_some(i)
        })
    }
}
