//! The network of a real run, made faulty in user space: a fault proxy in the parent
//! in front of every server, so partitions, delays and connection resets from the
//! seed's fault plan act on real TCP links without root or kernel modules.
//!
//! - Every link goes through the proxy, which knows both ends of each: a client by a
//!   listener of its own per server, a server by its own loopback address.
//! - A partition holds bytes, a delay delivers them late, a reset closes connections
//!   with `RST`, a machine crash cuts a host off from every host (details on [`Net`]).
//! - The runner's own questions to the servers go to their real ports, past the proxy.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// The loopback address of the `n`-th server (0-based): `127.0.1.(n + 1)`.
pub fn server_ip(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1, (n + 1).min(254) as u8)
}

/// Where the clients' own listeners are.
const CLIENT_SIDE_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 2, 1);

/// What a client process needs to reach the servers through the proxy.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientNet {
    /// A server's public address (as the Sentinels announce it) → this client's own
    /// listener for that server.
    pub rewrite: BTreeMap<SocketAddr, SocketAddr>,
}

impl ClientNet {
    /// Where this client dials to reach `host:port`.
    pub fn rewrite(&self, host: &str, port: u16) -> (String, u16) {
        match host
            .parse::<IpAddr>()
            .ok()
            .and_then(|ip| self.rewrite.get(&SocketAddr::new(ip, port)))
        {
            Some(a) => (a.ip().to_string(), a.port()),
            None => (host.to_string(), port),
        }
    }
}

/// A partition in force: `a` → `b` (and back unless `one_way`) is held.
struct Cut {
    id: u64,
    a: BTreeSet<String>,
    b: BTreeSet<String>,
    one_way: bool,
}

/// A delay in force: bytes arriving at `target` wait `latency`.
struct Slow {
    id: u64,
    target: String,
    latency: Duration,
}

/// One proxied connection.
struct Conn {
    from: String,
    to: String,
    kill: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    cuts: Vec<Cut>,
    slows: Vec<Slow>,
    conns: BTreeMap<u64, Conn>,
}

struct Shared {
    state: Mutex<State>,
    next: AtomicU64,
    /// A server's loopback address → its name.
    ip_host: BTreeMap<IpAddr, String>,
}

impl Shared {
    fn blocked(&self, from: &str, to: &str) -> bool {
        let s = self.state.lock().expect("net state");
        s.cuts.iter().any(|c| {
            (c.a.contains(from) && c.b.contains(to))
                || (!c.one_way && c.b.contains(from) && c.a.contains(to))
        })
    }

    fn latency(&self, to: &str) -> Duration {
        let s = self.state.lock().expect("net state");
        s.slows
            .iter()
            .filter(|d| d.target == to)
            .map(|d| d.latency)
            .max()
            .unwrap_or_default()
    }
}

/// The fault proxy of one run: its listeners, and the faults in force.
///
/// Every link goes through the proxy, and the proxy knows both ends of each:
///
/// - a **client** process reaches server `X` through a listener of its own
///   (`127.0.2.1:<port>`, one per client and server), so the listener names the
///   source; the addresses the Sentinels hand out (a server's public address, below)
///   are rewritten by the client process to its own listener for that server
///   ([`ClientNet::rewrite`]);
/// - a **server** (a Redis replica dialling its master, a Sentinel dialling a Redis
///   server or another Sentinel) has its own loopback address `127.0.1.N` and binds its
///   outgoing connections to it (Redis 7.0's `bind-source-addr`, used by replication
///   and by every Sentinel link: `replication.c`, `sentinel.c` at 7.0.15); it is
///   reached at its public address `127.0.1.N:<port>`, the proxy's listener, and
///   announces that address (`replica-announce-ip/port`, `sentinel announce-ip/port`),
///   so whatever the servers tell each other and the clients goes through the proxy;
///   the proxy names the source by the peer's address.
///
/// What the proxy does to a link (`from` → `to`, each direction of each connection on
/// its own):
///
/// - **partition**: bytes are held while the link is cut and delivered in order when it
///   heals, as TCP retransmission delivers them (the simulator's partition does the
///   same); a connection opened across a cut is accepted (the kernel completes the
///   handshake before the proxy sees it: a real partition would leave the dial
///   hanging instead) but not connected upstream until the cut heals, so the client
///   sees its commands time out rather than its dial;
/// - **delay**: bytes arriving at the target are delivered `latency` after the proxy
///   read them, in order;
/// - **reset**: every connection between the target and the servers is closed with a
///   `RST` on both ends (`SO_LINGER` 0) at once; new dials work at once;
/// - **machine crash**: the dead host is cut off from every host (its processes are
///   killed behind the cut, so their `FIN`s are held with everything else), and when
///   it is back every old connection of it is reset, what was held lost.
///
/// The runner's own probes (which server holds the key, a replica's offsets) go to the
/// servers' real ports, past the proxy: they are the runner's eyes, not a host.
pub struct Net {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    shared: Arc<Shared>,
    /// Each server's public address (the proxy's listener at its own loopback address).
    pub public: BTreeMap<String, SocketAddr>,
    /// Per client, per server: the client's own listener.
    pub client_addrs: BTreeMap<String, BTreeMap<String, SocketAddr>>,
}

