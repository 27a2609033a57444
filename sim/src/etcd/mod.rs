//! An etcd v3.4 member model: its gRPC API (`KV`, `Lease`, `Watch`, `v3lock`'s `Lock`)
//! over the simulator's streams, its MVCC store with revisions, and its lessor with
//! lease expiry on the member's clock.
//!
//! Layout: [`store`] (the key space and the lessor as a machine without I/O),
//! [`service`] (the member, its `KV` and `Lease` services, one connection's HTTP/2
//! server) and `hand` (the `Watch` and `Lock` services served by hand, and the
//! router of them all).
//!
//! Every write, lease grant and revoke, and linearizable read goes through the
//! members' Raft log ([`raft`]: TiKV's `raft` crate, driven as etcd drives etcd/raft)
//! as an [`op::Op`], and every member applies it to its store; a cluster of one (a
//! member on its own) runs the same path.

mod hand;
mod link;
mod loopback;
pub mod op;
pub mod raft;
pub mod service;
pub mod store;

pub use loopback::{TokioCluster, spawn_tokio_cluster, spawn_tokio_member};
pub use raft::{ClusterView, PEER_PORT, RaftLink};
pub use service::{EtcdMember, LocalExec, LocalTask, Peer, SharedEtcd, router, serve_connection};
pub use store::{Change, DeleteCause, EtcdError, Store};

/// The member IDs a cluster's members put in their headers (and in the high bits of
/// the lease IDs they give), by Raft ID 1, 2, 3, … (fixed values in etcd's form).
pub const MEMBER_IDS: [u64; 5] = [
    0x8e9e_05c5_2164_694d,
    0x91bc_3c39_8fb3_c146,
    0xfd42_2379_fda5_0e48,
    0x3a57_933b_cb04_a9d1,
    0xc4f1_d6a3_6b25_e3f2,
];

/// The port etcd serves clients on.
pub const ETCD_PORT: u16 = 2379;

/// etcd's minimum lease TTL at its defaults (`--election-timeout` 1000 ms:
/// `ceil(1.5 × 1 s)`), seconds.
pub const MIN_LEASE_TTL: i64 = 2;
