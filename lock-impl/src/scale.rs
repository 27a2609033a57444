//! One clock scale per world: the rule, written once, for every client constant that
//! competes with a lease.
//!
//! locksim's catalog runs locks at a 200 ms lease so a run of many acquisitions lasts
//! seconds. A real deployment holds the same lock for about 30 s (Redisson's
//! `lockWatchdogTimeout`, the lease the catalog's 200 ms stands for), and the client
//! libraries' constants (a ZooKeeper client's reconnect sleep of up to a second,
//! Curator's retry base, Redisson's resend interval) are tuned for that scale. A world
//! that shrinks the lease but keeps a one-second reconnect sleep tests a client nobody
//! runs: a reconnect that costs a thirtieth of a real lease costs five leases there.
//!
//! So a world has one [`TimeScale`]: world time per real time, from its lease
//! ([`TimeScale::for_lease`]: the lease over [`REFERENCE_LEASE_MS`]). A design reads
//! every such constant through [`Deps::scale`](crate::Deps::scale) and
//! [`TimeScale::of`]; production code gets [`TimeScale::REAL`], which changes nothing.
//! Each constant is a [`Constant`] listed in [`CONSTANTS`] with its source and its
//! [`Scaling`]: scaled with the world, or kept real on purpose, with the reason.

use std::time::Duration;

/// The real lease the catalog's worlds stand for: Redisson's `lockWatchdogTimeout`
/// (30 s). A world whose lease is 200 ms runs at 1/150 of real time.
pub const REFERENCE_LEASE_MS: u64 = 30_000;

/// How a world's time relates to real time: `world_ms` of world time stand for
/// `real_ms` of real time.
///
/// What is not a client constant is set by the world, not here: the servers' timers
/// (Sentinel's `down-after-milliseconds`, ZooKeeper's `tickTime` and session timeout,
/// MongoDB's `electionTimeoutMillis`, MySQL's `wait_timeout`) and the reply and connect
/// timeouts a service configures (`Workload::response_timeout_ms`,
/// `connect_timeout_ms`); each world's module says how it scales them. The checkers'
/// liveness bound is the lease plus the design's own retry horizon
/// ([`LockDesign::retry_horizon`](crate::LockDesign::retry_horizon)), at the world's
/// scale.
///
/// The reply timeouts of the MySQL client and the MongoDB driver (the world's
/// `response_timeout_ms`, which `sim::world::client` gives both as their `timeout_ms`)
/// are such service settings and scale with the world's lease: neither library has
/// one by default (MariaDB Connector/C's `MYSQL_OPT_READ_TIMEOUT` and the Java
/// driver's `socketTimeoutMS` are 0, wait forever), so a service picks one a few
/// leases long. The catalog's 500 ms at a 200 ms lease stands for 75 s of real time;
/// the MySQL and MongoDB worlds' 2 s at an 8 s lease (4/15 of real time) for 7.5 s;
/// the `mongodb` profile runs the MongoDB worlds at real time (30 s lease, 7.5 s
/// timeout, MongoDB's own heartbeat and election timeout).
///
/// A server's restart is a world quantity too (`restart-ms`, drawn by the catalog's
/// crash scenarios): how long the crashed server takes to accept connections again,
/// drawn from half to twice the real start measured on this machine
/// ([`SERVER_STARTS`]), at the world's scale. Scaled like the leases it competes
/// with: a restart is the gap in which a lock a server forgot can be granted again,
/// and a 200 ms start stands for 200 ms of a 30 s lease's life, not five leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeScale {
    world_ms: u64,
    real_ms: u64,
}

impl Default for TimeScale {
    fn default() -> Self {
        Self::REAL
    }
}

impl TimeScale {
    /// Real time: every constant as the library ships it (production, and worlds
    /// built at a real profile's lease).
    pub const REAL: TimeScale = TimeScale {
        world_ms: 1,
        real_ms: 1,
    };

