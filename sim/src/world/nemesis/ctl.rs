//! The world's handles the nemesis reaches: each client's pause gate and fault
//! switches, the servers and Sentinels, the links, the clocks, the record and the
//! observer's view of the servers.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::net::NetFaults;
use crate::recorder::Recorder;

use crate::world::observe::Observer;
use crate::world::servers::ServerCtl;

/// Per-client handles the nemesis reaches into.
pub(crate) struct ClientCtl {
    pub gate: crate::pause::PauseGate,
    /// Extra critical-section time for the next hold (slow-work faults).
    pub slow_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A pause armed for the next write (fault index, duration).
    pub pause_before_write: crate::world::client::PauseBeforeWrite,
}

/// Everything in the world the nemesis can hurt, and what it aims with.
pub(crate) struct WorldCtl {
    pub recorder: Recorder,
    pub net: NetFaults,
    pub clients: BTreeMap<String, ClientCtl>,
    /// In world order (`Deps.servers` order).
    pub servers: Vec<ServerCtl>,
    /// The Sentinels, if any.
    pub sentinels: Vec<crate::world::sentinels::SentinelCtl>,
    /// The ZooKeeper server, if any.
    pub zk: Option<crate::world::zookeeper::ZkCtl>,
    /// The MySQL server, if any.
    pub mysql: Option<crate::world::mysql::MySqlCtl>,
    /// The MongoDB replica set, if any.
    pub mongo: Option<crate::world::mongo::MongoCtl>,
    pub observer: Observer,
    /// Every host's clock, by host name.
    pub clocks: BTreeMap<String, crate::clock::HostClock>,
    /// The lock key (for the targets that follow the server's record).
    pub key: String,
    /// The longest one-way latency plus a tick: a reply sent that long ago has reached
    /// its client.
    pub reply_delay: Duration,
}

impl WorldCtl {
    pub(super) fn server(&self, name: &str) -> Option<&ServerCtl> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// The lock servers: the Redis servers, the ZooKeeper server and the MySQL server.
    pub(super) fn server_names(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| s.name.clone())
            .chain(self.zk.iter().flat_map(|z| z.names.clone()))
            .chain(self.mysql.iter().flat_map(|m| m.names()))
            .chain(
                self.mongo
                    .iter()
                    .flat_map(|m| m.names().map(String::from).collect::<Vec<_>>()),
            )
            .collect()
    }

    pub(super) fn sentinel(&self, name: &str) -> Option<&crate::world::sentinels::SentinelCtl> {
        self.sentinels.iter().find(|s| s.name == name)
    }

    pub(super) fn is_host(&self, name: &str) -> bool {
        self.clients.contains_key(name)
            || self.server(name).is_some()
            || self.sentinel(name).is_some()
            || self
                .zk
                .as_ref()
                .is_some_and(|z| z.names.iter().any(|n| n == name))
            || self
                .mysql
                .as_ref()
                .is_some_and(|m| m.names().iter().any(|n| n == name))
            || self
                .mongo
                .as_ref()
                .is_some_and(|m| m.names().any(|n| n == name))
    }

    /// Drains every server's and Sentinel's record now (before a memory goes).
    pub fn observe(&mut self, now: Duration) {
        self.observer.drain(&self.servers, &self.recorder, now);
        self.observer
            .drain_sentinels(&self.sentinels, &self.recorder, now);
        if let Some(zk) = &mut self.zk {
            zk.drain(&self.recorder, now);
        }
        if let Some(mysql) = &mut self.mysql {
            mysql.drain(&self.recorder, now);
        }
        if let Some(mongo) = &mut self.mongo {
            mongo.drain(&self.recorder, now);
        }
    }
}
