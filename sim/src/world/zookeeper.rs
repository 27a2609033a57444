//! The world's ZooKeeper server: its host (the model of `crate::zk`, run as
//! `crate::zk::zk_host` runs it, with every accepted connection wrapped by the
//! link-fault registry as a Redis server's is, so a crashed client's connections reset
//! on both ends and its bytes still in flight are never read) and the observation that
//! moves its record into the history.
//!
//! Recorded as server events, at true time: every session created, expired (with the
//! ephemeral nodes it took) or closed (`ZkSession`); every create and delete of a node
//! under the lock's directory (`ZkNode`); and the lock as the server's record says it
//! is held, in the terms every checker reads: the lowest-sequence child of the lock's
//! directory is the key's value (`Written` by its creator's host when it becomes the
//! lowest, `Removed` when it goes: `command` for a client's delete, `expired` when its
//! session expired). So `belief`, `ownership` and `liveness` judge a ZooKeeper lock
//! by the same server record as a Redis one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::designs::ZK_LOCK_ROOT;

use crate::clock::HostClock;
use crate::history::{EventKind, ServerEvent};
use crate::net::NetFaults;
use crate::recorder::Recorder;
use crate::zk::tree::TxnBody;
use crate::zk::{SharedZk, ZK_PORT, ZkConfig, serve_connection, session_tracker};

use super::config::ZkSpec;

/// The ZooKeeper host's handle: the running server (replaced by a restart) and what
/// the observer has already moved into the history.
pub(crate) struct ZkCtl {
    pub name: String,
    slot: Arc<Mutex<Option<SharedZk>>>,
    /// The lock's directory (`/locksim/<key>`).
    dir: String,
    /// Txns of the running server already seen.
    seen: usize,
    /// Session → (client host, timeout).
    sessions: BTreeMap<i64, (String, u32)>,
    /// Sessions that expired (not closed).
    expired: std::collections::BTreeSet<i64>,
    /// The lock directory's children: path → owner session.
    children: BTreeMap<String, i64>,
    /// The lowest child, as last recorded (path, creator host).
    holder: Option<(String, String)>,
}

fn session_name(id: i64) -> String {
    format!("0x{id:x}")
}

/// A lock node's sequence number (the ten digits after `-lock-`).
fn sequence(path: &str) -> Option<u64> {
    path.rsplit_once("-lock-")?.1.parse().ok()
}

impl ZkCtl {
    pub fn new(spec: &ZkSpec, key: &str) -> Self {
        ZkCtl {
            name: spec.name.clone(),
            slot: Arc::default(),
            dir: format!("{ZK_LOCK_ROOT}/{key}"),
            seen: 0,
            sessions: BTreeMap::new(),
            expired: Default::default(),
            children: BTreeMap::new(),
            holder: None,
        }
    }

