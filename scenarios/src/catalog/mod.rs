//! The scenario catalog: each scenario is one [`Def`], a value that holds its name, its
//! description, the fault it is about, its world (the workload), its fault plan
//! generator (which draws every fault from the run's seed within the scenario's
//! bounds) and its probe (the witness, read from the history, that the fault
//! happened). [`SCENARIOS`] lists them in the order reports show them.
//!
//! Layout: one module per family of scenarios, each holding its `Def`s and what they
//! share (a world, a plan shape): `no_faults` (contention, long holds, reentrancy, the
//! flash sale), `client_crash`, `pauses` (stop-the-world pauses of a client),
//! `slow_work`, `network` (delays and partitions), `pubsub` (lost unlock messages),
//! `server` (a Redis server crashes or pauses), `replication` (failover and split
//! brain under Sentinel), `clock` (a server's clock jumps or drifts, a client's wall
//! clock steps), `read_write` (a read/write mix for read-write locks: short
//! holds, holds on the watchdog, a paused writer) and `redlock`
//! (five independent masters), `zookeeper` (a ZooKeeper session expiring, a leader
//! crashing after a commit, a lagging follower), `mysql` (a
//! holder's MySQL connection dropped under its `GET_LOCK`, a primary lost before its
//! replica had the lock, the server's machine crashing after a grant and recovering
//! what `innodb_flush_log_at_trx_commit` made durable), `profiles` (a design
//! family's real time scale as the base of a world: Redisson's 30 s lease), `segments`
//! (the segmented stock of Dewu's article: one lock per stock segment). The probes
//! themselves are history readers in
//! [`crate::checkers`] (several scenarios share one, and they are tested on hand-built
//! histories there); a `Def` names the one it uses and with what arguments.
//!
//! Adding a scenario: a `Def` in its family's module (or a new module), and its line in
//! [`SCENARIOS`]. Its `needs` say what it asks of a design's system (a lock server to
//! pause, Sentinel failover, session expiry...: [`sim::system::Capability`]); it runs
//! every design whose system has them, and no list of scenario names says where.
//!
//! A scenario never names a design: the same scenario runs every design, and the
//! checkers judge only the history.

mod client_crash;
mod clock;
mod mongo;
mod mysql;
mod network;
mod no_faults;
mod pauses;
mod profiles;
mod pubsub;
mod read_write;
mod redlock;
mod replication;
mod segments;
mod server;
mod slow_work;
mod zookeeper;

use std::ops::{Range, RangeInclusive};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::History;
use sim::world::{ServerSpec, Workload, sub_seed};

use crate::params::Param;
use lock_impl::Backend;
use sim::system::Capability;

pub use profiles::Profile;
pub use read_write::READ_SHARE;
pub use redlock::BARE_MAJORITY_CLIENT;

