//! The Redis system's part of a workload: its servers (masters and replicas, each with
//! its clock, persistence and replication settings) and the Sentinels watching them.
//! `Workload::servers` and `Workload::sentinel` carry them; the registry hands them to
//! this plugin as a [`super::RedisSpec`].

use serde::{Deserialize, Serialize};

use crate::clock::ClockSpec;
use crate::redis::persistence::Persistence;

/// One Redis server of the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Its host name (`redis`, `redis-2`): what faults target and events name.
    pub name: String,
    /// Its clock; `None` uses the run's `server_clock`.
    #[serde(default)]
    pub clock: Option<ClockSpec>,
    /// What survives its crashes (default: nothing, as Redis without a snapshot).
    #[serde(default)]
    pub persistence: Persistence,
    /// `replicaof <server> 6379` in its configuration: it starts as a replica of the
    /// named server (default: a master).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_of: Option<String>,
    /// `replica-priority` (Sentinel promotes the lowest non-zero; 0 never).
    #[serde(default = "default_priority")]
    pub replica_priority: u64,
    /// `min-replicas-to-write` (0: off).
    #[serde(default)]
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`, seconds.
    #[serde(default = "default_max_lag")]
    pub min_replicas_max_lag_s: u64,
}

fn default_priority() -> u64 {
    100
}

fn default_max_lag() -> u64 {
    10
}

impl ServerSpec {
    /// A server called `name` with the run's default clock.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            clock: None,
            persistence: Persistence::None,
            replica_of: None,
            replica_priority: default_priority(),
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: default_max_lag(),
        }
    }
}

/// Sentinels watching the world's master (`sentinel-1` … `sentinel-N`, port 26379).
/// Clients then find the master by asking them, as a Sentinel-aware client does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentinelSpec {
    /// How many Sentinels.
    #[serde(default = "default_sentinels")]
    pub count: u32,
    /// The name they monitor the master under.
    #[serde(default = "default_master_name")]
    pub master_name: String,
    /// The server they start monitoring (default: the first server that replicates
    /// from nobody).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// Sentinels that must agree the master is down.
    #[serde(default = "default_quorum")]
    pub quorum: u32,
    /// `down-after-milliseconds` (Redis's default is 30000; scenarios use less so a
    /// failover fits a short run).
    pub down_after_ms: u64,
    /// `failover-timeout` (Redis's default is 180000).
    pub failover_timeout_ms: u64,
    /// `parallel-syncs`.
    #[serde(default = "default_parallel_syncs")]
    pub parallel_syncs: u32,
}

fn default_sentinels() -> u32 {
    3
}
fn default_master_name() -> String {
    "mymaster".into()
}
fn default_quorum() -> u32 {
    2
}
fn default_parallel_syncs() -> u32 {
    1
}

impl Default for SentinelSpec {
    fn default() -> Self {
        Self {
            count: default_sentinels(),
            master_name: default_master_name(),
            monitor: None,
            quorum: default_quorum(),
            down_after_ms: 30_000,
            failover_timeout_ms: 180_000,
            parallel_syncs: default_parallel_syncs(),
        }
    }
}

/// The default topology: one server called `redis`.
pub fn default_servers() -> Vec<ServerSpec> {
    vec![ServerSpec::named("redis")]
}

/// The server the Sentinels start monitoring, if there are Sentinels: the one they
/// name, or the first server that replicates from nobody.
pub fn monitored<'a>(
    servers: &'a [ServerSpec],
    sentinel: Option<&'a SentinelSpec>,
) -> Option<&'a str> {
    let sn = sentinel?;
    match &sn.monitor {
        Some(m) => Some(m.as_str()),
        None => servers
            .iter()
            .find(|s| s.replica_of.is_none())
            .map(|s| s.name.as_str()),
    }
}

/// The Sentinels' host names (`sentinel-1` …).
pub fn sentinel_names(sentinel: Option<&SentinelSpec>) -> Vec<String> {
    let n = sentinel.map_or(0, |s| s.count);
    (1..=n).map(|i| format!("sentinel-{i}")).collect()
}

/// Checks the servers and Sentinels of a workload; the error names the field and what
/// is allowed.
pub(crate) fn validate(
    servers: &[ServerSpec],
    sentinel: Option<&SentinelSpec>,
) -> Result<(), String> {
    for (i, s) in servers.iter().enumerate() {
        let reserved = s.name == "storage"
            || s.name.starts_with("client-")
            || s.name.starts_with("sentinel-")
            || s.name.is_empty()
            || !s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if reserved {
            return Err(format!(
                "workload.servers[{i}].name '{}' is not allowed: use letters, digits, '-' \
                     or '_', and not 'storage', 'client-N' or 'sentinel-N'",
                s.name
            ));
        }
        if let Some(master) = &s.replica_of
            && (master == &s.name || !servers.iter().any(|o| &o.name == master))
        {
            return Err(format!(
                "workload.servers[{i}].replica_of '{master}' must name another server of \
                     workload.servers"
            ));
        }
        if servers[..i].iter().any(|o| o.name == s.name) {
            return Err(format!(
                "workload.servers[{i}].name '{}' is used twice",
                s.name
            ));
        }
    }
    if let Some(sn) = sentinel {
        if sn.count == 0 {
            return Err("workload.sentinel.count must be at least 1".into());
        }
        if sn.quorum == 0 || sn.quorum > sn.count {
            return Err(format!(
                "workload.sentinel.quorum must be between 1 and workload.sentinel.count ({})",
                sn.count
            ));
        }
        if sn.down_after_ms == 0 || sn.failover_timeout_ms == 0 {
            return Err(
                "workload.sentinel.down_after_ms and failover_timeout_ms must be positive".into(),
            );
        }
        if sn.master_name.is_empty() || sn.master_name.contains([' ', ',']) {
            return Err(format!(
                "workload.sentinel.master_name '{}' must be non-empty, without spaces or commas",
                sn.master_name
            ));
        }
        if let Some(m) = &sn.monitor
            && !servers.iter().any(|s| &s.name == m)
        {
            return Err(format!(
                "workload.sentinel.monitor '{m}' must name a server of workload.servers"
            ));
        }
        if monitored(servers, sentinel).is_none() {
            return Err(
                "workload.sentinel needs a master to monitor: a server without replica_of".into(),
            );
        }
    }
    Ok(())
}
