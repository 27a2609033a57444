//! The servers' own record of the lock in a real run, sampled by the parent from the
//! servers' answers (the simulator's servers record it as they serve): each Redis
//! server's value under the lock key every 20 ms, at each crash, restart, cut and
//! clock step; its role with Sentinels; a ZooKeeper ensemble's roles; MariaDB's
//! `GET_LOCK` holder's session at a reset. The checkers that judge by this record
//! still say `Unknown` on a real run (a sample can miss a short-lived value); the
//! scenarios' probes read it to say whether their fault happened.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sim::history::{EventKind, ServerEvent};

use super::{Run, servers};

impl Run {
    /// Records what Redis server `host` holds under the lock key when it differs from
    /// what was last recorded: a `Written` (by the client its owner value names, else
    /// the server itself) or a `Removed` (`cause`: `lost` when a restart lost it, else
    /// `gone`, for a key seen absent: deleted or expired, the sample does not say).
    /// A real server's record is sampled (every 20 ms, and at each crash): a value held
    /// for less than that can be missed, so the checkers that judge by the servers'
    /// record still say `Unknown` on a real run (`RunParams::server_records`); the
    /// scenarios' probes read it to say whether the fault happened.
    pub(super) fn note_lock_value(&self, host: &str, value: Option<String>, cause: &str) {
        let key = &self.cfg.workload.key;
        let mut values = self.lock_values.lock().expect("lock values");
        let event = match (values.get(host), value) {
            (Some(old), Some(v)) if *old == v => return,
            (None, None) => return,
            (_, Some(v)) => {
                values.insert(host.to_string(), v.clone());
                ServerEvent::Written {
                    by: writer_of(&v).unwrap_or_else(|| host.to_string()),
                    key: key.clone(),
                    value: v,
                }
            }
            (Some(_), None) => ServerEvent::Removed {
                by: host.to_string(),
                key: key.clone(),
                value: values.remove(host).expect("held"),
                cause: cause.to_string(),
            },
        };
        self.recorder
            .record_at(self.now_us(), host, EventKind::Server(event));
    }

