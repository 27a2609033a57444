use crate::config::Config;
use crate::envelope::Protocol;
use crate::fxmap::{FxIndexMap, FxIndexSet};
use crate::host::HostTimer;
use crate::ip::IpVersionAddrIter;
use crate::net::udp::MulticastGroups;
use crate::{
    config, for_pairs, Dns, Host, Result as TurmoilResult, ToIpAddr, ToIpAddrs, Topology,
    TRACING_TARGET,
};

use rand::RngCore;
use scoped_tls::scoped_thread_local;
use std::cell::{Cell, RefCell};
use std::io::Result;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tracks all the state for the simulated world.
pub(crate) struct World {
    /// Tracks all individual hosts
    pub(crate) hosts: FxIndexMap<IpAddr, Host>,

    /// Tracks how each host is connected to each other.
    pub(crate) topology: Topology,

    /// Maps hostnames to ip addresses.
    pub(crate) dns: Dns,

    // Maps multicast groups to udp destination addresses.
    pub(crate) multicast_groups: MulticastGroups,

    /// If set, this is the current host being executed.
    pub(crate) current: Option<IpAddr>,

    /// The last host looked up by `current`, and its index in `hosts` (PATCH:
    /// wake hints, cost): a host is asked for by the current address at every
    /// clock read and socket operation of its software, and an index is stable
    /// (hosts are never removed), so the hash lookup is done once per address in a
    /// row rather than at each call.
    current_index: Cell<Option<(IpAddr, usize)>>,

    /// Random number generator used for all decisions. To make execution
    /// deterministic, reuse the same seed.
    pub(crate) rng: Box<dyn RngCore>,

    /// Hosts woken without a message (PATCH: wake hints).
    pub(crate) woken: Woken,

    /// Run duration for each host on every step.
    // TODO: Remove this once we've cleaned up the loopback implementation hacks
    pub(crate) tick_duration: Duration,
}

scoped_thread_local!(static CURRENT: RefCell<World>);

/// Hosts whose tasks were woken by another host's software or by the network
/// without a message to them, to be run at the next step (PATCH: wake hints).
///
/// It also counts, per host, the wakes still to come ([`WakeOnDrop`]s alive): a
/// host that waits for one is run at every step, never skipped as idle. Such a
/// wake lands in the middle of another host's turn; had the waiting host fallen
/// behind, its catch-up would run the woken task before its own turn, at the
/// time it fell behind, where stepping tick by tick runs it in its turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct Woken(Arc<Mutex<WokenHosts>>, Arc<AtomicUsize>);

#[derive(Debug, Default)]
struct WokenHosts {
    woken: FxIndexSet<IpAddr>,
    waiting: FxIndexMap<IpAddr, usize>,
}

impl Woken {
    /// Keeps the count of hosts woken or waiting, read without the lock by
    /// [`Woken::wants_run`] (asked for every host at every step).
    fn count(&self, hosts: &WokenHosts) {
        self.1
            .store(hosts.woken.len() + hosts.waiting.len(), Ordering::Release);
    }

    pub(crate) fn on_drop(&self, host: IpAddr) -> WakeOnDrop {
        let mut hosts = self.0.lock().unwrap();
        *hosts.waiting.entry(host).or_default() += 1;
        self.count(&hosts);
        drop(hosts);
        WakeOnDrop {
            host,
            woken: self.clone(),
        }
    }

    /// Whether `host` must run: it was woken (it is not any more), or a wake
    /// of it is still to come.
    pub(crate) fn wants_run(&self, host: IpAddr) -> bool {
        if self.1.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut hosts = self.0.lock().unwrap();
        let woken = hosts.woken.swap_remove(&host);
        self.count(&hosts);
        woken || hosts.waiting.contains_key(&host)
    }

    pub(crate) fn any(&self, running: impl Fn(IpAddr) -> bool) -> bool {
        if self.1.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.0.lock().unwrap().woken.iter().any(|h| running(*h))
    }
}

