//! The real servers a world names, started on loopback in the world's topology:
//! `redis-server` masters and replicas (with the world's persistence), the
//! `redis-sentinel`s, a ZooKeeper server or ensemble, a MariaDB server. Each is a child
//! process of the parent (killed with it, whatever ends it), with its own directory,
//! port and log; a server is killed and restarted in place for a crash.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_impl::testing::servers::{self as launch, free_ports, spawn_kept};
use lock_impl::testing::{
    MariaDbOptions, MariaDbServer, SentinelOptions, SentinelServer, ZkEnsembleServers, ZkOptions,
    ZkServer,
};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::{ServerSpec, Workload};

use super::clock::{ServerClock, shim_path};
use super::net::{Net, server_ip};

/// One `redis-server` with a fixed port and directory (its AOF survives a restart).
struct RedisProc {
    child: Child,
    port: u16,
    program: &'static str,
    args: Vec<String>,
    dir: PathBuf,
    log: PathBuf,
    /// Its clock, when the plan moves it (the shim preloaded, its control file).
    clock: Option<ServerClock>,
}

/// Where a server is reached through the fault proxy: its own loopback address (its
/// outgoing connections' source) and its public address (the proxy's listener).
#[derive(Clone, Copy)]
pub(crate) struct Public {
    ip: std::net::Ipv4Addr,
    addr: SocketAddr,
}

impl RedisProc {
    /// A `redis-server` for `spec` on `port`, replicating `master` (its address: the
    /// real one, or its public one behind the proxy), announcing `public` if given.
    fn start(
        spec: &ServerSpec,
        port: u16,
        master: Option<SocketAddr>,
        public: Option<Public>,
        clocked: bool,
    ) -> Result<Self, String> {
        let dir = launch::server_dir("real-redis");
        let clock = if clocked {
            Some(ServerClock::create(&dir.join("clock"))?)
        } else {
            None
        };
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
        if let Some(p) = public {
            // Replication leaves from the server's own address, and the master tells
            // the Sentinels the replica's public address (Redis 7.0's
            // `bind-source-addr`, `replica-announce-ip`, `replica-announce-port`).
            args.extend([
                "--bind-source-addr".into(),
                p.ip.to_string(),
                "--replica-announce-ip".into(),
                p.addr.ip().to_string(),
                "--replica-announce-port".into(),
                p.addr.port().to_string(),
            ]);
        }
        if let Some(m) = master {
            args.extend([
                "--replicaof".into(),
                m.ip().to_string(),
                m.port().to_string(),
            ]);
        }
        let log = dir.join("redis.log");
        let child = Self::spawn_in("redis-server", &args, &dir, clock.is_some())?;
        let mut p = Self {
            child,
            port,
            program: "redis-server",
            args,
            dir,
            log,
            clock,
        };
        p.wait_serving(&spec.name)?;
        Ok(p)
    }

