//! Starting a world's Redis servers and Sentinels: masters first, then replicas (the
//! run waits for each replica's first sync), then the Sentinels (the run waits until
//! each knows the replicas and the other Sentinels, as the simulated ones do from the
//! start).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use lock_impl::testing::servers::free_ports;
use lock_impl::testing::{SentinelOptions, SentinelServer};
use sim::world::Workload;

use super::RedisServers;
use super::proc::RedisProc;
use super::resp::{info_field, resp, resp_bulk, wait_until};
use crate::real::net::{Net, server_ip};
use crate::real::system::RealSystem as _;
use crate::real::system::{Public, StartCtx, Started};

/// Starts `w`'s Redis servers and Sentinels (see the module's comment).
pub(super) fn start(w: &Workload, ctx: &StartCtx) -> Result<Started, String> {
    let sentinel_names = if w.sentinel.is_some() {
        w.sentinel_names()
    } else {
        Vec::new()
    };
    let ports = free_ports(w.servers.len() + sentinel_names.len());
    let port_of: BTreeMap<String, u16> = w
        .servers
        .iter()
        .map(|x| x.name.clone())
        .chain(sentinel_names.iter().cloned())
        .zip(ports)
        .collect();
    let (mut net, mut precut_ids) = (None, Vec::new());
    // Behind the proxy: each server's own loopback address and public address.
    let mut public: BTreeMap<String, Public> = BTreeMap::new();
    if ctx.net {
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
        let proxy = Net::start(&servers, ctx.clients)?;
        for (a, b, one_way) in ctx.precuts {
            precut_ids.push(proxy.cut(a.clone(), b.clone(), *one_way));
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
        net = Some(proxy);
    }
    let mut s = RedisStart {
        w,
        port_of,
        public,
        servers: RedisServers {
            names: w.servers.iter().map(|x| x.name.clone()).collect(),
            redis: BTreeMap::new(),
            sentinels: BTreeMap::new(),
            proxied_sentinels: BTreeMap::new(),
            roles: w.sentinel.is_some(),
            start_roles: super::Redis.start_roles(w).into_iter().collect(),
            by_addr: BTreeMap::new(),
        },
        addrs: BTreeMap::new(),
    };
    s.servers_and_replicas(ctx, net.as_ref())?;
    s.sentinels(&sentinel_names)?;
    let mut by_addr: BTreeMap<String, String> = s
        .addrs
        .iter()
        .map(|(n, a)| (a.to_string(), n.clone()))
        .collect();
    if let Some(net) = &net {
        by_addr.extend(net.public.iter().map(|(n, a)| (a.to_string(), n.clone())));
    }
    s.servers.by_addr = by_addr;
    let started = Started {
        servers: Box::new(s.servers),
        addrs: s.addrs,
        net,
        precut_ids,
    };
    // Real Sentinels keep a once-a-second rhythm (PING, the down checks). The runner
    // starts the clients once every Sentinel knows the topology, a moment their own
    // rhythm sets, so a fault at a fixed time after it fell at much the same phase of
    // that rhythm in every run (a partition after 3 s was found down about 1 s later in
    // 15 of 17 runs). A deployment's faults fall at any phase: the run begins after a
    // seed-drawn part of a second, as the simulator's Sentinels start at a seed-drawn
    // phase (`sim/src/world/redis/sentinels.rs`).
    if w.sentinel.is_some() {
        let phase_ms =
            sim::seed::sub_seed(ctx.seed, sim::seed::stream::SENTINEL_PING_PHASE) % 1_000;
        std::thread::sleep(Duration::from_millis(phase_ms));
    }
    Ok(started)
}

/// A start under way.
struct RedisStart<'a> {
    w: &'a Workload,
    port_of: BTreeMap<String, u16>,
    public: BTreeMap<String, Public>,
    servers: RedisServers,
    addrs: BTreeMap<String, SocketAddr>,
}

impl RedisStart<'_> {
    /// How a server reaches server `name`: its public address behind the proxy.
    fn reach(&self, name: &str) -> Option<SocketAddr> {
        match self.public.get(name) {
            Some(p) => Some(p.addr),
            None => self
                .port_of
                .get(name)
                .map(|p| SocketAddr::from(([127, 0, 0, 1], *p))),
        }
    }

    /// The masters, then the replicas, each once its first sync is done.
    fn servers_and_replicas(&mut self, ctx: &StartCtx, net: Option<&Net>) -> Result<(), String> {
        let w = self.w;
        let ordered = w
            .servers
            .iter()
            .filter(|x| x.replica_of.is_none())
            .chain(w.servers.iter().filter(|x| x.replica_of.is_some()));
        for spec in ordered {
            let master = match &spec.replica_of {
                Some(m) => Some(
                    self.reach(m)
                        .ok_or_else(|| format!("{} replicates unknown server {m}", spec.name))?,
                ),
                None => None,
            };
            let port = self.port_of[&spec.name];
            let clocked = ctx.clocked.contains(&spec.name);
            let public = self.public.get(&spec.name).copied();
            let proc = RedisProc::start(spec, port, master, public, clocked)?;
            self.addrs
                .insert(spec.name.clone(), ([127, 0, 0, 1], port).into());
            self.servers.redis.insert(spec.name.clone(), proc);
        }
        self.servers.names = w.servers.iter().map(|x| x.name.clone()).collect();
        // The simulated world starts with its replicas in sync; a real replica's first
        // full sync waits `repl-diskless-sync-delay` (5 s by default in Redis 7.0), so
        // the run starts once every replica says its link is up.
        for spec in w.servers.iter().filter(|x| x.replica_of.is_some()) {
            let master = spec.replica_of.as_deref().unwrap_or_default();
            if net.is_some_and(|n| n.blocked(&spec.name, master)) {
                continue;
            }
            let port = self.port_of[&spec.name];
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
        Ok(())
    }

    /// The Sentinels, once each knows the replicas and the other Sentinels.
    fn sentinels(&mut self, sentinel_names: &[String]) -> Result<(), String> {
        let w = self.w;
        let Some(spec) = &w.sentinel else {
            return Ok(());
        };
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
        for name in sentinel_names {
            if let Some(p) = self.public.get(name).copied() {
                let master = self.reach(&monitored).ok_or("no monitored master")?;
                let replicas: Vec<SocketAddr> = w
                    .servers
                    .iter()
                    .filter(|x| x.replica_of.is_some())
                    .filter_map(|x| self.public.get(&x.name).map(|p| p.addr))
                    .collect();
                let sentinel = RedisProc::sentinel(spec, self.port_of[name], master, p, &replicas)?;
                self.addrs
                    .insert(name.clone(), ([127, 0, 0, 1], sentinel.port).into());
                self.servers
                    .proxied_sentinels
                    .insert(name.clone(), sentinel);
            } else {
                let sentinel = SentinelServer::start(self.addrs[&monitored], &opts)
                    .map_err(|e| e.to_string())?;
                self.addrs.insert(name.clone(), sentinel.addr());
                self.servers.sentinels.insert(name.clone(), sentinel);
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
        let mut sentinel_ports: BTreeMap<String, u16> = self
            .servers
            .sentinels
            .iter()
            .map(|(n, x)| (n.clone(), x.port()))
            .collect();
        sentinel_ports.extend(
            self.servers
                .proxied_sentinels
                .iter()
                .map(|(n, r)| (n.clone(), r.port)),
        );
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
        Ok(())
    }
}
