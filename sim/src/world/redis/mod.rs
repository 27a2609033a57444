//! The Redis system: its servers (masters and replicas, [`ServerCtl`]), its Sentinels
//! ([`SentinelCtl`]) and the observer that keeps the nemesis's view of their records
//! ([`Observer`]), behind the world's [`LockSystem`] interface. Its part of a workload
//! is [`spec`]; the registry hands it over as a [`RedisSpec`].

pub(crate) mod observe;
pub(crate) mod sentinels;
pub(crate) mod servers;
pub mod spec;

use std::time::Duration;

use crate::recorder::Recorder;

use self::observe::Observer;
use self::sentinels::SentinelCtl;
use self::servers::ServerCtl;
use self::spec::{SentinelSpec, ServerSpec};
use super::system::{Build, LockSystem, LockWrite, SystemInfo, SystemSpec, WriteMoment};
use crate::pause::PauseGate;

/// A world's Redis servers and Sentinels.
pub(crate) struct RedisSystem {
    /// In world order (`Deps.servers` order).
    pub servers: Vec<ServerCtl>,
    pub sentinels: Vec<SentinelCtl>,
    pub observer: Observer,
}

impl RedisSystem {
    fn server(&self, name: &str) -> Option<&ServerCtl> {
        self.servers.iter().find(|s| s.name == name)
    }

    fn sentinel(&self, name: &str) -> Option<&SentinelCtl> {
        self.sentinels.iter().find(|s| s.name == name)
    }
}

/// A workload's Redis servers and Sentinels (the system's part of a workload).
pub(crate) struct RedisSpec<'w> {
    pub servers: &'w [ServerSpec],
    pub sentinel: Option<&'w SentinelSpec>,
}

impl<'w> RedisSpec<'w> {
    /// The spec, if it names any server or Sentinel (a world without Redis names none).
    pub fn of(servers: &'w [ServerSpec], sentinel: Option<&'w SentinelSpec>) -> Option<Self> {
        (!servers.is_empty() || sentinel.is_some()).then_some(RedisSpec { servers, sentinel })
    }
}

impl SystemSpec for RedisSpec<'_> {
    fn host_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.servers.iter().map(|s| s.name.clone()).collect();
        names.extend(spec::sentinel_names(self.sentinel));
        names
    }

    fn masters(&self) -> u32 {
        (self
            .servers
            .iter()
            .filter(|s| s.replica_of.is_none())
            .count() as u32)
            .max(1)
    }

    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let mut servers = Vec::new();
        for spec in self.servers {
            let ctl = ServerCtl::new(spec, b.trace_commands);
            let clock = (b.clock_of)(&spec.name, spec.clock.unwrap_or(b.server_clock));
            ctl.add_host(b.sim, clock, b.net);
            servers.push(ctl);
        }
        let mut sentinels = Vec::new();
        let monitored = spec::monitored(self.servers, self.sentinel);
        if let (Some(spec), Some(master)) = (self.sentinel, monitored) {
            let names = spec::sentinel_names(self.sentinel);
            // The replicas of the monitored master, as a running Sentinel's
            // configuration file lists them (`known-replica`).
            let replicas: Vec<String> = self
                .servers
                .iter()
                .filter(|s| s.replica_of.as_deref() == Some(master))
                .map(|s| s.name.clone())
                .collect();
            for i in 1..=names.len() {
                let ctl = SentinelCtl::new(spec, &names, i, master, &replicas, b.seed);
                let clock = (b.clock_of)(&names[i - 1], b.server_clock);
                ctl.add_host(b.sim, clock, b.net);
                sentinels.push(ctl);
            }
        }
        Box::new(RedisSystem {
            servers,
            sentinels,
            observer: Observer::default(),
        })
    }
}

