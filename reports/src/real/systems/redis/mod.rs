//! Redis in a real run: `redis-server` masters and replicas with the world's
//! persistence, and its `redis-sentinel`s. Redlock's independent masters are a Redis
//! topology; the Sentinels are Redis's helpers, not lock servers.
//!
//! - Behind the fault proxy the servers' own links (replication, Sentinels' hellos)
//!   go through it too: each server leaves from its own loopback address and announces
//!   its public one, and the partitions in force from the start are cut before any
//!   server starts.
//! - The record of the lock is sampled: each server's value under the lock key (and,
//!   with Sentinels, its role) every 20 ms, by its own answers.

mod proc;
mod resp;
mod start;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lock_impl::{Backend, Deps};
use sim::world::Workload;

use crate::real::clock::ServerClock;
use crate::real::system::{
    ClientCtx, DepsFuture, Owner, RealServers, RealSystem, ServerAsk, Sink, StartCtx, Started,
    Watcher, client_in,
};
use proc::RedisProc;
use resp::{RedisAsk, info_field, lock_value_at, resp, resp_bulk, role_at};

/// Redis, with its Sentinels.
pub(crate) struct Redis;

impl RealSystem for Redis {
    fn backend(&self) -> Backend {
        Backend::Redis
    }

    fn clocked_hosts(&self, w: &Workload) -> Vec<String> {
        w.servers.iter().map(|s| s.name.clone()).collect()
    }

    fn moves_lock_server_clocks(&self) -> bool {
        true
    }

    fn masters(&self, w: &Workload) -> u32 {
        w.servers.iter().filter(|s| s.replica_of.is_none()).count() as u32
    }

    fn start_roles(&self, w: &Workload) -> Vec<(String, String)> {
        w.servers
            .iter()
            .map(|s| {
                let role = match &s.replica_of {
                    Some(m) => format!("replica of {m}"),
                    None => "master".to_string(),
                };
                (s.name.clone(), role)
            })
            .collect()
    }

    fn start(&self, w: &Workload, ctx: &StartCtx) -> Result<Started, String> {
        start::start(w, ctx)
    }

    fn client_deps<'a>(&'a self, w: &'a Workload, ctx: ClientCtx<'a>) -> DepsFuture<'a> {
        Box::pin(client_deps(w, ctx))
    }
}

/// Dials what a Sentinel names through this client's own listener for that server
/// (the proxy knows the link by the listener), else as given.
struct Rewriting {
    net: crate::real::net::ClientNet,
    inner: lock_impl::ClientAddrConnector,
}

impl lock_impl::AddrConnector for Rewriting {
    fn connect_to(
        &self,
        host: &str,
        port: u16,
    ) -> lock_impl::Dial<'_, redis::aio::MultiplexedConnection> {
        let (host, port) = self.net.rewrite(host, port);
        Box::pin(async move { self.inner.connect_to(&host, port).await })
    }

    fn pubsub_to(&self, host: &str, port: u16) -> lock_impl::Dial<'_, redis::aio::PubSub> {
        let (host, port) = self.net.rewrite(host, port);
        Box::pin(async move { self.inner.pubsub_to(&host, port).await })
    }
}