    /// The scale of a world whose lease is `lease_ms`: `lease_ms` of world time stand
    /// for [`REFERENCE_LEASE_MS`] of real time (a 30 s lease is real time; the
    /// catalog's 200 ms is 1/150). A lease of 0 (no lease) is real time.
    pub fn for_lease(lease_ms: u64) -> TimeScale {
        if lease_ms == 0 || lease_ms == REFERENCE_LEASE_MS {
            return Self::REAL;
        }
        TimeScale {
            world_ms: lease_ms,
            real_ms: REFERENCE_LEASE_MS,
        }
    }

    /// Whether this is real time.
    pub fn is_real(self) -> bool {
        self.world_ms == self.real_ms
    }

    /// `real_ms` of real time at this scale, in world milliseconds: rounded down, but
    /// never below 1 ms for a non-zero constant (a sleep does not vanish).
    pub fn ms(self, real_ms: u64) -> u64 {
        if real_ms == 0 || self.is_real() {
            return real_ms;
        }
        let scaled = u128::from(real_ms) * u128::from(self.world_ms) / u128::from(self.real_ms);
        u64::try_from(scaled).unwrap_or(u64::MAX).max(1)
    }

    /// `real` of real time at this scale, exactly (to the nanosecond): for a unit
    /// that other quantities are counted in (etcd's second, in which lease TTLs are
    /// whole numbers), where rounding to milliseconds would change every count.
    pub fn exact(self, real: Duration) -> Duration {
        if self.is_real() {
            return real;
        }
        let nanos = real.as_nanos() * u128::from(self.world_ms) / u128::from(self.real_ms);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX).max(1))
    }

    /// `constant` in world milliseconds: scaled, or as it is where it is kept real.
    pub fn ms_of(self, constant: &Constant) -> u64 {
        match constant.scaling {
            Scaling::Scaled => self.ms(constant.real_ms),
            Scaling::KeptReal { .. } => constant.real_ms,
        }
    }

    /// `constant` as a duration of world time (see [`TimeScale::ms_of`]).
    pub fn of(self, constant: &Constant) -> Duration {
        Duration::from_millis(self.ms_of(constant))
    }

    /// A value drawn in real milliseconds between the bounds `constant` belongs to (a
    /// jittered pause: redsync's `rand.Intn(250-50)+50`, node-redlock's `200 ± 100`),
    /// at this scale as `constant` is: the library's draw first, then one scaling, so
    /// the draw keeps its spread where scaling each bound to whole milliseconds would
    /// collapse it (50 and 250 ms are both 1 ms at 1/150).
    pub fn of_drawn(self, constant: &Constant, real_ms: u64) -> Duration {
        self.of(&Constant {
            real_ms,
            ..*constant
        })
    }

    /// The scale as text: `real time`, or `1/150 of real time (200 ms stand for 30 s)`.
    pub fn describe(self) -> String {
        if self.is_real() {
            return "real time".to_string();
        }
        let ratio = self.real_ms as f64 / self.world_ms as f64;
        format!(
            "1/{ratio:.0} of real time ({} ms stand for {} ms)",
            self.world_ms, self.real_ms
        )
    }
}

/// How a constant follows the world's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scaling {
    /// Scaled with the world ([`TimeScale::ms`]).
    Scaled,
    /// Kept as the library ships it, on purpose.
    KeptReal {
        /// Why keeping it real is right in a scaled world.
        why: &'static str,
    },
}

/// A client library's time constant: what it is, where it comes from, its real value
/// and how it scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constant {
    /// What it is.
    pub name: &'static str,
    /// The library, version and source line it comes from.
    pub source: &'static str,
    /// Its real value, ms.
    pub real_ms: u64,
    /// How it follows the world's scale.
    pub scaling: Scaling,
}

