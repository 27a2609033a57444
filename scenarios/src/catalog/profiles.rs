//! Time scales as users run them. The catalog scales every lock to a 200 ms lease and
//! a 500 ms reply timeout ([`super::base`]); real deployments keep other ratios, and
//! some failures exist only at those: a renewal that fails once while the lease still
//! has twenty seconds left. A [`Profile`] is a design family's real defaults as the
//! base workload a scenario's world starts from; `renewal-blip` runs under Redisson's.

use rand::RngExt;
use sim::faults::{Fault, FaultKind, Target};
use sim::world::{SystemSpecs, Workload};

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use crate::params::Param;

/// A named base workload: the time scale a family of clients runs at by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The catalog's scale: 200 ms leases, 500 ms reply timeout ([`super::base`]).
    Catalog,
    /// Redisson's defaults (`Config.lockWatchdogTimeout` 30 s, so the watchdog renews
    /// every 10 s; `BaseConfig.timeout` 3 s per command).
    Redisson,
    /// MongoDB's defaults for the `mongo-*` worlds, at real time: a replica set with
    /// `settings.heartbeatIntervalMillis` 2 s and `settings.electionTimeoutMillis` 10 s
    /// (MongoDB's `ReplSetConfig` defaults), and a 30 s lease; the world's other times
    /// stretch with the lease (see the `mongo` module).
    MongoDb,
    /// Real time for the ZooKeeper designs: the catalog's world at a 30 s lease (every
    /// time of the catalog's base times 150, so the clients' constants are real:
    /// `TimeScale::for_lease(30_000)`), and the ensemble ZooKeeper ships with
    /// (`ZkSpec::for_lease`: `tickTime` 2,000 ms, sessions of 1.5 leases clamped to
    /// 20 ticks, 40 s, which is also what Curator's default 60 s gets from a default
    /// server); Curator's connection timeout (15 s) and retry policy run unscaled.
    ZooKeeper,
}

impl Profile {
    /// Every profile, for listings and errors.
    pub const ALL: [Profile; 4] = [
        Profile::Catalog,
        Profile::Redisson,
        Profile::MongoDb,
        Profile::ZooKeeper,
    ];

    /// The user-facing name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Catalog => "catalog",
            Profile::Redisson => "redisson",
            Profile::MongoDb => "mongodb",
            Profile::ZooKeeper => "zookeeper",
        }
    }

    /// The profile called `name`, or an error listing the allowed names.
    pub fn parse(name: &str) -> Result<Profile, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
                format!("unknown profile '{name}'; allowed: {}", names.join(", "))
            })
    }

    /// The base workload at this scale. Redisson's: a 30 s lease, a 3 s reply timeout,
    /// waiters that wait up to a lease, four clients thinking up to 5 s between holds
    /// for four minutes, and a liveness slack of a lease.
    pub fn base(self) -> Workload {
        let catalog = super::base();
        match self {
            Profile::Catalog => catalog,
            Profile::Redisson => Workload {
                clients: 4,
                lease_ms: 30_000,
                wait_ms: 30_000,
                work_ms: 5_000,
                think_ms_max: 5_000,
                duration_ms: 240_000,
                drain_ms: 120_000,
                response_timeout_ms: 3_000,
                liveness_slack_ms: 30_000,
                connect_timeout_ms: 3_000,
                ..catalog
            },
            Profile::MongoDb => Workload {
                lease_ms: 30_000,
                systems: SystemSpecs {
                    mongo: Some(sim::world::MongoSpec {
                        heartbeat_ms: MONGODB_HEARTBEAT_MS,
                        election_timeout_ms: MONGODB_ELECTION_TIMEOUT_MS,
                        ..sim::world::MongoSpec::default()
                    }),
                    ..catalog.systems.clone()
                },
                ..catalog
            },
            Profile::ZooKeeper => {
                let k = lock_impl::scale::REFERENCE_LEASE_MS / catalog.lease_ms;
                Workload {
                    lease_ms: catalog.lease_ms * k,
                    wait_ms: catalog.wait_ms * k,
                    work_ms: catalog.work_ms * k,
                    think_ms_max: catalog.think_ms_max * k,
                    duration_ms: catalog.duration_ms * k,
                    drain_ms: catalog.drain_ms * k,
                    response_timeout_ms: catalog.response_timeout_ms * k,
                    liveness_slack_ms: catalog.liveness_slack_ms * k,
                    connect_timeout_ms: catalog.connect_timeout_ms * k,
                    ..catalog
                }
            }
        }
    }
}

/// MongoDB's `settings.heartbeatIntervalMillis` default (`src/mongo/db/repl/repl_set_config.cpp`:
/// `ReplSetConfig::kDefaultHeartbeatInterval(2000)`), ms.
pub const MONGODB_HEARTBEAT_MS: u64 = 2_000;

/// MongoDB's `settings.electionTimeoutMillis` default (`src/mongo/db/repl/repl_set_config.cpp`:
/// `ReplSetConfig::kDefaultElectionTimeoutPeriod(10000)`), ms.
pub const MONGODB_ELECTION_TIMEOUT_MS: u64 = 10_000;

pub(super) static RENEWAL_BLIP: Def = Def {
    name: "renewal-blip",
    description: "Redisson's time scale (30 s lease, renewal every 10 s, 3 s reply timeout), three clients; every critical section lasts 70 s, so a watchdog must renew it; the holder is cut off from the servers once or twice for 4-8 s (longer than a reply timeout, a fraction of the 20 s its lease still has)",
    fault_about: "a holder was cut off from the servers for less time than its lease still had, while it held the lock",
    class: FaultClass::Partition,
    needs: &[],
    // Three clients for under three minutes: enough for the cut to land in a hold and a
    // waiter to take the lapsed lock; Redlock's waiters poll every master all along.
    world: |_| Workload {
        clients: 3,
        work_ms: 70_000,
        duration_ms: 160_000,
        drain_ms: 150_000,
        ..Profile::Redisson.base()
    },
    quantities: &[Param::PartitionMs],
    plan: blips,
    probe: |h, _| probes::holder_cut_off_with_lease_left(h),
};

/// One or two partitions of the holder from every server, 4-8 s each.
fn blips(d: &mut Draw) -> Vec<Fault> {
    let count: usize = d.rng.random_range(1..=2);
    (0..count)
        .map(|_| Fault {
            at_ms: d.at(),
            kind: FaultKind::Partition {
                a: vec![Target::Holder],
                b: vec![Target::AllServers],
                one_way: false,
                duration_ms: d.quantity(Param::PartitionMs, 4_000..=8_000),
            },
        })
        .collect()
}
