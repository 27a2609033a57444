//! proptest strategies for fault plans and workloads within a scenario's world, so a
//! `proptest!` explores schedules and proptest's shrinking hands back a minimal failing
//! one: fewer faults, shorter, earlier, aimed at simpler targets, with fewer clients
//! and a shorter run.
//!
//! Every value is valid in its world: faults aim only at hosts the world has, sizes are
//! bounded by the scenario's lease and times by its run, and a workload that drops
//! clients re-aims the faults that named them. A failing case's [`crate::Failure`]
//! prints the plan as a plan file and the replay command that runs it.
//!
//! ```
//! use locksim::proptest::prelude::*;
//! use locksim::proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
//! use locksim::strategy::{plans, FaultSort};
//! use locksim::Expect;
//!
//! // A runner as `proptest!` makes one, kept small (and seeded) for the example.
//! let config = ProptestConfig { cases: 2, failure_persistence: None, ..ProptestConfig::default() };
//! let mut runner =
//!     TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
//! let strategy = plans("gc-pause").sorts(&[FaultSort::Crash]).max_faults(1);
//! runner
//!     .run(&strategy, |plan| {
//!         // Crashed holders never make `set-nx-px-lua` remove someone else's lock.
//!         locksim::check(locksim::builtin("set-nx-px-lua"))
//!             .scenario("gc-pause")
//!             .plan(plan)
//!             .seeds(0..1)
//!             .fixed_seeds()
//!             .verify(Expect::CheckerValid("ownership".into()))?;
//!         Ok(())
//!     })
//!     .unwrap();
//! ```

use proptest::prelude::*;
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::TestRunner;
use scenarios::catalog::{Scenario, Topology};
use scenarios::planfile::PlanFile;
use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::world::Workload;

/// A kind of fault a generated plan may hold.
///
/// ```
/// use locksim::strategy::{plans, FaultSort};
/// // Server faults too, pauses first (shrinking prefers the earlier sorts).
/// let everything = plans("gc-pause").sorts(&FaultSort::ALL);
/// let clients_only = plans("gc-pause").sorts(&FaultSort::CLIENT).max_faults(2);
/// # let _ = (everything, clients_only);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultSort {
    /// A client stops the world (a GC pause): the holder, an acquirer, the client the
    /// server's record names, or a named client; up to four leases.
    Pause,
    /// A client's process dies and restarts within four leases.
    Crash,
    /// Replies to a client arrive late (up to two leases) for up to four leases.
    Delay,
    /// A client is cut off from every server for up to eight leases; held messages
    /// arrive when it heals.
    Partition,
    /// A holder's critical section runs up to four leases longer.
    SlowWork,
    /// A Redis server stops for up to four leases (its clock runs on).
    ServerPause,
    /// A Redis server's process dies and restarts within two leases, with what its
    /// persistence kept (nothing, by default).
    ServerCrash,
    /// A Redis server's wall clock jumps forward up to four leases.
    ClockJump,
    /// The servers drop pub/sub messages (unlock notifications) for a while.
    DropPushes,
}

impl FaultSort {
    /// Faults of the client's own making or its network's: what any lock must live
    /// with. The default of [`fault_plans`] and [`plans`].
    pub const CLIENT: [FaultSort; 5] = [
        FaultSort::Pause,
        FaultSort::Crash,
        FaultSort::Delay,
        FaultSort::Partition,
        FaultSort::SlowWork,
    ];

    /// Every sort, client faults first.
    pub const ALL: [FaultSort; 9] = [
        FaultSort::Pause,
        FaultSort::Crash,
        FaultSort::Delay,
        FaultSort::Partition,
        FaultSort::SlowWork,
        FaultSort::ServerPause,
        FaultSort::ServerCrash,
        FaultSort::ClockJump,
        FaultSort::DropPushes,
    ];
}

