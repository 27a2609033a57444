//! An etcd v3.4 member model: its gRPC API (`KV`, `Lease`, `Watch`, `v3lock`'s `Lock`)
//! over the simulator's streams, its MVCC store with revisions, and its lessor with
//! lease expiry on the member's clock.
//!
//! Layout: [`store`] (the key space and the lessor as a machine without I/O),
//! [`service`] (the member, its `KV` and `Lease` services, one connection's HTTP/2
//! server) and `hand` (the `Watch` and `Lock` services served by hand, and the
//! router of them all).
//!
//! This first model is one member: a cluster of one, whose writes commit when they
//! apply. A 3-member cluster replicating through Raft, with leader elections and
//! members that fall behind, is not built yet (issue 39); the store is written so
//! that a Raft log can sit between the services and it.

mod hand;
pub mod service;
pub mod store;

pub use service::{EtcdMember, LocalExec, Peer, SharedEtcd, router, serve_connection};
pub use store::{Change, DeleteCause, EtcdError, Store};

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
                    0x8e9e_05c5_2164_694d,
                    MIN_LEASE_TTL,
                    std::time::Duration::from_secs(1),
                ),
                clock,
            );
            let _ = tx.send(member.clone());
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
