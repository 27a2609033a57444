use crate::fxmap::FxIndexMap;
use rand::{rngs::SmallRng, seq::SliceRandom, Rng, SeedableRng};
use std::cell::RefCell;
use std::future::Future;
use std::net::IpAddr;
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use tokio::time::Duration;
use tracing::Level;

use crate::host::HostTimer;
use crate::{
    for_pairs, rt, Config, LinksIter, Result, Rt, ToIpAddr, ToIpAddrs, World, TRACING_TARGET,
};

/// A handle for interacting with the simulation.
pub struct Sim<'a> {
    /// Simulation configuration
    config: Config,

    /// Tracks the simulated world state
    ///
    /// This is what is stored in the thread-local
    world: RefCell<World>,

    /// Per simulated host runtimes
    rts: FxIndexMap<IpAddr, Rt<'a>>,

    /// Simulation duration since unix epoch. Set when the simulation is
    /// created.
    since_epoch: Duration,

    /// Simulation elapsed time
    elapsed: Duration,

    steps: usize,

    /// Host runtimes run so far, catch-ups included (PATCH: wake hints).
    host_runs: u64,
}

impl<'a> Sim<'a> {
    pub(crate) fn new(config: Config, world: World) -> Self {
        let since_epoch = config
            .epoch
            .duration_since(UNIX_EPOCH)
            .expect("now must be >= UNIX_EPOCH");

        Self {
            config,
            world: RefCell::new(world),
            rts: FxIndexMap::default(),
            since_epoch,
            elapsed: Duration::ZERO,
            steps: 1, // bumped after each step
            host_runs: 0,
        }
    }

    /// How much logical time has elapsed since the simulation started.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The logical duration from [`UNIX_EPOCH`] until now.
    ///
    /// On creation the simulation picks a `SystemTime` and calculates the
    /// duration since the epoch. Each `run()` invocation moves logical time
    /// forward the configured tick duration.
    pub fn since_epoch(&self) -> Duration {
        self.since_epoch + self.elapsed
    }

    /// Register a client with the simulation.
    pub fn client<F>(&mut self, addr: impl ToIpAddr, client: F)
    where
        F: Future<Output = Result> + 'static,
    {
        let addr = self.lookup(addr);
        let nodename: Arc<str> = self
            .world
            .borrow_mut()
            .dns
            .reverse(addr)
            .map(str::to_string)
            .unwrap_or_else(|| addr.to_string())
            .into();

        {
            let world = RefCell::get_mut(&mut self.world);

            // Register host state with the world
            world.register(
                addr,
                &nodename,
                HostTimer::new(self.elapsed, self.since_epoch),
                &self.config,
            );
        }

        let seed = self.world.borrow_mut().rng.random();
        let rng = SmallRng::from_seed(seed);
        let config = rt::Config {
            enable_io: self.config.enable_tokio_io,
            rng: Some(rng),
        };

        let rt = World::enter(&self.world, || Rt::client(nodename, client, config));

        self.rts.insert(addr, rt);
    }

    /// Register a host with the simulation.
    ///
    /// This method takes a `Fn` that builds a future, as opposed to
    /// [`Sim::client`] which just takes a future. The reason for this is we
    /// might restart the host, and so need to be able to call the future
    /// multiple times.
    pub fn host<F, Fut>(&mut self, addr: impl ToIpAddr, host: F)
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = Result> + 'static,
    {
        let addr = self.lookup(addr);
        let nodename: Arc<str> = self
            .world
            .borrow_mut()
            .dns
            .reverse(addr)
            .map(str::to_string)
            .unwrap_or_else(|| addr.to_string())
            .into();

        {
            let world = RefCell::get_mut(&mut self.world);

            // Register host state with the world
            world.register(
                addr,
                &nodename,
                HostTimer::new(self.elapsed, self.since_epoch),
                &self.config,
            );
        }

        let seed = self.world.borrow_mut().rng.random();
        let rng = SmallRng::from_seed(seed);
        let config = rt::Config {
            enable_io: self.config.enable_tokio_io,
            rng: Some(rng),
        };

        let rt = World::enter(&self.world, || Rt::host(nodename, host, config));

        self.rts.insert(addr, rt);
    }

    /// Crashes the resolved hosts. Nothing will be running on the matched hosts
    /// after this method. You can use [`Sim::bounce`] to start the hosts up
    /// again.
    ///
    /// For filesystem simulation (requires `unstable-fs` feature), this
    /// discards any pending (unsynced) writes. Data that was synced via
    /// `sync_all()` survives the crash.
    pub fn crash(&mut self, addrs: impl ToIpAddrs) {
        let hosts = self.world.borrow_mut().lookup_many(addrs);
        for h in hosts {
            let rt = self.rts.get_mut(&h).expect("missing host");

            self.world.borrow_mut().current = Some(h);

            // Its runtime goes, and with it the clock its wake hints were in.
            self.world
                .borrow_mut()
                .restart_clock(h, std::mem::take(&mut rt.lag));

            World::enter(&self.world, || {
                rt.crash();

                // Discard pending filesystem operations
                #[cfg(feature = "unstable-fs")]
                World::current(|world| {
                    let addr = world.current.expect("current host missing");
                    let World { hosts, rng, .. } = world;
                    let host = hosts.get_mut(&addr).unwrap();
                    host.fs.lock().unwrap().discard_pending(&mut **rng);
                });

                tracing::trace!(target: TRACING_TARGET, addr = ?h, "Crash");
            });
        }

        self.world.borrow_mut().current = None;
    }

    /// Bounces the resolved hosts. The software is restarted.
    pub fn bounce(&mut self, addrs: impl ToIpAddrs) {
        self.run_with_hosts(addrs, |addr, rt| {
            World::current(|world| world.restart_clock(addr, std::mem::take(&mut rt.lag)));
            rt.bounce();

            tracing::trace!(target: TRACING_TARGET, addr = ?addr, "Bounce");
        });
    }