/// A client a raw fault aims at, before the world's client count is known.
#[derive(Debug, Clone, Copy)]
enum ClientAim {
    Holder,
    Acquirer,
    LockOwner,
    /// The `n`th client, modulo the world's clients.
    Nth(u32),
}

#[derive(Debug, Clone, Copy)]
enum ServerAim {
    LockServer,
    Nth(usize),
}

/// A fault with its target still relative to the world.
#[derive(Debug, Clone)]
enum Raw {
    Pause(ClientAim, u64),
    Crash(ClientAim, u64),
    Delay(ClientAim, u64, u64),
    Partition(ClientAim, u64),
    SlowWork(ClientAim, u64),
    ServerPause(ServerAim, u64),
    ServerCrash(ServerAim, u64),
    ClockJump(ServerAim, u64),
    DropPushes(u64),
}

/// What the strategies need to know of a world.
#[derive(Debug, Clone)]
struct World {
    clients: u32,
    servers: Vec<String>,
    lease_ms: u64,
    duration_ms: u64,
}

impl World {
    fn of(w: &Workload) -> World {
        World {
            clients: w.clients.max(1),
            servers: w.servers.iter().map(|s| s.name.clone()).collect(),
            lease_ms: w.lease_ms.max(1),
            duration_ms: w.duration_ms.max(1),
        }
    }
}

fn client_aim(max_clients: u32) -> BoxedStrategy<ClientAim> {
    prop_oneof![
        Just(ClientAim::Holder),
        Just(ClientAim::Acquirer),
        Just(ClientAim::LockOwner),
        (0..max_clients.max(1)).prop_map(ClientAim::Nth),
    ]
    .boxed()
}

fn server_aim(servers: usize) -> BoxedStrategy<ServerAim> {
    if servers == 0 {
        return Just(ServerAim::LockServer).boxed();
    }
    prop_oneof![
        Just(ServerAim::LockServer),
        (0..servers).prop_map(ServerAim::Nth),
    ]
    .boxed()
}

fn raw_fault(sort: FaultSort, w: &World) -> BoxedStrategy<Raw> {
    let lease = w.lease_ms;
    let c = || client_aim(w.clients);
    let s = || server_aim(w.servers.len());
    match sort {
        FaultSort::Pause => (c(), 1..=lease * 4)
            .prop_map(|(t, d)| Raw::Pause(t, d))
            .boxed(),
        FaultSort::Crash => (c(), 1..=lease * 4)
            .prop_map(|(t, r)| Raw::Crash(t, r))
            .boxed(),
        FaultSort::Delay => (c(), 1..=lease * 2, 1..=lease * 4)
            .prop_map(|(t, l, d)| Raw::Delay(t, l, d))
            .boxed(),
        FaultSort::Partition => (c(), 1..=lease * 8)
            .prop_map(|(t, d)| Raw::Partition(t, d))
            .boxed(),
        FaultSort::SlowWork => (c(), 1..=lease * 4)
            .prop_map(|(t, e)| Raw::SlowWork(t, e))
            .boxed(),
        FaultSort::ServerPause => (s(), 1..=lease * 4)
            .prop_map(|(t, d)| Raw::ServerPause(t, d))
            .boxed(),
        FaultSort::ServerCrash => (s(), 1..=lease * 2)
            .prop_map(|(t, r)| Raw::ServerCrash(t, r))
            .boxed(),
        FaultSort::ClockJump => (s(), 1..=lease * 4)
            .prop_map(|(t, d)| Raw::ClockJump(t, d))
            .boxed(),
        FaultSort::DropPushes => (1..=w.duration_ms).prop_map(Raw::DropPushes).boxed(),
    }
}

