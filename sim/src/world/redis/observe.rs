//! Observation: moving each server's own record of key changes into the history, and
//! keeping the little view of it the nemesis aims with (which server holds the lock
//! key, and whose value it is).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::history::{EventKind, ServerEvent};
use crate::recorder::Recorder;
use crate::redis::{KeyCause, KeyEvent};

use super::servers::ServerCtl;

/// What each server's record says it holds: server → key → (value, writer host).
#[derive(Debug, Default)]
pub(crate) struct Observer {
    keys: BTreeMap<String, BTreeMap<String, (String, String)>>,
    /// Commands executed by engines that have since died (their counters died too).
    pub commands_of_dead_engines: u64,
    /// Each server's replication role when last seen (`master`, `replica of X`).
    roles: BTreeMap<String, String>,
}

/// A server's role as the history names it.
pub(crate) fn role_name(role: &crate::redis::replication::Role) -> String {
    match role {
        crate::redis::replication::Role::Master => "master".into(),
        crate::redis::replication::Role::Replica { host, .. } => format!("replica of {host}"),
    }
}

impl Observer {
    /// Moves every server's key events into the history at true time `now` (the time
    /// the hosts saw during the tick that produced them).
    pub fn drain(&mut self, servers: &[ServerCtl], recorder: &Recorder, now: Duration) {
        for server in servers {
            let Some(engine) = server.engine() else {
                continue;
            };
            // The role's name is built only when it may have changed (this runs at
            // every step of every world).
            let known = self.roles.get(&server.name);
            let (commands, events, role, dropped) = engine.with_engine(|e| {
                let role = &e.engine.replication().role;
                let changed = match role {
                    crate::redis::replication::Role::Master => known.is_none_or(|k| k != "master"),
                    crate::redis::replication::Role::Replica { host, .. } => known
                        .and_then(|k| k.strip_prefix("replica of "))
                        .is_none_or(|k| k != host.as_str()),
                };
                let role = changed.then(|| role_name(role));
                (
                    e.engine.take_commands(),
                    e.engine.take_key_events(),
                    role,
                    e.engine.take_dropped(),
                )
            });
            // A tick's commands before what they changed.
            for (by, command) in commands {
                recorder.record_at(
                    now.as_micros() as u64,
                    &server.name,
                    EventKind::Server(ServerEvent::Command { by, command }),
                );
            }
            self.record(&server.name, events, recorder, now);
            for channel in dropped {
                recorder.record_at(
                    now.as_micros() as u64,
                    &server.name,
                    EventKind::Server(ServerEvent::MessageDropped { channel }),
                );
            }
            // Each server's role is recorded when first seen (its role at the start)
            // and at every change, so a checker knows at every moment which servers
            // are masters (who a client needs).
            if let Some(role) = role
                && self.roles.get(&server.name) != Some(&role)
            {
                self.roles.insert(server.name.clone(), role.clone());
                recorder.record_at(
                    now.as_micros() as u64,
                    &server.name,
                    EventKind::Server(ServerEvent::Role { role }),
                );
            }
            if server.take_reloaded() {
                let state = engine.with_engine(|e| e.engine.dump());
                self.reconcile(&server.name, state, recorder, now);
            }
        }
    }

    fn record(&mut self, server: &str, events: Vec<KeyEvent>, recorder: &Recorder, now: Duration) {
        if events.is_empty() {
            return;
        }
        let at_us = now.as_micros() as u64;
        let held = self.keys.entry(server.to_string()).or_default();
        for event in events {
            let kind = match event {
                KeyEvent::Written { by, key, value, .. } => {
                    held.insert(key.clone(), (value.clone(), by.clone()));
                    ServerEvent::Written { by, key, value }
                }
                KeyEvent::ExpireSet {
                    by, key, ttl_ms, ..
                } => ServerEvent::ExpireSet { by, key, ttl_ms },
                KeyEvent::FieldRemoved { by, key, field, .. } => {
                    ServerEvent::FieldRemoved { by, key, field }
                }
                KeyEvent::Removed {
                    by,
                    key,
                    value,
                    cause,
                    ..
                } => {
                    held.remove(&key);
                    ServerEvent::Removed {
                        by,
                        key,
                        value,
                        cause: match cause {
                            KeyCause::Command => "command",
                            KeyCause::Expired => "expired",
                            KeyCause::Overwritten => "overwritten",
                            KeyCause::Flushed => "flushed",
                            KeyCause::Resync => "resync",
                        }
                        .into(),
                    }
                }
            };
            recorder.record_at(at_us, server, EventKind::Server(kind));
        }
    }

