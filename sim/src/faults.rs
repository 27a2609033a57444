//! Fault plans: what the nemesis does and when, as plain serde data.
//!
//! A plan is a list of timed faults, generated from the seed within a scenario's
//! bounds or written by hand, small enough to shrink: removing a fault from the list
//! gives another valid plan.

use serde::{Deserialize, Serialize};

/// A list of timed faults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// The faults, in any order; each has its own start time.
    pub faults: Vec<Fault>,
}

/// Which host a fault hits: a client, a lock server or a helper (a Sentinel), named
/// or asked for by its role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A named host, e.g. `client-2` or `redis`.
    Host(String),
    /// Whichever client the history shows holding the lock at the fault's start (an
    /// acquire `ok` not yet followed by its release); no-op if nobody holds it. Like
    /// Jepsen's "pause the primary": aims the fault where it matters.
    Holder,
    /// Whichever client has an acquire in flight at the fault's start; no-op if none.
    Acquirer,
    /// The client whose value the lock key holds on the lock server at the fault's
    /// start (the server's own record, not the client's belief); no-op if the key is
    /// absent. This reaches the moments a client cannot see: after the server granted
    /// the lock and before the client heard of it, or between two commands of a
    /// non-atomic acquire.
    LockOwner,
    /// The lock server whose own record shows the lock key held at the fault's start
    /// (the first such server in name order); no-op if no server holds it.
    LockServer,
    /// The moment that matters for replication: the master whose own record holds the
    /// lock key, written by a command whose replication offset none of its replicas
    /// has acknowledged yet (by the master's own record of their `REPLCONF ACK`s), and
    /// that none has even received, while no replica holds the key at all (so the
    /// lock is truly lost with the master, and a promoted replica grants it anew), once
    /// the master's reply has had time to reach the client (the longest latency and a
    /// tick after the write; so the replicas must lag more than that). The fault waits from its start for up to `within_ms` for that moment and hits at
    /// the first tick it holds; it is a no-op if the moment never comes.
    UnreplicatedLockMaster {
        /// How long the fault waits for the moment.
        within_ms: u64,
    },
    /// The master whose own record holds the lock key, just granted: the fault waits
    /// from its start for up to `within_ms` for a lock write made after it started,
    /// and hits as soon as the history shows its writer holding the lock (the acquire
    /// completed, whatever the design waits for after the write), replicated or not. A
    /// no-op if no grant comes.
    FreshLockMaster {
        /// How long the fault waits for a grant.
        within_ms: u64,
    },
    /// The lock server holding a given client's lock: the fault waits from its start
    /// for up to `within_ms` for the moment the history shows `client` holding the
    /// lock, and hits the first server (in world order) whose record holds the lock key
    /// with that client's owner value. With several independent masters (Redlock) this
    /// is "a node of the holder's majority". A no-op if the moment never comes.
    LockServerOf {
        /// The client whose lock.
        client: String,
        /// How long the fault waits for the client to hold the lock.
        within_ms: u64,
    },
    /// A client in the middle of an acquisition that a server has already granted: its
    /// acquire is in flight and some server's record holds the lock key with a value
    /// that client wrote (the reply is on its way, or a multi-server design is still
    /// asking the others). The fault waits from its start for up to `within_ms` for
    /// that moment. A no-op if it never comes.
    MidAcquire {
        /// How long the fault waits for the moment.
        within_ms: u64,
    },
    /// The leader of the lock system's quorum serving at the fault's start (an
    /// established leader); no-op if none. Serialized under its first name,
    /// `zk-leader`; `leader` is read too.
    #[serde(rename = "zk-leader", alias = "leader")]
    Leader,
    /// The quorum's leader right after it committed a create of a lock entry (a quorum
    /// logged it): the fault waits from its start for up to `within_ms` for a lock
    /// entry created after it started, and hits the leader at the first tick the
    /// commit is seen, whether or not the reply has reached the client. A no-op if no
    /// create comes. Serialized as `zk-leader-after-lock-create`;
    /// `leader-after-lock-create` is read too.
    #[serde(
        rename = "zk-leader-after-lock-create",
        alias = "leader-after-lock-create"
    )]
    LeaderAfterLockCreate {
        /// How long the fault waits for the commit.
        within_ms: u64,
    },
    /// The quorum's follower serving the most client sessions at the fault's start
    /// (ties: name order); no-op if no follower serves. Serialized as
    /// `zk-busiest-follower`; `busiest-follower` is read too.
    #[serde(rename = "zk-busiest-follower", alias = "busiest-follower")]
    BusiestFollower,
    /// Every lock server of the world (for partitions: "the servers' side").
    AllServers,
    /// Every client of the world.
    AllClients,
    /// In a partition: every host (clients, lock servers, helpers such as Sentinels; never the
    /// storage) that is not on the other side.
    Rest,
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// Start, in true simulated milliseconds since the run's start.
    pub at_ms: u64,
    /// What happens.
    pub kind: FaultKind,
}

