//! ZooKeeper: the wire protocol ([`proto`], shared with locksim's server model) and a
//! client ([`ZkClient`]) over the streams a [`StreamDialer`] gives, timed by the
//! design's [`Clock`](crate::Clock). The designs built on it are
//! [`crate::designs::ZkCurator`] (`zk-curator`, `zk-curator-fenced`).

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
    seed_design: crate::designs::ZkCurator::NAME,
};
