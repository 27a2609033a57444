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
pub mod op;
pub mod raft;
pub mod service;
pub mod store;

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

/// One member on a real loopback port (real clock), for tests of the designs and the
/// model outside a simulation: its address and handle. It runs on a thread of its own
/// (a current-thread runtime with a local set: HTTP/2's tasks are spawned locally, as
/// on a simulated host) until the process ends.
pub fn spawn_tokio_member() -> std::io::Result<(std::net::SocketAddr, SharedEtcd)> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let clock: std::sync::Arc<dyn lock_impl::Clock> =
                std::sync::Arc::new(crate::clock::RuntimeClock::new());
            let member = EtcdMember::new(
                Store::new(
                    MEMBER_IDS[0],
                    MIN_LEASE_TTL,
                    std::time::Duration::from_secs(1),
                ),
                clock,
                RaftLink::new(ClusterView::single(), None, Default::default()),
            );
            let _ = tx.send(member.clone());
            tokio::task::spawn_local(raft::run_node(member.clone()));
            tokio::task::spawn_local(member.clone().run_lessor());
            let exec = LocalExec(std::rc::Rc::new(|fut| {
                tokio::task::spawn_local(fut);
            }));
            let routes = router(&member);
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            loop {
                if let Ok((stream, peer)) = listener.accept().await {
                    let _ = stream.set_nodelay(true);
                    tokio::task::spawn_local(serve_connection(
                        stream,
                        peer.to_string(),
                        routes.clone(),
                        exec.clone(),
                    ));
                }
            }
        });
    });
    let member = rx
        .recv()
        .map_err(|_| std::io::Error::other("the etcd model's thread ended"))?;
    Ok((addr, member))
}
