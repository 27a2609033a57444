//! The ZooKeeper system's part of a workload: one standalone server or an ensemble of
//! 3 or 5, its `tickTime` and the session timeout clients ask for.

use serde::{Deserialize, Serialize};

/// The world's ZooKeeper servers: one standalone server (the model of
/// `crate::zk::server`), or an ensemble of 3 or 5 (`crate::zk::ensemble`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZkSpec {
    /// The first server's host name (`zk-1`); an ensemble's are `zk-1` … `zk-N`.
    pub name: String,
    /// How many servers: 1 (standalone, the default), 3 or 5 (an ensemble).
    #[serde(default = "one_server", skip_serializing_if = "is_one_server")]
    pub servers: u8,
    /// The model's `tickTime`, ms: sessions may last 2 to 20 ticks.
    pub tick_time_ms: u32,
    /// The session timeout each client asks for, ms (the server clamps it to
    /// [2, 20] × `tick_time_ms`).
    pub session_timeout_ms: u32,
}

impl ZkSpec {
    /// The world's server for a lease of `lease_ms`: `zk-1` with a `tickTime` of a
    /// quarter lease between 50 ms and ZooKeeper's default 2,000 ms (50 ms for the
    /// catalog's 200 ms lease; 2,000 ms for a real 30 s lease), and a session timeout of
    /// 1.5 leases (300 ms for the catalog's lease), so that a client fault of 2 leases or
    /// more outlasts the session, bucket rounding included; the server clamps it to
    /// `[2, 20]` ticks (a 30 s lease asks 45 s and gets 40 s, as Curator's default 60 s
    /// would against a default server).
    pub fn for_lease(lease_ms: u64) -> ZkSpec {
        let tick_time_ms = (lease_ms / 4).clamp(50, 2_000) as u32;
        let tick = u64::from(tick_time_ms);
        let session = (lease_ms * 3 / 2).clamp(2 * tick, 20 * tick) as u32;
        ZkSpec {
            name: "zk-1".into(),
            servers: 1,
            tick_time_ms,
            session_timeout_ms: session,
        }
    }

    /// [`ZkSpec::for_lease`] as an ensemble of three servers, `zk-1` to `zk-3`.
    pub fn ensemble_for_lease(lease_ms: u64) -> ZkSpec {
        ZkSpec {
            servers: 3,
            ..Self::for_lease(lease_ms)
        }
    }

    /// The servers' host names.
    pub fn names(&self) -> Vec<String> {
        if self.servers <= 1 {
            vec![self.name.clone()]
        } else {
            (1..=self.servers).map(|i| format!("zk-{i}")).collect()
        }
    }
}

fn one_server() -> u8 {
    1
}

fn is_one_server(n: &u8) -> bool {
    *n == 1
}