/// Every scenario, in the order reports list them.
pub static SCENARIOS: &[&Def] = &[
    &no_faults::NO_FAULTS,
    &client_crash::CLIENT_CRASH,
    &pauses::GC_PAUSE,
    &pauses::GC_PAUSE_PLAIN_STORAGE,
    &slow_work::SLOW_WORK,
    &network::NETWORK_DELAY,
    &no_faults::LONG_WORK,
    &no_faults::REENTRANCY,
    &pubsub::UNLOCK_MESSAGE_LOST,
    &server::SERVER_RESTART,
    &server::SERVER_RESTART_AOF,
    &server::SERVER_RESTART_DELAYED,
    &server::SERVER_PAUSE,
    &network::PARTITION,
    &replication::FAILOVER,
    &replication::FAILOVER_WAIT,
    &replication::SPLIT_BRAIN,
    &replication::SPLIT_BRAIN_MIN_REPLICAS,
    &clock::CLOCK_JUMP,
    &clock::CLOCK_DRIFT,
    &pauses::ACQUIRE_PAUSE,
    &redlock::REDLOCK_CLOCK_JUMP,
    &redlock::REDLOCK_RESTART,
    &redlock::REDLOCK_RESTART_AOF,
    &redlock::REDLOCK_RESTART_DELAYED,
    &redlock::REDLOCK_GC_PAUSE,
    &no_faults::FLASH_SALE,
    &zookeeper::ZK_SESSION_EXPIRY,
    &zookeeper::LEADER_CRASH,
    &zookeeper::ZK_FOLLOWER_STALE,
    &clock::CLIENT_CLOCK_STEP,
    &clock::CLIENT_CLOCKS_APART,
    &clock::CLIENT_CLOCK_SLEW,
    &profiles::RENEWAL_BLIP,
    &mysql::MYSQL_CONNECTION_DROP,
    &mysql::MYSQL_WAIT_TIMEOUT,
    &read_write::READ_WRITE,
    &segments::SEGMENTED_STOCK,
    &mongo::MONGO_FAILOVER,
    &mongo::MONGO_PARTITION,
    &mysql::MYSQL_FAILOVER,
    &read_write::READ_WRITE_CONTENTION,
    &read_write::READ_WRITE_LONG_WORK,
    &mysql::MYSQL_RESTART,
    &mysql::MYSQL_RESTART_FLUSH_2,
    &network::SERVER_ISOLATED,
];

/// One scenario, whole: what it says of itself, its world, its faults and its probe.
#[derive(Debug)]
pub struct Def {
    /// The user-facing identifier.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// The fault this scenario is about, as its probe checks it.
    pub fault_about: &'static str,
    /// The family of faults it belongs to (a column of the comparison by system).
    pub class: FaultClass,
    /// What it needs from the system a design locks on (its faults' targets and its
    /// probe): it runs every design whose system has all of it
    /// ([`sim::world::capabilities`]); nothing for a scenario of client faults.
    pub needs: &'static [Capability],
    /// Its world: the workload, made from the catalog's base (see [`base`]).
    pub world: fn(&Workload) -> Workload,
    /// The sizes of its faults that `--param` can pin (besides the workload knobs every
    /// scenario has, see [`Scenario::has_param`]); its plan draws each through
    /// [`Draw::quantity`].
    pub quantities: &'static [Param],
    /// Its faults for one seed: every time, target and size drawn through the
    /// [`Draw`], in a fixed order (the order is part of every seed's history).
    pub plan: fn(&mut Draw) -> Vec<Fault>,
    /// Its "the fault happened" probe on a history of its world (with the workload it
    /// ran): a description of the witness, or `None` if the run never saw the fault.
    pub probe: fn(&History, &Workload) -> Option<String>,
}

/// The families of faults, one column each in the comparison by system (the
/// lock-service comparison's table): what a scenario injects, whatever system it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    /// No fault: contention, long holds, reentrancy, the flash sale.
    None,
    /// A client stops the world (a GC pause) while it holds or acquires the lock.
    ClientPause,
    /// A client crashes while it holds the lock.
    ClientCrash,
    /// A critical section outlasts the lease.
    SlowWork,
    /// Replies to a client are delayed.
    NetworkDelay,
    /// A client is cut off from its servers (or its connections reset), or servers from
    /// each other.
    Partition,
    /// The lock's server stops for a while.
    ServerPause,
    /// The lock's server crashes, and restarts.
    ServerCrash,
    /// A primary is lost and another takes its place (Sentinel, an election, a
    /// promoted replica).
    Failover,
    /// A server's clock steps or drifts.
    ServerClock,
    /// A client's wall clock steps, slews or disagrees with another's.
    ClientClock,
    /// Release notifications are lost.
    LostNotification,
}

impl FaultClass {
    /// Every class, in the comparison's column order.
    pub const ALL: &[FaultClass] = &[
        FaultClass::None,
        FaultClass::ClientPause,
        FaultClass::ClientCrash,
        FaultClass::SlowWork,
        FaultClass::NetworkDelay,
        FaultClass::Partition,
        FaultClass::ServerPause,
        FaultClass::ServerCrash,
        FaultClass::Failover,
        FaultClass::ServerClock,
        FaultClass::ClientClock,
        FaultClass::LostNotification,
    ];

