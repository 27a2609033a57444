//! A ZooKeeper 3.8 model speaking ZooKeeper's wire protocol (the codec is
//! `lock_impl::zk::proto`, shared with the client): a standalone server, and an
//! ensemble of 3 or 5 servers electing a leader and replicating writes with Zab.
//!
//! Layout: [`tree`] (the data tree and its txns: the one write path, shared by both),
//! `front` (what both do alike for client connections: watches, replies, reads),
//! [`server`] (a standalone server as a state machine without I/O: sessions,
//! connections, requests, watches; the model the differential test compares with a
//! real `zookeeperd`), [`driver`] (that server over turmoil or tokio TCP, and a turmoil
//! host), [`ensemble`] (one server of an ensemble as a state machine without I/O:
//! election, sync, proposals, acks, commits, the leader's session tracker, learners
//! forwarding writes and serving reads from their own tree, a durable txn log),
//! [`peer_host`] (an ensemble server as a turmoil host: clients on 2181, peers on
//! 2888), [`java`] (the JVM behaviours that reach the wire: `HashSet` order,
//! `java.util.Random`). Each module lists its simplifications.

pub mod driver;
pub mod ensemble;
mod front;
pub mod java;
pub mod peer_host;
pub mod record;
pub mod server;
pub mod tree;

pub use driver::{
    SharedZk, SystemZkClock, ZK_PORT, ZkClock, serve_connection, serve_tokio, serve_turmoil,
    session_tracker, spawn_tokio_zk, zk_host,
};
pub use server::{ConnId, Out, ServerEvent, ZkConfig, ZkNow, ZkServer};
