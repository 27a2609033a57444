//! What the real runner asks of one system, and nothing about any system in
//! particular: [`RealSystem`] (what a world of it needs: its refusals, its start, its
//! clients' `Deps`) and [`RealServers`] (its started processes: pid, kill, restart, the
//! server holding the lock, the lock's owner, the servers' own record). Each system
//! implements them once, in `systems/`; the runner core reaches systems only through
//! these traits.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use lock_impl::{Backend, Deps};
use sim::faults::FaultPlan;
use sim::history::{Event, ServerEvent};
use sim::world::Workload;

use super::clock::ServerClock;
use super::net::{ClientNet, Net};

/// A partition in force from the start: side `a`, side `b`, one way.
pub(crate) type Precut = (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
    bool,
);

/// A user, a password and a database (a launcher's), passed to the clients.
pub(crate) type Login = (String, String, String);

/// Where a server is reached through the fault proxy: its own loopback address (its
/// outgoing connections' source) and its public address (the proxy's listener).
#[derive(Clone, Copy)]
pub(crate) struct Public {
    pub ip: Ipv4Addr,
    pub addr: SocketAddr,
}

/// What a system's start is given.
pub(crate) struct StartCtx<'a> {
    /// Whether the plan needs the fault proxy.
    pub net: bool,
    /// The clients' host names.
    pub clients: &'a [String],
    /// Partitions in force from the start (a system whose servers link to each other
    /// through the proxy cuts them before they start).
    pub precuts: &'a [Precut],
    /// The servers whose wall clocks the run may move.
    pub clocked: &'a [String],
    /// The run's seed.
    pub seed: u64,
}

/// A system's servers, started.
pub(crate) struct Started {
    pub servers: Box<dyn RealServers>,
    /// Every server's own address by its world name.
    pub addrs: BTreeMap<String, SocketAddr>,
    /// The fault proxy, if the system started it (its servers' own links behind it).
    pub net: Option<Net>,
    /// The precuts cut in that proxy.
    pub precut_ids: Vec<u64>,
}

/// What a client process's `Deps` are built from, besides the world.
pub(crate) struct ClientCtx<'a> {
    /// Every server's address (the client's own listeners behind the proxy).
    pub addrs: &'a BTreeMap<String, SocketAddr>,
    /// The servers' credentials, when a launcher made them.
    pub login: Option<Login>,
    /// Behind the fault proxy: how addresses a server names are reached.
    pub net: Option<&'a ClientNet>,
    pub clock: Arc<dyn lock_impl::Clock>,
    pub entropy: Arc<dyn lock_impl::Entropy>,
    pub spawner: Arc<dyn lock_impl::Spawner>,
    pub scale: lock_impl::TimeScale,
}

impl ClientCtx<'_> {
    /// Server `name`'s address.
    pub fn addr(&self, name: &str) -> Result<SocketAddr, String> {
        self.addrs
            .get(name)
            .copied()
            .ok_or_else(|| format!("no address for server {name}"))
    }
}

/// A client's `Deps`, being built.
pub(crate) type DepsFuture<'a> = Pin<Box<dyn Future<Output = Result<Deps, String>> + 'a>>;

/// One system as the real runner knows it, before anything starts.
pub(crate) trait RealSystem: Sync {
    /// The system (a world has it when `Workload::systems` names it).
    fn backend(&self) -> Backend;

    /// Why a world of this system cannot be started at all (no package, a topology
    /// not made real).
    fn refuses_world(&self, _w: &Workload) -> Option<String> {
        None
    }

    /// Why `design` in `w` under `plan` cannot be made real on this system (its
    /// targets' mapping, its servers' links), in the order the system gives them.
    fn refuses_plan(&self, _design: &str, _w: &Workload, _plan: &FaultPlan) -> Vec<String> {
        Vec::new()
    }

    /// The servers whose wall clocks a run moves (through the clock shim).
    fn clocked_hosts(&self, _w: &Workload) -> Vec<String> {
        Vec::new()
    }

    /// Whether every server that can hold the lock has a clock the run moves.
    fn moves_lock_server_clocks(&self) -> bool {
        false
    }

    /// Independent masters a design locks on in `w` (0: the system has none).
    fn masters(&self, _w: &Workload) -> u32 {
        0
    }

    /// Each server's role at the start, as the simulator records it.
    fn start_roles(&self, _w: &Workload) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Starts `w`'s servers of this system on loopback, in the world's topology.
    fn start(&self, w: &Workload, ctx: &StartCtx) -> Result<Started, String>;

    /// A client's `Deps` over real sockets to this system's servers.
    fn client_deps<'a>(&'a self, w: &'a Workload, ctx: ClientCtx<'a>) -> DepsFuture<'a>;
}