    /// Run `f` with the resolved hosts at `addrs` set on the world.
    fn run_with_hosts(&mut self, addrs: impl ToIpAddrs, mut f: impl FnMut(IpAddr, &mut Rt)) {
        let hosts = self.world.borrow_mut().lookup_many(addrs);
        for h in hosts {
            let rt = self.rts.get_mut(&h).expect("missing host");

            self.world.borrow_mut().current = Some(h);

            World::enter(&self.world, || f(h, rt));
        }

        self.world.borrow_mut().current = None;
    }

    /// Check whether a host has software running.
    pub fn is_host_running(&mut self, addr: impl ToIpAddr) -> bool {
        let host = self.world.borrow_mut().lookup(addr);

        self.rts
            .get(&host)
            .expect("missing host")
            .is_software_running()
    }

    /// Lookup an IP address by host name.
    pub fn lookup(&self, addr: impl ToIpAddr) -> IpAddr {
        self.world.borrow_mut().lookup(addr)
    }

    /// Perform a reverse DNS lookup, returning the hostname if the entry
    /// exists.
    pub fn reverse_lookup(&self, addr: IpAddr) -> Option<String> {
        self.world
            .borrow()
            .reverse_lookup(addr)
            .map(|h| h.to_owned())
    }

    /// Hold messages between two hosts, or sets of hosts, until [`release`](crate::release) is
    /// called.
    pub fn hold(&self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.hold_many(a, b);
    }

    /// Repair the connection between two hosts, or sets of hosts, resulting in
    /// messages to be delivered.
    pub fn repair(&self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.repair_many(a, b);
    }

    /// Repair the connection between two hosts, or sets of hosts, removing
    /// the effect of a previous [`Self::partition_oneway`].
    ///
    /// Combining this feature with [`Self::hold`] is presently not supported.
    pub fn repair_oneway(&self, from: impl ToIpAddrs, to: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.repair_oneway_many(from, to);
    }

    /// The opposite of [`hold`](crate::hold). All held messages are immediately delivered.
    pub fn release(&self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.release_many(a, b);
    }

    /// Partition two hosts, or sets of hosts, resulting in all messages sent
    /// between them to be dropped.
    pub fn partition(&self, a: impl ToIpAddrs, b: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.partition_many(a, b);
    }

    /// Partition two hosts, or sets of hosts, such that messages can not be sent
    /// from 'from' to 'to', while not affecting the ability for them to be delivered
    /// in the other direction.
    ///
    /// Partitioning first from->to, then to->from, will stop all messages, similarly to
    /// a single call to [`Self::partition`].
    ///
    /// Combining this feature with [`Self::hold`] is presently not supported.
    pub fn partition_oneway(&self, from: impl ToIpAddrs, to: impl ToIpAddrs) {
        let mut world = self.world.borrow_mut();
        world.partition_oneway_many(from, to);
    }

    /// Resolve host names for an [`IpAddr`] pair.
    ///
    /// Useful when interacting with network [links](#method.links).
    pub fn reverse_lookup_pair(&self, pair: (IpAddr, IpAddr)) -> (String, String) {
        let world = self.world.borrow();

        (
            world
                .dns
                .reverse(pair.0)
                .expect("no hostname found for ip address")
                .to_owned(),
            world
                .dns
                .reverse(pair.1)
                .expect("no hostname found for ip address")
                .to_owned(),
        )
    }

    /// Lookup IP addresses for resolved hosts.
    pub fn lookup_many(&self, addr: impl ToIpAddrs) -> Vec<IpAddr> {
        self.world.borrow_mut().lookup_many(addr)
    }

    /// Set the max message latency for all links.
    pub fn set_max_message_latency(&self, value: Duration) {
        self.world
            .borrow_mut()
            .topology
            .set_max_message_latency(value);
    }