/// A Redis client's `Deps`: a connection to each master, or one through the
/// Sentinels.
async fn client_deps(w: &Workload, ctx: ClientCtx<'_>) -> Result<Deps, String> {
    let response_timeout = Duration::from_millis(w.response_timeout_ms);
    let policy = lock_impl::ReconnectPolicy {
        connect_timeout_ms: w.connect_timeout_ms,
        ..Default::default()
    };
    let clock = ctx.clock.clone();
    let mut servers = Vec::new();
    for s in &w.servers {
        let url = format!("redis://{}", ctx.addr(&s.name)?);
        let connector: Arc<dyn lock_impl::Connector> = Arc::new(
            lock_impl::ClientConnector::new(&url, response_timeout).map_err(|e| e.to_string())?,
        );
        servers.push(lock_impl::Conn::new(connector, clock.clone(), policy));
    }
    let conn = match &w.sentinel {
        Some(spec) => {
            let sentinels = w
                .sentinel_names()
                .iter()
                .map(|n| ctx.addr(n).map(|a| (a.ip().to_string(), a.port())))
                .collect::<Result<Vec<_>, _>>()?;
            let inner = lock_impl::ClientAddrConnector::new(response_timeout);
            let transport: Arc<dyn lock_impl::AddrConnector> = match ctx.net {
                Some(net) => Arc::new(Rewriting {
                    net: net.clone(),
                    inner,
                }),
                None => Arc::new(inner),
            };
            let connector: Arc<dyn lock_impl::Connector> =
                Arc::new(lock_impl::SentinelConnector::new(
                    spec.master_name.clone(),
                    sentinels,
                    transport,
                    clock.clone(),
                    Duration::from_millis(250),
                ));
            lock_impl::Conn::new(connector, clock.clone(), policy)
        }
        None => servers
            .first()
            .cloned()
            .ok_or("a Redis world without servers")?,
    };
    let _ = conn.ensure_connected().await;
    let servers = if w.sentinel.is_some() {
        vec![conn.clone()]
    } else {
        servers
    };
    Ok(Deps {
        pubsub: Some(Arc::new(lock_impl::ConnectorPubSub(
            conn.connector().clone(),
        ))),
        scale: ctx.scale,
        ..Deps::new(conn, servers, clock, ctx.entropy, ctx.spawner)
    })
}

/// Every Redis server and Sentinel of one world.
pub(crate) struct RedisServers {
    /// The lock servers' names, in world order.
    names: Vec<String>,
    redis: BTreeMap<String, RedisProc>,
    sentinels: BTreeMap<String, lock_impl::testing::SentinelServer>,
    /// The Sentinels behind the fault proxy (their own config: announced addresses).
    proxied_sentinels: BTreeMap<String, RedisProc>,
    /// Whether the run records the servers' roles (a world with Sentinels).
    roles: bool,
    /// Each server's role at the start.
    start_roles: BTreeMap<String, String>,
    /// A server's name by its address (real, or public behind the proxy): a replica
    /// names its master by address.
    by_addr: BTreeMap<String, String>,
}

impl RedisServers {
    /// Server `name`'s own port (not the proxy's).
    fn port(&self, name: &str) -> Option<u16> {
        self.redis.get(name).map(|r| r.port)
    }

    /// What server `name` holds under `key` now, by its own answer.
    fn value_of(&self, name: &str, key: &str) -> Option<String> {
        lock_value_at(self.port(name)?, key).flatten()
    }

    fn role(&self, name: &str) -> Option<String> {
        role_at(self.port(name)?)
    }
}

impl RealServers for RedisServers {
    fn lock_servers(&self) -> Vec<String> {
        self.names.clone()
    }

    fn helpers(&self) -> Vec<String> {
        let mut names: Vec<String> = self.sentinels.keys().cloned().collect();
        names.extend(self.proxied_sentinels.keys().cloned());
        names
    }

    fn pid(&self, name: &str) -> Option<u32> {
        if let Some(r) = self
            .redis
            .get(name)
            .or_else(|| self.proxied_sentinels.get(name))
        {
            return Some(r.child.id());
        }
        self.sentinels.get(name).map(|x| x.pid())
    }

    fn kill(&mut self, name: &str) -> bool {
        if let Some(r) = self
            .redis
            .get_mut(name)
            .or_else(|| self.proxied_sentinels.get_mut(name))
        {
            r.kill();
        } else if let Some(x) = self.sentinels.get_mut(name) {
            x.kill();
        } else {
            return false;
        }
        true
    }

    fn restart(&mut self, name: &str) -> Option<Result<(), String>> {
        if let Some(r) = self
            .redis
            .get_mut(name)
            .or_else(|| self.proxied_sentinels.get_mut(name))
        {
            return Some(r.restart(name));
        }
        let x = self.sentinels.get_mut(name)?;
        Some(x.restart().map_err(|e| e.to_string()))
    }

    /// The first server (world order) on which `key` exists.
    fn lock_server(&self, key: &str) -> Option<String> {
        self.names.iter().find_map(|name| {
            let port = self.port(name)?;
            resp(port, &["EXISTS", key])
                .is_some_and(|r| r.starts_with(":1"))
                .then(|| name.clone())
        })
    }