/// The ZooKeeper Java client's pause before any reconnect: `ClientCnxn.startConnect`,
/// `Thread.sleep(r.nextInt(1000))` (a random pause below this).
pub const ZK_RECONNECT_JITTER: Constant = Constant {
    name: "ZooKeeper client: random pause before a reconnect (below this)",
    source: "zookeeper release-3.8.0-1 ClientCnxn.SendThread.startConnect: Thread.sleep(ThreadLocalRandom.current().nextLong(1000))",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// The ZooKeeper Java client's pause once it has tried every server of its list:
/// `StaticHostProvider.next(1000)`.
pub const ZK_HOST_LIST_TURN: Constant = Constant {
    name: "ZooKeeper client: pause after a full turn of the server list",
    source: "zookeeper release-3.8.0-1 ClientCnxn.SendThread.run: hostProvider.next(1000) (StaticHostProvider.next sleeps spinDelay when it comes back to the last connected server)",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// Redisson 3.20's pause before it resends a command whose reply timed out, and the
/// time an attempt may spend getting a connection: `BaseConfig.retryInterval`.
pub const REDISSON_3_20_RETRY_INTERVAL: Constant = Constant {
    name: "Redisson 3.20: pause before a resend (retryInterval)",
    source: "redisson 3.20.0 BaseConfig.retryInterval = 1500; RedisExecutor.scheduleResponseTimeout / scheduleRetryTimeout",
    real_ms: 1_500,
    scaling: Scaling::Scaled,
};

/// Redisson 3.52.0's resend delay, base of its `EqualJitterDelay`: the delay of
/// attempt `n` is `min(base × 2^n, max)`, half of it fixed and half random.
pub const REDISSON_3_52_RETRY_DELAY_BASE: Constant = Constant {
    name: "Redisson 3.52: resend delay base (retryDelay = EqualJitterDelay(1 s, 2 s))",
    source: "redisson 3.52.0 BaseConfig.retryDelay = new EqualJitterDelay(Duration.ofMillis(1000), Duration.ofSeconds(2)); EqualJitterDelay.calcDelay",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// Redisson 3.52.0's resend delay ceiling (see [`REDISSON_3_52_RETRY_DELAY_BASE`]).
pub const REDISSON_3_52_RETRY_DELAY_MAX: Constant = Constant {
    name: "Redisson 3.52: resend delay ceiling",
    source: "redisson 3.52.0 BaseConfig.retryDelay = new EqualJitterDelay(Duration.ofMillis(1000), Duration.ofSeconds(2))",
    real_ms: 2_000,
    scaling: Scaling::Scaled,
};

/// Curator's retry policy's base sleep: `ExponentialBackoffRetry(1000, 3)` (the policy
/// of Curator's own examples and `zk-curator`'s), whose `getSleepTimeMs` is
/// `base × max(1, random.nextInt(1 << (retryCount + 1)))`: up to 1, 3 and 7 bases
/// before the first, second and third retry. Its `maxSleepMs` defaults to
/// `Integer.MAX_VALUE` (no cap), so the longest sleep is the policy's own, 7 bases
/// ([`CURATOR_MAX_BACKOFF_BASES`]).
pub const CURATOR_RETRY_BASE: Constant = Constant {
    name: "Curator: ExponentialBackoffRetry base sleep (sleeps up to 1, 3, 7 bases)",
    source: "curator apache-curator-5.9.0 ExponentialBackoffRetry.getSleepTimeMs: baseSleepTimeMs * max(1, random.nextInt(1 << (retryCount + 1))), with new ExponentialBackoffRetry(1000, 3)",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// The longest sleep `ExponentialBackoffRetry(base, 3)` picks, in bases: before the
/// third retry, `random.nextInt(1 << 3)` is at most 7 (`maxSleepMs` is
/// `Integer.MAX_VALUE` by default, so nothing caps it sooner).
pub const CURATOR_MAX_BACKOFF_BASES: u64 = 7;

/// Curator's connection timeout: how long `RetryLoop.callWithRetry` waits for a
/// connection before its first try (`CuratorZookeeperClient.
/// internalBlockUntilConnectedOrTimedOut`), `CuratorFrameworkFactory`'s default.
pub const CURATOR_CONNECTION_TIMEOUT: Constant = Constant {
    name: "Curator: connection timeout (RetryLoop waits this long for a connection)",
    source: "curator apache-curator-5.9.0 CuratorFrameworkFactory.DEFAULT_CONNECTION_TIMEOUT_MS (15 * 1000), used by CuratorZookeeperClient.internalBlockUntilConnectedOrTimedOut",
    real_ms: 15_000,
    scaling: Scaling::Scaled,
};

// The published Redis clients' constants (`redis-py`, `redsync`, `node-redlock`,
// `node-redlock-using`), the spec's Redlock (`redlock`) and `redisson-redlock`'s
// stand-in for Redisson's unlock message. Their pauses between tries compete with the
// lease (a waiter's retry pause, a timer set to fire before the lease ends): scaled.
// What races the network instead (the per-master timeout, Redis's expiry precision) is
// kept real, since no world scales its round trips or the server's millisecond. Not
// times, so not listed: the retry counts (redsync's 32 `tries`, node-redlock's
// `retryCount` 10), which are counts at every scale, and the drift factors (1 % of the
// lease in redsync, node-redlock and the spec) and redsync's `timeoutFactor` (5 %),
// which are shares of the lease and scale with it on their own.

/// redis-py's pause between two tries of a blocking `acquire`: `Lock.__init__`'s
/// `sleep=0.1` (the same in 3.5.3).
pub const REDIS_PY_SLEEP: Constant = Constant {
    name: "redis-py: pause between two tries of a blocking acquire",
    source: "redis-py 5.3.1 (and 3.5.3) redis/lock.py: Lock.__init__(..., sleep=0.1)",
    real_ms: 100,
    scaling: Scaling::Scaled,
};

/// go-redsync's shortest pause between two tries: `minRetryDelayMilliSec`.
pub const REDSYNC_MIN_RETRY_DELAY: Constant = Constant {
    name: "redsync: shortest pause between two tries (delayFunc's lower bound)",
    source: "go-redsync v4.17.0 redsync.go: minRetryDelayMilliSec = 50",
    real_ms: 50,
    scaling: Scaling::Scaled,
};

/// go-redsync's longest pause between two tries (excluded): `maxRetryDelayMilliSec`;
/// `delayFunc` is `rand.Intn(max-min)+min` ms.
pub const REDSYNC_MAX_RETRY_DELAY: Constant = Constant {
    name: "redsync: longest pause between two tries (delayFunc's upper bound, excluded)",
    source: "go-redsync v4.17.0 redsync.go: maxRetryDelayMilliSec = 250",
    real_ms: 250,
    scaling: Scaling::Scaled,
};

/// node-redlock's pause between two attempts, before jitter: `retryDelay`.
pub const NODE_REDLOCK_RETRY_DELAY: Constant = Constant {
    name: "node-redlock: pause between two attempts (retryDelay)",
    source: "node-redlock 5.0.0-beta.2 src/index.ts: defaultSettings.retryDelay = 200",
    real_ms: 200,
    scaling: Scaling::Scaled,
};

/// node-redlock's jitter around `retryDelay`: the pause is `retryDelay +
/// floor((random*2-1) * retryJitter)`.
pub const NODE_REDLOCK_RETRY_JITTER: Constant = Constant {
    name: "node-redlock: jitter either side of retryDelay (retryJitter)",
    source: "node-redlock 5.0.0-beta.2 src/index.ts: defaultSettings.retryJitter = 100",
    real_ms: 100,
    scaling: Scaling::Scaled,
};

/// The fixed part of node-redlock's (and the spec's) drift allowance: `drift =
/// round(driftFactor * duration) + 2`.
pub const REDLOCK_DRIFT_PRECISION: Constant = Constant {
    name: "node-redlock and redlock: fixed part of the drift allowance (+2 ms)",
    source: "node-redlock 5.0.0-beta.2 src/index.ts acquire: \"Add 2 milliseconds to the drift \
             to account for Redis expires precision, which is 1 ms\"; redis.io distlock page",
    real_ms: 2,
    scaling: Scaling::KeptReal {
        why: "it stands for Redis's expiry precision (1 ms) and the client's millisecond \
              clock, which are a millisecond in every world; the lease-proportional part \
              (1 %) scales on its own",
    },
};

/// node-redlock `using()`'s lead before expiration at which the extension timer fires:
/// `automaticExtensionThreshold`.
pub const NODE_REDLOCK_EXTENSION_THRESHOLD: Constant = Constant {
    name: "node-redlock using(): extend this long before the expiration",
    source: "node-redlock 5.0.0-beta.2 src/index.ts: \
             defaultSettings.automaticExtensionThreshold = 500",
    real_ms: 500,
    scaling: Scaling::KeptReal {
        why: "it races an extension's round trip to every master and the timer's own lateness, which no world scales: at 1/150 it would be 3 ms, under a round trip, and every extension would land after the lock expired",
    },
};

/// node-redlock `using()`'s least margin between the threshold and the duration: it
/// throws if `automaticExtensionThreshold > duration - 100`.
pub const NODE_REDLOCK_EXTENSION_MARGIN: Constant = Constant {
    name: "node-redlock using(): least margin of the duration over the threshold",
    source: "node-redlock 5.0.0-beta.2 src/index.ts using: \
             automaticExtensionThreshold > duration - 100 throws",
    real_ms: 100,
    scaling: Scaling::KeptReal {
        why: "it goes with the threshold it bounds, which is kept real",
    },
};

/// The spec's per-master timeout, upper bound: "if the auto-release time is 10
/// seconds, the timeout could be in the ~ 5-50 milliseconds range".
pub const REDLOCK_INSTANCE_TIMEOUT_MAX: Constant = Constant {
    name: "redlock: per-master timeout, at most (a tenth of the lease within 20-50 ms)",
    source: "redis.io distributed locks page (Redlock), step 2: 5-50 ms for a 10 s lease",
    real_ms: 50,
    scaling: Scaling::KeptReal {
        why: "it races a master's round trip, not the lease: no world scales its network, \
              and a scaled 50 ms (below 1 ms at 1/150) would call every master dead",
    },
};

/// locksim's lower bound on the spec's per-master timeout.
pub const REDLOCK_INSTANCE_TIMEOUT_MIN: Constant = Constant {
    name: "redlock: per-master timeout, at least",
    source: "locksim (redlock.rs): above a loaded loopback round trip; the spec's range \
             starts at 5 ms",
    real_ms: 20,
    scaling: Scaling::KeptReal {
        why: "it races a master's round trip, which no world scales",
    },
};

/// `redisson-redlock`'s look at a held node lock, standing in for the unlock message
/// Redisson waits for (`RedissonLock.tryLock`: subscribe to the lock's channel, then
/// wait on the entry's latch up to the holder's TTL).
pub const REDISSON_REDLOCK_UNLOCK_POLL: Constant = Constant {
    name: "redisson-redlock: look again at a held node lock (stands in for the unlock message)",
    source: "locksim (redisson_redlock.rs); Redisson 3.52.0 RedissonLock.tryLock hears the \
             unlock on the lock's channel one round trip after it",
    real_ms: 50,
    scaling: Scaling::Scaled,
};

/// etcd's second: lease TTLs are whole seconds (`LeaseGrantRequest.TTL`), so a scaled
/// world scales the second they are counted in (read with [`TimeScale::exact`]); the
/// etcd world's member counts in the same second (`sim::world::EtcdSpec::second_us`).
pub const ETCD_SECOND: Constant = Constant {
    name: "etcd: the second lease TTLs are counted in",
    source: "etcd v3.4.23 etcdserver/etcdserverpb/rpc.proto: LeaseGrantRequest.TTL \"the advisory time-to-live in seconds\"",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// etcd's Go client: the lease keeper's pause before it sends a due keep-alive again
/// and before it opens a failed keep-alive stream again.
pub const ETCD_RETRY_CONN_WAIT: Constant = Constant {
    name: "etcd clientv3: lease keeper's send period and stream reopen pause (retryConnWait)",
    source: "etcd v3.4.23 clientv3/lease.go: retryConnWait = 500 * time.Millisecond",
    real_ms: 500,
    scaling: Scaling::Scaled,
};

/// etcd's Go client: how often the lease keeper checks that an answer came within the
/// TTL.
pub const ETCD_DEADLINE_LOOP: Constant = Constant {
    name: "etcd clientv3: lease keeper's deadline check period (deadlineLoop)",
    source: "etcd v3.4.23 clientv3/lease.go deadlineLoop: time.After(time.Second)",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// Redisson: how long the `WAIT` batched after a lock, unlock or renewal script waits
/// for the master's replicas (`checkLockSyncedSlaves`). Scaled: a holder waits it out
/// before it may work, and a refused grant costs the waiter as long.
pub const REDISSON_SLAVES_SYNC_TIMEOUT: Constant = Constant {
    name: "Redisson: WAIT timeout after a lock, unlock or renewal script (slavesSyncTimeout)",
    source: "redisson 3.20.0 RedissonBaseLock.createCommandBatchService: syncSlaves(availableSlaves, 1, SECONDS); redisson 3.52.0 Config.slavesSyncTimeout = 1000",
    real_ms: 1_000,
    scaling: Scaling::Scaled,
};

/// etcd's Go client: the first keep-alive's deadline with no dial timeout set.
pub const ETCD_FIRST_KEEPALIVE_TIMEOUT: Constant = Constant {
    name: "etcd clientv3: the first keep-alive's deadline (defaultTTL)",
    source: "etcd v3.4.23 clientv3/lease.go: defaultTTL = 5 * time.Second (firstKeepAliveTimeout without DialTimeout)",
    real_ms: 5_000,
    scaling: Scaling::Scaled,
};

/// etcd's Go client: the pause between retries of a unary call.
pub const ETCD_RETRY_BACKOFF: Constant = Constant {
    name: "etcd clientv3: pause between retries of a call (± 10 %)",
    source: "etcd v3.4.23 clientv3/options.go: defaultBackoffWaitBetween = 25 * time.Millisecond, defaultBackoffJitterFraction = 0.10",
    real_ms: 25,
    scaling: Scaling::Scaled,
};

/// Every constant a built-in design reads through [`TimeScale::of`], for docs/layout.md's
/// table and `locksim list`.
pub const CONSTANTS: &[&Constant] = &[
    &ZK_RECONNECT_JITTER,
    &ZK_HOST_LIST_TURN,
    &REDISSON_3_20_RETRY_INTERVAL,
    &REDISSON_3_52_RETRY_DELAY_BASE,
    &REDISSON_3_52_RETRY_DELAY_MAX,
    &REDISSON_SLAVES_SYNC_TIMEOUT,
    &CURATOR_RETRY_BASE,
    &CURATOR_CONNECTION_TIMEOUT,
    &REDIS_PY_SLEEP,
    &REDSYNC_MIN_RETRY_DELAY,
    &REDSYNC_MAX_RETRY_DELAY,
    &NODE_REDLOCK_RETRY_DELAY,
    &NODE_REDLOCK_RETRY_JITTER,
    &REDLOCK_DRIFT_PRECISION,
    &NODE_REDLOCK_EXTENSION_THRESHOLD,
    &NODE_REDLOCK_EXTENSION_MARGIN,
    &REDLOCK_INSTANCE_TIMEOUT_MAX,
    &REDLOCK_INSTANCE_TIMEOUT_MIN,
    &REDISSON_REDLOCK_UNLOCK_POLL,
    &ETCD_SECOND,
    &ETCD_RETRY_CONN_WAIT,
    &ETCD_DEADLINE_LOOP,
    &ETCD_FIRST_KEEPALIVE_TIMEOUT,
    &ETCD_RETRY_BACKOFF,
    &MONGO_MIN_HEARTBEAT_FREQUENCY,
    &MONGO_SERVER_SELECTION_TIMEOUT,
];

/// A MongoDB driver's floor between two checks of one server
/// (`minHeartbeatFrequencyMS`): when a server selection finds no suitable server it
/// asks every monitor for an immediate check, and a monitor checks its server again
/// no sooner than this after the last check.
pub const MONGO_MIN_HEARTBEAT_FREQUENCY: Constant = Constant {
    name: "MongoDB driver: least time between two checks of a server (minHeartbeatFrequencyMS)",
    source: "mongodb/specifications server-discovery-and-monitoring: minHeartbeatFrequencyMS = 500 (not configurable); server-selection: the selection loop requests an immediate check and waits for the topology to change",
    real_ms: 500,
    scaling: Scaling::Scaled,
};

/// A MongoDB driver's bound on one server selection (`serverSelectionTimeoutMS`): how
/// long an operation waits for a suitable server (a writable primary) before it
/// fails.
pub const MONGO_SERVER_SELECTION_TIMEOUT: Constant = Constant {
    name: "MongoDB driver: server selection timeout (serverSelectionTimeoutMS)",
    source: "mongodb/specifications server-selection: serverSelectionTimeoutMS defaults to 30,000",
    real_ms: 30_000,
    scaling: Scaling::Scaled,
};

/// MariaDB's start after a crash, to its first answered ping: `mariadbd` 10.11.19
/// (Debian 12's package) with Debian's `/etc/mysql/my.cnf`, on a datadir a `kill -9`
/// left (InnoDB crash recovery included), measured on the machine locksim was built
/// on: 163, 171, 172, 236 and 259 ms (a fresh datadir: 176-327 ms; with
/// `--no-defaults`: 78-113 ms). The median.
pub const MARIADB_START: Constant = Constant {
    name: "MariaDB server: start after a crash until it answers (median of five)",
    source: "measured: mariadbd 10.11.19-MariaDB-0+deb12u1, Debian my.cnf, after kill -9: 163-259 ms",
    real_ms: 172,
    scaling: Scaling::Scaled,
};

/// Redis's start with an append-only file, to its first `PONG` (`LOADING` until the
/// AOF is read): `redis-server` 7.0.15 (Debian 12), `appendonly yes`, an AOF of 100,000
/// keys (3.6 MB) after a `kill -9`: 97, 107, 108, 111 and 185 ms (an empty AOF: 18-30
/// ms). The median.
pub const REDIS_START: Constant = Constant {
    name: "Redis server: start with an AOF of 100,000 keys until it answers (median of five)",
    source: "measured: redis-server 7.0.15 (Debian 12), appendonly yes, 3.6 MB AOF, after kill -9: 97-185 ms",
    real_ms: 108,
    scaling: Scaling::Scaled,
};

/// The pause systemd takes before it restarts a crashed service whose unit sets no
/// `RestartSec` (Debian's `redis-server.service`: `Restart=always`): a `kill -9`'d
/// redis-server is started again this long after it died. (Debian's
/// `mariadb.service` sets `Restart=on-abnormal`, `RestartSec=5s`.)
pub const SYSTEMD_RESTART_SEC: Constant = Constant {
    name: "systemd: pause before restarting a crashed service (RestartSec's default)",
    source: "systemd.service(5): RestartSec= defaults to 100ms; Debian 12 redis-server.service sets Restart=always",
    real_ms: 100,
    scaling: Scaling::Scaled,
};

/// The servers' restart times the catalog's crash scenarios draw `restart-ms` around.
pub const SERVER_STARTS: &[&Constant] = &[&MARIADB_START, &REDIS_START, &SYSTEMD_RESTART_SEC];