    /// Set the message latency for any links matching `a` and `b`.
    ///
    /// This sets the min and max to the same value eliminating any variance in
    /// latency.
    pub fn set_link_latency(&self, a: impl ToIpAddrs, b: impl ToIpAddrs, value: Duration) {
        let mut world = self.world.borrow_mut();
        let a = world.lookup_many(a);
        let b = world.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            world.topology.set_link_message_latency(a, b, value);
        });
    }

    /// Set the max message latency for any links matching `a` and `b`.
    pub fn set_link_max_message_latency(
        &self,
        a: impl ToIpAddrs,
        b: impl ToIpAddrs,
        value: Duration,
    ) {
        let mut world = self.world.borrow_mut();
        let a = world.lookup_many(a);
        let b = world.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            world.topology.set_link_max_message_latency(a, b, value);
        });
    }

    /// Set the message latency distribution curve for all links.
    ///
    /// Message latency follows an exponential distribution curve. The `value`
    /// is the lambda argument to the probability function.
    pub fn set_message_latency_curve(&self, value: f64) {
        self.world
            .borrow_mut()
            .topology
            .set_message_latency_curve(value);
    }

    pub fn set_fail_rate(&mut self, value: f64) {
        self.world.borrow_mut().topology.set_fail_rate(value);
    }

    pub fn set_link_fail_rate(&mut self, a: impl ToIpAddrs, b: impl ToIpAddrs, value: f64) {
        let mut world = self.world.borrow_mut();
        let a = world.lookup_many(a);
        let b = world.lookup_many(b);

        for_pairs(&a, &b, |a, b| {
            world.topology.set_link_fail_rate(a, b, value);
        });
    }

    /// Access a [`LinksIter`] to introspect inflight messages between hosts.
    pub fn links(&self, f: impl FnOnce(LinksIter)) {
        let top = &mut self.world.borrow_mut().topology;

        f(top.iter_mut())
    }

    /// Run the simulation until all client hosts have completed.
    ///
    /// Executes a simple event loop that calls [step](#method.step) each
    /// iteration, returning early if any host software errors.
    pub fn run(&mut self) -> Result {
        // check if we have any clients
        if !self
            .rts
            .iter()
            .any(|(_, rt)| matches!(rt.kind, rt::Kind::Client))
        {
            tracing::info!(target: TRACING_TARGET, "No client hosts registered, exiting simulation");
            return Ok(());
        }

        loop {
            let is_finished = self.step()?;

            if is_finished {
                return Ok(());
            }
        }
    }

    /// The latest time (as [`Sim::elapsed`] counts it) that a single
    /// [`Sim::step_by`] can reach with the same outcome as stepping there tick
    /// by tick (PATCH: wake hints): the step before an in-flight message is
    /// delivered, or the end of the tick in which a hinted timer fires
    /// (see [`crate::time`]), whichever comes first. `Duration::MAX` when
    /// nothing is in flight and no timer is hinted.
    ///
    /// It knows only what the simulation holds: the caller adds its own
    /// events, and must not jump right after it woke a host's task itself
    /// (say, by sending on a channel from outside the simulation).
    pub fn idle_until(&mut self) -> Duration {
        let tick = self.config.tick;
        let now = self.elapsed;
        // A whole number of ticks that ends no later than `due` from now.
        let ticks_within = |due: Duration| -> Duration {
            tick * (due.as_nanos() / tick.as_nanos()).min(u32::MAX as u128) as u32
        };
        let mut until = Duration::MAX;
        let world = self.world.borrow();
        let World {
            topology, woken, ..
        } = &*world;
        let running = |addr: IpAddr| {
            self.rts
                .get(&addr)
                .is_some_and(|rt| rt.is_software_running())
        };
        if woken.any(running) {
            return now;
        }
        if let Some(due) = topology.next_delivery(running) {
            // Delivered at the start of the step whose network tick reaches
            // it: the step that starts one tick before it is due.
            let steps = due.as_nanos().div_ceil(tick.as_nanos()).max(1);
            until = until.min(now + tick * (steps - 1).min(u32::MAX as u128) as u32);
        }
        for rt in self.rts.values() {
            if !rt.is_software_running() {
                continue;
            }
            if rt.must_run {
                return now;
            }
            let Some(at) = rt.fire_at else {
                continue;
            };
            until = until.min(now + ticks_within(at.saturating_sub(now)));
        }
        until
    }

    /// Runs every host at the next step, whatever its hints and messages say:
    /// for a caller that woke a host's task from outside the simulation, say
    /// by sending on a channel (PATCH: wake hints). Until that step,
    /// [`Sim::idle_until`] is now.
    pub fn wake_all(&mut self) {
        for rt in self.rts.values_mut() {
            rt.must_run = true;
        }
    }

    /// Brings every host that was skipped as idle (see
    /// [`crate::Builder::skip_idle_hosts`]) up to now, as if it had run every
    /// step (PATCH: wake hints). A caller that is about to wake a host's task
    /// from outside the simulation calls it first: otherwise the woken task
    /// would run in the host's catch-up, at the time the host fell behind and
    /// before the messages of its next step are delivered, where stepping tick
    /// by tick runs it after them. Then [`Sim::wake_all`].
    pub fn catch_up(&mut self) -> Result {
        let now = self.elapsed;
        for (&addr, rt) in self.rts.iter_mut() {
            if rt.is_software_running() {
                if !rt.lag.is_zero() {
                    self.host_runs += 1;
                }
                catch_up(&self.world, addr, rt, now)?;
            }
        }
        Ok(())
    }

    /// How many times a timer fired inside a step longer than the tick,
    /// over all hosts (PATCH: wake hints). Each is a timer that was not hinted
    /// (see [`crate::time`]); what its task did happened at its own time on
    /// its own host, but what it sent left at the end of the step. A
    /// simulation that jumps only to [`Sim::idle_until`] and counts none here
    /// ran exactly as it would have tick by tick.
    pub fn unhinted_wakes(&self) -> u64 {
        self.rts.values().map(|rt| rt.unhinted_wakes()).sum()
    }

    /// How many times a host's runtime has run so far, catch-ups included
    /// (PATCH: wake hints): what a simulation cost, in the unit that dominates
    /// it.
    pub fn host_runs(&self) -> u64 {
        self.host_runs
    }

    /// Step the simulation.
    ///
    /// Runs each host in the simulation a fixed duration configured by
    /// `tick_duration` in the builder.
    ///
    /// The simulated network also steps, processing in flight messages, and
    /// delivering them to their destination if appropriate.
    ///
    /// Returns whether or not all clients have completed.
    pub fn step(&mut self) -> Result<bool> {
        self.step_by(self.config.tick)
    }

    /// Step the simulation by `duration` instead of the configured tick
    /// (PATCH: wake hints).
    ///
    /// Stepping straight to [`Sim::idle_until`] has the same outcome as
    /// stepping there tick by tick: nothing happens in between. A step longer
    /// than the tick is watched: timers that fire inside it were not hinted
    /// (see [`crate::time`]) and are counted by [`Sim::unhinted_wakes`].
    pub fn step_by(&mut self, duration: Duration) -> Result<bool> {
        tracing::trace!(target: TRACING_TARGET, "step {}", self.steps);

        let tick = duration;
        let watch = duration > self.config.tick;
        let mut is_finished = true;

        // Tick the networking, processing messages. This is done before
        // ticking any other runtime, as they might be waiting on network
        // IO. (It also might be waiting on something else, such as time.)
        self.world.borrow_mut().topology.tick_by(tick);

        // Tick each host runtimes with running software. If the software
        // completes, extract the result and return early if an error is
        // encountered.

        // PATCH (wake hints): the hosts in turn without collecting them first
        // (a step is the hot loop of a jumping simulation), unless their order
        // is shuffled.
        let mut order: Vec<IpAddr> = Vec::new();
        if self.config.random_node_order {
            order = self
                .rts
                .iter()
                .filter(|(_, rt)| rt.is_software_running())
                .map(|(addr, _)| *addr)
                .collect();
            order.shuffle(&mut self.world.borrow_mut().rng);
        }
        let now = self.elapsed;
        for i in 0.. {
            let (addr, rt) = if self.config.random_node_order {
                let Some(&addr) = order.get(i) else { break };
                (addr, self.rts.get_mut(&addr).expect("missing runtime"))
            } else {
                let Some((&addr, rt)) = self.rts.get_index_mut(i) else {
                    break;
                };
                if !rt.is_software_running() {
                    continue;
                }
                (addr, rt)
            };
            if self.config.skip_idle_hosts {
                // PATCH (wake hints): a host with nothing to do this step is
                // not run: its runtime falls behind, and catches up (running
                // nothing, since no hinted timer falls in between) the next
                // time it has something to do.
                let world = self.world.borrow();
                // (`wants_run` first: it also takes the host's wake.)
                let idle = !world.woken.wants_run(addr)
                    && !rt.must_run
                    && rt.fire_at.is_none_or(|at| at > now)
                    && !world.topology.has_deliverable(addr);
                drop(world);
                if idle {
                    rt.lag += tick;
                    // Its software runs on: a client skipped is not finished.
                    if rt.is_client() {
                        is_finished = false;
                    }
                    continue;
                }
                // A hinted timer that fires exactly at the end of the lag
                // would look like an unhinted one to `Rt::tick_after`: such a
                // host catches up the old way.
                if rt.fire_at == Some(now) && !rt.lag.is_zero() {
                    self.host_runs += 1;
                    catch_up(&self.world, addr, rt, now)?;
                }
            }
            let _span_guard = tracing::span!(Level::INFO, "node", name = &*rt.nodename,).entered();
            let lag = std::mem::take(&mut rt.lag);
            {
                let mut world = self.world.borrow_mut();
                // Set the current host (see method docs)
                world.current = Some(addr);

                world.current_host_mut().timer.now(rt.now());
            }
            // We need to move deliverable messages off the network and into
            // the dst host. This requires two mutable borrows. (PATCH: wake
            // hints: in the host's `block_on`, after its clock caught up with
            // the lag, and as before with no current host.)
            let world_cell = &self.world;
            let deliver = || {
                let mut world = world_cell.borrow_mut();
                world.current = None;
                let World {
                    rng,
                    topology,
                    hosts,
                    ..
                } = world.deref_mut();
                topology.deliver_messages(rng, hosts.get_mut(&addr).expect("missing host"));
                world.current = Some(addr);
            };

            self.host_runs += 1;
            let is_software_finished =
                World::enter(&self.world, || rt.tick_after(lag, tick, watch, deliver))?;

            if rt.is_client() {
                is_finished = is_finished && is_software_finished;
            }

            // Unset the current host
            let mut world = self.world.borrow_mut();
            world.current = None;

            world.tick(addr, lag + tick);
            rt.fire_at = fire_at(rt, world.hosts.get_mut(&addr), now + tick);
        }

        // Tick the nodes that are not actively running (i.e., crashed) to ensure their clock keeps up
        // with the rest of the simulation when they are restarted (bounced).
        for (&addr, rt) in self.rts.iter() {
            if !rt.is_software_running() {
                let mut world = self.world.borrow_mut();
                world.tick(addr, tick);
            }
        }

        self.elapsed += tick;
        self.steps += 1;

        if self.elapsed > self.config.duration && !is_finished {
            return Err(format!(
                "Ran for duration: {:?} steps: {} without completing",
                self.config.duration, self.steps,
            ))?;
        }

        Ok(is_finished)
    }
}