/// Fault kinds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum FaultKind {
    /// Stop-the-world pause. A client's tasks, timers and reading of replies freeze;
    /// replies queue and arrive after the pause. A Redis server answers nothing and
    /// expires nothing meanwhile; its clock runs on, so keys whose time passed expire
    /// the moment it resumes. Overlapping pauses of one host end when the last ends.
    Pause {
        /// Who.
        target: Target,
        /// How long.
        duration_ms: u64,
    },
    /// The host's *process* dies (`kill -9`, an OOM kill), holding whatever it held;
    /// optionally restarts. The kernel resets its connections at once. A restarted
    /// Redis server starts from what its AOF had written (the page cache survives a
    /// process crash), or empty without persistence.
    Crash {
        /// Who.
        target: Target,
        /// Restart this long after the crash (antirez's delayed restart for Redlock:
        /// stay down at least a lease); never if `None`.
        restart_after_ms: Option<u64>,
    },
    /// The host's *machine* dies (power, kernel panic): no FIN, no RST; peers find out
    /// by timeout, and dials to it hang until it is back. A restarted Redis server
    /// keeps only what its AOF had fsynced.
    MachineCrash {
        /// Who.
        target: Target,
        /// Restart this long after the crash; never if `None`.
        restart_after_ms: Option<u64>,
    },
    /// One-way delay: every message *arriving at* the target takes `latency_ms` (from
    /// the Redis servers, if the target is a client: its replies; from anyone, if the
    /// target is a server) for `duration_ms`. Messages the target sends are on time.
    Delay {
        /// Whose incoming messages are delayed.
        target: Target,
        /// One-way latency while the fault lasts.
        latency_ms: u64,
        /// How long the fault lasts.
        duration_ms: u64,
    },
    /// The Redis servers drop every pub/sub message they would deliver for
    /// `duration_ms` (an unlock message lost on the way to a waiter).
    DropPushes {
        /// How long messages are dropped.
        duration_ms: u64,
    },
    /// A network partition: messages from side `a` to side `b` (and back, unless
    /// `one_way`) are held for `duration_ms`, then delivered in order, as TCP
    /// retransmission delivers them once the network heals. Each side is a list of
    /// targets, resolved at the fault's start.
    Partition {
        /// One side.
        a: Vec<Target>,
        /// The other side.
        b: Vec<Target>,
        /// Hold only `a → b`.
        #[serde(default)]
        one_way: bool,
        /// How long until it heals.
        duration_ms: u64,
    },
    /// The target's wall clock steps by `delta_ms` (forward if positive), as an NTP
    /// step or an operator's `date -s` does. A Redis server expires keys by its wall
    /// clock, so a forward step past a lock's expiry frees the lock at once in true
    /// time. A client's monotonic clock, which leases are measured by, does not move.
    ClockJump {
        /// Whose clock.
        target: Target,
        /// The step, in milliseconds.
        delta_ms: i64,
    },
    /// The target's clock runs at `drift_ppm` (parts per million; positive: fast) for
    /// `duration_ms`, or for the rest of the run if `None`, then at its former rate. A
    /// rate change applies to the wall and the monotonic clock alike: a client with a
    /// fast clock believes its lease runs out early, a server with a fast clock
    /// expires keys early.
    ClockDrift {
        /// Whose clock.
        target: Target,
        /// The rate error while the fault lasts.
        drift_ppm: i64,
        /// How long; `None`: to the end of the run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// NTP corrects the target's clock by `delta_ms` (negative: back, for a clock found
    /// ahead) by slewing instead of stepping: the clock runs `rate_ppm` slow (or fast)
    /// on top of its own rate for as long as the correction takes (`|delta_ms|` ÷
    /// `rate_ppm`), then at its own rate again. chrony slews at up to 83,333 ppm
    /// (`maxslewrate`'s default), ntpd at 500 ppm. On Linux the kernel's slew
    /// (`adjtimex`) moves `CLOCK_MONOTONIC` with `CLOCK_REALTIME` (only
    /// `CLOCK_MONOTONIC_RAW` escapes it), so a client's lease timers, measured on the
    /// monotonic clock, run slow or fast with it.
    ClockSlew {
        /// Whose clock.
        target: Target,
        /// The correction, in milliseconds (negative: the clock is set back).
        delta_ms: i64,
        /// How fast the correction is applied, in parts per million (1 to 1,000,000;
        /// a slew back never stops the clock or runs it backwards).
        rate_ppm: u64,
    },
    /// A stop-the-world pause of a client at the worst moment of its next critical
    /// section: after it read the storage, worked and (with the workload's
    /// `check_validity_ms`) found enough validity left, just before its write is sent
    /// (Kleppmann's GC pause after the check). The client records the pause's start
    /// and end itself, since only it knows the moment.
    PauseBeforeWrite {
        /// Which client.
        target: Target,
        /// How long.
        duration_ms: u64,
    },
    /// The client's next critical section runs `extra_ms` longer than planned.
    SlowWork {
        /// Who.
        target: Target,
        /// Extra time inside the critical section.
        extra_ms: u64,
    },
    /// Every TCP connection between the target and the lock servers is reset at once,
    /// on both ends (a proxy or a firewall dropping idle connections, a pool recycling
    /// them, a server's `KILL`): whatever the server scoped to those connections ends
    /// with them. New dials work at once.
    ResetConnections {
        /// Whose connections.
        target: Target,
    },
}