/// One server's answers about the lock, over the parent's own connection (short
/// timeouts: a paused server is simply not asked).
pub(crate) trait ServerAsk: Send {
    /// What it holds under `key` (`Some(None)`: nothing); `None` if it does not answer.
    fn lock_value(&mut self, key: &str) -> Option<Option<String>>;
    /// Its count of keys it expired.
    fn expired_keys(&mut self) -> Option<u64> {
        None
    }
}

/// What the lock's owner is, by a server's answer.
#[derive(Default)]
pub(crate) struct Owner {
    /// The client its owner value names.
    pub client: Option<String>,
    /// The server's record of the lock at this moment, if its answer is one.
    pub record: Option<(String, ServerEvent)>,
}

/// A poll for the end of a session that held the lock: the server's record of the
/// end once its answers say so.
pub(crate) type SessionWatch = Box<dyn FnMut() -> Option<(String, ServerEvent)> + Send>;

/// A thread that records the servers' own answers until the run is over.
pub(crate) type Watcher = Box<dyn FnOnce(&dyn Sink) + Send>;

/// Where a watcher records what the servers answer.
pub(crate) trait Sink: Sync {
    /// µs of the run now.
    fn now_us(&self) -> u64;
    /// Whether the run is over.
    fn over(&self) -> bool;
    /// Whether `host` is killed and not yet back (its record is left alone).
    fn is_down(&self, host: &str) -> bool;
    /// Records what `host` holds under the lock key, if it changed.
    fn note_lock_value(&self, host: &str, value: Option<String>, cause: &str);
    /// Records `host`'s role if it is not the last one recorded (`last`).
    fn note_role(&self, last: &mut BTreeMap<String, String>, host: String, role: String);
}

/// A system's servers, running.
pub(crate) trait RealServers: Send {
    /// The servers that can hold the lock, in world order.
    fn lock_servers(&self) -> Vec<String>;

    /// Its helpers (servers that never hold the lock), after the lock servers.
    fn helpers(&self) -> Vec<String> {
        Vec::new()
    }

    /// Server `name`'s process id.
    fn pid(&self, name: &str) -> Option<u32>;

    /// Kills server `name` (`SIGKILL`); false if it is not this system's.
    fn kill(&mut self, name: &str) -> bool;

    /// Restarts server `name` in place (`None`: not this system's).
    fn restart(&mut self, name: &str) -> Option<Result<(), String>>;

    /// The server holding the lock key now.
    fn lock_server(&self, key: &str) -> Option<String>;

    /// The lock's owner by the servers' answers.
    fn lock_owner(&self, _key: &str) -> Owner {
        Owner::default()
    }

    /// Each server's log file.
    fn logs(&self) -> Vec<(String, PathBuf)>;

    /// The credentials its clients log in with.
    fn login(&self) -> Option<Login> {
        None
    }

    /// Server `name`'s clock, if the run moves it.
    fn clock(&mut self, _name: &str) -> Option<&mut ServerClock> {
        None
    }

    /// Asks server `name` about the lock (none: it is not asked).
    fn ask(&self, _name: &str) -> Option<Box<dyn ServerAsk>> {
        None
    }

    /// Its leader now (a consensus ensemble's).
    fn leader(&self) -> Option<String> {
        None
    }

    /// Its leader and its last committed write's mark, with the detail a fault's
    /// start gives for that mark (a lock write committed once the mark moves).
    fn leader_commit(&self) -> Option<(String, u64, String)> {
        None
    }

    /// A master holding `key` by a write none of its replicas has, with the detail.
    fn unreplicated_lock_master(&self, _key: &str) -> Option<(String, String)> {
        None
    }

    /// A master holding `key` now.
    fn lock_master(&self, _key: &str) -> Option<String> {
        None
    }

    /// The first server whose lock value holds `owner`.
    fn server_holding(&self, _key: &str, _owner: &str) -> Option<String> {
        None
    }

    /// Before `client`'s connections are reset: a watch for each server session that
    /// holds `key` now.
    fn sessions_holding(&self, _client: &str, _key: &str) -> Vec<SessionWatch> {
        Vec::new()
    }

    /// The threads that record its servers' answers during the run.
    fn watchers(&self, _key: &str) -> Vec<Watcher> {
        Vec::new()
    }

    /// Adds what its watchers read to the run's events once the run is over.
    fn finish(&self, _events: &mut Vec<Event>) {}
}

/// The client host an owner value names (`client-N-…`, the clients' entropy), if it
/// names one.
pub(crate) fn writer_of(value: &str) -> Option<String> {
    let rest = value.strip_prefix("client-")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then(|| format!("client-{digits}"))
}

/// The first `client-N` anywhere in `text` (a server's reply holding an owner value).
pub(crate) fn client_in(text: &str) -> Option<String> {
    let at = text.find("client-")?;
    let digits: String = text[at + 7..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("client-{digits}"))
}
