//! The world's MySQL server: its host (the MariaDB model of `crate::mysql`, every
//! accepted connection wrapped by the link-fault registry as a Redis server's is, so
//! a crashed client's or a reset link's connections end on both sides and the server
//! releases what they held) and the observation that moves its record into the
//! history.
//!
//! Recorded as server events, at true time: every connection logged in and ended
//! (`MySqlConnection`, with the user locks its end released), and the lock as the
//! server's record says it is held, in the terms every checker reads:
//! - `mysql-unique-index` and the other row designs (a table with an `owner` column): a
//!   committed row named by the key is the key's value (its `owner`): `Written` by the
//!   inserting connection's host, `Removed` (`command`) by the deleting one's; an
//!   `UPDATE` that changes the owner is a takeover, which the designs only make of a
//!   row whose `expires_at` the taker's clock has passed: `Removed` (`expired`, by
//!   `expiry`: the lease ran out, by a client's clock) then `Written`; one that empties
//!   the owner (a release that keeps the row) `Removed` (`command`);
//! - `mysql-for-update`: the row lock on the key's row, held by a transaction, is the
//!   key's value `connection-<id>` (the holding connection, as the guard names it):
//!   `Written` when locked, `Removed` (`command`) when its transaction ended, `Removed`
//!   (`connection-closed`) when its connection ended and rolled it back;
//! - `mysql-get-lock`: the user lock named by the key is the key's value
//!   `connection-<id>` (the holder's connection, which the design's guard names too):
//!   `Written` when taken, `Removed` (`command`) on `RELEASE_LOCK`, `Removed`
//!   (`connection-closed`, by `connection-closed`) when its connection ended.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::history::{EventKind, ServerEvent};
use crate::mysql::{
    ConnId, MYSQL_PORT, MySqlConfig, ServerEvent as MyEvent, SharedMySql, serve_connection,
};
use crate::net::NetFaults;
use crate::recorder::Recorder;

use super::config::MySqlSpec;

/// The owner value of a `GET_LOCK` held by connection `id` (the guard's owner too).
pub fn get_lock_owner(id: ConnId) -> String {
    lock_impl::designs::get_lock_owner(id)
}

/// The MySQL host's handle: the running server and what the observer has seen.
pub(crate) struct MySqlCtl {
    pub name: String,
    slot: Arc<Mutex<Option<SharedMySql>>>,
    key: String,
    /// Connection → client host.
    hosts: BTreeMap<ConnId, String>,
    /// The key's holder by the server's record: (value, host).
    holder: Option<(String, String)>,
}

impl MySqlCtl {
    pub fn new(spec: &MySqlSpec, key: &str) -> Self {
        MySqlCtl {
            name: spec.name.clone(),
            slot: Arc::default(),
            key: key.to_string(),
            hosts: BTreeMap::new(),
            holder: None,
        }
    }

