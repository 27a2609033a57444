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

/// Which client a fault hits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A named host, e.g. `client-2`.
    Host(String),
    /// Whichever client the history shows holding the lock at the fault's start (an
    /// acquire `ok` not yet followed by its release); no-op if nobody holds it. Like
    /// Jepsen's "pause the primary": aims the fault where it matters.
    Holder,
    /// Whichever client has an acquire in flight at the fault's start; no-op if none.
    Acquirer,
    /// The client whose value the lock key holds on the Redis server at the fault's
    /// start (the server's own record, not the client's belief); no-op if the key is
    /// absent. This reaches the moments a client cannot see: after the server granted
    /// the lock and before the client heard of it, or between two commands of a
    /// non-atomic acquire.
    LockOwner,
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
    /// Stop-the-world pause: the client's tasks, timers and reading of replies freeze;
    /// replies queue and arrive after the pause.
    Pause {
        /// Who.
        target: Target,
        /// How long.
        duration_ms: u64,
    },
    /// The client process dies, holding whatever it held; optionally restarts.
    Crash {
        /// Who.
        target: Target,
        /// Restart this long after the crash; never if `None`.
        restart_after_ms: Option<u64>,
    },
    /// Messages from Redis to the client take `latency_ms` for `duration_ms`.
    Delay {
        /// Whose replies are delayed.
        target: Target,
        /// One-way latency while the fault lasts.
        latency_ms: u64,
        /// How long the fault lasts.
        duration_ms: u64,
    },
    /// The Redis server drops every pub/sub message it would deliver for
    /// `duration_ms` (an unlock message lost on the way to a waiter).
    DropPushes {
        /// How long messages are dropped.
        duration_ms: u64,
    },
    /// The client's next critical section runs `extra_ms` longer than planned.
    SlowWork {
        /// Who.
        target: Target,
        /// Extra time inside the critical section.
        extra_ms: u64,
    },
}
