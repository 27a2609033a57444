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
    /// held `GET_LOCK(key)` or a transaction's row locks (within 2 s, by its process
    /// list), records the end as the simulator's MySQL server does (`MySqlConnection`,
    /// `closed`, releasing `key` or its row lock, as `held` says); a session that lives
    /// on (the lock was another client's, or released by a command) records nothing.
    pub(super) fn watch_session_end(
        self: &Arc<Self>,
        client: &str,
        id: u32,
        key: String,
        held: Held,
    ) {
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
                    let (released, row_locks) = match held {
                        Held::GetLock => (vec![key], Vec::new()),
                        Held::RowLock => (Vec::new(), vec![key]),
                    };
                    run.recorder.record_at(
                        run.now_us(),
                        &name,
                        EventKind::Server(ServerEvent::MySqlConnection {
                            connection: id,
                            client,
                            event: "closed".into(),
                            released,
                            row_locks,
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
        let (zk, zk_servers) = {
            let servers = self.servers.lock().expect("servers");
            (servers.zk_members(), servers.zk_servers())
        };
        // A ZooKeeper ensemble's roles are asked on their own thread, which never waits
        // for the servers' lock: a member's restart holds it while its JVM starts
        // (seconds on a loaded machine), and the roles elected meanwhile are what a
        // leader crash's probe reads. Its sessions' expiries are read on another.
        std::thread::scope(|scope| {
            if !zk.is_empty() {
                scope.spawn(|| self.watch_zk_roles(&zk));
            }
            if !zk_servers.is_empty() {
                scope.spawn(|| self.watch_zk_sessions(&zk_servers));
            }
            self.watch_redis(&key, roles, &by_addr, &mut last);
        });
    }

    /// A ZooKeeper server's own record of the sessions it expires: the line it logs
    /// when its session tracker expires one (`ZooKeeperServer.expire`: "Expiring
    /// session 0x…, timeout of N ms exceeded"), read off each server's log every 20 ms
    /// and stamped when read (at most one poll after the server wrote it); and each
    /// session's ephemeral nodes by the servers' `dump` answer, every 100 ms, which
    /// name the nodes an expiry deletes and, by the lock node a client was granted, the
    /// session's client. The expiries are kept for [`Run::record_zk_expiries`].
    fn watch_zk_sessions(&self, zk: &[(String, std::net::SocketAddr, std::path::PathBuf)]) {
        // Only what the servers log from now on (their start-up is not the run's).
        let mut offsets: BTreeMap<&str, u64> = zk
            .iter()
            .map(|(n, _, log)| {
                let len = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
                (n.as_str(), len)
            })
            .collect();
        // Each session's nodes at the last `dump`, and every node ever seen under it.
        let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut ever: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for round in 0u64.. {
            let over = self.over.load(Ordering::Relaxed);
            for (name, _, log) in zk {
                let offset = offsets.entry(name.as_str()).or_default();
                for line in new_lines(log, offset) {
                    let Some((session, timeout_ms)) = expiring_session(&line) else {
                        continue;
                    };
                    let at_us = self.now_us();
                    self.zk_expiries
                        .lock()
                        .expect("zk expiries")
                        .push(ZkExpiry {
                            at_us,
                            server: name.clone(),
                            ephemerals: nodes.get(&session).cloned().unwrap_or_default(),
                            ever: ever.get(&session).cloned().unwrap_or_default(),
                            session,
                            timeout_ms,
                        });
                }
            }
            if round.is_multiple_of(5)
                && let Some(dump) = zk.iter().find_map(|(_, addr, _)| {
                    lock_impl::testing::servers::four_letter_word(*addr, "dump")
                })
            {
                nodes = ephemerals_by_session(&dump);
                for (session, paths) in &nodes {
                    ever.entry(session.clone())
                        .or_default()
                        .extend(paths.iter().cloned());
                }
            }
            if over {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Adds to the run's `events` (in time order) each ZooKeeper session expiry read
    /// during the run, as the simulator's server records it (`ZkSession`, `expired`),
    /// by the server that logged it, at the moment it was read. The session's client is
    /// the host granted the lock as one of the session's nodes (the Curator port's
    /// owner value is its node's path); an expiry of a session no client was granted a
    /// node of (a waiter's) names no client and is not recorded.
    pub(super) fn record_zk_expiries(&self, events: &mut Vec<sim::history::Event>) {
        let expiries = std::mem::take(&mut *self.zk_expiries.lock().expect("zk expiries"));
        let mut found = Vec::new();
        for x in expiries {
            let Some(client) = events.iter().find_map(|e| match &e.kind {
                EventKind::Op(op)
                    if op.f == sim::history::OpF::Acquire
                        && op.phase == sim::history::Phase::Ok
                        && op
                            .owner
                            .as_ref()
                            .is_some_and(|o| x.ever.contains(o) || x.ephemerals.contains(o)) =>
                {
                    Some(e.host.clone())
                }
                _ => None,
            }) else {
                continue;
            };
            found.push(sim::history::Event {
                at_us: x.at_us,
                host: x.server,
                kind: EventKind::Server(ServerEvent::ZkSession {
                    session: x.session,
                    client,
                    event: "expired".into(),
                    timeout_ms: x.timeout_ms,
                    ephemerals: x.ephemerals,
                }),
            });
        }
        if !found.is_empty() {
            events.extend(found);
            events.sort_by_key(|e| e.at_us);
        }
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

/// What a MariaDB session held that its end releases (see
/// [`Run::watch_session_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// A `GET_LOCK` (`IS_USED_LOCK` named the session).
    GetLock,
    /// Row locks of its open transaction (`INNODB_TRX` named the session): the lock
    /// key's row, in a world whose lock is a row.
    RowLock,
}

/// A ZooKeeper session's expiry as a real server logged it (see
/// [`Run::watch_zk_sessions`]).
pub(super) struct ZkExpiry {
    /// When the runner read the line (µs of the run).
    at_us: u64,
    /// The server whose log has it.
    server: String,
    /// `0x…`, as ZooKeeper logs it.
    session: String,
    timeout_ms: u32,
    /// The session's ephemeral nodes at the last `dump` before the expiry.
    ephemerals: Vec<String>,
    /// Every node seen under the session.
    ever: std::collections::BTreeSet<String>,
}

/// The complete lines appended to `log` since `offset`, which moves past them (a
/// partial last line waits for its end; a log shorter than the offset is read from its
/// start).
fn new_lines(log: &std::path::Path, offset: &mut u64) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len < *offset {
        *offset = 0;
    }
    if len == *offset || f.seek(SeekFrom::Start(*offset)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if f.take(len - *offset).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
        return Vec::new();
    };
    *offset += end as u64 + 1;
    String::from_utf8_lossy(&bytes[..end])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The session and timeout of a ZooKeeper server's log line for a session it expires
/// (`ZooKeeperServer.expire`, 3.8: "Expiring session 0x{}, timeout of {}ms exceeded").
pub(crate) fn expiring_session(line: &str) -> Option<(String, u32)> {
    let rest = line.split_once("Expiring session ")?.1;
    let (session, rest) = rest.split_once(", timeout of ")?;
    let timeout = rest.split_once("ms exceeded")?.0.trim().parse().ok()?;
    session
        .starts_with("0x")
        .then(|| (session.to_string(), timeout))
}

/// Each session's ephemeral nodes in a ZooKeeper server's `dump` answer
/// (`DataTree.dumpEphemerals`: "Sessions with Ephemerals (N):", then per session a
/// `0x…:` line and its nodes' paths, each on a line of its own after a tab).
pub(crate) fn ephemerals_by_session(dump: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Some((_, rest)) = dump.split_once("Sessions with Ephemerals") else {
        return out;
    };
    let mut session: Option<String> = None;
    for line in rest.lines().skip(1) {
        let t = line.trim();
        if let Some(id) = t.strip_suffix(':').filter(|id| id.starts_with("0x")) {
            out.entry(id.to_string()).or_default();
            session = Some(id.to_string());
        } else if t.starts_with('/')
            && let Some(s) = &session
        {
            out.entry(s.clone()).or_default().push(t.to_string());
        } else if !t.is_empty() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zookeeper_expiry_line_and_a_dump_are_read_as_the_server_writes_them() {
        let line = "2026-12-07T19:10:00.123 [SessionTracker] INFO \
                    org.apache.zookeeper.server.ZooKeeperServer - Expiring session \
                    0x100004f2a3b0001, timeout of 300ms exceeded";
        assert_eq!(
            expiring_session(line),
            Some(("0x100004f2a3b0001".to_string(), 300))
        );
        assert_eq!(expiring_session("Expiring session soon"), None);
        let dump = "SessionTracker dump:\nSession Sets (2)/2:\n0 expire at ...\n\
                    ephemeral nodes dump:\nSessions with Ephemerals (2):\n\
                    0x100004f2a3b0001:\n\t/locks/stock/_c_ab-lock-0000000003\n\
                    0x100004f2a3b0002:\n\t/locks/stock/_c_cd-lock-0000000004\n\
                    Connections with Ephemerals (0):\n";
        let by = ephemerals_by_session(dump);
        assert_eq!(
            by["0x100004f2a3b0001"],
            ["/locks/stock/_c_ab-lock-0000000003"]
        );
        assert_eq!(by.len(), 2, "{by:?}");
    }

    #[test]
    fn a_log_is_read_line_by_line_as_it_grows() {
        let dir = std::env::temp_dir().join(format!("locksim-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("zk.log");
        std::fs::write(&log, "old\n").unwrap();
        let mut offset = std::fs::metadata(&log).unwrap().len();
        assert!(new_lines(&log, &mut offset).is_empty());
        std::fs::write(&log, "old\nfirst\nsec").unwrap();
        assert_eq!(new_lines(&log, &mut offset), ["first"]);
        std::fs::write(&log, "old\nfirst\nsecond\n").unwrap();
        assert_eq!(new_lines(&log, &mut offset), ["second"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
