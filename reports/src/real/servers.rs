//! The real servers a world names, started on loopback in the world's topology:
//! `redis-server` masters and replicas (with the world's persistence), the
//! `redis-sentinel`s, a ZooKeeper server or ensemble, a MariaDB server. Each is a child
//! process of the parent (killed with it, whatever ends it), with its own directory,
//! port and log; a server is killed and restarted in place for a crash.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_impl::testing::servers::{self as launch, free_ports, spawn_kept};
use lock_impl::testing::{
    MariaDbOptions, MariaDbServer, SentinelOptions, SentinelServer, ZkEnsembleServers, ZkOptions,
    ZkServer,
};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::{ServerSpec, Workload};

/// One `redis-server` with a fixed port and directory (its AOF survives a restart).
struct RedisProc {
    child: Child,
    port: u16,
    args: Vec<String>,
    dir: PathBuf,
}

impl RedisProc {
    fn start(spec: &ServerSpec, port: u16, master: Option<u16>) -> Result<Self, String> {
        let dir = launch::server_dir("real-redis");
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.display().to_string(),
            "--logfile".into(),
            dir.join("redis.log").display().to_string(),
            "--save".into(),
            String::new(),
            "--protected-mode".into(),
            "no".into(),
            "--replica-priority".into(),
            spec.replica_priority.to_string(),
            "--min-replicas-to-write".into(),
            spec.min_replicas_to_write.to_string(),
            "--min-replicas-max-lag".into(),
            spec.min_replicas_max_lag_s.to_string(),
        ];
        match spec.persistence {
            Persistence::None => args.extend(["--appendonly".into(), "no".into()]),
            Persistence::Aof { fsync } => {
                let policy = match fsync {
                    Fsync::Always => "always",
                    Fsync::Everysec => "everysec",
                    Fsync::No => "no",
                };
                args.extend([
                    "--appendonly".into(),
                    "yes".into(),
                    "--appendfsync".into(),
                    policy.into(),
                ]);
            }
        }
        if let Some(m) = master {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), m.to_string()]);
        }
        let child = Self::spawn(&args)?;
        let mut p = Self {
            child,
            port,
            args,
            dir,
        };
        p.wait_serving(&spec.name)?;
        Ok(p)
    }

    fn spawn(args: &[String]) -> Result<Child, String> {
        let mut cmd = Command::new("redis-server");
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        spawn_kept(cmd).map_err(|e| {
            format!("redis-server did not start ({e}); install it with `apt-get install -y redis-server`")
        })
    }

    fn wait_serving(&mut self, name: &str) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if resp(self.port, &["PING"]).is_some_and(|r| r.starts_with("+PONG")) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{name}: redis-server exited ({status}); its log: {}",
                    self.dir.join("redis.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!("{name}: redis-server did not answer PING in 10 s"))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self, name: &str) -> Result<(), String> {
        self.kill();
        self.child = Self::spawn(&self.args)?;
        self.wait_serving(name)
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One RESP request over a fresh connection (a short timeout: a paused server is
/// simply not asked); the first reply line.
fn resp(port: u16, argv: &[&str]) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    let mut req = format!("*{}\r\n", argv.len());
    for a in argv {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Every real server of one world.
#[derive(Default)]
pub(crate) struct Servers {
    /// Every server's address by its world name.
    pub addrs: BTreeMap<String, SocketAddr>,
    redis: BTreeMap<String, RedisProc>,
    sentinels: BTreeMap<String, SentinelServer>,
    zk: Option<(String, ZkServer)>,
    ensemble: Option<(Vec<String>, ZkEnsembleServers)>,
    mysql: Option<(String, MariaDbServer)>,
    /// MariaDB's user, password and database (the launcher's).
    pub mysql_login: Option<(String, String, String)>,
    /// The lock servers' names, in world order (no Sentinels).
    pub lock_servers: Vec<String>,
}

impl Servers {
    /// Starts the servers `w` names, masters first, then replicas and Sentinels.
    pub fn start(w: &Workload) -> Result<Self, String> {
        let mut s = Self::default();
        if let Some(spec) = &w.zookeeper {
            let opts = ZkOptions {
                tick_time_ms: spec.tick_time_ms,
                extra_config: Vec::new(),
            };
            let names = spec.names();
            if names.len() == 1 {
                let server = ZkServer::start_with(&opts).map_err(|e| e.to_string())?;
                s.addrs.insert(names[0].clone(), server.addr());
                s.zk = Some((names[0].clone(), server));
            } else {
                let mut ensemble =
                    ZkEnsembleServers::start_with(names.len(), &opts).map_err(|e| e.to_string())?;
                ensemble
                    .wait_serving(Duration::from_secs(30))
                    .map_err(|e| e.to_string())?;
                for (n, a) in names.iter().zip(ensemble.addrs()) {
                    s.addrs.insert(n.clone(), a);
                }
                s.ensemble = Some((names.clone(), ensemble));
            }
            s.lock_servers = names;
            return Ok(s);
        }
        if let Some(spec) = &w.mysql {
            if spec.replica.is_some() {
                return Err(
                    "a MariaDB replica is not started by the real runner yet (mysql-failover \
                     stays model-only)"
                        .into(),
                );
            }
            let opts = MariaDbOptions {
                extra_args: vec![
                    format!(
                        "--innodb-flush-log-at-trx-commit={}",
                        spec.innodb_flush_log_at_trx_commit
                    ),
                    format!("--wait-timeout={}", spec.wait_timeout_s.max(1)),
                ],
            };
            let server = MariaDbServer::start_with(&opts).map_err(|e| e.to_string())?;
            s.addrs.insert(spec.name.clone(), server.addr());
            s.mysql_login = Some(("locksim".into(), "locksim".into(), "locksim".into()));
            s.lock_servers = vec![spec.name.clone()];
            s.mysql = Some((spec.name.clone(), server));
            return Ok(s);
        }
        if w.mongo.is_some() {
            return Err(
                "MongoDB has no Debian package: the mongo-* designs stay model-only".into(),
            );
        }
        let ports = free_ports(w.servers.len());
        let port_of: BTreeMap<&str, u16> = w
            .servers
            .iter()
            .zip(&ports)
            .map(|(spec, p)| (spec.name.as_str(), *p))
            .collect();
        let ordered = w
            .servers
            .iter()
            .filter(|x| x.replica_of.is_none())
            .chain(w.servers.iter().filter(|x| x.replica_of.is_some()));
        for spec in ordered {
            let master = match &spec.replica_of {
                Some(m) => Some(
                    *port_of
                        .get(m.as_str())
                        .ok_or_else(|| format!("{} replicates unknown server {m}", spec.name))?,
                ),
                None => None,
            };
            let port = port_of[spec.name.as_str()];
            let proc = RedisProc::start(spec, port, master)?;
            s.addrs
                .insert(spec.name.clone(), ([127, 0, 0, 1], port).into());
            s.redis.insert(spec.name.clone(), proc);
        }
        s.lock_servers = w.servers.iter().map(|x| x.name.clone()).collect();
        if let Some(spec) = &w.sentinel {
            let monitored = spec
                .monitor
                .clone()
                .or_else(|| w.servers.first().map(|x| x.name.clone()))
                .ok_or("Sentinels without a server to monitor")?;
            let master = s.addrs[&monitored];
            let opts = SentinelOptions {
                master_name: spec.master_name.clone(),
                quorum: spec.quorum,
                down_after_ms: spec.down_after_ms,
                failover_timeout_ms: spec.failover_timeout_ms,
            };
            for name in w.sentinel_names() {
                let sentinel = SentinelServer::start(master, &opts).map_err(|e| e.to_string())?;
                s.addrs.insert(name.clone(), sentinel.addr());
                s.sentinels.insert(name, sentinel);
            }
        }
        Ok(s)
    }

    /// Every server's name: lock servers, then Sentinels.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.lock_servers.clone();
        names.extend(self.sentinels.keys().cloned());
        names
    }

    /// The process id of server `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        if let Some(r) = self.redis.get(name) {
            return Some(r.child.id());
        }
        if let Some(x) = self.sentinels.get(name) {
            return Some(x.pid());
        }
        if let Some((n, z)) = &self.zk
            && n == name
        {
            return Some(z.pid());
        }
        if let Some((names, e)) = &self.ensemble {
            let i = names.iter().position(|n| n == name)?;
            return Some(e.members()[i].pid());
        }
        if let Some((n, m)) = &self.mysql
            && n == name
        {
            return Some(m.pid());
        }
        None
    }

    /// Kills server `name` (`SIGKILL`).
    pub fn kill(&mut self, name: &str) {
        if let Some(r) = self.redis.get_mut(name) {
            r.kill();
        } else if let Some(x) = self.sentinels.get_mut(name) {
            x.kill();
        } else if let Some((_, z)) = self.zk.as_mut().filter(|(n, _)| n == name) {
            z.kill();
        } else if let Some((names, e)) = &mut self.ensemble
            && let Some(i) = names.iter().position(|n| n == name)
        {
            e.member_mut(i).kill();
        } else if let Some((_, m)) = self.mysql.as_mut().filter(|(n, _)| n == name) {
            m.kill();
        }
    }

    /// Restarts server `name` on its port, from what its directory kept.
    pub fn restart(&mut self, name: &str) -> Result<(), String> {
        if let Some(r) = self.redis.get_mut(name) {
            return r.restart(name);
        }
        let result = if let Some(x) = self.sentinels.get_mut(name) {
            x.restart()
        } else if let Some((_, z)) = self.zk.as_mut().filter(|(n, _)| n == name) {
            z.restart()
        } else if let Some((names, e)) = &mut self.ensemble
            && let Some(i) = names.iter().position(|n| n == name)
        {
            e.member_mut(i).restart()
        } else if let Some((_, m)) = self.mysql.as_mut().filter(|(n, _)| n == name) {
            m.restart()
        } else {
            return Err(format!("no server {name}"));
        };
        result.map_err(|e| e.to_string())
    }

    /// The server holding the lock key now: the first Redis server (world order) on
    /// which `key` exists; a ZooKeeper ensemble's leader (a standalone server, the
    /// MariaDB server: itself).
    pub fn lock_server(&self, key: &str) -> Option<String> {
        if let Some((names, e)) = &self.ensemble {
            return e.leader().map(|i| names[i].clone());
        }
        if let Some((n, _)) = &self.zk {
            return Some(n.clone());
        }
        if let Some((n, _)) = &self.mysql {
            return Some(n.clone());
        }
        self.lock_servers.iter().find_map(|name| {
            let port = self.addrs.get(name)?.port();
            resp(port, &["EXISTS", key])
                .is_some_and(|r| r.starts_with(":1"))
                .then(|| name.clone())
        })
    }

    /// The client whose owner value the lock key holds on the first Redis server (world
    /// order) that has it: a string's value, or a hash's fields (Redisson's
    /// `uuid:thread` holds), read for the `client-N` every owner value starts with.
    pub fn lock_owner(&self, key: &str) -> Option<String> {
        self.redis.iter().find_map(|(_, r)| {
            let reply = resp(r.port, &["GET", key])
                .filter(|x| !x.starts_with("-WRONGTYPE"))
                .or_else(|| resp(r.port, &["HKEYS", key]))?;
            client_in(&reply)
        })
    }

    /// What Redis server `name` holds under `key` now, by its own answer: a string's
    /// value, or a hash's fields joined by `,`; `None` if absent, or not a Redis server.
    pub fn value_of(&self, name: &str, key: &str) -> Option<String> {
        let r = self.redis.get(name)?;
        let reply = resp(r.port, &["GET", key])
            .filter(|x| !x.starts_with("-WRONGTYPE"))
            .or_else(|| resp(r.port, &["HKEYS", key]))?;
        let items: Vec<&str> = reply
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('$') && !l.starts_with('*'))
            .collect();
        (!items.is_empty() && !reply.starts_with('-')).then(|| items.join(","))
    }

    /// A ZooKeeper ensemble's leader now.
    pub fn zk_leader(&self) -> Option<String> {
        let (names, e) = self.ensemble.as_ref()?;
        e.leader().map(|i| names[i].clone())
    }

    /// Each server's log file, for a run whose verdict needs them.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        let mut logs: Vec<(String, PathBuf)> = self
            .redis
            .iter()
            .map(|(n, r)| (n.clone(), r.dir.join("redis.log")))
            .collect();
        logs.extend(
            self.sentinels
                .iter()
                .map(|(n, x)| (n.clone(), x.log_path().to_path_buf())),
        );
        if let Some((n, z)) = &self.zk {
            logs.push((n.clone(), z.log_path().to_path_buf()));
        }
        if let Some((names, e)) = &self.ensemble {
            for (n, m) in names.iter().zip(e.members()) {
                logs.push((n.clone(), m.log_path().to_path_buf()));
            }
        }
        if let Some((n, m)) = &self.mysql {
            logs.push((n.clone(), m.log_path().to_path_buf()));
        }
        logs
    }
}

/// The first `client-N` in `text`.
fn client_in(text: &str) -> Option<String> {
    let at = text.find("client-")?;
    let digits: String = text[at + 7..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("client-{digits}"))
}