impl Net {
    /// A proxy for `servers` (name → (its loopback address, its real address)) and the
    /// clients `clients`: binds every listener (ports the kernel picks) and serves them.
    pub fn start(
        servers: &BTreeMap<String, (Ipv4Addr, SocketAddr)>,
        clients: &[String],
    ) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("locksim-net")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the fault proxy's runtime: {e}"))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            next: AtomicU64::new(1),
            ip_host: servers
                .iter()
                .map(|(n, (ip, _))| (IpAddr::V4(*ip), n.clone()))
                .collect(),
        });
        let mut public = BTreeMap::new();
        let mut client_addrs: BTreeMap<String, BTreeMap<String, SocketAddr>> = BTreeMap::new();
        runtime.block_on(async {
            for (name, (ip, real)) in servers {
                let l = TcpListener::bind((*ip, 0)).await.map_err(|e| {
                    format!(
                        "the fault proxy cannot listen on {ip} ({e}): the real runner gives \
                         each server its own loopback address in 127.0.1.0/24"
                    )
                })?;
                public.insert(name.clone(), l.local_addr().map_err(|e| e.to_string())?);
                tokio::spawn(serve(l, None, name.clone(), *real, shared.clone()));
                for c in clients {
                    // On 127.0.2.1, so that the kernel's choice of port never takes
                    // one picked for a server on 127.0.0.1 that has not bound it yet.
                    let l = TcpListener::bind((CLIENT_SIDE_IP, 0))
                        .await
                        .map_err(|e| format!("the fault proxy cannot listen: {e}"))?;
                    client_addrs
                        .entry(c.clone())
                        .or_default()
                        .insert(name.clone(), l.local_addr().map_err(|e| e.to_string())?);
                    tokio::spawn(serve(
                        l,
                        Some(c.clone()),
                        name.clone(),
                        *real,
                        shared.clone(),
                    ));
                }
            }
            Ok::<(), String>(())
        })?;
        Ok(Self {
            runtime: Mutex::new(Some(runtime)),
            shared,
            public,
            client_addrs,
        })
    }

    /// What client `name` needs: its rewrite of the public addresses.
    pub fn client_net(&self, name: &str) -> ClientNet {
        let mine = self.client_addrs.get(name).cloned().unwrap_or_default();
        ClientNet {
            rewrite: self
                .public
                .iter()
                .filter_map(|(server, public)| mine.get(server).map(|l| (*public, *l)))
                .collect(),
        }
    }

    /// Holds `a` → `b` (and back unless `one_way`) until [`Net::heal`] with the id.
    pub fn cut(&self, a: BTreeSet<String>, b: BTreeSet<String>, one_way: bool) -> u64 {
        let id = self.shared.next.fetch_add(1, Ordering::Relaxed);
        self.shared
            .state
            .lock()
            .expect("net state")
            .cuts
            .push(Cut { id, a, b, one_way });
        id
    }

    /// Whether `from` → `to` is cut now.
    pub fn blocked(&self, from: &str, to: &str) -> bool {
        self.shared.blocked(from, to)
    }

    /// Ends cut or delay `id`.
    pub fn heal(&self, id: u64) {
        let mut s = self.shared.state.lock().expect("net state");
        s.cuts.retain(|c| c.id != id);
        s.slows.retain(|d| d.id != id);
    }

    /// Delays everything arriving at `target` by `latency` until [`Net::heal`].
    pub fn delay(&self, target: &str, latency: Duration) -> u64 {
        let id = self.shared.next.fetch_add(1, Ordering::Relaxed);
        self.shared
            .state
            .lock()
            .expect("net state")
            .slows
            .push(Slow {
                id,
                target: target.to_string(),
                latency,
            });
        id
    }

    /// Resets (RST on both ends) every connection between `host` and the servers
    /// `servers`; returns how many.
    pub fn reset(&self, host: &str, servers: &[String]) -> usize {
        let s = self.shared.state.lock().expect("net state");
        let mut n = 0;
        for c in s.conns.values() {
            if (c.from == host && servers.contains(&c.to))
                || (c.to == host && servers.contains(&c.from))
            {
                let _ = c.kill.send(true);
                n += 1;
            }
        }
        n
    }

    /// Every host the proxy knows: the servers and the clients.
    fn hosts(&self) -> BTreeSet<String> {
        self.shared
            .ip_host
            .values()
            .chain(self.client_addrs.keys())
            .cloned()
            .collect()
    }

    /// `host`'s machine is dead: nothing it sent and nothing sent to it moves on any
    /// link, and dials to it hang, until [`Net::machine_back`] with the id. (Its
    /// kernel's `FIN`s and `RST`s, when the runner kills its processes, are held too.)
    pub fn black_hole(&self, host: &str) -> u64 {
        let mut others = self.hosts();
        others.remove(host);
        self.cut(BTreeSet::from([host.to_string()]), others, false)
    }

    /// `host`'s machine is back with no memory of its connections: every old one is
    /// reset on both ends (what the black hole held is lost), then links work again.
    pub fn machine_back(&self, host: &str, black_hole: u64) {
        let others: Vec<String> = self.hosts().into_iter().filter(|h| h != host).collect();
        self.reset(host, &others);
        self.heal(black_hole);
    }

    /// Stops every listener and connection.
    pub fn shutdown(&self) {
        if let Some(rt) = self.runtime.lock().expect("net runtime").take() {
            rt.shutdown_background();
        }
    }
}