/// Runs a host that fell behind (`rt.lag`) up to the simulation's now. No
/// hinted timer fires and no message is delivered in between, so nothing runs
/// unless a task was woken from outside (see [`Sim::catch_up`]) or an
/// unhinted timer fires, which the watch counts (PATCH: wake hints).
fn catch_up(world: &RefCell<World>, addr: IpAddr, rt: &mut Rt, now: Duration) -> Result {
    if rt.lag.is_zero() {
        return Ok(());
    }
    let lag = std::mem::take(&mut rt.lag);
    {
        let mut world = world.borrow_mut();
        world.current = Some(addr);
        world.current_host_mut().timer.now(rt.now());
    }
    World::enter(world, || rt.tick(lag, true))?;
    let mut world = world.borrow_mut();
    world.current = None;
    world.tick(addr, lag);
    rt.fire_at = fire_at(rt, world.hosts.get_mut(&addr), now);
    Ok(())
}

/// When (in the simulation's elapsed time) the earliest hinted timer of a
/// host that has just run up to `now` fires: the end of the tick in which
/// tokio fires it (at its deadline rounded up to the millisecond of the
/// runtime's clock, whose `now` is on that grid); `now` itself if it fired at
/// the end of the run and its task has yet to run (PATCH: wake hints).
///
/// Kept in `Rt::fire_at` until the host runs again: only its own software
/// adds hints, and a hint dropped in between (a timer cancelled from outside
/// the host) can only make the host run early, which stepping tick by tick
/// does anyway.
fn fire_at(rt: &Rt, host: Option<&mut crate::host::Host>, now: Duration) -> Option<Duration> {
    let host_now = rt.now();
    let at = host?.next_wake(host_now)?;
    let due = at.saturating_duration_since(host_now);
    Some(now + Duration::from_millis(due.as_nanos().div_ceil(1_000_000) as u64))
}

