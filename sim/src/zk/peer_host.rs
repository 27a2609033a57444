//! Runs one ensemble server ([`Peer`]) as a turmoil host: clients on [`ZK_PORT`],
//! peers on [`QUORUM_PORT`]. Every stream is wrapped by the link-fault registry and
//! the host's pause gate, so partitions, crashes and pauses reach quorum traffic as
//! they reach clients. The core's lock is a `std::sync::Mutex` held only around
//! synchronous calls; loops use `select! { biased; ... }`; timers sleep on turmoil's
//! time, so a simulation that jumps sees them.
//!
//! Peer links: each server dials every other server once and only writes on that
//! stream (a `u64` hello with its id, then length-prefixed JSON [`PeerMsg`]s); what it
//! accepts it only reads. A broken link is re-dialled after a tick; messages queued
//! while it was down are sent on the new stream (a restarted peer ignores what no
//! longer fits its state, as ZooKeeper's epochs and rounds make it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::driver::{ZK_PORT, ZkClock, pump_frames};
use super::ensemble::{EnsembleConfig, Peer, PeerMsg, SharedDisk, Sid};
use super::server::{ConnId, Out};
use crate::net::NetFaults;
use crate::pause::PauseGate;

/// The port servers talk to each other on (ZooKeeper's quorum port).
pub const QUORUM_PORT: u16 = 2888;

type Senders = BTreeMap<ConnId, UnboundedSender<Out>>;

/// One ensemble server shared by its connections, links and timer. Cheap to clone.
#[derive(Clone)]
pub struct SharedPeer {
    peer: Arc<Mutex<Peer>>,
    clients: Arc<Mutex<Senders>>,
    links: Arc<BTreeMap<Sid, UnboundedSender<PeerMsg>>>,
    clock: Arc<dyn ZkClock>,
}

impl std::fmt::Debug for SharedPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPeer").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SharedPeer {
    /// Runs `f` on the server at the clock's reading, then hands each connection and
    /// link what it queued.
    pub fn with<R>(&self, f: impl FnOnce(&mut Peer, super::ZkNow) -> R) -> R {
        let now = self.clock.now();
        let (r, out, msgs) = {
            let mut p = lock(&self.peer);
            let r = f(&mut p, now);
            (r, p.take_output(), p.take_peer_output())
        };
        if !out.is_empty() {
            let senders = lock(&self.clients);
            for (conn, o) in out {
                if let Some(tx) = senders.get(&conn) {
                    let _ = tx.send(o);
                }
            }
        }
        for (sid, m) in msgs {
            if let Some(tx) = self.links.get(&sid) {
                let _ = tx.send(m);
            }
        }
        r
    }
}

/// Where a server runs: its id, every server's host name by id, its disk and clock,
/// the link-fault registry and its pause gate.
pub struct PeerHost {
    /// The ensemble.
    pub cfg: EnsembleConfig,
    /// `myid`.
    pub me: Sid,
    /// Host names by id.
    pub names: BTreeMap<Sid, String>,
    /// The durable store.
    pub disk: SharedDisk,
    /// The host clock.
    pub clock: Arc<dyn ZkClock>,
    /// Link faults.
    pub net: NetFaults,
    /// The host's pause gate.
    pub gate: PauseGate,
}