/// Accepts on `l` (links from `from`, or from the peer's address's server) to `to`.
async fn serve(
    l: TcpListener,
    from: Option<String>,
    to: String,
    real: SocketAddr,
    shared: Arc<Shared>,
) {
    loop {
        let Ok((stream, peer)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let from = from.clone().unwrap_or_else(|| {
            shared
                .ip_host
                .get(&peer.ip())
                .cloned()
                .unwrap_or_else(|| format!("unknown {peer}"))
        });
        tokio::spawn(connect(stream, from, to.clone(), real, shared.clone()));
    }
}

/// Connects one accepted connection upstream (once its link is not cut) and pumps
/// both ways until either end closes or the link is reset.
async fn connect(
    client: TcpStream,
    from: String,
    to: String,
    real: SocketAddr,
    shared: Arc<Shared>,
) {
    let id = shared.next.fetch_add(1, Ordering::Relaxed);
    let (kill, killed) = watch::channel(false);
    shared.state.lock().expect("net state").conns.insert(
        id,
        Conn {
            from: from.clone(),
            to: to.clone(),
            kill,
        },
    );
    while shared.blocked(&from, &to) && !*killed.borrow() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let upstream = if *killed.borrow() {
        None
    } else {
        TcpStream::connect(real).await.ok()
    };
    let Some(upstream) = upstream else {
        rst_on_close(&client);
        shared.state.lock().expect("net state").conns.remove(&id);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let up = tokio::spawn(pump(
        cr,
        uw,
        from.clone(),
        to.clone(),
        killed.clone(),
        shared.clone(),
    ));
    let down = tokio::spawn(pump(ur, cw, to, from, killed, shared.clone()));
    let _ = up.await;
    let _ = down.await;
    shared.state.lock().expect("net state").conns.remove(&id);
}

enum Chunk {
    Data(Vec<u8>, Instant),
    Eof(Instant),
}

/// Moves bytes one way over one connection (host `from` → host `to`), holding them
/// while the link is cut and delaying them by the latency at `to`; a reset closes the
/// sockets with an `RST` (`SO_LINGER` 0, no `FIN` first).
async fn pump(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    from: String,
    to: String,
    killed: watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Chunk>();
    let mut kill_reader = killed.clone();
    let mut kill_writer = killed;
    let latency_of = shared.clone();
    let to2 = to.clone();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        loop {
            let n = tokio::select! {
                biased;
                _ = kill_reader.wait_for(|k| *k) => {
                    rst_on_close(r.as_ref());
                    return;
                }
                n = r.read(&mut buf) => n,
            };
            let at = (Instant::now() + latency_of.latency(&to2)).max(last);
            last = at;
            match n {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Chunk::Eof(at));
                    return;
                }
                Ok(n) => {
                    if tx.send(Chunk::Data(buf[..n].to_vec(), at)).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        loop {
            let chunk = tokio::select! {
                biased;
                _ = kill_writer.wait_for(|k| *k) => {
                    rst_on_close(w.as_ref());
                    w.forget();
                    return;
                }
                c = rx.recv() => c,
            };
            let Some(chunk) = chunk else { return };
            let at = match &chunk {
                Chunk::Data(_, at) | Chunk::Eof(at) => *at,
            };
            // Delayed, then held while the link is cut; a reset meanwhile ends it.
            let wait = async {
                tokio::time::sleep_until(at).await;
                while shared.blocked(&from, &to) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            };
            tokio::select! {
                biased;
                _ = kill_writer.wait_for(|k| *k) => {
                    rst_on_close(w.as_ref());
                    w.forget();
                    return;
                }
                () = wait => {}
            }
            match chunk {
                Chunk::Data(bytes, _) => {
                    if w.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Chunk::Eof(_) => {
                    let _ = w.shutdown().await;
                }
            }
        }
    };
    tokio::join!(reader, writer);
}

/// Makes the socket's close send an `RST` and no `FIN` (`SO_LINGER` on, 0 s): with a
/// zero linger the close never blocks.
fn rst_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a socket this process owns, with a valid `linger`.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read, Write};

    /// An echo server on a kernel-chosen port of 127.0.0.1.
    fn echo() -> SocketAddr {
        let up = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = up.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in up.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b) {
                        if n == 0 || s.write_all(&b[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(c: &mut std::net::TcpStream, what: &[u8]) -> std::io::Result<Vec<u8>> {
        c.write_all(what)?;
        let mut got = vec![0u8; what.len()];
        c.read_exact(&mut got)?;
        Ok(got)
    }

    /// A dead machine's links carry nothing either way; when it is back, its old
    /// connections are reset (what was held is lost) and new ones work.
    #[test]
    fn a_machine_crash_holds_every_byte_and_its_return_resets_the_old_connections() {
        let servers = BTreeMap::from([("redis".to_string(), (server_ip(150), echo()))]);
        let net = Net::start(&servers, &["client-1".to_string()]).unwrap();
        let via = net.client_addrs["client-1"]["redis"];
        let mut c = std::net::TcpStream::connect(via).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert_eq!(round_trip(&mut c, b"ping").unwrap(), b"ping");

        let id = net.black_hole("redis");
        let err = round_trip(&mut c, b"lost").unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "a dead machine answered: {err}"
        );

        // The old connection ends without the held bytes: by an `RST` (a pump's
        // `SO_LINGER` 0), or, when the proxy's two pumps of the connection close it in
        // the other order, by a `FIN` (seen once in CI): either way nothing comes back.
        net.machine_back("redis", id);
        let mut b = [0u8; 8];
        let after = c.read(&mut b);
        assert!(
            matches!(&after, Ok(0))
                || matches!(&after, Err(e) if e.kind() == ErrorKind::ConnectionReset),
            "the old connection was not ended, or gave back what the dead machine held: {after:?}"
        );
        let mut c2 = std::net::TcpStream::connect(via).unwrap();
        c2.set_read_timeout(Some(Duration::from_millis(1_000)))
            .unwrap();
        assert_eq!(round_trip(&mut c2, b"back").unwrap(), b"back");
        net.shutdown();
    }
}