/// Adds its host to [`Woken`] when dropped (PATCH: wake hints).
#[derive(Debug)]
pub(crate) struct WakeOnDrop {
    host: IpAddr,
    woken: Woken,
}

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        let mut hosts = self.woken.0.lock().unwrap();
        if let Some(n) = hosts.waiting.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                hosts.waiting.swap_remove(&self.host);
            }
        }
        hosts.woken.insert(self.host);
        self.woken.count(&hosts);
    }
}

impl World {
    /// A host's runtime is replaced (crash, bounce): its own clock catches up with
    /// the `lag` it was not run, and the wake hints, which were on the old
    /// runtime's clock, go (PATCH: wake hints).
    pub(crate) fn restart_clock(&mut self, addr: IpAddr, lag: Duration) {
        self.tick(addr, lag);
        if let Some(host) = self.hosts.get_mut(&addr) {
            host.wakes.clear();
        }
    }

    /// Initialize a new world.
    pub(crate) fn new(
        link: config::Link,
        rng: Box<dyn RngCore>,
        addrs: IpVersionAddrIter,
        tick_duration: Duration,
    ) -> World {
        World {
            hosts: FxIndexMap::default(),
            topology: Topology::new(link),
            dns: Dns::new(addrs),
            multicast_groups: MulticastGroups::default(),
            current: None,
            current_index: Cell::new(None),
            rng,
            woken: Woken::default(),
            tick_duration,
        }
    }

    /// Run `f` on the world.
    pub(crate) fn current<R>(f: impl FnOnce(&mut World) -> R) -> R {
        CURRENT.with(|current| {
            let mut current = current.borrow_mut();
            f(&mut current)
        })
    }

    /// Run `f` if the world is set - otherwise no-op.
    ///
    /// Used in drop paths, where the simulation may be shutting
    /// down and we don't need to do anything.
    pub(crate) fn current_if_set(f: impl FnOnce(&mut World)) {
        if CURRENT.is_set() {
            Self::current(f);
        }
    }

    /// Run `f` on the host currently executing, if there is one and the world
    /// is not borrowed already (PATCH: wake hints).
    pub(crate) fn with_current_host_if_set(f: impl FnOnce(&mut Host)) {
        if CURRENT.is_set() {
            CURRENT.with(|current| {
                if let Ok(mut world) = current.try_borrow_mut() {
                    if let Some(addr) = world.current {
                        if let Some(host) = world.hosts.get_mut(&addr) {
                            f(host);
                        }
                    }
                }
            });
        }
    }

    /// Runs `f` on the host at `addr` if the world is set and not borrowed
    /// (PATCH: wake hints): for a drop path that may run while the simulation
    /// itself holds the world (a runtime torn down in a crash).
    pub(crate) fn with_host_if_set(addr: IpAddr, f: impl FnOnce(&mut Host)) {
        if CURRENT.is_set() {
            CURRENT.with(|current| {
                if let Ok(mut world) = current.try_borrow_mut() {
                    if let Some(host) = world.hosts.get_mut(&addr) {
                        f(host);
                    }
                }
            });
        }
    }

    pub(crate) fn try_current<R>(f: impl FnOnce(&World) -> R) -> TurmoilResult<R> {
        if CURRENT.is_set() {
            CURRENT.with(|current| match current.try_borrow() {
                Ok(world) => Ok(f(&world)),
                Err(_) => Err("World already borrowed".into()),
            })
        } else {
            Err("World not set".into())
        }
    }

    pub(crate) fn enter<R>(world: &RefCell<World>, f: impl FnOnce() -> R) -> R {
        CURRENT.set(world, f)
    }

    pub(crate) fn current_host_mut(&mut self) -> &mut Host {
        let addr = self.current.expect("current host missing");
        let i = self.index_of(addr).expect("host missing");
        &mut self.hosts[i]
    }

    pub(crate) fn current_host(&self) -> &Host {
        let addr = self.current.expect("current host missing");
        let i = self.index_of(addr).expect("host missing");
        &self.hosts[i]
    }

