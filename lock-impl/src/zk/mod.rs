//! ZooKeeper: the wire protocol ([`proto`], shared with locksim's server model) and a
//! client ([`ZkClient`]) over the streams a [`StreamDialer`] gives, timed by the
//! design's [`Clock`](crate::Clock). The designs built on it are
//! [`crate::designs::ZkCurator`] (`zk-curator`, `zk-curator-fenced`).

mod client;
pub mod proto;
#[cfg(test)]
pub(crate) mod scripted;

pub use client::{
    SessionState, StreamDial, StreamDialer, TokioDialer, Watch, WatchedEvent, ZkClient, ZkEnsemble,
    ZkError, ZkIo, ZkStream, ping_after_ms,
};