    /// A `redis-sentinel` on `port` monitoring `master` at `master_addr`, its outgoing
    /// connections leaving from `public.ip` and announcing `public.addr` (behind the
    /// fault proxy; `sentinel announce-ip/port`, `bind-source-addr`, Redis 7.0).
    fn sentinel(
        spec: &sim::world::SentinelSpec,
        port: u16,
        master_addr: SocketAddr,
        public: Public,
        replicas: &[SocketAddr],
    ) -> Result<Self, String> {
        let dir = launch::server_dir("real-sentinel");
        let conf = dir.join("sentinel.conf");
        let log = dir.join("sentinel.log");
        let name = &spec.master_name;
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {}\n\
                 logfile {}\nbind-source-addr {}\n\
                 sentinel announce-ip {}\nsentinel announce-port {}\n\
                 sentinel monitor {name} {} {} {}\n\
                 sentinel down-after-milliseconds {name} {}\n\
                 sentinel failover-timeout {name} {}\n",
                dir.display(),
                log.display(),
                public.ip,
                public.addr.ip(),
                public.addr.port(),
                master_addr.ip(),
                master_addr.port(),
                spec.quorum,
                spec.down_after_ms,
                spec.failover_timeout_ms,
            ),
        )
        .map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
        // The replicas the world names, known from the start (as the simulated
        // Sentinels know them, and as a real Sentinel's rewritten config remembers
        // them: `sentinel known-replica`), even one that never reached its master.
        let known: String = replicas
            .iter()
            .map(|r| format!("sentinel known-replica {name} {} {}\n", r.ip(), r.port()))
            .collect();
        let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
        text.push_str(&known);
        std::fs::write(&conf, text).map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
        let args = vec![conf.display().to_string()];
        let child = Self::spawn("redis-sentinel", &args)?;
        let mut p = Self {
            child,
            port,
            program: "redis-sentinel",
            args,
            dir,
            log,
            clock: None,
        };
        p.wait_serving("sentinel")?;
        Ok(p)
    }

    fn spawn(program: &str, args: &[String]) -> Result<Child, String> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        spawn_kept(cmd).map_err(|e| {
            format!("{program} did not start ({e}); install it with `apt-get install -y {program}`")
        })
    }

    /// [`RedisProc::spawn`], with the clock shim preloaded if `clocked` (its control
    /// file `clock` in `dir`).
    fn spawn_in(
        program: &'static str,
        args: &[String],
        dir: &Path,
        clocked: bool,
    ) -> Result<Child, String> {
        if !clocked {
            return Self::spawn(program, args);
        }
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env("LD_PRELOAD", shim_path()?)
            .env("LOCKSIM_CLOCK_FILE", dir.join("clock"));
        spawn_kept(cmd).map_err(|e| {
            format!("{program} did not start ({e}); install it with `apt-get install -y {program}`")
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
                    "{name}: {} exited ({status}); its log: {}",
                    self.program,
                    self.log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!(
            "{name}: {} did not answer PING in 10 s",
            self.program
        ))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self, name: &str) -> Result<(), String> {
        self.kill();
        self.child = Self::spawn_in(self.program, &self.args, &self.dir, self.clock.is_some())?;
        self.wait_serving(name)
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh connection to `port` with one RESP request sent (short timeouts: a paused
/// server is simply not asked).
fn resp_send(port: u16, argv: &[&str]) -> Option<TcpStream> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    s.write_all(request(argv).as_bytes()).ok()?;
    Some(s)
}

/// `argv` as a RESP request.
fn request(argv: &[&str]) -> String {
    let mut req = format!("*{}\r\n", argv.len());
    for a in argv {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    req
}

/// The parent's own connection to one Redis server (not through the fault proxy),
/// kept between questions so that sampling every 20 ms does not open a connection
/// each time; dropped on any error or timeout (a reply half read cannot be trusted)
/// and opened again at the next question. Short timeouts: a paused server is simply
/// not asked.
pub struct RedisAsk {
    port: u16,
    stream: Option<TcpStream>,
}

impl RedisAsk {
    /// Asks the server on `port` (connects at the first question).
    pub fn new(port: u16) -> Self {
        Self { port, stream: None }
    }

    /// Sends `argv` and reads until `done` says the reply is whole.
    fn ask<T>(&mut self, argv: &[&str], done: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        let answer = self.try_ask(argv, done);
        if answer.is_none() {
            self.stream = None;
        }
        answer
    }

    fn try_ask<T>(&mut self, argv: &[&str], done: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        if self.stream.is_none() {
            let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
            let s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
            s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
            self.stream = Some(s);
        }
        let s = self.stream.as_mut()?;
        s.write_all(request(argv).as_bytes()).ok()?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
            if let Some(answer) = done(&got) {
                return Some(answer);
            }
        }
    }

    /// What the server holds under `key`, by its own answer: a string's value or a
    /// hash's fields joined by `,` (`Some(None)`: no such key); `None` if it does not
    /// answer (stopped, dead, or an error).
    pub fn lock_value(&mut self, key: &str) -> Option<Option<String>> {
        let mut items = self.ask(&["GET", key], parse_strings)?;
        if items.as_ref().is_err_and(|e| e.starts_with("WRONGTYPE")) {
            items = self.ask(&["HKEYS", key], parse_strings)?;
        }
        let items = items.ok()?;
        Some((!items.is_empty()).then(|| items.join(",")))
    }

    /// A bulk-string reply (`INFO`), whole.
    fn bulk(&mut self, argv: &[&str]) -> Option<String> {
        self.ask(argv, |got| {
            let text = std::str::from_utf8(got).ok()?;
            let (head, body) = text.split_once("\r\n")?;
            let len: usize = head.strip_prefix('$')?.parse().ok()?;
            (body.len() >= len + 2).then(|| body[..len].to_string())
        })
    }

    /// Its role by its own answer (`INFO replication`): `master`, or `replica of
    /// <ip:port>`; `None` if it does not answer.
    pub fn role(&mut self) -> Option<String> {
        let info = self.bulk(&["INFO", "replication"])?;
        match info_field(&info, "role")? {
            "master" => Some("master".into()),
            _ => Some(format!(
                "replica of {}:{}",
                info_field(&info, "master_host")?,
                info_field(&info, "master_port")?
            )),
        }
    }

    /// Its count of expired keys (`INFO stats`'s `expired_keys`).
    pub fn expired_keys(&mut self) -> Option<u64> {
        let info = self.bulk(&["INFO", "stats"])?;
        info_field(&info, "expired_keys")?.parse().ok()
    }
}

/// [`RedisAsk::lock_value`] over a fresh connection.
pub fn lock_value_at(port: u16, key: &str) -> Option<Option<String>> {
    RedisAsk::new(port).lock_value(key)
}

/// A whole reply in `bytes` that is a bulk string, a nil or an array of bulk strings:
/// the strings (none for a nil or an empty array), or the error's text; `None` if more
/// is to come.
fn parse_strings(bytes: &[u8]) -> Option<Result<Vec<String>, String>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (head, mut rest) = text.split_once("\r\n")?;
    let bulk = |rest: &mut &str| -> Option<Option<String>> {
        let (h, r) = rest.split_once("\r\n")?;
        let len: i64 = h.strip_prefix('$')?.parse().ok()?;
        if len < 0 {
            *rest = r;
            return Some(None);
        }
        let len = len as usize;
        (r.len() >= len + 2).then(|| {
            *rest = &r[len + 2..];
            Some(r[..len].to_string())
        })
    };
    match head.as_bytes().first()? {
        b'-' => Some(Err(head[1..].to_string())),
        b'$' => {
            let mut all = text;
            Some(Ok(bulk(&mut all)?.into_iter().collect()))
        }
        b'*' => {
            let count: i64 = head[1..].parse().ok()?;
            let mut out = Vec::new();
            for _ in 0..count.max(0) {
                out.extend(bulk(&mut rest)?);
            }
            Some(Ok(out))
        }
        _ => Some(Err(format!("unexpected reply {head}"))),
    }
}

/// [`RedisAsk::role`] over a fresh connection.
pub fn role_at(port: u16) -> Option<String> {
    RedisAsk::new(port).role()
}

/// One RESP request over a fresh connection; the first reply line.
fn resp(port: u16, argv: &[&str]) -> Option<String> {
    let mut s = resp_send(port, argv)?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// One RESP request to `port` whose reply is a bulk string (`INFO`): the whole string.
fn resp_bulk(port: u16, argv: &[&str]) -> Option<String> {
    RedisAsk::new(port).bulk(argv)
}

/// Polls `ready` every 20 ms until it holds, for up to `limit`.
fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(())
}

/// `field:value` of an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// A partition in force from the start: side `a`, side `b`, one way.
pub(crate) type Precut = (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
    bool,
);

/// Every real server of one world.
#[derive(Default)]
pub(crate) struct Servers {
    /// Every server's address by its world name.
    pub addrs: BTreeMap<String, SocketAddr>,
    redis: BTreeMap<String, RedisProc>,
    sentinels: BTreeMap<String, SentinelServer>,
    /// The Sentinels behind the fault proxy (their own config: announced addresses).
    proxied_sentinels: BTreeMap<String, RedisProc>,
    /// The fault proxy in front of every server, when the plan needs one.
    pub net: Option<Net>,
    /// The partitions cut before the servers started.
    pub precut_ids: Vec<u64>,
    zk: Option<(String, ZkServer)>,
    ensemble: Option<(Vec<String>, ZkEnsembleServers)>,
    mysql: Option<(String, MariaDbServer)>,
    /// MariaDB's user, password and database (the launcher's).
    pub mysql_login: Option<(String, String, String)>,
    /// The lock servers' names, in world order (no Sentinels).
    pub lock_servers: Vec<String>,
}

impl Servers {
    /// Starts the servers `w` names, masters first, then replicas and Sentinels; with
    /// `net`, behind a fault proxy (for the clients `clients`).
    ///
    /// `precuts` are partitions in force from the run's start (a plan's partitions
    /// between named hosts at 0 ms): cut before the servers start, so a replica cut off
    /// from its master never reaches it, as in the simulated world; their ids are in
    /// `precut_ids` (the runner heals them once the plan's own faults at 0 ms hold).
    pub fn start(
        w: &Workload,
        net: bool,
        clients: &[String],
        precuts: &[Precut],
        clocked: &[String],
    ) -> Result<Self, String> {
        let mut s = Self::start_servers(w, net, clients, precuts, clocked)?;
        if net && s.net.is_none() {
            // ZooKeeper and MariaDB: only the clients' links go through the proxy.
            let servers: BTreeMap<String, (std::net::Ipv4Addr, SocketAddr)> = s
                .addrs
                .iter()
                .enumerate()
                .map(|(i, (n, a))| (n.clone(), (server_ip(i), *a)))
                .collect();
            s.net = Some(Net::start(&servers, clients)?);
        }
        Ok(s)
    }

    fn start_servers(
        w: &Workload,
        net: bool,
        clients: &[String],
        precuts: &[Precut],
        clocked: &[String],
    ) -> Result<Self, String> {
        let mut s = Self::default();
        if let Some(spec) = &w.systems.zookeeper {
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
        if let Some(spec) = &w.systems.mysql {
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
        if w.systems.mongo.is_some() {
            return Err(
                "MongoDB has no Debian package: the mongo-* designs stay model-only".into(),
            );
        }
        let sentinel_names = if w.sentinel.is_some() {
            w.sentinel_names()
        } else {
            Vec::new()
        };
        let ports = free_ports(w.servers.len() + sentinel_names.len());
        let port_of: BTreeMap<&str, u16> = w
            .servers
            .iter()
            .map(|x| x.name.as_str())
            .chain(sentinel_names.iter().map(String::as_str))
            .zip(&ports)
            .map(|(name, p)| (name, *p))
            .collect();
        // Behind the proxy: each server's own loopback address and public address.
        let mut public: BTreeMap<String, Public> = BTreeMap::new();
        if net {
            let servers: BTreeMap<String, (std::net::Ipv4Addr, SocketAddr)> = port_of
                .iter()
                .enumerate()
                .map(|(i, (n, p))| {
                    (
                        n.to_string(),
                        (server_ip(i), SocketAddr::from(([127, 0, 0, 1], *p))),
                    )
                })
                .collect();
            let proxy = Net::start(&servers, clients)?;
            for (a, b, one_way) in precuts {
                s.precut_ids.push(proxy.cut(a.clone(), b.clone(), *one_way));
            }
            for (n, (ip, _)) in &servers {
                public.insert(
                    n.clone(),
                    Public {
                        ip: *ip,
                        addr: proxy.public[n],
                    },
                );
            }
            s.net = Some(proxy);
        }
        // How a server reaches server `name`: its public address behind the proxy.
        let reach = |name: &str| -> Option<SocketAddr> {
            match public.get(name) {
                Some(p) => Some(p.addr),
                None => port_of
                    .get(name)
                    .map(|p| SocketAddr::from(([127, 0, 0, 1], *p))),
            }
        };
        let ordered = w
            .servers
            .iter()
            .filter(|x| x.replica_of.is_none())
            .chain(w.servers.iter().filter(|x| x.replica_of.is_some()));
        for spec in ordered {
            let master = match &spec.replica_of {
                Some(m) => Some(
                    reach(m)
                        .ok_or_else(|| format!("{} replicates unknown server {m}", spec.name))?,
                ),
                None => None,
            };
            let port = port_of[spec.name.as_str()];
            let clocked = clocked.contains(&spec.name);
            let proc =
                RedisProc::start(spec, port, master, public.get(&spec.name).copied(), clocked)?;
            s.addrs
                .insert(spec.name.clone(), ([127, 0, 0, 1], port).into());
            s.redis.insert(spec.name.clone(), proc);
        }
        s.lock_servers = w.servers.iter().map(|x| x.name.clone()).collect();
        // The simulated world starts with its replicas in sync; a real replica's first
        // full sync waits `repl-diskless-sync-delay` (5 s by default in Redis 7.0), so
        // the run starts once every replica says its link is up.
        for spec in w.servers.iter().filter(|x| x.replica_of.is_some()) {
            let master = spec.replica_of.as_deref().unwrap_or_default();
            if s.net
                .as_ref()
                .is_some_and(|n| n.blocked(&spec.name, master))
            {
                continue;
            }
            let port = port_of[spec.name.as_str()];
            wait_until(Duration::from_secs(20), || {
                resp_bulk(port, &["INFO", "replication"])
                    .is_some_and(|i| info_field(&i, "master_link_status") == Some("up"))
            })
            .map_err(|()| {
                format!(
                    "{}: its first sync with its master did not complete in 20 s",
                    spec.name
                )
            })?;
        }
        if let Some(spec) = &w.sentinel {
            let monitored = spec
                .monitor
                .clone()
                .or_else(|| w.servers.first().map(|x| x.name.clone()))
                .ok_or("Sentinels without a server to monitor")?;
            let opts = SentinelOptions {
                master_name: spec.master_name.clone(),
                quorum: spec.quorum,
                down_after_ms: spec.down_after_ms,
                failover_timeout_ms: spec.failover_timeout_ms,
            };
            for name in sentinel_names.clone() {
                if let Some(p) = public.get(&name).copied() {
                    let master = reach(&monitored).ok_or("no monitored master")?;
                    let replicas: Vec<SocketAddr> = w
                        .servers
                        .iter()
                        .filter(|x| x.replica_of.is_some())
                        .filter_map(|x| public.get(&x.name).map(|p| p.addr))
                        .collect();
                    let sentinel =
                        RedisProc::sentinel(spec, port_of[name.as_str()], master, p, &replicas)?;
                    s.addrs
                        .insert(name.clone(), ([127, 0, 0, 1], sentinel.port).into());
                    s.proxied_sentinels.insert(name, sentinel);
                } else {
                    let sentinel = SentinelServer::start(s.addrs[&monitored], &opts)
                        .map_err(|e| e.to_string())?;
                    s.addrs.insert(name.clone(), sentinel.addr());
                    s.sentinels.insert(name, sentinel);
                }
            }
            // ... and every Sentinel knows the replicas and the other Sentinels (as the
            // simulated Sentinels do from the start; a real one learns them from the
            // master's INFO and the others' hellos, every 2 s).
            let replicas = w.servers.iter().filter(|x| x.replica_of.is_some()).count();
            let count = |port: u16, what: &str| -> Option<usize> {
                let r = resp(port, &["SENTINEL", what, &spec.master_name])?;
                r.strip_prefix('*')?.split("\r\n").next()?.parse().ok()
            };
            let sentinel_ports: Vec<(String, u16)> = s.sentinel_ports().into_iter().collect();
            let others = sentinel_ports.len().saturating_sub(1);
            for (name, port) in &sentinel_ports {
                wait_until(Duration::from_secs(20), || {
                    count(*port, "REPLICAS") == Some(replicas)
                        && count(*port, "SENTINELS") == Some(others)
                })
                .map_err(|()| {
                    format!("{name}: did not learn the replicas and the other Sentinels in 20 s")
                })?;
            }
        }
        Ok(s)
    }

    /// Each Sentinel's real port.
    fn sentinel_ports(&self) -> BTreeMap<String, u16> {
        let mut ports: BTreeMap<String, u16> = self
            .sentinels
            .iter()
            .map(|(n, x)| (n.clone(), x.port()))
            .collect();
        ports.extend(
            self.proxied_sentinels
                .iter()
                .map(|(n, r)| (n.clone(), r.port)),
        );
        ports
    }

    /// Every server's name: lock servers, then Sentinels.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.lock_servers.clone();
        names.extend(self.sentinels.keys().cloned());
        names.extend(self.proxied_sentinels.keys().cloned());
        names
    }

    /// Redis server `name`'s clock, if the run moves it.
    pub fn clock(&mut self, name: &str) -> Option<&mut ServerClock> {
        self.redis.get_mut(name).and_then(|p| p.clock.as_mut())
    }

    /// The process id of server `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        if let Some(r) = self
            .redis
            .get(name)
            .or_else(|| self.proxied_sentinels.get(name))
        {
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
        if let Some(r) = self
            .redis
            .get_mut(name)
            .or_else(|| self.proxied_sentinels.get_mut(name))
        {
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
        if let Some(r) = self
            .redis
            .get_mut(name)
            .or_else(|| self.proxied_sentinels.get_mut(name))
        {
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
        if self.mysql.is_some() {
            // A unique-index row holds its owner value (`locks (name, owner)`).
            return client_in(&self.mysql_row_owner(key)?);
        }
        self.redis.iter().find_map(|(_, r)| {
            let reply = resp(r.port, &["GET", key])
                .filter(|x| !x.starts_with("-WRONGTYPE"))
                .or_else(|| resp(r.port, &["HKEYS", key]))?;
            client_in(&reply)
        })
    }

    /// One statement on MariaDB through Debian's `mariadb` client, over the parent's
    /// own connection (outside the fault proxy): its rows, tab-separated, one a line;
    /// `None` if there is no MariaDB or it could not be asked.
    pub fn mysql_query(&self, sql: &str) -> Option<String> {
        let (name, _) = self.mysql.as_ref()?;
        let (user, password, database) = self.mysql_login.clone()?;
        let addr = self.addrs.get(name)?;
        let out = Command::new("mariadb")
            .args([
                "--protocol=tcp",
                "-h",
                &addr.ip().to_string(),
                "-P",
                &addr.port().to_string(),
                "-u",
                &user,
                &format!("-p{password}"),
                "-D",
                &database,
                "-N",
                "-B",
                "-e",
                sql,
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// MariaDB's host name in the world, if it has one.
    pub fn mysql_name(&self) -> Option<&str> {
        self.mysql.as_ref().map(|(name, _)| name.as_str())
    }

    /// The owner value of `key`'s unique-index row (`locks (name, owner)`), by
    /// MariaDB's answer; `None` if there is no row (or no answer).
    pub fn mysql_row_owner(&self, key: &str) -> Option<String> {
        let out = self.mysql_query(&format!(
            "SELECT owner FROM locks WHERE name = {}",
            sql_quote(key)
        ))?;
        let owner = out.trim();
        (!owner.is_empty()).then(|| owner.to_string())
    }

    /// The connection holding `GET_LOCK(key)` (`IS_USED_LOCK`), by MariaDB's answer:
    /// `Some(None)` if it is free, `None` if MariaDB could not be asked.
    pub fn mysql_lock_holder(&self, key: &str) -> Option<Option<u32>> {
        let out = self.mysql_query(&format!("SELECT IS_USED_LOCK({})", sql_quote(key)))?;
        Some(out.trim().parse().ok())
    }

    /// The connections whose open transactions hold row locks, by MariaDB's answer
    /// (`information_schema.INNODB_TRX`: a running transaction with rows locked, as a
    /// `SELECT … FOR UPDATE` holder's is until its `COMMIT`); empty if none, `None` if
    /// MariaDB could not be asked.
    pub fn mysql_row_lock_holders(&self) -> Option<Vec<u32>> {
        let out = self.mysql_query(
            "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX \
             WHERE trx_state = 'RUNNING' AND trx_rows_locked > 0",
        )?;
        Some(out.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Whether MariaDB still has a session with connection id `id` (its process list).
    pub fn mysql_session_alive(&self, id: u32) -> Option<bool> {
        let out = self.mysql_query(&format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"
        ))?;
        Some(out.trim() != "0")
    }

    /// What Redis server `name` holds under `key` now, by its own answer: a string's
    /// value, or a hash's fields joined by `,`; `None` if absent, or not a Redis server.
    pub fn value_of(&self, name: &str, key: &str) -> Option<String> {
        lock_value_at(self.redis.get(name)?.port, key).flatten()
    }

    /// Redis server `name`'s role by its own answer (`ROLE`): `master`, or
    /// `replica of <ip:port>`; `None` if it does not answer.
    pub fn role(&self, name: &str) -> Option<String> {
        role_at(self.redis.get(name)?.port)
    }

    /// Redis server `name`'s own port (not the proxy's), to ask it without holding
    /// the servers' lock.
    pub fn redis_port(&self, name: &str) -> Option<u16> {
        self.redis.get(name).map(|r| r.port)
    }

    /// The Redis server names, in world order.
    pub fn redis_names(&self) -> Vec<String> {
        self.lock_servers
            .iter()
            .filter(|n| self.redis.contains_key(*n))
            .cloned()
            .collect()
    }

    /// A master holding `key` now (by `INFO replication` and `EXISTS`), first in
    /// world order.
    pub fn lock_master(&self, key: &str) -> Option<String> {
        self.redis_names()
            .into_iter()
            .find(|n| self.role(n).as_deref() == Some("master") && self.value_of(n, key).is_some())
    }

    /// The master holding `key` by a write none of its replicas has: its replication
    /// offset is past every replica's own (`master_repl_offset` on each side of the
    /// link), and no replica holds `key` at all. With the detail the start record
    /// gives (`lock write at offset …`, as the simulator's).
    pub fn unreplicated_lock_master(&self, key: &str) -> Option<(String, String)> {
        let names = self.redis_names();
        for m in &names {
            let r = &self.redis[m];
            let info = resp_bulk(r.port, &["INFO", "replication"])?;
            if info_field(&info, "role") != Some("master") || self.value_of(m, key).is_none() {
                continue;
            }
            let written: u64 = info_field(&info, "master_repl_offset")?.parse().ok()?;
            let acks: Vec<String> = info
                .lines()
                .filter(|l| l.starts_with("slave"))
                .filter_map(|l| {
                    l.split(',')
                        .find_map(|kv| kv.strip_prefix("offset="))
                        .map(str::to_string)
                })
                .collect();
            // Its replicas: the other servers replicating anyone (one master per world
            // with replicas).
            let mut applied = Vec::new();
            for n in names.iter().filter(|n| *n != m) {
                let rinfo = resp_bulk(self.redis[n].port, &["INFO", "replication"])?;
                if info_field(&rinfo, "role") == Some("master") {
                    continue;
                }
                let o: u64 = info_field(&rinfo, "master_repl_offset")?.parse().ok()?;
                if o >= written || self.value_of(n, key).is_some() {
                    return None;
                }
                applied.push(format!("{n}={o}"));
            }
            if applied.is_empty() {
                return None;
            }
            return Some((
                m.clone(),
                format!(
                    "lock write at offset {written}; acknowledged: {}; applied: {}",
                    acks.join(" "),
                    applied.join(" ")
                ),
            ));
        }
        None
    }

    /// The first Redis server (world order) whose lock key holds `owner`.
    pub fn server_holding(&self, key: &str, owner: &str) -> Option<String> {
        self.redis_names().into_iter().find(|n| {
            self.value_of(n, key)
                .is_some_and(|v| v.contains(owner) || (!v.is_empty() && owner.contains(&v)))
        })
    }

    /// A ZooKeeper server's last zxid by its own `srvr` answer.
    pub fn zk_zxid(&self, name: &str) -> Option<u64> {
        let addr = *self.addrs.get(name)?;
        let reply = launch::four_letter_word(addr, "srvr")?;
        let z = reply
            .lines()
            .find_map(|l| l.strip_prefix("Zxid:"))?
            .trim()
            .trim_start_matches("0x");
        u64::from_str_radix(z, 16).ok()
    }

    /// The ZooKeeper ensemble's members by world name, with their client addresses
    /// (none without an ensemble).
    pub fn zk_members(&self) -> Vec<(String, SocketAddr)> {
        self.ensemble
            .as_ref()
            .map(|(names, e)| names.iter().cloned().zip(e.addrs()).collect())
            .unwrap_or_default()
    }

    /// Every ZooKeeper server (standalone or of an ensemble) by world name, with its
    /// client address and its log.
    pub fn zk_servers(&self) -> Vec<(String, SocketAddr, PathBuf)> {
        let mut all: Vec<(String, SocketAddr, PathBuf)> = Vec::new();
        if let Some((n, z)) = &self.zk {
            all.push((n.clone(), z.addr(), z.log_path().to_path_buf()));
        }
        if let Some((names, e)) = &self.ensemble {
            for (n, m) in names.iter().zip(e.members()) {
                all.push((n.clone(), m.addr(), m.log_path().to_path_buf()));
            }
        }
        all
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
            .chain(&self.proxied_sentinels)
            .map(|(n, r)| (n.clone(), r.log.clone()))
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
/// A ZooKeeper server's mode and epoch by its own answer (`srvr`: `Mode: leader`,
/// `Zxid: 0x<epoch><counter>`); `None` if it does not answer (down, or not serving).
pub fn zk_mode_at(addr: SocketAddr) -> Option<(String, u64)> {
    let reply = lock_impl::testing::servers::four_letter_word(addr, "srvr")?;
    let field = |name: &str| {
        reply
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let mode = field("Mode: ")?;
    let zxid = u64::from_str_radix(field("Zxid: ")?.trim_start_matches("0x"), 16).ok()?;
    Some((mode, zxid >> 32))
}

/// `text` as an SQL string literal.
fn sql_quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

fn client_in(text: &str) -> Option<String> {
    let at = text.find("client-")?;
    let digits: String = text[at + 7..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("client-{digits}"))
}

#[cfg(test)]
mod tests {
    /// A lock value is read whole or not at all: a reply cut short is "no answer yet",
    /// never "no key" (which would record a removal that did not happen).
    #[test]
    fn a_reply_cut_short_is_no_answer_never_an_absent_key() {
        let ok = |b: &str| parse_strings(b.as_bytes());
        assert_eq!(ok("$-1\r\n"), Some(Ok(vec![])));
        assert_eq!(ok("$3\r\nabc\r\n"), Some(Ok(vec!["abc".to_string()])));
        assert_eq!(ok("$3\r\n"), None);
        assert_eq!(ok("$3\r\nab"), None);
        assert_eq!(ok("*0\r\n"), Some(Ok(vec![])));
        assert_eq!(
            ok("*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
            Some(Ok(vec!["a".to_string(), "b".to_string()]))
        );
        assert_eq!(ok("*2\r\n$1\r\na\r\n"), None);
        assert_eq!(
            ok("-WRONGTYPE Operation against a key\r\n"),
            Some(Err("WRONGTYPE Operation against a key".to_string()))
        );
        // And the owner value names the client that wrote it.
        assert_eq!(
            crate::real::writer_of("client-12-0-ab"),
            Some("client-12".to_string())
        );
        assert_eq!(crate::real::writer_of("redisson-uuid:1"), None);
    }

    use super::*;

    /// `PTTL`'s answer as a number.
    fn pttl(port: u16) -> i64 {
        let r = resp(port, &["PTTL", "k"]).unwrap_or_default();
        r.trim().trim_start_matches(':').parse().unwrap_or(i64::MIN)
    }

    /// A real `redis-server` under the clock shim: a step forward of its wall clock
    /// shortens a key's remaining life by the step (Redis 7.0 counts expiry on the
    /// wall clock), and a fast clock runs the key out sooner.
    #[test]
    fn a_real_redis_servers_wall_clock_moves_when_the_runner_says_so() {
        if !lock_impl::testing::redis_server_available() {
            return;
        }
        let port = free_ports(1)[0];
        let mut p = RedisProc::start(&ServerSpec::named("redis"), port, None, None, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            resp(port, &["SET", "k", "v", "PX", "10000"]).is_some_and(|r| r.starts_with("+OK"))
        );
        let before = pttl(port);
        assert!(before > 9_000, "PTTL before the step: {before}");
        p.clock.as_mut().expect("clocked").step(5_000);
        let after = pttl(port);
        assert!(
            (3_500..5_200).contains(&after),
            "a 5 s step forward left PTTL at {after} ms (was {before})"
        );
        // Twice as fast: 200 ms of real time take 400 ms off the key.
        p.clock.as_mut().expect("clocked").set_drift(1_000_000);
        std::thread::sleep(Duration::from_millis(200));
        let fast = pttl(port);
        assert!(
            after - fast >= 350,
            "a clock at +100 % took {} ms off in 200 ms",
            after - fast
        );
    }
}
