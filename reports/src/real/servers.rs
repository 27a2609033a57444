//! The real servers of one world, whatever their systems: each system's servers
//! started by its plugin ([`super::systems`]) on loopback, in the world's topology,
//! each server a child process of the parent (killed with it, whatever ends it) with
//! its own directory, port and log. The runner asks them here, by role (the server
//! holding the lock, the lock's owner, the leader), and each system answers in its own
//! words.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use lock_impl::Backend;
use sim::history::Event;
use sim::world::Workload;

use super::clock::ServerClock;
use super::net::{Net, server_ip};
use super::system::{
    Login, Owner, RealServers, RealSystem, ServerAsk, SessionWatch, StartCtx, Watcher,
};
pub(crate) use super::systems::SERVER_CLOCKS;
use super::systems::SYSTEMS;

/// The systems of `w` the runner has a real side for, in the list's order.
pub(crate) fn in_world(w: &Workload) -> Vec<&'static dyn RealSystem> {
    let present = w.systems();
    SYSTEMS
        .iter()
        .copied()
        .filter(|s| present.contains(&s.backend()))
        .collect()
}

/// The systems of `w` the runner has no real side for.
pub(crate) fn unlisted(w: &Workload) -> Vec<Backend> {
    w.systems()
        .into_iter()
        .filter(|b| !SYSTEMS.iter().any(|s| s.backend() == *b))
        .collect()
}

/// Every real server of one world.
#[derive(Default)]
pub(crate) struct Servers {
    /// Every server's address by its world name.
    pub addrs: BTreeMap<String, SocketAddr>,
    /// The fault proxy in front of every server, when the plan needs one.
    pub net: Option<Net>,
    /// The partitions cut before the servers started.
    pub precut_ids: Vec<u64>,
    /// The lock servers' names, in world order (no helpers).
    pub lock_servers: Vec<String>,
    systems: Vec<Box<dyn RealServers>>,
}

impl Servers {
    /// Starts the servers `w` names, each system's by its plugin; with `ctx.net`,
    /// behind a fault proxy (a system whose servers link to each other starts it
    /// itself, with them behind it; otherwise only the clients' links go through it).
    ///
    /// `ctx.precuts` are partitions in force from the run's start (a plan's partitions
    /// between named hosts at 0 ms); their ids are in `precut_ids` (the runner heals
    /// them once the plan's own faults at 0 ms hold).
    pub fn start(w: &Workload, ctx: &StartCtx) -> Result<Self, String> {
        if let Some(b) = unlisted(w).first() {
            return Err(format!(
                "the real runner starts no {} servers yet",
                b.name()
            ));
        }
        let mut s = Self::default();
        for system in in_world(w) {
            let started = system.start(w, ctx)?;
            s.addrs.extend(started.addrs);
            s.lock_servers.extend(started.servers.lock_servers());
            s.precut_ids.extend(started.precut_ids);
            if s.net.is_none() {
                s.net = started.net;
            }
            s.systems.push(started.servers);
        }
        if ctx.net && s.net.is_none() {
            let servers: BTreeMap<String, (std::net::Ipv4Addr, SocketAddr)> = s
                .addrs
                .iter()
                .enumerate()
                .map(|(i, (n, a))| (n.clone(), (server_ip(i), *a)))
                .collect();
            s.net = Some(Net::start(&servers, ctx.clients)?);
        }
        Ok(s)
    }

    /// Every server's name: lock servers, then helpers.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.lock_servers.clone();
        names.extend(self.systems.iter().flat_map(|s| s.helpers()));
        names
    }

    /// Server `name`'s clock, if the run moves it.
    pub fn clock(&mut self, name: &str) -> Option<&mut ServerClock> {
        self.systems.iter_mut().find_map(|s| s.clock(name))
    }

    /// The process id of server `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.systems.iter().find_map(|s| s.pid(name))
    }

    /// Kills server `name` (`SIGKILL`).
    pub fn kill(&mut self, name: &str) {
        for s in &mut self.systems {
            if s.kill(name) {
                return;
            }
        }
    }

    /// Restarts server `name` on its port, from what its directory kept.
    pub fn restart(&mut self, name: &str) -> Result<(), String> {
        self.systems
            .iter_mut()
            .find_map(|s| s.restart(name))
            .unwrap_or_else(|| Err(format!("no server {name}")))
    }

    /// The server holding the lock key now, by its system's answer.
    pub fn lock_server(&self, key: &str) -> Option<String> {
        self.systems.iter().find_map(|s| s.lock_server(key))
    }

    /// The lock's owner by the servers' answers: the first system that names a client
    /// or gives a record.
    pub fn lock_owner(&self, key: &str) -> Owner {
        self.systems
            .iter()
            .map(|s| s.lock_owner(key))
            .find(|o| o.client.is_some() || o.record.is_some())
            .unwrap_or_default()
    }

    /// The credentials the clients log in with, if a launcher made them.
    pub fn login(&self) -> Option<Login> {
        self.systems.iter().find_map(|s| s.login())
    }

    /// Asks server `name` about the lock, if its system answers such questions.
    pub fn ask(&self, name: &str) -> Option<Box<dyn ServerAsk>> {
        self.systems.iter().find_map(|s| s.ask(name))
    }

    /// What server `name` holds under `key` now, by its own answer (`None`: nothing,
    /// or not asked).
    pub fn value_of(&self, name: &str, key: &str) -> Option<String> {
        self.ask(name)?.lock_value(key).flatten()
    }

    /// The leader now (a consensus ensemble's).
    pub fn leader(&self) -> Option<String> {
        self.systems.iter().find_map(|s| s.leader())
    }

    /// The leader, its last committed write's mark and the detail for it.
    pub fn leader_commit(&self) -> Option<(String, u64, String)> {
        self.systems.iter().find_map(|s| s.leader_commit())
    }

    /// A master holding `key` by a write none of its replicas has, with the detail.
    pub fn unreplicated_lock_master(&self, key: &str) -> Option<(String, String)> {
        self.systems
            .iter()
            .find_map(|s| s.unreplicated_lock_master(key))
    }

    /// A master holding `key` now.
    pub fn lock_master(&self, key: &str) -> Option<String> {
        self.systems.iter().find_map(|s| s.lock_master(key))
    }

    /// The first server whose lock value holds `owner`.
    pub fn server_holding(&self, key: &str, owner: &str) -> Option<String> {
        self.systems
            .iter()
            .find_map(|s| s.server_holding(key, owner))
    }

    /// A watch for each server session that holds `key` now (before `client`'s
    /// connections are reset).
    pub fn sessions_holding(&self, client: &str, key: &str) -> Vec<SessionWatch> {
        self.systems
            .iter()
            .flat_map(|s| s.sessions_holding(client, key))
            .collect()
    }

    /// The threads that record the servers' answers during the run.
    pub fn watchers(&self, key: &str) -> Vec<Watcher> {
        self.systems.iter().flat_map(|s| s.watchers(key)).collect()
    }

    /// Adds what the watchers read to the run's events once it is over.
    pub fn finish(&self, events: &mut Vec<Event>) {
        for s in &self.systems {
            s.finish(events);
        }
    }

    /// Each server's log file, for a run whose verdict needs them.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        self.systems.iter().flat_map(|s| s.logs()).collect()
    }
}