    /// Adds the host to the simulation.
    pub fn add_host(
        &self,
        sim: &mut turmoil::Sim<'_>,
        spec: &ZkSpec,
        clock: HostClock,
        net: &NetFaults,
    ) {
        let config = ZkConfig {
            tick_time_ms: spec.tick_time_ms,
            ..ZkConfig::default()
        };
        let (slot, net, name) = (self.slot.clone(), net.clone(), self.name.clone());
        sim.host(spec.name.as_str(), move || {
            let (slot, net, name, clock) = (slot.clone(), net.clone(), name.clone(), clock.clone());
            async move {
                // A fresh server on every start (no snapshot or txn log yet).
                let shared = SharedZk::new(config, Arc::new(clock));
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
                let listener =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ZK_PORT))
                        .await?;
                tokio::task::spawn_local(session_tracker(shared.clone()));
                loop {
                    let Ok((stream, addr)) = listener.accept().await else {
                        continue;
                    };
                    let peer =
                        turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                    let stream = net.wrap(stream, &name, &peer);
                    tokio::task::spawn_local(serve_connection(shared.clone(), stream, peer));
                }
            }
        });
    }

    /// Whether the server's record has the lock held (the directory has a child).
    pub fn holds(&self) -> bool {
        self.holder.is_some()
    }

    /// The lock holder's host, by the server's record.
    pub fn owner(&self) -> Option<&str> {
        self.holder.as_ref().map(|(_, h)| h.as_str())
    }

    /// Moves the server's new sessions and txns into the history at `now`.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        let Some(shared) = self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        let at = now.as_micros() as u64;
        let (events, txns) = shared.with(|s, _| {
            let log = s.log();
            let new = log.get(self.seen..).unwrap_or_default().to_vec();
            (s.take_events(), new)
        });
        self.seen += txns.len();
        let name = self.name.clone();
        let record = |kind: ServerEvent| {
            recorder.record_at(at, &name, EventKind::Server(kind));
        };
        for event in events {
            match event {
                crate::zk::ServerEvent::SessionCreated {
                    session_id,
                    peer,
                    timeout_ms,
                } => {
                    self.sessions.insert(session_id, (peer.clone(), timeout_ms));
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client: peer,
                        event: "created".into(),
                        timeout_ms,
                        ephemerals: Vec::new(),
                    });
                }
                crate::zk::ServerEvent::SessionExpired {
                    session_id,
                    ephemerals,
                } => {
                    self.expired.insert(session_id);
                    let (client, timeout_ms) =
                        self.sessions.get(&session_id).cloned().unwrap_or_default();
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client,
                        event: "expired".into(),
                        timeout_ms,
                        ephemerals,
                    });
                }
                crate::zk::ServerEvent::SessionClosed { session_id } => {
                    let (client, timeout_ms) =
                        self.sessions.get(&session_id).cloned().unwrap_or_default();
                    let ephemerals = self
                        .children
                        .iter()
                        .filter(|(_, s)| **s == session_id)
                        .map(|(p, _)| p.clone())
                        .collect();
                    record(ServerEvent::ZkSession {
                        session: session_name(session_id),
                        client,
                        event: "closed".into(),
                        timeout_ms,
                        ephemerals,
                    });
                }
            }
        }
        let prefix = format!("{}/", self.dir);
        for txn in txns {
            let host_of = |s: i64, sessions: &BTreeMap<i64, (String, u32)>| -> String {
                sessions.get(&s).map(|(h, _)| h.clone()).unwrap_or_default()
            };
            match txn.body {
                TxnBody::Create {
                    path,
                    ephemeral_owner,
                    ..
                } if path.starts_with(&prefix) => {
                    let owner = if ephemeral_owner != 0 {
                        ephemeral_owner
                    } else {
                        txn.session_id
                    };
                    self.children.insert(path.clone(), owner);
                    record(ServerEvent::ZkNode {
                        by: host_of(txn.session_id, &self.sessions),
                        session: session_name(txn.session_id),
                        path,
                        op: "created".into(),
                    });
                    self.update_holder(recorder, at, "command");
                }
                TxnBody::Delete { path } if self.children.contains_key(&path) => {
                    self.children.remove(&path);
                    record(ServerEvent::ZkNode {
                        by: host_of(txn.session_id, &self.sessions),
                        session: session_name(txn.session_id),
                        path,
                        op: "deleted".into(),
                    });
                    self.update_holder(recorder, at, "command");
                }
                TxnBody::CloseSession => {
                    let gone: Vec<String> = self
                        .children
                        .iter()
                        .filter(|(_, s)| **s == txn.session_id)
                        .map(|(p, _)| p.clone())
                        .collect();
                    for path in gone {
                        self.children.remove(&path);
                        record(ServerEvent::ZkNode {
                            by: host_of(txn.session_id, &self.sessions),
                            session: session_name(txn.session_id),
                            path,
                            op: "deleted-with-session".into(),
                        });
                    }
                    let cause = if self.expired.contains(&txn.session_id) {
                        "expired"
                    } else {
                        "command"
                    };
                    self.update_holder(recorder, at, cause);
                }
                _ => {}
            }
        }
    }

    /// Records a change of the lowest child as the key's removal and write.
    fn update_holder(&mut self, recorder: &Recorder, at: u64, cause: &str) {
        let lowest = self
            .children
            .iter()
            .min_by_key(|(p, _)| (sequence(p).unwrap_or(u64::MAX), (*p).clone()))
            .map(|(p, s)| {
                let host = self.sessions.get(s).map(|(h, _)| h.clone());
                (p.clone(), host.unwrap_or_default())
            });
        if lowest == self.holder {
            return;
        }
        let key = self
            .dir
            .strip_prefix(&format!("{ZK_LOCK_ROOT}/"))
            .unwrap_or(&self.dir)
            .to_string();
        if let Some((path, host)) = self.holder.take() {
            let by = if cause == "expired" {
                "expiry".to_string()
            } else {
                host
            };
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Removed {
                    by,
                    key: key.clone(),
                    value: path,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((path, host)) = &lowest {
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key,
                    value: path.clone(),
                }),
            );
        }
        self.holder = lowest;
    }
}
