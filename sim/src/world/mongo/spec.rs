//! The MongoDB system's part of a workload: the replica set's members, its name, the
//! locks' database and its election timing.

use serde::{Deserialize, Serialize};

/// The world's MongoDB replica set (the MongoDB 7.0 model of `crate::mongo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MongoSpec {
    /// Its members' host names, in configuration order (`mongo-1` … `mongo-3`).
    pub members: Vec<String>,
    /// `replSetName`.
    pub set_name: String,
    /// The database the locks live in.
    pub database: String,
    /// `heartbeatIntervalMillis`: 200 (MongoDB's default is 2 000; scaled down with the
    /// election timeout, as the Sentinel worlds scale `down-after-milliseconds`, so a
    /// failover takes about a second and a run stays short).
    pub heartbeat_ms: u64,
    /// `electionTimeoutMillis`: 1 000 (MongoDB's default is 10 000).
    pub election_timeout_ms: u64,
}

impl Default for MongoSpec {
    fn default() -> Self {
        MongoSpec {
            members: (1..=3).map(|i| format!("mongo-{i}")).collect(),
            set_name: "rs0".into(),
            database: "locksim".into(),
            heartbeat_ms: 200,
            election_timeout_ms: 1_000,
        }
    }
}