impl FaultKind {
    /// Every target the fault names: one, both sides of a partition, or none.
    pub fn targets(&self) -> Vec<&Target> {
        match self {
            FaultKind::Pause { target, .. }
            | FaultKind::Crash { target, .. }
            | FaultKind::MachineCrash { target, .. }
            | FaultKind::Delay { target, .. }
            | FaultKind::ClockJump { target, .. }
            | FaultKind::ClockDrift { target, .. }
            | FaultKind::ClockSlew { target, .. }
            | FaultKind::PauseBeforeWrite { target, .. }
            | FaultKind::SlowWork { target, .. }
            | FaultKind::ResetConnections { target } => vec![target],
            FaultKind::Partition { a, b, .. } => a.iter().chain(b).collect(),
            FaultKind::DropPushes { .. } => Vec::new(),
        }
    }
}

/// A partition's sides, made disjoint: a host is on one side only. `Rest` on side `a`
/// is every host not on side `b`, so `a` gives way; otherwise a side named by a wider
/// target (`all-servers`) leaves out the hosts side `a` took (a lock server cut off
/// from the rest of its system). The simulator's nemesis and the real runner's proxy
/// both cut by this rule.
pub fn disjoint_sides(a: &[Target], side_a: &mut Vec<String>, side_b: &mut Vec<String>) {
    if a.contains(&Target::Rest) {
        side_a.retain(|h| !side_b.contains(h));
    } else {
        side_b.retain(|h| !side_a.contains(h));
    }
}