    /// Its column heading.
    pub fn name(self) -> &'static str {
        match self {
            FaultClass::None => "no fault",
            FaultClass::ClientPause => "client pause",
            FaultClass::ClientCrash => "client crash",
            FaultClass::SlowWork => "slow work",
            FaultClass::NetworkDelay => "network delay",
            FaultClass::Partition => "partition",
            FaultClass::ServerPause => "server pause",
            FaultClass::ServerCrash => "server crash/restart",
            FaultClass::Failover => "failover",
            FaultClass::ServerClock => "server clock",
            FaultClass::ClientClock => "client clock",
            FaultClass::LostNotification => "lost notification",
        }
    }
}

/// What a plan generator draws from: the seed's generator and the bounds the
/// scenario's workload sets.
pub struct Draw<'a> {
    /// The plan's generator, seeded from the run's seed alone.
    pub rng: ChaCha8Rng,
    /// The workload the plan is for.
    pub workload: &'a Workload,
    /// The lease, ms (fault sizes scale with it).
    pub lease: u64,
    /// Fault start times: after warm-up, and early enough for their effects to show.
    pub window: Range<u64>,
    /// Quantities pinned by `--param`.
    pins: &'a [(Param, u64)],
    /// A placed run's placement (see [`Placement`]); `None` for a seeded plan.
    place: Option<Placement>,
    /// Timed faults drawn so far (each [`Draw::timed`] call is one).
    timed: usize,
}

/// Where a placed run puts its scenario's fault, in place of the times the seed draws.
///
/// A plan's *timed* faults are those whose start goes through [`Draw::timed`] (every
/// [`Draw::at`] does); faults at fixed times (a lag for the whole run from time zero)
/// are the world's standing faults. A placed plan keeps the standing faults, puts the
/// first timed fault at the placement and leaves the other timed faults out. Every
/// other draw (targets, sizes: the scenario's ranges already outlast the lease where a
/// length matters) is the seed's, in the seed's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// No timed fault: the standing faults alone (the run whose steps the placements
    /// are read from).
    Bare,
    /// The first timed fault at this millisecond.
    At(u64),
}

/// A placed fault strikes at its placement: a crash that would wait for the leader's
/// next committed lock create crashes the leader there (the placement chose the moment,
/// and can put it between a commit and its reply, which a wait for the commit never
/// does: the reply leaves in the commit's own step).
fn strike_now(fault: &mut Fault) {
    if let FaultKind::Crash { target, .. } | FaultKind::MachineCrash { target, .. } =
        &mut fault.kind
        && matches!(target, Target::LeaderAfterLockCreate { .. })
    {
        *target = Target::Leader;
    }
}

/// A timed fault a placed plan leaves out starts here (and is then dropped).
const LEFT_OUT: u64 = u64::MAX / 4;

impl Draw<'_> {
    /// A start time in [`Draw::window`] (a timed fault's: see [`Placement`]).
    pub fn at(&mut self) -> u64 {
        let drawn = self.rng.random_range(self.window.clone());
        self.timed(drawn)
    }

    /// A timed fault's start, `drawn` from the seed: the seed's time in a seeded plan,
    /// the placement's for a placed plan's first timed fault, left out for the others.
    pub fn timed(&mut self, drawn: u64) -> u64 {
        let n = self.timed;
        self.timed += 1;
        match self.place {
            None => drawn,
            Some(Placement::At(ms)) if n == 0 => ms,
            Some(_) => LEFT_OUT,
        }
    }

    /// A crashed server's downtime, `restart-ms`: unless pinned, drawn from half to
    /// twice the real restart `real` adds up to (a server's measured start, after
    /// systemd's pause for a process it restarts: see
    /// [`lock_impl::scale::SERVER_STARTS`]), at the world's scale (its lease's
    /// [`TimeScale`](lock_impl::scale::TimeScale)): one clock for the lease and the
    /// restart that competes with it.
    pub fn restart_ms(&mut self, real: &[&lock_impl::scale::Constant]) -> u64 {
        let real_ms: u64 = real.iter().map(|c| c.real_ms).sum();
        let scale = lock_impl::scale::TimeScale::for_lease(self.lease);
        self.quantity(
            Param::RestartMs,
            scale.ms(real_ms / 2)..=scale.ms(real_ms * 2),
        )
    }

    /// The quantity `param`, drawn from `range` unless it is pinned (then the pinned
    /// value). It is drawn either way, so pinning one quantity leaves every other draw
    /// as the seed made it.
    pub fn quantity(&mut self, param: Param, range: RangeInclusive<u64>) -> u64 {
        let drawn = self.rng.random_range(range);
        self.pins
            .iter()
            .find(|(p, _)| *p == param)
            .map_or(drawn, |(_, v)| *v)
    }
}