    pub(crate) fn try_current_host(&self) -> TurmoilResult<&Host> {
        let addr = self.current.ok_or("current host missing")?;
        let i = self.index_of(addr).ok_or("host missing")?;
        Ok(&self.hosts[i])
    }

    /// `addr`'s index in `hosts`, from the one-entry cache when it holds `addr`
    /// (PATCH: wake hints, cost).
    fn index_of(&self, addr: IpAddr) -> Option<usize> {
        if let Some((cached, i)) = self.current_index.get() {
            if cached == addr {
                return Some(i);
            }
        }
        let i = self.hosts.get_index_of(&addr)?;
        self.current_index.set(Some((addr, i)));
        Some(i)
    }

    pub(crate) fn lookup(&mut self, host: impl ToIpAddr) -> IpAddr {
        self.dns.lookup(host)
    }

    pub(crate) fn reverse_lookup(&self, addr: IpAddr) -> Option<&str> {
        self.dns.reverse(addr)
    }

    pub(crate) fn lookup_many(&mut self, hosts: impl ToIpAddrs) -> Vec<IpAddr> {
        self.dns.lookup_many(hosts)
    }

    pub(crate) fn hold(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.hold(a, b);
    }

    pub(crate) fn hold_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.hold(a, b);
        });
    }

    pub(crate) fn release(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.release(a, b);
    }

    pub(crate) fn release_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.release(a, b);
        });
    }

    pub(crate) fn partition(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.partition(a, b);
    }

    pub(crate) fn partition_oneway(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.partition_oneway(a, b);
    }

    pub(crate) fn partition_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.partition(a, b);
        });
    }
    pub(crate) fn partition_oneway_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.partition_oneway(a, b);
        });
    }
    pub(crate) fn repair(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.repair(a, b);
    }
    pub(crate) fn repair_oneway(&mut self, a: IpAddr, b: IpAddr) {
        self.topology.repair_oneway(a, b);
    }

    pub(crate) fn repair_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.repair(a, b);
        });
    }

    pub(crate) fn repair_oneway_many(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let a = self.lookup_many(a);
        let b = self.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            self.repair_oneway(a, b);
        });
    }

    pub(crate) fn est_tcp_streams(&mut self) -> usize {
        self.current_host().tcp.stream_count()
    }

    pub(crate) fn est_tcp_streams_on(&mut self, addr: impl ToIpAddr) -> usize {
        self.hosts
            .get(&self.dns.lookup(addr))
            .unwrap()
            .tcp
            .stream_count()
    }

    /// Register a new host with the simulation.
    pub(crate) fn register(
        &mut self,
        addr: IpAddr,
        nodename: &str,
        timer: HostTimer,
        config: &Config,
    ) {
        assert!(
            !self.hosts.contains_key(&addr),
            "already registered host for the given ip address"
        );

        tracing::info!(target: TRACING_TARGET, nodename, ?addr, "New");

        // Register links between the new host and all existing hosts
        for existing in self.hosts.keys() {
            self.topology.register(*existing, addr);
        }

        // Initialize host state
        #[cfg(feature = "unstable-fs")]
        self.hosts.insert(
            addr,
            Host::new(
                nodename,
                addr,
                timer,
                config.ephemeral_ports.clone(),
                config.tcp_capacity,
                config.udp_capacity,
                config.fs.clone(),
            ),
        );
        #[cfg(not(feature = "unstable-fs"))]
        self.hosts.insert(
            addr,
            Host::new(
                nodename,
                addr,
                timer,
                config.ephemeral_ports.clone(),
                config.tcp_capacity,
                config.udp_capacity,
            ),
        );
    }

    /// Send `message` from `src` to `dst`. Delivery is asynchronous and not
    /// guaranteed.
    pub(crate) fn send_message(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
    ) -> Result<()> {
        self.topology
            .enqueue_message(&mut self.rng, src, dst, message)
    }

    /// Tick the host at `addr` by `duration`.
    pub(crate) fn tick(&mut self, addr: IpAddr, duration: Duration) {
        self.hosts
            .get_mut(&addr)
            .expect("missing host")
            .timer
            .tick(duration);
    }
}
