//! A ZooKeeper ensemble's own record in a real run, read off its servers: each
//! session's expiry by the line its server logs, each session's ephemeral nodes by the
//! servers' `dump`, and the members' roles by `srvr`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::history::{Event, EventKind, ServerEvent};

use crate::real::system::Sink;

/// The expiries the session watcher read, kept for [`record_expiries`].
pub(super) type Expiries = Arc<Mutex<Vec<ZkExpiry>>>;

/// A ZooKeeper server's own record of the sessions it expires: the line it logs when
/// its session tracker expires one (`ZooKeeperServer.expire`: "Expiring session 0x…,
/// timeout of N ms exceeded"), read off each server's log every 20 ms and stamped when
/// read (at most one poll after the server wrote it); and each session's ephemeral
/// nodes by the servers' `dump` answer, every 100 ms, which name the nodes an expiry
/// deletes and, by the lock node a client was granted, the session's client.
pub(super) fn watch_sessions(
    sink: &dyn Sink,
    zk: &[(String, SocketAddr, PathBuf)],
    out: &Expiries,
) {
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
        let over = sink.over();
        for (name, _, log) in zk {
            let offset = offsets.entry(name.as_str()).or_default();
            for line in new_lines(log, offset) {
                let Some((session, timeout_ms)) = expiring_session(&line) else {
                    continue;
                };
                let at_us = sink.now_us();
                out.lock().expect("zk expiries").push(ZkExpiry {
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
pub(super) fn record_expiries(expiries: &Expiries, events: &mut Vec<Event>) {
    let expiries = std::mem::take(&mut *expiries.lock().expect("zk expiries"));
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
        found.push(Event {
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
pub(super) fn watch_roles(sink: &dyn Sink, zk: &[(String, SocketAddr)]) {
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let over = sink.over();
        let modes: Vec<(String, Option<(String, u64)>)> =
            zk.iter().map(|(n, a)| (n.clone(), mode_at(*a))).collect();
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
            sink.note_role(&mut last, n, role);
        }
        if over {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A ZooKeeper server's mode and epoch by its own answer (`srvr`: `Mode: leader`,
/// `Zxid: 0x<epoch><counter>`); `None` if it does not answer (down, or not serving).
fn mode_at(addr: SocketAddr) -> Option<(String, u64)> {
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

/// A ZooKeeper session's expiry as a real server logged it (see
/// [`watch_sessions`]).
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