#[cfg(test)]
mod test {
    use rand::Rng;
    use std::future;
    use std::{
        net::{IpAddr, Ipv4Addr},
        rc::Rc,
        sync::{
            atomic::{AtomicU64, Ordering},
            Arc, Mutex,
        },
        time::Duration,
    };

    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        sync::Semaphore,
        time::Instant,
    };

    use crate::net::UdpSocket;
    use crate::{
        elapsed, hold,
        net::{TcpListener, TcpStream},
        sim_elapsed, since_epoch, Builder, Result, Sim, World,
    };

    /// PATCH (wake hints): a host skipped as idle and run again for a message
    /// jumps its clock over the lag in one go (`Rt::tick_after`); a timer it
    /// armed with tokio directly that fired inside that lag is still counted.
    #[test]
    fn an_unhinted_timer_inside_a_skipped_hosts_lag_is_counted() -> Result {
        let mut sim = Builder::new()
            .tick_duration(Duration::from_millis(1))
            .min_message_latency(Duration::from_millis(1))
            .max_message_latency(Duration::from_millis(1))
            .skip_idle_hosts(true)
            .build();
        sim.host("server", || async {
            tokio::task::spawn_local(async {
                loop {
                    tokio::time::sleep(Duration::from_millis(7)).await;
                }
            });
            let listener = TcpListener::bind(("0.0.0.0", 1234)).await?;
            let (mut s, _) = listener.accept().await?;
            let mut buf = [0u8; 1];
            while s.read_exact(&mut buf).await.is_ok() {
                s.write_all(&buf).await?;
            }
            Ok(())
        });
        sim.client("client", async {
            let mut s = TcpStream::connect(("server", 1234)).await?;
            for i in 0..10u8 {
                crate::time::sleep(Duration::from_millis(50)).await;
                s.write_all(&[i]).await?;
                let mut buf = [0u8; 1];
                s.read_exact(&mut buf).await?;
            }
            Ok(())
        });
        loop {
            let until = sim.idle_until();
            let now = sim.elapsed();
            let done = if until > now + Duration::from_millis(1) {
                sim.step_by(until - now)
            } else {
                sim.step()
            }?;
            if done {
                break;
            }
        }
        assert!(sim.unhinted_wakes() >= 5, "{}", sim.unhinted_wakes());
        Ok(())
    }

    /// PATCH (wake hints): a hinted timer dropped before it fires takes its
    /// hint back, so the simulation does not stop for it; one that is reset
    /// moves its hint; a bare `hint_wake` stays until it passes.
    #[test]
    fn a_dropped_timer_takes_its_hint_back() -> Result {
        let mut sim = Builder::new()
            .tick_duration(Duration::from_millis(1))
            .skip_idle_hosts(true)
            .build();
        sim.client("c", async {
            // A timeout that loses its race: its 50 ms hint must go with it.
            let won = crate::time::timeout(
                Duration::from_millis(50),
                crate::time::sleep(Duration::from_millis(5)),
            )
            .await;
            assert!(won.is_ok());
            let sleep = crate::time::sleep(Duration::from_millis(30));
            tokio::pin!(sleep);
            sleep
                .as_mut()
                .reset(Instant::now() + Duration::from_millis(200));
            sleep.await;
            crate::time::hint_wake(Instant::now() + Duration::from_millis(10));
            crate::time::sleep(Duration::from_millis(100)).await;
            Ok(())
        });
        // Run until the first sleep is done (5 ms), then look ahead.
        while sim.elapsed() < Duration::from_millis(6) {
            sim.step()?;
        }
        // Not 50 ms (the dropped timeout), nor 36 (the reset sleep's old
        // deadline): the reset one's 206, less the tick in which it fires.
        assert_eq!(sim.idle_until(), Duration::from_millis(205));
        let jump = sim.idle_until() - sim.elapsed();
        sim.step_by(jump)?;
        while sim.elapsed() < Duration::from_millis(207) {
            sim.step()?;
        }
        // The bare hint (10 ms) stays although nothing sleeps on it.
        assert_eq!(sim.idle_until(), Duration::from_millis(215));
        assert_eq!(sim.unhinted_wakes(), 0);
        Ok(())
    }

    /// PATCH (wake hints): a world of hinted timers and TCP, stepped to
    /// `idle_until` with idle hosts skipped, records what stepping tick by tick
    /// records, and skips work.
    #[test]
    fn jumping_with_idle_hosts_skipped_gives_the_tick_by_tick_run() -> Result {
        fn world(skip: bool) -> (Vec<(String, Duration)>, u64) {
            let log = Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut sim = Builder::new()
                .rng_seed(7)
                .tick_duration(Duration::from_millis(1))
                .min_message_latency(Duration::from_millis(1))
                .max_message_latency(Duration::from_millis(3))
                .skip_idle_hosts(skip)
                .build();
            sim.host("server", || async {
                let listener = TcpListener::bind(("0.0.0.0", 1234)).await?;
                loop {
                    let (mut s, _) = listener.accept().await?;
                    tokio::task::spawn_local(async move {
                        let mut buf = [0u8; 1];
                        while s.read_exact(&mut buf).await.is_ok() {
                            crate::time::sleep(Duration::from_millis(buf[0] as u64)).await;
                            if s.write_all(&buf).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            for c in 0..3u8 {
                let log = log.clone();
                sim.client(format!("client-{c}"), async move {
                    crate::time::sleep(Duration::from_millis(5 * c as u64)).await;
                    let mut s = TcpStream::connect(("server", 1234)).await?;
                    for i in 0..20u8 {
                        let think = (i * 7 + c * 3) % 13;
                        crate::time::sleep(Duration::from_millis(think as u64)).await;
                        s.write_all(&[i % 5]).await?;
                        let mut buf = [0u8; 1];
                        s.read_exact(&mut buf).await?;
                        log.borrow_mut()
                            .push((format!("client-{c} {i}"), sim_elapsed().unwrap()));
                    }
                    Ok(())
                });
            }
            let mut steps = 0;
            loop {
                let until = if skip {
                    sim.idle_until()
                } else {
                    sim.elapsed()
                };
                let now = sim.elapsed();
                let done = if until > now + Duration::from_millis(1) {
                    sim.step_by(until - now)
                } else {
                    sim.step()
                }
                .unwrap();
                steps += 1;
                if done {
                    break;
                }
            }
            assert_eq!(sim.unhinted_wakes(), 0);
            let log = log.borrow().clone();
            (log, steps)
        }
        let (ticked, tick_steps) = world(false);
        let (jumped, jump_steps) = world(true);
        assert_eq!(ticked.len(), 60);
        assert_eq!(jumped, ticked);
        assert!(
            jump_steps < tick_steps,
            "{jump_steps} steps, {tick_steps} ticks"
        );
        Ok(())
    }

    #[test]
    fn client_error() {
        let mut sim = Builder::new().build();

        sim.client("doomed", async { Err("An Error")? });

        assert!(sim.run().is_err());
    }

    #[test]
    fn timeout() {
        let mut sim = Builder::new()
            .simulation_duration(Duration::from_millis(500))
            .build();

        sim.client("timeout", async {
            tokio::time::sleep(Duration::from_secs(1)).await;

            Ok(())
        });

        assert!(sim.run().is_err());
    }

    #[test]
    fn multiple_clients_all_finish() -> Result {
        let how_many = 3;
        let tick_ms = 10;

        // N = how_many runs, each with a different client finishing immediately
        for run in 0..how_many {
            let mut sim = Builder::new()
                .tick_duration(Duration::from_millis(tick_ms))
                .build();

            let ct = Rc::new(Semaphore::new(how_many));

            for client in 0..how_many {
                let ct = ct.clone();

                sim.client(format!("client-{client}"), async move {
                    let ms = if run == client { 0 } else { 2 * tick_ms };
                    tokio::time::sleep(Duration::from_millis(ms)).await;

                    let p = ct.acquire().await?;
                    p.forget();

                    Ok(())
                });
            }

            sim.run()?;
            assert_eq!(0, ct.available_permits());
        }

        Ok(())
    }

    /// This is a regression test that ensures host software completes when the
    /// host crashes. Before this fix we simply dropped the LocalSet, which did
    /// not ensure resources owned by spawned tasks were dropped. Now we drop
    /// and replace both the tokio Runtime and the LocalSet.
    #[test]
    fn crash_blocks_until_complete() -> Result {
        let ct = Arc::new(());

        let mut sim = Builder::new().build();

        sim.host("host", || {
            let ct = ct.clone();

            async move {
                tokio::spawn(async move {
                    let _into_task = ct;
                    future::pending::<()>().await;
                });

                future::pending().await
            }
        });

        sim.run()?;
        assert_eq!(2, Arc::strong_count(&ct));

        sim.crash("host");
        assert_eq!(1, Arc::strong_count(&ct));

        Ok(())
    }

    #[test]
    fn elapsed_time() -> Result {
        let tick = Duration::from_millis(5);
        let mut sim = Builder::new().tick_duration(tick).build();
        let start_epoch = sim.since_epoch();

        let duration = Duration::from_millis(500);

        sim.client("c1", async move {
            tokio::time::sleep(duration).await;
            assert_eq!(duration, elapsed());
            // For hosts/clients started before the first `sim.run()` call, the
            // `elapsed` and `sim_elapsed` time will be identical.
            assert_eq!(duration, sim_elapsed().unwrap());

            // Logical epoch time should move forward at the same rate the sim
            assert_eq!(start_epoch + duration, since_epoch().unwrap());

            Ok(())
        });

        sim.client("c2", async move {
            tokio::time::sleep(duration).await;
            assert_eq!(duration, elapsed());
            assert_eq!(duration, sim_elapsed().unwrap());
            assert_eq!(start_epoch + duration, since_epoch().unwrap());

            Ok(())
        });

        sim.run()?;

        // sleep duration plus one tick to complete
        assert_eq!(duration + tick, sim.elapsed());

        let start = sim.elapsed();
        sim.client("c3", async move {
            assert_eq!(Duration::ZERO, elapsed());
            // Note that sim_elapsed is total simulation time while elapsed is
            // still zero for this newly created host.
            assert_eq!(duration + tick, sim_elapsed().unwrap());
            assert_eq!(start_epoch + duration + tick, since_epoch().unwrap());
            tokio::time::sleep(duration).await;
            assert_eq!(duration, elapsed());
            assert_eq!(duration + tick + duration, sim_elapsed().unwrap());
            assert_eq!(
                start_epoch + duration + tick + duration,
                since_epoch().unwrap()
            );

            Ok(())
        });

        sim.run()?;

        // Client "c3" takes one sleep duration plus one tick to complete
        assert_eq!(duration + tick, sim.elapsed() - start);

        Ok(())
    }

    /// This is a regression test to ensure it is safe to call sim_elapsed
    /// if current world of host is not set.
    #[test]
    fn sim_elapsed_time() -> Result {
        // Safe to call outside of simution while there
        // is no current world set
        assert!(sim_elapsed().is_none());

        let sim = Builder::new().build();
        // Safe to call while there is no current host set
        World::enter(&sim.world, || assert!(sim_elapsed().is_none()));

        Ok(())
    }

    /// This is a regression test to ensure it is safe to call since_epoch
    /// if current world of host is not set.
    #[test]
    fn since_epoch_regression() -> Result {
        // Safe to call outside of simution while there
        // is no current world set
        assert!(since_epoch().is_none());

        let sim = Builder::new().build();
        // Safe to call while there is no current host set
        World::enter(&sim.world, || assert!(since_epoch().is_none()));

        Ok(())
    }

    #[test]
    fn hold_release_peers() -> Result {
        let global = Duration::from_millis(2);

        let mut sim = Builder::new()
            .min_message_latency(global)
            .max_message_latency(global)
            .build();

        sim.host("server", || async {
            let listener = TcpListener::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1234)).await?;

            while let Ok((mut s, _)) = listener.accept().await {
                assert!(s.write_u8(42).await.is_ok());
            }

            Ok(())
        });

        sim.client("client", async move {
            let mut s = TcpStream::connect("server:1234").await?;

            s.read_u8().await?;

            Ok(())
        });

        sim.hold("server", "client");

        // Verify that msg is not delivered.
        sim.step()?;

        sim.links(|l| {
            assert!(l.count() == 1);
        });

        // Verify that msg is still not delivered.
        sim.step()?;

        sim.release("server", "client");

        sim.run()?;

        Ok(())
    }

    #[test]
    fn partition_peers() -> Result {
        let global = Duration::from_millis(2);

        let mut sim = Builder::new()
            .min_message_latency(global)
            .max_message_latency(global)
            .build();

        sim.host("server", || async {
            let _listener = TcpListener::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1234)).await?;

            Ok(())
        });

        sim.client("client", async move {
            // Peers are partitioned. TCP setup should fail.
            let _ = TcpStream::connect("server:1234").await.unwrap_err();

            Ok(())
        });

        sim.partition("server", "client");

        sim.run()?;

        Ok(())
    }

    struct Expectation {
        expect_a_receive: bool,
        expect_b_receive: bool,
    }

    #[derive(Debug)]
    enum Action {
        Partition,
        PartitionOnewayAB,
        PartitionOnewayBA,
        RepairOnewayAB,
        RepairOnewayBA,
        Repair,
    }

    fn run_with_partitioning(
        host_a: &'static str,
        host_b: &'static str,
        mut partitioning: impl FnMut(&mut Sim) -> Expectation,
    ) -> Result {
        let global = Duration::from_millis(1);

        let mut sim = Builder::new()
            .min_message_latency(global)
            .max_message_latency(global)
            .build();

        let a_did_receive = Arc::new(Mutex::new(None));
        let b_did_receive = Arc::new(Mutex::new(None));

        let make_a = |sim: &mut Sim| {
            sim.client(host_a, {
                let a_did_receive = Arc::clone(&a_did_receive);
                async move {
                    let udp_socket =
                        UdpSocket::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1234)).await?;
                    udp_socket
                        .send_to(&[42], format!("{host_b}:1234"))
                        .await
                        .expect("sending packet should appear to work, even if partitioned");

                    *a_did_receive.lock().unwrap() = Some(matches!(
                        tokio::time::timeout(
                            Duration::from_secs(1),
                            udp_socket.recv_from(&mut [0])
                        )
                        .await,
                        Ok(Ok(_))
                    ));

                    Ok(())
                }
            })
        };

        let make_b = |sim: &mut Sim| {
            sim.client(host_b, {
                let b_did_receive = Arc::clone(&b_did_receive);
                async move {
                    let udp_socket =
                        UdpSocket::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1234)).await?;
                    udp_socket
                        .send_to(&[42], format!("{host_a}:1234"))
                        .await
                        .expect("sending packet should work");

                    *b_did_receive.lock().unwrap() = Some(matches!(
                        tokio::time::timeout(
                            Duration::from_secs(1),
                            udp_socket.recv_from(&mut [0])
                        )
                        .await,
                        Ok(Ok(_))
                    ));

                    Ok(())
                }
            })
        };

        let construct_a_first = sim.world.borrow_mut().rng.random_bool(0.5);
        if construct_a_first {
            make_a(&mut sim);
            make_b(&mut sim);
        } else {
            make_b(&mut sim);
            make_a(&mut sim);
        }

        let Expectation {
            expect_a_receive,
            expect_b_receive,
        } = partitioning(&mut sim);
        sim.run()?;

        assert_eq!(*a_did_receive.lock().unwrap(), Some(expect_a_receive));
        assert_eq!(*b_did_receive.lock().unwrap(), Some(expect_b_receive));

        Ok(())
    }

    #[test]
    fn partition_peers_oneway() -> Result {
        run_with_partitioning("a", "b", |sim: &mut Sim| {
            sim.partition_oneway("a", "b");
            Expectation {
                expect_a_receive: true,
                expect_b_receive: false,
            }
        })
    }

    #[test]
    fn partition_peers_oneway_many_cases() -> Result {
        const HOST_A: &str = "a";
        const HOST_B: &str = "b";

        // Test all permutations of the above 6 actions.

        fn run_with_actions(actions: &[Action]) -> Result {
            run_with_partitioning(HOST_A, HOST_B, |sim: &mut Sim| {
                let mut expect_a_receive = true;
                let mut expect_b_receive = true;
                for action in actions {
                    match action {
                        Action::Partition => {
                            sim.partition(HOST_A, HOST_B);
                            expect_a_receive = false;
                            expect_b_receive = false;
                        }
                        Action::PartitionOnewayAB => {
                            sim.partition_oneway(HOST_A, HOST_B);
                            expect_b_receive = false;
                        }
                        Action::PartitionOnewayBA => {
                            sim.partition_oneway(HOST_B, HOST_A);
                            expect_a_receive = false;
                        }
                        Action::RepairOnewayAB => {
                            sim.repair_oneway(HOST_A, HOST_B);
                            expect_b_receive = true;
                        }
                        Action::RepairOnewayBA => {
                            sim.repair_oneway(HOST_B, HOST_A);
                            expect_a_receive = true;
                        }
                        Action::Repair => {
                            sim.repair(HOST_A, HOST_B);
                            expect_a_receive = true;
                            expect_b_receive = true;
                        }
                    }
                }
                Expectation {
                    expect_a_receive,
                    expect_b_receive,
                }
            })?;
            Ok(())
        }

        run_with_actions(&[Action::PartitionOnewayAB])?;
        run_with_actions(&[Action::PartitionOnewayBA])?;
        run_with_actions(&[Action::Partition, Action::RepairOnewayAB])?;
        run_with_actions(&[Action::Partition, Action::RepairOnewayBA])?;
        run_with_actions(&[Action::PartitionOnewayAB, Action::Repair])?;
        run_with_actions(&[Action::PartitionOnewayBA, Action::Repair])?;
        run_with_actions(&[Action::PartitionOnewayBA, Action::RepairOnewayAB])?;
        run_with_actions(&[Action::PartitionOnewayAB, Action::PartitionOnewayBA])?;
        run_with_actions(&[
            Action::Partition,
            Action::RepairOnewayAB,
            Action::RepairOnewayBA,
        ])?;

        Ok(())
    }

    #[test]
    fn elapsed_time_across_restarts() -> Result {
        let tick_ms = 5;
        let mut sim = Builder::new()
            .tick_duration(Duration::from_millis(tick_ms))
            .build();

        let clock = Arc::new(AtomicU64::new(0));
        let actual = clock.clone();

        sim.host("host", move || {
            let clock = clock.clone();

            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    clock.store(elapsed().as_millis() as u64, Ordering::SeqCst);
                }
            }
        });

        sim.step()?;
        assert_eq!(tick_ms - 1, actual.load(Ordering::SeqCst));

        sim.bounce("host");
        sim.step()?;
        assert_eq!((tick_ms * 2) - 1, actual.load(Ordering::SeqCst));

        Ok(())
    }

    #[test]
    fn elapsed_time_across_crashes() -> Result {
        let tick_ms = 5;
        let mut sim = Builder::new()
            .tick_duration(Duration::from_millis(tick_ms))
            .build();

        let clock_1 = Arc::new(AtomicU64::new(0));
        let clock_1_moved = clock_1.clone();

        sim.host("host1", move || {
            let clock = clock_1_moved.clone();
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    clock.store(sim_elapsed().unwrap().as_millis() as u64, Ordering::SeqCst);
                }
            }
        });

        // Crashing host 1
        sim.crash("host1");
        sim.step()?;
        // After bouncing host 1, host's clock must be synced.
        sim.bounce("host1");
        sim.step()?;
        assert_eq!(
            2 * tick_ms - 1,
            clock_1.load(Ordering::SeqCst),
            "Host 1 should have caught up"
        );

        Ok(())
    }

    #[test]
    fn host_finishes_with_error() {
        let mut sim = Builder::new().build();

        sim.host("host", || async {
            Err("Host software finished unexpectedly")?
        });

        assert!(sim.step().is_err());
    }

    #[test]
    fn manual_message_delivery() -> Result {
        let mut sim = Builder::new().build();

        sim.host("a", || async {
            let l = TcpListener::bind("0.0.0.0:1234").await?;

            _ = l.accept().await?;

            Ok(())
        });

        sim.client("b", async {
            hold("a", "b");

            _ = TcpStream::connect("a:1234").await?;

            Ok(())
        });

        assert!(!sim.step()?);

        sim.links(|mut l| {
            let a_to_b = l.next().unwrap();
            a_to_b.deliver_all();
        });

        assert!(sim.step()?);

        Ok(())
    }

    /// This is a regression test that ensures JoinError::Cancelled is not
    /// propagated to the test when the host crashes, which was causing
    /// incorrect test failure.
    #[test]
    fn run_after_host_crashes() -> Result {
        let mut sim = Builder::new().build();

        sim.host("h", || async { future::pending().await });

        sim.crash("h");

        sim.run()
    }

    #[test]
    fn restart_host_after_crash() -> Result {
        let mut sim = Builder::new().build();

        let data = Arc::new(AtomicU64::new(0));
        let data_cloned = data.clone();

        sim.host("h", move || {
            let data_cloned = data_cloned.clone();
            async move {
                data_cloned.store(data_cloned.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
                Ok(())
            }
        });

        // crash and step to execute the err handling logic
        sim.crash("h");
        sim.step()?;

        // restart and step to ensure the host software runs
        sim.bounce("h");
        sim.step()?;
        // check that software actually runs
        assert_eq!(1, data.load(Ordering::SeqCst));

        Ok(())
    }

    #[test]
    fn override_link_latency() -> Result {
        let global = Duration::from_millis(2);

        let mut sim = Builder::new()
            .min_message_latency(global)
            .max_message_latency(global)
            .build();

        sim.host("server", || async {
            let listener = TcpListener::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 1234)).await?;

            while let Ok((mut s, _)) = listener.accept().await {
                assert!(s.write_u8(9).await.is_ok());
            }

            Ok(())
        });

        sim.client("client", async move {
            let mut s = TcpStream::connect("server:1234").await?;

            let start = Instant::now();
            s.read_u8().await?;
            assert_eq!(global, start.elapsed());

            Ok(())
        });

        sim.run()?;

        let degraded = Duration::from_millis(10);

        sim.client("client2", async move {
            let mut s = TcpStream::connect("server:1234").await?;

            let start = Instant::now();
            s.read_u8().await?;
            assert_eq!(degraded, start.elapsed());

            Ok(())
        });

        sim.set_link_latency("client2", "server", degraded);

        sim.run()
    }

    #[test]
    fn is_host_running() -> Result {
        let mut sim = Builder::new().build();

        sim.client("client", async { future::pending().await });
        sim.host("host", || async { future::pending().await });

        assert!(!sim.step()?);

        assert!(sim.is_host_running("client"));
        assert!(sim.is_host_running("host"));

        sim.crash("host");
        assert!(!sim.is_host_running("host"));

        Ok(())
    }

    #[test]
    #[cfg(feature = "regex")]
    fn host_scan() -> Result {
        let mut sim = Builder::new().build();

        let how_many = 3;
        for i in 0..how_many {
            sim.host(format!("host-{i}"), || async { future::pending().await })
        }

        let mut ips = sim.lookup_many(regex::Regex::new(".*")?);
        ips.sort();

        assert_eq!(how_many, ips.len());

        for (i, ip) in ips.iter().enumerate() {
            assert_eq!(
                format!("host-{i}"),
                sim.reverse_lookup(*ip).ok_or("Unable to resolve ip")?
            );
        }

        Ok(())
    }

    #[test]
    #[cfg(feature = "regex")]
    fn bounce_multiple_hosts_with_regex() -> Result {
        let mut sim = Builder::new().build();

        let count = Arc::new(AtomicU64::new(0));
        for i in 1..=3 {
            let count = count.clone();
            sim.host(format!("host-{}", i), move || {
                let count = count.clone();
                async move {
                    count.fetch_add(1, Ordering::SeqCst);
                    future::pending().await
                }
            });
        }

        sim.step()?;
        assert_eq!(count.load(Ordering::SeqCst), 3);
        sim.bounce(regex::Regex::new("host-[12]")?);
        sim.step()?;
        assert_eq!(count.load(Ordering::SeqCst), 5);

        Ok(())
    }

    #[test]
    #[cfg(feature = "regex")]
    fn hold_all() -> Result {
        let mut sim = Builder::new().build();

        sim.host("host", || async {
            let l = TcpListener::bind("0.0.0.0:1234").await?;

            loop {
                _ = l.accept().await?;
            }
        });

        sim.client("test", async {
            hold(regex::Regex::new(r".*")?, regex::Regex::new(r".*")?);

            assert!(tokio::time::timeout(
                Duration::from_millis(100),
                TcpStream::connect("host:1234")
            )
            .await
            .is_err());

            crate::release(regex::Regex::new(r".*")?, regex::Regex::new(r".*")?);

            assert!(TcpStream::connect("host:1234").await.is_ok());

            Ok(())
        });

        sim.run()
    }
}
