//! ZooKeeper: the wire protocol ([`proto`], shared with locksim's server model) and a
//! client ([`ZkClient`]) over the streams a [`StreamDialer`] gives, timed by the
//! design's [`Clock`]; its record ([`SYSTEM`]) and the designs'
//! dependencies ([`zookeeper_deps`], [`production_zk_deps`]). The designs built on it
//! are `zk-curator` and `zk-curator-fenced` (`designs::ZkCurator`).

mod client;
pub mod proto;
#[cfg(feature = "testing")]
mod scripted;

/// What `lock-impl-tests`' unit tests (`tests/units`) reach inside this module: a
/// scripted server over in-memory streams, to dial instead of a real one. Not an API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod internals {
    pub use super::scripted::{Scripted, Step};
}

use std::sync::Arc;

use crate::system::{production_system_deps, system_deps};
use crate::{Clock, Deps, Entropy, LockError, Spawner, TimeScale};

pub use client::{
    SessionState, StreamDial, StreamDialer, TokioDialer, Watch, WatchedEvent, ZkClient, ZkEnsemble,
    ZkError, ZkIo, ZkStream, ping_after_ms,
};

/// A ZooKeeper design's handle in [`crate::Deps`]: the ensemble.
impl crate::SystemHandle for ZkEnsemble {
    const BACKEND: crate::Backend = crate::Backend::ZooKeeper;
}

/// ZooKeeper's record ([`crate::Backend::ZooKeeper`]).
pub const SYSTEM: crate::BackendInfo = crate::BackendInfo {
    name: "ZooKeeper",
    promise: "ZooKeeper: a lock node is committed by a quorum (Zab) before anyone sees \
              it and carries a czxid no failover reissues, but it is ephemeral: it lives \
              as long as its holder's session, which the leader expires when the holder \
              is silent past the session timeout, a paused holder included",
    // The row "基于ZooKeeper": ephemeral sequential nodes under `/lock`, the lowest
    // holds, the others watch their predecessor, through Curator (which the row names).
    seed_design: "zk-curator",
};

/// Dependencies for the ZooKeeper designs: the ensemble, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis (its commands fail).
pub fn zookeeper_deps(
    ensemble: ZkEnsemble,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    system_deps(ensemble, clock, entropy, spawner)
}

/// Production dependencies for the ZooKeeper designs: the servers `host:port`, asking
/// for `session_timeout_ms`, over tokio TCP with tokio's clock and OS randomness.
pub fn production_zk_deps(servers: &[&str], session_timeout_ms: u32) -> Result<Deps, LockError> {
    let mut list = Vec::with_capacity(servers.len());
    for s in servers {
        let parsed = s
            .rsplit_once(':')
            .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h.to_string(), p)));
        match parsed {
            Some(hp) if !hp.0.is_empty() => list.push(hp),
            _ => {
                return Err(LockError::BadZooKeeperAddress {
                    addr: s.to_string(),
                });
            }
        }
    }
    if list.is_empty() {
        return Err(LockError::NoServers);
    }
    Ok(production_system_deps(ZkEnsemble {
        servers: list,
        dialer: Arc::new(TokioDialer),
        session_timeout_ms,
        scale: TimeScale::REAL,
    }))
}