/// One raw fault with its start time, of one of `sorts` (the client sorts if none).
fn raw_fault_at(w: &World, sorts: &[FaultSort]) -> BoxedStrategy<(u64, Raw)> {
    let sorts = if sorts.is_empty() {
        &FaultSort::CLIENT[..]
    } else {
        sorts
    };
    let kinds: Vec<BoxedStrategy<Raw>> = sorts.iter().map(|s| raw_fault(*s, w)).collect();
    // Union shrinks towards the first alternative: the sorts in the order given.
    (0..w.duration_ms, proptest::strategy::Union::new(kinds)).boxed()
}

/// The plan of `raw` in a world with `clients` clients and these servers.
fn resolve(raw: &[(u64, Raw)], clients: u32, servers: &[String]) -> FaultPlan {
    let client = |a: ClientAim| match a {
        ClientAim::Holder => Target::Holder,
        ClientAim::Acquirer => Target::Acquirer,
        ClientAim::LockOwner => Target::LockOwner,
        ClientAim::Nth(n) => Target::Host(format!("client-{}", n % clients.max(1) + 1)),
    };
    let server = |a: ServerAim| match a {
        ServerAim::LockServer => Target::LockServer,
        ServerAim::Nth(_) if servers.is_empty() => Target::LockServer,
        ServerAim::Nth(n) => Target::Host(servers[n % servers.len()].clone()),
    };
    let faults = raw
        .iter()
        .map(|(at_ms, r)| {
            let kind = match *r {
                Raw::Pause(t, duration_ms) => FaultKind::Pause {
                    target: client(t),
                    duration_ms,
                },
                Raw::Crash(t, r) => FaultKind::Crash {
                    target: client(t),
                    restart_after_ms: Some(r),
                },
                Raw::Delay(t, latency_ms, duration_ms) => FaultKind::Delay {
                    target: client(t),
                    latency_ms,
                    duration_ms,
                },
                Raw::Partition(t, duration_ms) => FaultKind::Partition {
                    a: vec![client(t)],
                    b: vec![Target::AllServers],
                    one_way: false,
                    duration_ms,
                },
                Raw::SlowWork(t, extra_ms) => FaultKind::SlowWork {
                    target: client(t),
                    extra_ms,
                },
                Raw::ServerPause(t, duration_ms) => FaultKind::Pause {
                    target: server(t),
                    duration_ms,
                },
                Raw::ServerCrash(t, r) => FaultKind::Crash {
                    target: server(t),
                    restart_after_ms: Some(r),
                },
                Raw::ClockJump(t, d) => FaultKind::ClockJump {
                    target: server(t),
                    delta_ms: d as i64,
                },
                Raw::DropPushes(duration_ms) => FaultKind::DropPushes { duration_ms },
            };
            Fault {
                at_ms: *at_ms,
                kind,
            }
        })
        .collect();
    FaultPlan { faults }
}

/// The search state of one generated plan: its faults (each its own proptest tree)
/// and, optionally, its workload.
///
/// proptest's own `Vec` tree deletes elements only before it shrinks any, and its
/// tuples shrink each part once, in order; a plan often needs one fault shortened
/// before another can go, and fewer clients only once the faults are few. So this
/// tree shrinks in rounds (delete each fault; shrink each fault; fewer clients,
/// trying 1, 2, … in order, since a failure need not persist with every smaller
/// count; a shorter run) and starts another round while the last one changed the
/// plan: the minimal plan is one no single step can shrink further.
struct PlanTree<V> {
    faults: Vec<BoxedValueTree<(u64, Raw)>>,
    included: Vec<bool>,
    workload: Option<Vary>,
    base: Workload,
    world: World,
    phase: Phase,
    last: Option<Phase>,
    round_start: (FaultPlan, Workload),
    output: fn(FaultPlan, &Workload, &Workload) -> V,
}

type BoxedValueTree<T> = Box<dyn ValueTree<Value = T>>;

/// The workload knobs a plan varies.
struct Vary {
    clients: u32,
    clients_before: u32,
    duration_ms: BoxedValueTree<u64>,
}

