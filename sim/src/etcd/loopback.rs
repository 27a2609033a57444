//! The model on real loopback ports with the real clock, for tests outside a
//! simulation: one member ([`spawn_tokio_member`]) or a cluster whose members talk
//! over loopback TCP ([`spawn_tokio_cluster`]). Each member runs on a thread of its
//! own (a current-thread runtime with a local set: HTTP/2's tasks are spawned locally,
//! as on a simulated host) until the process ends or, in a cluster, it is killed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::raft::{self, HEARTBEAT_MILLIS};
use super::{
    ClusterView, EtcdMember, LocalExec, MEMBER_IDS, MIN_LEASE_TTL, RaftLink, SharedEtcd, Store,
    router, serve_connection,
};

/// One member on a real loopback port: its address and handle.
pub fn spawn_tokio_member() -> std::io::Result<(SocketAddr, SharedEtcd)> {
    let mut c = spawn_tokio_cluster(1)?;
    let (addr, member) = c.members.remove(0);
    std::mem::forget(c);
    Ok((addr, member))
}

/// A cluster of the model on loopback: each member's client address and handle.
/// Dropping it kills every member still running.
pub struct TokioCluster {
    pub members: Vec<(SocketAddr, SharedEtcd)>,
    kills: Vec<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl TokioCluster {
    /// Kills member `i` (its runtime stops: its connections close, its tasks end).
    pub fn kill(&mut self, i: usize) {
        if let Some(k) = self.kills.get_mut(i).and_then(Option::take) {
            let _ = k.send(());
        }
    }

    /// The running member that leads now, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|i| self.kills[*i].is_some() && self.members[*i].1.leading())
    }
}

impl Drop for TokioCluster {
    fn drop(&mut self) {
        for i in 0..self.kills.len() {
            self.kill(i);
        }
    }
}

/// `n` members of one cluster on free loopback ports, the first campaigning at once.
pub fn spawn_tokio_cluster(n: usize) -> std::io::Result<TokioCluster> {
    let mut clients = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..n {
        let c = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        c.set_nonblocking(true)?;
        let p = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        p.set_nonblocking(true)?;
        clients.push(c);
        peers.push(p);
    }
    let peer_addrs: Vec<SocketAddr> = peers
        .iter()
        .map(|p| p.local_addr())
        .collect::<Result<_, _>>()?;
    let members: Vec<(u64, String)> = (1..=n as u64).map(|i| (i, format!("etcd-{i}"))).collect();
    let mut out = TokioCluster {
        members: Vec::new(),
        kills: Vec::new(),
    };
    for (i, (client, peer)) in clients.into_iter().zip(peers).enumerate() {
        let addr = client.local_addr()?;
        let view = ClusterView {
            me: i as u64 + 1,
            members: members.clone(),
            // Distinct first timeouts in etcd's range, whatever `n`.
            election_ticks: raft::ELECTION_TICKS + (3 * i) % raft::ELECTION_TICKS,
            timeout_seed: i as u64 + 1,
            campaign_at_start: i == 0,
        };
        let peer_addrs = peer_addrs.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                tokio::select! {
                    biased;
                    _ = killed => {}
                    _ = run_member(view, client, peer, peer_addrs, tx) => {}
                }
            });
        });
        let member = rx
            .recv()
            .map_err(|_| std::io::Error::other("the etcd model's thread ended"))?;
        out.members.push((addr, member));
        out.kills.push(Some(kill));
    }
    Ok(out)
}

/// One member on this thread's local set until dropped.
async fn run_member(
    view: ClusterView,
    client: std::net::TcpListener,
    peer: std::net::TcpListener,
    peer_addrs: Vec<SocketAddr>,
    tx: std::sync::mpsc::Sender<SharedEtcd>,
) {
    let clock: Arc<dyn lock_impl::Clock> = Arc::new(crate::clock::RuntimeClock::new());
    let second = Duration::from_secs(1);
    let tick = second * HEARTBEAT_MILLIS / 1000;
    let mut outbox = BTreeMap::new();
    for (id, _) in &view.members {
        if *id == view.me {
            continue;
        }
        let (otx, orx) = tokio::sync::mpsc::unbounded_channel();
        outbox.insert(*id, otx);
        let to = peer_addrs[*id as usize - 1];
        tokio::task::spawn_local(raft::write_link(
            orx,
            move || async move {
                let s = tokio::net::TcpStream::connect(to).await?;
                s.set_nodelay(true)?;
                Ok(s)
            },
            clock.clone(),
            tick,
        ));
    }
    let me = view.me as usize - 1;
    let member = EtcdMember::new(
        Store::new(MEMBER_IDS[me % MEMBER_IDS.len()], MIN_LEASE_TTL, second),
        clock,
        RaftLink::new(view, None, outbox),
    );
    let _ = tx.send(member.clone());
    tokio::task::spawn_local(raft::run_node(member.clone()));
    tokio::task::spawn_local(member.clone().run_lessor());
    let spawn_local = |fut: super::LocalTask| {
        tokio::task::spawn_local(fut);
    };
    let exec = LocalExec(std::rc::Rc::new(spawn_local));
    let peers = tokio::net::TcpListener::from_std(peer).expect("a listener");
    let m2 = member.clone();
    tokio::task::spawn_local(async move {
        loop {
            if let Ok((stream, _)) = peers.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::task::spawn_local(raft::read_link(m2.clone(), stream, spawn_local));
            }
        }
    });
    let routes = router(&member);
    let listener = tokio::net::TcpListener::from_std(client).expect("a listener");
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
}