    /// Adds the host to the simulation.
    pub fn add_host(
        &self,
        sim: &mut turmoil::Sim<'_>,
        spec: &MySqlSpec,
        seed: u64,
        net: &NetFaults,
    ) {
        let config = MySqlConfig {
            user: spec.user.clone(),
            password: spec.password.clone(),
            database: spec.database.clone(),
            seed,
            wait_timeout_s: spec.wait_timeout_s,
            ..MySqlConfig::default()
        };
        let (slot, net, name) = (self.slot.clone(), net.clone(), self.name.clone());
        sim.host(spec.name.as_str(), move || {
            let (slot, net, name, config) =
                (slot.clone(), net.clone(), name.clone(), config.clone());
            async move {
                // A fresh server on every start (nothing on disk is modelled yet).
                let shared = SharedMySql::new(config);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
                let listener =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, MYSQL_PORT))
                        .await?;
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

    /// Whether the server's record has the lock held.
    pub fn holds(&self) -> bool {
        self.holder.is_some()
    }

    /// The lock holder's host, by the server's record.
    pub fn owner(&self) -> Option<&str> {
        self.holder.as_ref().map(|(_, h)| h.as_str())
    }

    /// Moves the server's new events into the history at `now`.
    pub fn drain(&mut self, recorder: &Recorder, now: Duration) {
        let Some(shared) = self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        let at = now.as_micros() as u64;
        let events = shared.with(|m| m.take_events());
        let name = self.name.clone();
        let record = |kind: ServerEvent| recorder.record_at(at, &name, EventKind::Server(kind));
        for event in events {
            match event {
                MyEvent::Connected { conn, host } => {
                    self.hosts.insert(conn, host.clone());
                    record(ServerEvent::MySqlConnection {
                        connection: conn,
                        client: host,
                        event: "opened".into(),
                        released: Vec::new(),
                        row_locks: Vec::new(),
                    });
                }
                MyEvent::Disconnected {
                    conn,
                    host,
                    released,
                    row_locks,
                } => {
                    let lost = released.contains(&self.key) || row_locks.contains(&self.key);
                    record(ServerEvent::MySqlConnection {
                        connection: conn,
                        client: host.clone(),
                        event: "closed".into(),
                        released,
                        row_locks,
                    });
                    if lost {
                        self.set_holder(recorder, at, None, "connection-closed");
                    }
                }
                MyEvent::Inserted {
                    conn,
                    name,
                    owner: Some(owner),
                    ..
                } if name == self.key => {
                    let host = self.hosts.get(&conn).cloned().unwrap_or_default();
                    self.set_holder(recorder, at, Some((owner, host)), "command");
                }
                MyEvent::Deleted {
                    conn,
                    name,
                    owner: Some(_),
                    ..
                } if name == self.key => {
                    let by = self.hosts.get(&conn).cloned().unwrap_or_default();
                    self.set_holder(recorder, at, None, &by);
                }
                MyEvent::Updated {
                    conn,
                    name,
                    before: Some(before),
                    owner: Some(owner),
                    ..
                } if name == self.key && before != owner => {
                    let by = self.hosts.get(&conn).cloned().unwrap_or_default();
                    if owner.is_empty() {
                        // A release that keeps the row.
                        self.set_holder(recorder, at, None, &by);
                    } else {
                        if !before.is_empty() {
                            self.set_holder(recorder, at, None, "expiry");
                        }
                        self.set_holder(recorder, at, Some((owner, by)), "command");
                    }
                }
                MyEvent::LockTaken { conn, name } if name == self.key => {
                    let host = self.hosts.get(&conn).cloned().unwrap_or_default();
                    self.set_holder(recorder, at, Some((get_lock_owner(conn), host)), "command");
                }
                MyEvent::RowLocked { conn, name, .. } if name == self.key => {
                    let host = self.hosts.get(&conn).cloned().unwrap_or_default();
                    self.set_holder(recorder, at, Some((get_lock_owner(conn), host)), "command");
                }
                MyEvent::LockReleased { conn, name } | MyEvent::RowUnlocked { conn, name, .. }
                    if name == self.key =>
                {
                    let by = self.hosts.get(&conn).cloned().unwrap_or_default();
                    self.set_holder(recorder, at, None, &by);
                }
                _ => {}
            }
        }
    }

    /// Records the end of the current hold (`how`: the releasing host,
    /// `connection-closed`, or `expiry`) and the start of `next`.
    fn set_holder(
        &mut self,
        recorder: &Recorder,
        at: u64,
        next: Option<(String, String)>,
        how: &str,
    ) {
        if let Some((value, host)) = self.holder.take()
            && next.is_none()
        {
            let (by, cause) = if how == "connection-closed" {
                ("connection-closed".to_string(), "connection-closed")
            } else if how == "expiry" {
                ("expiry".to_string(), "expired")
            } else if how == "command" {
                (host, "command")
            } else {
                (how.to_string(), "command")
            };
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Removed {
                    by,
                    key: self.key.clone(),
                    value,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((value, host)) = &next {
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key: self.key.clone(),
                    value: value.clone(),
                }),
            );
        }
        if next.is_some() {
            self.holder = next;
        }
    }
}
