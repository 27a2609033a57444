//! One `redis-server` or `redis-sentinel` process of a real run: its fixed port and
//! directory (an AOF survives a restart), its arguments, its log, and its clock when
//! the plan moves it (locksim's clock shim preloaded).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_impl::testing::servers::{self as launch, spawn_kept};
use sim::redis::persistence::{Fsync, Persistence};
use sim::world::ServerSpec;

use super::resp::resp;
use crate::real::clock::{ServerClock, shim_path};
use crate::real::system::Public;

/// One `redis-server` with a fixed port and directory (its AOF survives a restart).
pub(super) struct RedisProc {
    pub child: Child,
    pub port: u16,
    program: &'static str,
    args: Vec<String>,
    dir: PathBuf,
    pub log: PathBuf,
    /// Its clock, when the plan moves it (the shim preloaded, its control file).
    pub clock: Option<ServerClock>,
}

impl RedisProc {
    /// A `redis-server` for `spec` on `port`, replicating `master` (its address: the
    /// real one, or its public one behind the proxy), announcing `public` if given.
    pub fn start(
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
    pub fn sentinel(
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

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn restart(&mut self, name: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lock_impl::testing::servers::free_ports;

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