impl LockSystem for RedisSystem {
    fn hosts(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| s.name.clone())
            .chain(self.sentinels.iter().map(|s| s.name.clone()))
            .collect()
    }

    fn servers(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        match (self.server(host), self.sentinel(host)) {
            (Some(s), _) => Some(s.gate.clone()),
            (None, Some(s)) => Some(s.gate.clone()),
            (None, None) => None,
        }
    }

    fn lock_owner(&self, key: &str) -> Option<String> {
        self.observer.owner_of(&self.servers, key)
    }

    fn lock_server(&self, key: &str) -> Option<String> {
        self.observer.server_holding(&self.servers, key)
    }

    fn server_holding_value(&self, key: &str, value: &str) -> Option<String> {
        self.observer
            .server_holding_value(&self.servers, key, value)
    }

    fn lock_writers(&self, key: &str) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| self.observer.writer_on(&s.name, key).map(String::from))
            .collect()
    }

    /// The master whose record holds the lock key with replicas attached, the offset
    /// of its last lock write and a description; for the unreplicated moment, only if
    /// the write is at a replication offset that no replica has acknowledged (by the
    /// master's record) or received (by the replicas' own offsets), and no replica
    /// holds the key at all.
    fn lock_write(&self, key: &str, recorder: &Recorder, moment: WriteMoment) -> Option<LockWrite> {
        let unreplicated = moment == WriteMoment::Unreplicated;
        for server in &self.servers {
            if !self.observer.holds(&server.name, key) {
                continue;
            }
            let Some(engine) = server.engine() else {
                continue;
            };
            let found = engine.with_engine(|e| {
                let repl = e.engine.replication();
                if repl.role != crate::redis::replication::Role::Master || repl.replicas.is_empty()
                {
                    return None;
                }
                // A write made before any replica connected went into no stream (offset
                // 0): it is not a moment of replication.
                let written = e.engine.write_offset(key).filter(|w| *w > 0)?;
                let acked = repl
                    .replicas
                    .values()
                    .map(|r| r.ack_offset)
                    .max()
                    .unwrap_or(0);
                (!unreplicated || acked < written).then(|| {
                    let acks: Vec<String> = repl
                        .replicas
                        .values()
                        .map(|r| format!("{}={}", r.ip, r.ack_offset))
                        .collect();
                    (written, acks.join(" "))
                })
            });
            let Some((written, acks)) = found else {
                continue;
            };
            // A fresh grant counts once it is in the client's hands: the history shows the
            // writer holding the lock (its acquire completed, `WAIT` included).
            if !unreplicated
                && !self
                    .observer
                    .writer_on(&server.name, key)
                    .is_some_and(|w| recorder.holders().iter().any(|h| h == w))
            {
                continue;
            }
            // What the replicas themselves have applied: the write must not have reached
            // any of them yet.
            let mut applied = Vec::new();
            for r in &self.servers {
                let Some(e) = r.engine() else { continue };
                let offset = e.with_engine(|e| {
                    let repl = e.engine.replication();
                    match &repl.role {
                        crate::redis::replication::Role::Replica { host, .. }
                            if *host == server.name =>
                        {
                            Some(repl.offset)
                        }
                        _ => None,
                    }
                });
                if let Some(o) = offset {
                    applied.push((r.name.clone(), o));
                }
            }
            // ... and none of them holds the lock key at all: promoted, it would grant the
            // lock afresh (a replica that still holds an older grant would only block).
            if unreplicated
                && applied
                    .iter()
                    .any(|(name, o)| *o >= written || self.observer.holds(name, key))
            {
                continue;
            }
            let applied: Vec<String> = applied.iter().map(|(n, o)| format!("{n}={o}")).collect();
            return Some(LockWrite {
                server: server.name.clone(),
                detail: format!(
                    "lock write at offset {written}; acknowledged: {acks}; applied: {}",
                    applied.join(" ")
                ),
                position: written,
            });
        }
        None
    }

    fn crashed(&mut self, host: &str, machine: bool, now: Duration, recorder: &Recorder) {
        if let Some(sentinel) = self.sentinel(host) {
            sentinel.crash();
        }
        if let Some(server) = self.server(host).cloned() {
            if let Some(engine) = server.engine() {
                self.observer.commands_of_dead_engines +=
                    engine.with_engine(|e| e.engine.commands_processed());
            }
            server.crash(machine);
            if !server.persists() {
                // Without persistence the memory was all there was; with it, what came
                // back is compared with the record at restart.
                self.observer.lose_all(host, recorder, now);
            }
        }
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        self.observer.drain(&self.servers, recorder, now);
        self.observer
            .drain_sentinels(&self.sentinels, recorder, now);
    }

    fn drop_notifications(&self, drop: bool) -> Option<String> {
        for server in &self.servers {
            server.set_drop_pushes(drop);
        }
        self.servers.first().map(|s| s.name.clone())
    }

    fn commands_processed(&self) -> u64 {
        self.observer.commands_of_dead_engines
            + self
                .servers
                .iter()
                .filter_map(|s| s.engine())
                .map(|e| e.with_engine(|e| e.engine.commands_processed()))
                .sum::<u64>()
    }
}

/// Redis's record.
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::Redis,
    capabilities: servers::REDIS_CAPABILITIES,
};