impl PeerHost {
    /// Starts the server on the current turmoil host and serves until the host dies;
    /// `on_start` gets the shared server first.
    pub async fn run(self, on_start: impl FnOnce(SharedPeer)) -> turmoil::Result {
        let me_name = self.names.get(&self.me).cloned().unwrap_or_default();
        let mut links = BTreeMap::new();
        let mut receivers = Vec::new();
        for (sid, name) in &self.names {
            if *sid == self.me {
                continue;
            }
            let (tx, rx) = unbounded_channel();
            links.insert(*sid, tx);
            receivers.push((name.clone(), rx));
        }
        let peer = Peer::new(self.cfg, self.me, self.disk, self.clock.now());
        let shared = SharedPeer {
            peer: Arc::new(Mutex::new(peer)),
            clients: Arc::default(),
            links: Arc::new(links),
            clock: self.clock,
        };
        on_start(shared.clone());
        // The first votes, queued by `Peer::new`.
        shared.with(|_, _| ());
        let clients =
            turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ZK_PORT)).await?;
        let quorum =
            turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, QUORUM_PORT)).await?;
        for (name, rx) in receivers {
            tokio::task::spawn_local(self.gate.wrap(link_writer(
                self.me,
                me_name.clone(),
                name,
                rx,
                self.net.clone(),
                self.gate.clone(),
            )));
        }
        tokio::task::spawn_local(self.gate.wrap(timer(shared.clone())));
        let (net, gate) = (self.net.clone(), self.gate.clone());
        let sh = shared.clone();
        let me2 = me_name.clone();
        tokio::task::spawn_local(self.gate.wrap(async move {
            loop {
                let Ok((stream, addr)) = quorum.accept().await else {
                    turmoil::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let from = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                let stream = gate.wrap_io(net.wrap(stream, &me2, &from));
                tokio::task::spawn_local(gate.wrap(link_reader(sh.clone(), stream)));
            }
        }));
        loop {
            let Ok((stream, addr)) = self.gate.wrap(clients.accept()).await else {
                turmoil::time::sleep(Duration::from_millis(1)).await;
                continue;
            };
            let from = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
            let stream = self.net.wrap(stream, &me_name, &from);
            tokio::task::spawn_local(self.gate.wrap(serve_client(shared.clone(), stream, from)));
        }
    }
}

/// The server's timer: every tick boundary of its clock.
async fn timer(shared: SharedPeer) {
    loop {
        let (next, now) = shared.with(|p, now| (p.next_tick_ms(now.elapsed_ms), now.elapsed_ms));
        if next > now {
            let wait = shared
                .clock
                .true_duration(Duration::from_millis(next - now));
            turmoil::time::sleep(wait).await;
        }
        shared.with(|p, now| p.tick(now));
    }
}

fn encode(msg: &PeerMsg) -> Vec<u8> {
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend(body);
    f
}

/// Writes this server's messages to peer `to`, re-dialling a broken link after a
/// tick.
async fn link_writer(
    me: Sid,
    me_name: String,
    to: String,
    mut rx: UnboundedReceiver<PeerMsg>,
    net: NetFaults,
    gate: PauseGate,
) {
    loop {
        let dialed = crate::net::dial_host(&net, &me_name, &gate, &to, QUORUM_PORT, None).await;
        let Ok((mut stream, _)) = dialed else {
            turmoil::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut hello = 8u32.to_be_bytes().to_vec();
        hello.extend(me.to_be_bytes());
        if stream.write_all(&hello).await.is_err() {
            continue;
        }
        while let Some(msg) = rx.recv().await {
            if stream.write_all(&encode(&msg)).await.is_err() {
                break;
            }
        }
        turmoil::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads one peer's messages into the server.
async fn link_reader<S: AsyncRead + Unpin>(shared: SharedPeer, stream: S) {
    let mut from: Option<Sid> = None;
    crate::net::read_frames(stream, |body| match from {
        None => match <[u8; 8]>::try_from(body) {
            Ok(b) => {
                from = Some(u64::from_be_bytes(b));
                true
            }
            Err(_) => false,
        },
        Some(sid) => match serde_json::from_slice::<PeerMsg>(body) {
            Ok(msg) => {
                shared.with(|p, now| p.on_peer(sid, msg, now));
                true
            }
            Err(_) => false,
        },
    })
    .await;
}

/// Serves one client connection until either side closes it.
async fn serve_client<S>(shared: SharedPeer, stream: S, peer: String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (tx, rx) = unbounded_channel();
    let id = shared.with(|p, _| p.connect(peer));
    lock(&shared.clients).insert(id, tx);
    pump_frames(stream, rx, |payload| {
        shared.with(|p, now| p.receive(id, payload, now))
    })
    .await;
    lock(&shared.clients).remove(&id);
    shared.with(|p, _| p.disconnect(id));
}