    /// Moves every Sentinel's log into the history at true time `now`.
    pub fn drain_sentinels(
        &mut self,
        sentinels: &[super::sentinels::SentinelCtl],
        recorder: &Recorder,
        now: Duration,
    ) {
        for s in sentinels {
            for e in s.take_events() {
                recorder.record_at(
                    now.as_micros() as u64,
                    &s.name,
                    EventKind::Sentinel {
                        event: e.kind,
                        detail: e.detail,
                    },
                );
            }
        }
    }

    /// The host whose value `key` holds on `server`, by its record.
    pub fn writer_on(&self, server: &str, key: &str) -> Option<&str> {
        self.keys.get(server)?.get(key).map(|(_, by)| by.as_str())
    }

    /// Whether `server`'s record holds `key`.
    pub fn holds(&self, server: &str, key: &str) -> bool {
        self.keys.get(server).is_some_and(|k| k.contains_key(key))
    }

    /// The server lost its memory (a crash without persistence): every key its record
    /// showed is recorded as removed, cause `lost`, by the server itself.
    pub fn lose_all(&mut self, server: &str, recorder: &Recorder, now: Duration) {
        let at_us = now.as_micros() as u64;
        for (key, (value, _)) in std::mem::take(self.keys.entry(server.to_string()).or_default()) {
            record_lost(recorder, at_us, server, key, value);
        }
    }

    /// A server started again from its disk: compare what came back with what its
    /// record held before the crash. Keys that did not come back (or came back with
    /// another value) are recorded as removed, cause `lost`; keys that came back with
    /// another value, or that the record did not hold, as written by the server itself.
    fn reconcile(
        &mut self,
        server: &str,
        state: crate::redis::persistence::State,
        recorder: &Recorder,
        now: Duration,
    ) {
        let at_us = now.as_micros() as u64;
        let held = self.keys.entry(server.to_string()).or_default();
        let back: BTreeMap<String, String> = state
            .into_iter()
            .filter(|(db, _, _)| *db == 0)
            .map(|(_, k, e)| (String::from_utf8_lossy(&k).into_owned(), e.value.describe()))
            .collect();
        let lost: Vec<(String, String)> = held
            .iter()
            .filter(|(k, (v, _))| back.get(*k) != Some(v))
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        for (key, value) in lost {
            held.remove(&key);
            record_lost(recorder, at_us, server, key, value);
        }
        for (key, value) in back {
            if held.contains_key(&key) {
                continue;
            }
            held.insert(key.clone(), (value.clone(), server.to_string()));
            recorder.record_at(
                at_us,
                server,
                EventKind::Server(ServerEvent::Written {
                    by: server.to_string(),
                    key,
                    value,
                }),
            );
        }
    }

    /// The host whose value `key` holds on the first server (in world order) whose
    /// record has it.
    pub fn owner_of(&self, servers: &[ServerCtl], key: &str) -> Option<String> {
        servers
            .iter()
            .find_map(|s| self.keys.get(&s.name)?.get(key).map(|(_, by)| by.clone()))
    }

    /// The first server (in world order) whose record holds `key` with `value`.
    pub fn server_holding_value(
        &self,
        servers: &[ServerCtl],
        key: &str,
        value: &str,
    ) -> Option<String> {
        servers
            .iter()
            .find(|s| {
                self.keys
                    .get(&s.name)
                    .and_then(|k| k.get(key))
                    .is_some_and(|(v, _)| v == value)
            })
            .map(|s| s.name.clone())
    }

    /// The first server (in world order) whose record holds `key`.
    pub fn server_holding(&self, servers: &[ServerCtl], key: &str) -> Option<String> {
        servers
            .iter()
            .find(|s| self.keys.get(&s.name).is_some_and(|k| k.contains_key(key)))
            .map(|s| s.name.clone())
    }
}

/// Records that `server` lost `key` (holding `value`) in a crash: removed by the
/// server itself, cause `lost`.
fn record_lost(recorder: &Recorder, at_us: u64, server: &str, key: String, value: String) {
    recorder.record_at(
        at_us,
        server,
        EventKind::Server(ServerEvent::Removed {
            by: server.to_string(),
            key,
            value,
            cause: "lost".into(),
        }),
    );
}