/// What the tree shrinks next, or last shrank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Delete(usize),
    Shrink(usize),
    Clients(u32),
    Duration,
}

impl<V> PlanTree<V> {
    fn new(
        runner: &mut TestRunner,
        world: &World,
        sorts: &[FaultSort],
        max_faults: usize,
        workloads: Option<&Workloads>,
        base: Workload,
        output: fn(FaultPlan, &Workload, &Workload) -> V,
    ) -> Result<PlanTree<V>, proptest::test_runner::Reason> {
        let count = (0..=max_faults).new_tree(runner)?.current();
        let fault = raw_fault_at(world, sorts);
        let faults = (0..count)
            .map(|_| fault.new_tree(runner))
            .collect::<Result<Vec<_>, _>>()?;
        let workload = match workloads {
            None => None,
            Some(w) => {
                let (clients, duration_ms) = w.ranges();
                Some(Vary {
                    clients: clients.new_tree(runner)?.current(),
                    clients_before: 0,
                    duration_ms: duration_ms.boxed().new_tree(runner)?,
                })
            }
        };
        let mut tree = PlanTree {
            included: vec![true; faults.len()],
            faults,
            workload,
            base,
            world: world.clone(),
            phase: Phase::Delete(0),
            last: None,
            round_start: (FaultPlan::default(), Workload::default()),
            output,
        };
        tree.round_start = tree.parts();
        Ok(tree)
    }

    fn parts(&self) -> (FaultPlan, Workload) {
        let workload = match &self.workload {
            None => self.base.clone(),
            Some(v) => Workload {
                clients: v.clients,
                duration_ms: v.duration_ms.current(),
                ..self.base.clone()
            },
        };
        let raw: Vec<(u64, Raw)> = self
            .faults
            .iter()
            .zip(&self.included)
            .filter(|(_, keep)| **keep)
            .map(|(f, _)| f.current())
            .collect();
        let plan = resolve(&raw, workload.clients, &self.world.servers);
        (plan, workload)
    }
}

impl<V: std::fmt::Debug> ValueTree for PlanTree<V> {
    type Value = V;

    fn current(&self) -> V {
        let (plan, workload) = self.parts();
        (self.output)(plan, &workload, &self.base)
    }

    fn simplify(&mut self) -> bool {
        loop {
            match self.phase {
                Phase::Delete(i) => match (i..self.faults.len()).find(|j| self.included[*j]) {
                    Some(j) => {
                        self.included[j] = false;
                        self.last = Some(Phase::Delete(j));
                        self.phase = Phase::Delete(j + 1);
                        return true;
                    }
                    None => self.phase = Phase::Shrink(0),
                },
                Phase::Shrink(i) if i >= self.faults.len() => self.phase = Phase::Clients(1),
                Phase::Shrink(i) => {
                    if self.included[i] && self.faults[i].simplify() {
                        self.last = Some(Phase::Shrink(i));
                        return true;
                    }
                    self.phase = Phase::Shrink(i + 1);
                }
                Phase::Clients(k) => match &mut self.workload {
                    Some(v) if k < v.clients => {
                        v.clients_before = v.clients;
                        v.clients = k;
                        self.last = Some(Phase::Clients(k));
                        self.phase = Phase::Clients(k + 1);
                        return true;
                    }
                    _ => self.phase = Phase::Duration,
                },
                Phase::Duration => {
                    if let Some(v) = &mut self.workload
                        && v.duration_ms.simplify()
                    {
                        self.last = Some(Phase::Duration);
                        return true;
                    }
                    // The round is over: another if it changed anything.
                    let now = self.parts();
                    if now == self.round_start {
                        self.last = None;
                        return false;
                    }
                    self.round_start = now;
                    self.phase = Phase::Delete(0);
                }
            }
        }
    }

