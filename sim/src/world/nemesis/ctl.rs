//! The world's handles the nemesis reaches: each client's pause gate and fault
//! switches, the servers and Sentinels, the links, the clocks, the record and the
//! observer's view of the servers.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::net::NetFaults;
use crate::recorder::Recorder;

use crate::world::system::Systems;

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
    /// The lock-server systems, in world order.
    pub systems: Systems,
    /// Every host's clock, by host name.
    pub clocks: BTreeMap<String, crate::clock::HostClock>,
    /// The lock key (for the targets that follow the server's record).
    pub key: String,
    /// The longest one-way latency plus a tick: a reply sent that long ago has reached
    /// its client.
    pub reply_delay: Duration,
}

impl WorldCtl {
    /// The lock servers of every system.
    pub(super) fn server_names(&self) -> Vec<String> {
        self.systems.servers()
    }

    pub(super) fn is_host(&self, name: &str) -> bool {
        self.clients.contains_key(name) || self.systems.hosts().iter().any(|h| h == name)
    }

    /// The pause gate of `host`: a client's or any system's.
    pub(super) fn gate(&self, host: &str) -> Option<crate::pause::PauseGate> {
        match self.clients.get(host) {
            Some(c) => Some(c.gate.clone()),
            None => self.systems.gate(host),
        }
    }

    /// Drains every system's record now (before a memory goes).
    pub fn observe(&mut self, now: Duration) {
        self.systems.drain(&self.recorder, now);
    }
}