/// One scenario of the catalog as a run uses it: its [`Def`], with the workload's knobs
/// and fault sizes that `--param` pinned, or a hand-written plan.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The user-facing identifier.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// The fault this scenario is about, as its probe checks it.
    pub fault_about: &'static str,
    /// The family of faults it belongs to.
    pub class: FaultClass,
    /// The workload.
    pub workload: Workload,
    /// A hand-written plan that replaces the seed's (`locksim run --plan FILE`), and
    /// the file it came from (for replay commands).
    pub fixed_plan: Option<(FaultPlan, String)>,
    def: &'static Def,
    /// Quantities pinned by `--param` (see [`crate::params`]), sorted.
    pub(crate) params: Vec<(Param, u64)>,
    /// The time scale its world was built at (`--profile`; the catalog's by default).
    pub profile: Profile,
    /// Where its fault is placed instead of drawn (`--place MS`; see [`Placement`]).
    pub placement: Option<Placement>,
}

/// The shape of a scenario's world, which decides the designs it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One master, no replicas: every design runs here; a design that locks on N
    /// independent masters (Redlock) gets N copies of that master.
    SingleMaster,
    /// A master with replicas (and Sentinels): single-master designs only (Redlock is
    /// defined over independent masters, without replication).
    Replicated,
    /// N independent masters: designs that lock on several masters only.
    Masters(usize),
}

/// The workload every scenario's world starts from.
pub fn base() -> Workload {
    // A reply timeout a real service would use: a few leases (500 ms for a 200 ms
    // lease), not the redis crate's generous default. A reply later than that is an
    // unknown outcome (`info`), so every scenario that delays, pauses or cuts off a
    // server exercises how a design handles not knowing.
    Workload {
        response_timeout_ms: 500,
        ..Workload::default()
    }
}

/// Every scenario, in the order reports list them.
pub fn catalog() -> Vec<Scenario> {
    let base = base();
    SCENARIOS
        .iter()
        .map(|def| Scenario::of(def, &base))
        .collect()
}