    fn complicate(&mut self) -> bool {
        // The last step made the case pass: undo it. An inner tree that cannot undo
        // further is back at its last failing value; say "changed" anyway, so the
        // runner tests that value again and asks for the next step, rather than
        // ending the whole search there.
        match self.last {
            None => false,
            Some(Phase::Delete(j)) => {
                self.included[j] = true;
                self.last = None;
                true
            }
            Some(Phase::Shrink(i)) => {
                if !self.faults[i].complicate() {
                    self.last = None;
                }
                true
            }
            Some(Phase::Clients(_)) => {
                if let Some(v) = &mut self.workload {
                    v.clients = v.clients_before;
                }
                self.last = None;
                true
            }
            Some(Phase::Duration) => {
                if let Some(v) = &mut self.workload
                    && !v.duration_ms.complicate()
                {
                    self.last = None;
                }
                true
            }
        }
    }
}

/// The scenario called `name`; panics with the allowed names (a strategy is built in
/// a test, where a panic is the error report).
fn scenario(name: &str) -> Scenario {
    scenarios::catalog::find(name).unwrap_or_else(|e| panic!("locksim::strategy: {e}"))
}

/// Fault plans for scenario `name`'s world (its clients, servers, lease and run):
/// up to four faults of the [`FaultSort::CLIENT`] sorts by default.
///
/// ```
/// use locksim::proptest::prelude::*;
/// use locksim::proptest::strategy::ValueTree;
/// use locksim::proptest::test_runner::TestRunner;
/// use locksim::strategy::{fault_plans, FaultSort};
///
/// let strategy = fault_plans("gc-pause").sorts(&[FaultSort::Pause]).max_faults(2);
/// let mut runner = TestRunner::deterministic();
/// let plan = strategy.new_tree(&mut runner).unwrap().current();
/// assert!(plan.faults.len() <= 2);
/// assert!(plan.faults.iter().all(|f| f.at_ms < 5_000));
/// ```
pub fn fault_plans(name: &str) -> FaultPlans {
    let s = scenario(name);
    FaultPlans {
        world: World::of(&s.workload),
        scenario: s,
        sorts: FaultSort::CLIENT.to_vec(),
        max_faults: 4,
    }
}

/// A strategy of [`FaultPlan`]s: see [`fault_plans`].
#[derive(Debug, Clone)]
pub struct FaultPlans {
    scenario: Scenario,
    world: World,
    sorts: Vec<FaultSort>,
    max_faults: usize,
}

impl FaultPlans {
    /// Draw only these sorts (shrinking prefers the earlier ones).
    pub fn sorts(mut self, sorts: &[FaultSort]) -> FaultPlans {
        self.sorts = sorts.to_vec();
        self
    }

    /// At most `n` faults per plan (default 4).
    pub fn max_faults(mut self, n: usize) -> FaultPlans {
        self.max_faults = n;
        self
    }

    /// For a design on `masters` independent masters (a Redlock): a one-master
    /// scenario gives it copies of its master, so server faults aim at the lock's
    /// server rather than at a named one.
    pub fn masters(mut self, masters: usize) -> FaultPlans {
        if masters > 1 && self.scenario.topology() == Topology::SingleMaster {
            self.world.servers.clear();
        }
        self
    }
}

impl Strategy for FaultPlans {
    type Tree = Box<dyn ValueTree<Value = FaultPlan>>;
    type Value = FaultPlan;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let tree = PlanTree::new(
            runner,
            &self.world,
            &self.sorts,
            self.max_faults,
            None,
            self.scenario.workload.clone(),
            |plan, _, _| plan,
        )?;
        Ok(Box::new(tree))
    }
}

/// Workloads within scenario `name`'s: from one client to its count, and runs from a
/// second (or two leases, if longer) to its length; everything else as the scenario
/// has it.
///
/// ```
/// use locksim::proptest::prelude::*;
/// use locksim::proptest::strategy::ValueTree;
/// use locksim::proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let w = locksim::strategy::workloads("gc-pause").new_tree(&mut runner).unwrap().current();
/// assert!((1..=8).contains(&w.clients));
/// ```
pub fn workloads(name: &str) -> Workloads {
    Workloads {
        base: scenario(name).workload,
    }
}