    /// Samples the lock value of each Redis server among `hosts` now (see
    /// [`Run::note_lock_value`]).
    pub(super) fn sample_lock_values<'a>(&self, hosts: impl Iterator<Item = &'a String>) {
        let key = self.cfg.workload.key.clone();
        for host in hosts {
            let port = self.servers.lock().expect("servers").redis_port(host);
            if let Some(value) = port.and_then(|p| servers::lock_value_at(p, &key))
                && !self.down.lock().expect("down").contains(host)
            {
                self.note_lock_value(host, value, "gone");
            }
        }
    }

    /// After `client`'s connections were reset: if MariaDB ends the session `id` that
    /// held `GET_LOCK(key)` (within 2 s, by its process list), records the end as the
    /// simulator's MySQL server does (`MySqlConnection`, `closed`, releasing `key`); a
    /// session that lives on (the lock was another client's, or released by a command)
    /// records nothing.
    pub(super) fn watch_session_end(self: &Arc<Self>, client: &str, id: u32, key: String) {
        let (run, client) = (self.clone(), client.to_string());
        std::thread::spawn(move || {
            for _ in 0..100 {
                if run.over.load(Ordering::Relaxed) {
                    return;
                }
                let (alive, name) = {
                    let servers = run.servers.lock().expect("servers");
                    (
                        servers.mysql_session_alive(id),
                        servers.mysql_name().map(str::to_string),
                    )
                };
                if let (Some(false), Some(name)) = (alive, name) {
                    run.recorder.record_at(
                        run.now_us(),
                        &name,
                        EventKind::Server(ServerEvent::MySqlConnection {
                            connection: id,
                            client,
                            event: "closed".into(),
                            released: vec![key],
                            row_locks: Vec::new(),
                        }),
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// Records each Redis server's lock value and, with Sentinels, its role when they
    /// change, and a ZooKeeper ensemble's roles, by their own answers, until the run is
    /// over.
    pub(super) fn watch_servers(&self) {
        let key = self.cfg.workload.key.clone();
        let roles = self.cfg.workload.sentinel.is_some();
        // A replica names its master by address (real, or public behind the proxy).
        let mut by_addr: BTreeMap<String, String> = self
            .addrs
            .iter()
            .map(|(n, a)| (a.to_string(), n.clone()))
            .collect();
        if let Some(net) = &self.net {
            by_addr.extend(net.public.iter().map(|(n, a)| (a.to_string(), n.clone())));
        }
        let mut last: BTreeMap<String, String> = self
            .cfg
            .workload
            .servers
            .iter()
            .map(|s| {
                let role = match &s.replica_of {
                    Some(m) => format!("replica of {m}"),
                    None => "master".to_string(),
                };
                (s.name.clone(), role)
            })
            .collect();
        let zk = self.servers.lock().expect("servers").zk_members();
        // A ZooKeeper ensemble's roles are asked on their own thread, which never waits
        // for the servers' lock: a member's restart holds it while its JVM starts
        // (seconds on a loaded machine), and the roles elected meanwhile are what a
        // leader crash's probe reads.
        std::thread::scope(|scope| {
            if !zk.is_empty() {
                scope.spawn(|| self.watch_zk_roles(&zk));
            }
            self.watch_redis(&key, roles, &by_addr, &mut last);
        });
    }

    /// A ZooKeeper ensemble's roles as its members answer `srvr`, every 100 ms (a JVM's
    /// answer costs more than Redis's) and once more when the run is over (an election
    /// that ended in the run's last moments): `leader (epoch N)` and `follower of zk-K`,
    /// as the simulator's members record them.
    fn watch_zk_roles(&self, zk: &[(String, std::net::SocketAddr)]) {
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let over = self.over.load(Ordering::Relaxed);
            let modes: Vec<(String, Option<(String, u64)>)> = zk
                .iter()
                .map(|(n, a)| (n.clone(), servers::zk_mode_at(*a)))
                .collect();
            let leader = modes
                .iter()
                .find(|(_, m)| m.as_ref().is_some_and(|(mode, _)| mode == "leader"))
                .map(|(n, _)| n.clone());
            for (n, m) in modes {
                let Some((mode, epoch)) = m else { continue };
                let role = match (mode.as_str(), &leader) {
                    ("leader", _) => format!("leader (epoch {epoch})"),
                    ("follower", Some(l)) => format!("follower of {l}"),
                    _ => continue,
                };
                self.note_role(&mut last, n, role);
            }
            if over {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Each Redis server's lock value and, with Sentinels (`roles`), its role, every
    /// 20 ms until the run is over.
    fn watch_redis(
        &self,
        key: &str,
        roles: bool,
        by_addr: &BTreeMap<String, String>,
        last: &mut BTreeMap<String, String>,
    ) {
        // One kept connection per Redis server (by port: a restart keeps its port).
        let mut asks: BTreeMap<u16, servers::RedisAsk> = BTreeMap::new();
        while !self.over.load(Ordering::Relaxed) {
            let names = self.servers.lock().expect("servers").redis_names();
            for n in names {
                // Asked without holding the servers' lock (a stopped server makes each
                // question wait out its timeout).
                let Some(port) = self.servers.lock().expect("servers").redis_port(&n) else {
                    continue;
                };
                // The value first: a promotion recorded below finds the new master's
                // record as fresh as its role.
                let ask = asks
                    .entry(port)
                    .or_insert_with(|| servers::RedisAsk::new(port));
                if let Some(value) = ask.lock_value(key)
                    && !self.down.lock().expect("down").contains(&n)
                {
                    self.note_lock_value(&n, value, "gone");
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
                self.note_role(last, n, role);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Records server `host`'s `role` if it is not the last one recorded (`last`).
    fn note_role(&self, last: &mut BTreeMap<String, String>, host: String, role: String) {
        if last.get(&host) != Some(&role) {
            self.recorder.record_at(
                self.now_us(),
                &host,
                EventKind::Server(ServerEvent::Role { role: role.clone() }),
            );
            last.insert(host, role);
        }
    }
}

/// The client host an owner value names (`client-N-…`, the clients' entropy), if it
/// names one.
pub(crate) fn writer_of(value: &str) -> Option<String> {
    let rest = value.strip_prefix("client-")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then(|| format!("client-{digits}"))
}
