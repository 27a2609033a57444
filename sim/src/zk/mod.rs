//! A ZooKeeper 3.8 model: one server speaking ZooKeeper's wire protocol (the codec is
//! `lock_impl::zk::proto`, shared with the client), with sessions that expire by the
//! server's clock, the data tree with its Stat, one-shot watches, and the operations
//! the lock recipes use, with ZooKeeper's exact errors.
//!
//! Layout: [`tree`] (the data tree and its txns: the one write path), [`server`] (the
//! server as a state machine without I/O: sessions, connections, requests, watches),
//! [`driver`] (the same core over turmoil or tokio TCP, and a turmoil host), [`java`]
//! (the JVM behaviours that reach the wire: `HashSet` order, `java.util.Random`).
//!
//! Next (an ensemble of 3 or 5): a leader turns requests into [`tree::Txn`]s exactly
//! as [`server`] does now, replicates [`server::ZkServer::log`]'s entries to followers
//! that apply them in zxid order through [`tree::DataTree::apply`], and the session
//! tracker moves to the leader. The simplifications are listed in [`server`].

pub mod driver;
pub mod ensemble;
pub mod java;
pub mod peer_host;
pub mod server;
pub mod tree;

pub use driver::{
    SharedZk, SystemZkClock, ZK_PORT, ZkClock, serve_connection, serve_tokio, serve_turmoil,
    session_tracker, spawn_tokio_zk, zk_host,
};
pub use server::{ConnId, Out, ServerEvent, ZkConfig, ZkNow, ZkServer};