/// A strategy of [`Workload`]s: see [`workloads`].
#[derive(Debug, Clone)]
pub struct Workloads {
    base: Workload,
}

impl Workloads {
    /// The clients and run lengths it draws from.
    fn ranges(&self) -> (std::ops::RangeInclusive<u32>, std::ops::RangeInclusive<u64>) {
        let b = &self.base;
        let shortest = (b.lease_ms * 2).max(1_000).min(b.duration_ms);
        (1..=b.clients.max(1), shortest..=b.duration_ms)
    }

    fn build(&self) -> BoxedStrategy<Workload> {
        let base = self.base.clone();
        self.ranges()
            .prop_map(move |(clients, duration_ms)| Workload {
                clients,
                duration_ms,
                ..base.clone()
            })
            .boxed()
    }
}

impl Strategy for Workloads {
    type Tree = Box<dyn ValueTree<Value = Workload>>;
    type Value = Workload;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        self.build().new_tree(runner)
    }
}

/// Plan files for scenario `name`: [`fault_plans`] with a workload from
/// [`workloads`] (faults that named a client the smaller world lacks aim at another),
/// written as the workload fields that differ from the scenario's. What
/// [`crate::Check::plan`] runs and a failure prints.
///
/// ```
/// use locksim::proptest::prelude::*;
/// use locksim::proptest::strategy::ValueTree;
/// use locksim::proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let plan = locksim::strategy::plans("gc-pause").new_tree(&mut runner).unwrap().current();
/// // A plan file, as `locksim run --plan` reads it.
/// assert!(plan.to_json().contains("\"faults\""));
/// ```
pub fn plans(name: &str) -> Plans {
    Plans {
        faults: fault_plans(name),
        workloads: Some(workloads(name)),
    }
}

/// A strategy of [`PlanFile`]s: see [`plans`].
#[derive(Debug, Clone)]
pub struct Plans {
    faults: FaultPlans,
    workloads: Option<Workloads>,
}

impl Plans {
    /// Draw only these sorts (shrinking prefers the earlier ones).
    pub fn sorts(mut self, sorts: &[FaultSort]) -> Plans {
        self.faults = self.faults.sorts(sorts);
        self
    }

    /// At most `n` faults per plan (default 4).
    pub fn max_faults(mut self, n: usize) -> Plans {
        self.faults = self.faults.max_faults(n);
        self
    }

    /// For a design on `masters` independent masters: see [`FaultPlans::masters`].
    pub fn masters(mut self, masters: usize) -> Plans {
        self.faults = self.faults.masters(masters);
        self
    }

    /// Keep the scenario's workload: vary the faults only.
    ///
    /// ```
    /// use locksim::proptest::prelude::*;
    /// use locksim::proptest::strategy::ValueTree;
    /// use locksim::proptest::test_runner::TestRunner;
    ///
    /// let mut runner = TestRunner::deterministic();
    /// let strategy = locksim::strategy::plans("client-crash").faults_only();
    /// let plan = strategy.new_tree(&mut runner).unwrap().current();
    /// assert!(plan.workload.is_empty());
    /// ```
    pub fn faults_only(mut self) -> Plans {
        self.workloads = None;
        self
    }
}

impl Strategy for Plans {
    type Tree = Box<dyn ValueTree<Value = PlanFile>>;
    type Value = PlanFile;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let tree = PlanTree::new(
            runner,
            &self.faults.world,
            &self.faults.sorts,
            self.faults.max_faults,
            self.workloads.as_ref(),
            self.faults.scenario.workload.clone(),
            |plan, workload, base| PlanFile::new(&plan, workload, base),
        )?;
        Ok(Box::new(tree))
    }
}