/// The catalog's names, comma separated, for error messages.
pub fn scenario_names() -> String {
    SCENARIOS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The scenario called `name`, or an error listing the allowed names.
pub fn find(name: &str) -> Result<Scenario, String> {
    SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .map(|def| Scenario::of(def, &base()))
        .ok_or_else(|| format!("unknown scenario '{name}'; allowed: {}", scenario_names()))
}

impl Scenario {
    /// `def` in its own world, nothing pinned.
    fn of(def: &'static Def, base: &Workload) -> Scenario {
        Scenario {
            name: def.name,
            description: def.description,
            fault_about: def.fault_about,
            class: def.class,
            workload: (def.world)(base),
            fixed_plan: None,
            def,
            params: Vec::new(),
            profile: Profile::Catalog,
            placement: None,
        }
    }

    /// This scenario's world rebuilt from `profile`'s base workload (`locksim run
    /// --profile redisson`), its pinned quantities pinned again. The faults' sizes
    /// that the scenario draws as multiples of the lease scale with the profile's
    /// lease, and their times spread over its run; a world's absolute settings
    /// (Sentinel timeouts, link latencies, a fixed number of clients) stay as the
    /// scenario sets them. A scenario whose world ignores the base (`renewal-blip`
    /// sets Redisson's scale itself) is unchanged by it.
    pub fn with_profile(self, profile: Profile) -> Result<Scenario, String> {
        let params = self.params.clone();
        let mut s = Scenario {
            workload: (self.def.world)(&profile.base()),
            params: Vec::new(),
            profile,
            ..self
        };
        for (p, v) in params {
            s = s.with_param(p, v)?;
        }
        Ok(s)
    }

    /// The shape of this scenario's world.
    pub fn topology(&self) -> Topology {
        let w = &self.workload;
        if w.sentinel.is_some() || w.servers.iter().any(|s| s.replica_of.is_some()) {
            Topology::Replicated
        } else if w.servers.len() > 1 {
            Topology::Masters(w.servers.len())
        } else {
            Topology::SingleMaster
        }
    }

    /// Whether `param` is a quantity of this scenario (a size of its faults, or a
    /// workload knob every scenario has).
    pub fn has_param(&self, param: Param) -> bool {
        matches!(param, Param::LeaseMs | Param::Clients | Param::WorkMs)
            || self.def.quantities.contains(&param)
    }

    /// Whether a design on `backend` that locks on `masters` independent Redis masters
    /// runs here: see [`Scenario::fit`].
    pub fn applies_to(&self, backend: Backend, masters: usize) -> bool {
        self.fit(backend, masters).is_ok()
    }

    /// The first capability this scenario needs that the system behind `backend` lacks.
    pub fn missing(&self, backend: Backend) -> Option<Capability> {
        sim::world::missing(backend, self.def.needs)
    }

    /// Whether a design on `backend` that locks on `masters` independent Redis masters
    /// runs here, or why not (the `.` of a matrix cell): the scenario's
    /// [`Def::needs`] against what the design's system has
    /// ([`sim::world::capabilities`]), then, on Redis, the world's shape against the
    /// design's masters (Redlock runs over independent masters only, a single-master
    /// design never there).
    pub fn fit(&self, backend: Backend, masters: usize) -> Result<(), String> {
        if let Some(missing) = self.missing(backend) {
            return Err(format!(
                "needs {}, which {} does not have",
                missing.describe(),
                backend.name()
            ));
        }
        if backend != Backend::Redis {
            return Ok(());
        }
        match self.topology() {
            Topology::SingleMaster => Ok(()),
            Topology::Replicated if masters <= 1 => Ok(()),
            Topology::Replicated => Err(format!(
                "its world is one master with replicas; the design locks on {masters} independent masters"
            )),
            Topology::Masters(_) if masters > 1 => Ok(()),
            Topology::Masters(n) => Err(format!(
                "its world is {n} independent masters (Redlock); the design locks on one"
            )),
        }
    }

    /// The workload for a design on `backend` that locks on `masters` independent
    /// masters: a single-master world becomes `redis-1` … `redis-N`, each configured
    /// as the one master was (persistence, clock); a ZooKeeper or MySQL design's world
    /// has that server in the one master's place; every other world is the scenario's
    /// own.
    pub fn workload_for(&self, backend: Backend, masters: usize) -> Workload {
        if backend != Backend::Redis {
            return self.workload.clone().on_system(backend);
        }
        let mut w = self.workload.clone();
        if masters > 1 && self.topology() == Topology::SingleMaster && !w.servers.is_empty() {
            let one = w.servers[0].clone();
            w.servers = (1..=masters)
                .map(|i| ServerSpec {
                    name: format!("redis-{i}"),
                    ..one.clone()
                })
                .collect();
        }
        w
    }

    /// The scenario's "the fault happened" probe: a description of the witness, or
    /// `None` if this history never saw the fault the scenario is about.
    pub fn probe(&self, history: &History) -> Option<String> {
        (self.def.probe)(history, &self.workload)
    }

    /// The fault plan for `seed`: times, targets and sizes drawn from the seed.
    pub fn plan(&self, seed: u64) -> FaultPlan {
        if let Some((plan, _)) = &self.fixed_plan {
            return plan.clone();
        }
        let w = &self.workload;
        let mut draw = Draw {
            rng: ChaCha8Rng::seed_from_u64(sub_seed(seed, sim::seed::stream::FAULT_PLAN)),
            workload: w,
            lease: w.lease_ms,
            window: self.fault_window(),
            pins: &self.params,
            place: self.placement,
            timed: 0,
        };
        let mut faults = (self.def.plan)(&mut draw);
        faults.retain(|f| f.at_ms < LEFT_OUT);
        if let Some(Placement::At(ms)) = self.placement
            && let Some(placed) = faults.iter_mut().find(|f| f.at_ms == ms)
        {
            strike_now(placed);
        }
        FaultPlan { faults }
    }

    /// Where its plans draw fault start times: after warm-up, and early enough for
    /// their effects to show.
    pub fn fault_window(&self) -> Range<u64> {
        let w = &self.workload;
        300..w.duration_ms.saturating_sub(w.lease_ms * 4).max(301)
    }

    /// This scenario with its fault placed (`Some`) or drawn from the seed (`None`).
    pub fn placed(mut self, placement: Option<Placement>) -> Scenario {
        self.placement = placement;
        self
    }

    /// How many timed faults its plan draws (none: nothing to place; see
    /// [`Placement`]).
    pub fn timed_faults(&self) -> usize {
        if self.fixed_plan.is_some() {
            return 0;
        }
        let w = &self.workload;
        let mut draw = Draw {
            rng: ChaCha8Rng::seed_from_u64(0),
            workload: w,
            lease: w.lease_ms,
            window: self.fault_window(),
            pins: &self.params,
            place: None,
            timed: 0,
        };
        (self.def.plan)(&mut draw);
        draw.timed
    }

    /// This scenario with `param` pinned to `value`, or an error naming the scenarios
    /// whose faults have that quantity.
    pub fn with_param(mut self, param: Param, value: u64) -> Result<Scenario, String> {
        if !self.has_param(param) {
            let fitting: Vec<&str> = catalog()
                .into_iter()
                .filter(|s| s.has_param(param))
                .map(|s| s.name)
                .collect();
            return Err(format!(
                "--param {param}: scenario {} has no such quantity; scenarios with it: {}",
                self.name,
                fitting.join(", ")
            ));
        }
        let w = &mut self.workload;
        match param {
            Param::LeaseMs => w.lease_ms = value,
            Param::Clients => w.clients = value as u32,
            Param::WorkMs => w.work_ms = value,
            _ => {}
        }
        self.params.retain(|(p, _)| *p != param);
        self.params.push((param, value));
        self.params.sort();
        // A pinned size must be one the scenario's faults can have, as a plan file's
        // must: refused with the fault's own rule, never clamped into range.
        if self.fixed_plan.is_none()
            && let Err(e) = crate::plancheck::check_values(&self.plan(0))
        {
            return Err(format!(
                "--param {param}={value}: scenario {} would run a fault it cannot have: {e}",
                self.name
            ));
        }
        Ok(self)
    }

    /// The profile (unless the catalog's) and the pinned parameters, as `--profile` and
    /// `--param` flags (empty if neither), for replay commands.
    pub fn param_flags(&self) -> String {
        let profile = match self.profile {
            Profile::Catalog => String::new(),
            other => format!(" --profile {}", other.name()),
        };
        let params: String = self
            .params
            .iter()
            .map(|(p, v)| format!(" --param {p}={v}"))
            .collect();
        let place = match self.placement {
            None => String::new(),
            Some(Placement::Bare) => " --place none".into(),
            Some(Placement::At(ms)) => format!(" --place {ms}"),
        };
        profile + &params + &place
    }
}