    /// The client whose owner value the lock key holds on the first server (by name)
    /// that has it: a string's value, or a hash's fields (Redisson's `uuid:thread`
    /// holds), read for the `client-N` every owner value starts with.
    fn lock_owner(&self, key: &str) -> Owner {
        let client = self.redis.values().find_map(|r| {
            let reply = resp(r.port, &["GET", key])
                .filter(|x| !x.starts_with("-WRONGTYPE"))
                .or_else(|| resp(r.port, &["HKEYS", key]))?;
            client_in(&reply)
        });
        Owner {
            client,
            record: None,
        }
    }

    fn logs(&self) -> Vec<(String, PathBuf)> {
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
        logs
    }

    fn clock(&mut self, name: &str) -> Option<&mut ServerClock> {
        self.redis.get_mut(name).and_then(|p| p.clock.as_mut())
    }

    fn ask(&self, name: &str) -> Option<Box<dyn ServerAsk>> {
        Some(Box::new(RedisAsk::new(self.port(name)?)))
    }

    /// A master holding `key` now (by `INFO replication` and `EXISTS`), first in
    /// world order.
    fn lock_master(&self, key: &str) -> Option<String> {
        self.names
            .iter()
            .find(|n| self.role(n).as_deref() == Some("master") && self.value_of(n, key).is_some())
            .cloned()
    }

    /// The master holding `key` by a write none of its replicas has: its replication
    /// offset is past every replica's own (`master_repl_offset` on each side of the
    /// link), and no replica holds `key` at all. With the detail the start record
    /// gives (`lock write at offset …`, as the simulator's).
    fn unreplicated_lock_master(&self, key: &str) -> Option<(String, String)> {
        for m in &self.names {
            let info = resp_bulk(self.port(m)?, &["INFO", "replication"])?;
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
            for n in self.names.iter().filter(|n| *n != m) {
                let rinfo = resp_bulk(self.port(n)?, &["INFO", "replication"])?;
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

    /// The first server (world order) whose lock key holds `owner`.
    fn server_holding(&self, key: &str, owner: &str) -> Option<String> {
        self.names
            .iter()
            .find(|n| {
                self.value_of(n, key)
                    .is_some_and(|v| v.contains(owner) || (!v.is_empty() && owner.contains(&v)))
            })
            .cloned()
    }

    fn watchers(&self, key: &str) -> Vec<Watcher> {
        let servers: Vec<(String, u16)> = self
            .names
            .iter()
            .filter_map(|n| Some((n.clone(), self.port(n)?)))
            .collect();
        if servers.is_empty() {
            return Vec::new();
        }
        let (key, roles) = (key.to_string(), self.roles);
        let (by_addr, last) = (self.by_addr.clone(), self.start_roles.clone());
        vec![Box::new(move |sink: &dyn Sink| {
            watch(sink, &servers, &key, roles, &by_addr, last);
        })]
    }
}

/// Each server's lock value and, with Sentinels (`roles`), its role, every 20 ms
/// until the run is over, each over one kept connection (a restart keeps its port).
fn watch(
    sink: &dyn Sink,
    servers: &[(String, u16)],
    key: &str,
    roles: bool,
    by_addr: &BTreeMap<String, String>,
    mut last: BTreeMap<String, String>,
) {
    let mut asks: BTreeMap<u16, RedisAsk> = BTreeMap::new();
    while !sink.over() {
        for (n, port) in servers {
            // The value first: a promotion recorded below finds the new master's
            // record as fresh as its role.
            let ask = asks.entry(*port).or_insert_with(|| RedisAsk::new(*port));
            if let Some(value) = ask.lock_value_of(key)
                && !sink.is_down(n)
            {
                sink.note_lock_value(n, value, "gone");
            }
            if !roles {
                continue;
            }
            let Some(role) = ask.role() else {
                continue;
            };
            let role = match role.strip_prefix("replica of ") {
                Some(addr) => format!(
                    "replica of {}",
                    by_addr
                        .get(addr)
                        .cloned()
                        .unwrap_or_else(|| addr.to_string())
                ),
                None => role,
            };
            sink.note_role(&mut last, n.clone(), role);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
