//! Runs a [`Member`] over a network: its clients' and peers' connections (`OP_MSG`
//! over turmoil's TCP in the simulator, tokio's on loopback ports in tests), and its
//! own background work, each a task: a heartbeat loop per peer, the election timer,
//! and the oplog fetcher. Peers are reached through a [`StreamDialer`] with the same
//! `OP_MSG` client the lock designs use, so partitions, delays and crashes reach
//! replication and elections exactly as they reach clients.
//!
//! The model's lock is held only around synchronous calls, never across an `.await`;
//! every timer is turmoil's hinted sleep, so a simulation that jumps in time sees it.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lock_impl::mongo::wire::{Message, split_message};
use lock_impl::mongo::{Document, MongoConn};
use lock_impl::zk::StreamDialer;
use lock_impl::{Clock, Sleep};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::member::{ConcernState, Durable, Fetched, Handled, Member, MongoConfig, Role};

/// One running member, shared by its connections and tasks. Cheap to clone.
#[derive(Clone)]
pub struct SharedMember {
    member: Arc<Mutex<Member>>,
    /// Woken after every call on the member: waiting writes and oplog reads look again.
    changed: Arc<tokio::sync::Notify>,
    /// The host's monotonic clock, which every timer of the member runs on (heartbeats,
    /// election timeouts, `wtimeout`, a long poll's wait): a clock that drifts bends
    /// them all, as a real `mongod`'s steady clock does.
    clock: Arc<dyn Clock>,
    /// Its reading when the member started.
    origin: Duration,
}

impl std::fmt::Debug for SharedMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMember")
            .field("member", &self.member)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl SharedMember {
    /// A member starting from `durable` (what it had on disk), on its runtime's clock.
    pub fn new(config: MongoConfig, durable: Durable) -> Self {
        Self::on_clock(config, durable, Arc::new(crate::clock::RuntimeClock::new()))
    }

    /// A member starting from `durable`, on the host clock `clock`.
    pub fn on_clock(config: MongoConfig, durable: Durable, clock: Arc<dyn Clock>) -> Self {
        SharedMember {
            member: Arc::new(Mutex::new(Member::new(config, durable, Duration::ZERO))),
            changed: Arc::new(tokio::sync::Notify::new()),
            origin: clock.now(),
            clock,
        }
    }

    /// Sleeps `duration` of the host's clock.
    fn sleep(&self, duration: Duration) -> Sleep {
        self.clock.sleep(duration)
    }

    fn lock(&self) -> MutexGuard<'_, Member> {
        self.member.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time since it started, by its host's clock.
    pub fn now(&self) -> Duration {
        self.clock.now().saturating_sub(self.origin)
    }

    /// Runs `f` on the member, then wakes whoever waits on it.
    pub fn with<R>(&self, f: impl FnOnce(&mut Member) -> R) -> R {
        let r = f(&mut self.lock());
        self.changed.notify_waiters();
        r
    }

    /// Reads the member without waking anyone.
    pub fn read<R>(&self, f: impl FnOnce(&Member) -> R) -> R {
        f(&self.lock())
    }

    /// Runs one command to its reply, waiting for a write concern or new oplog
    /// entries if the member says so.
    async fn run(&self, host: &str, body: Document) -> Document {
        let now = self.now();
        let mut handled = self.with(|m| m.command(host, &body, now));
        loop {
            match handled {
                Handled::Reply(d) => return d,
                Handled::WaitConcern(w) => {
                    let deadline = w.wtimeout_ms.map(Duration::from_millis);
                    let started = self.now();
                    loop {
                        let changed = self.changed.notified();
                        tokio::pin!(changed);
                        changed.as_mut().enable();
                        match self.read(|m| m.concern_met(&w)) {
                            ConcernState::Met => return w.reply,
                            ConcernState::Failed(e) => return w.reply.with("writeConcernError", e),
                            ConcernState::Waiting => {}
                        }
                        let left = deadline.map(|d| d.saturating_sub(self.now() - started));
                        if left == Some(Duration::ZERO) {
                            let e = Member::wtimeout_error(&w);
                            return w.reply.with("writeConcernError", e);
                        }
                        tokio::select! {
                            biased;
                            _ = &mut changed => {}
                            _ = self.sleep(left.unwrap_or(Duration::from_secs(3600))) => {}
                        }
                    }
                }
                Handled::WaitOplog {
                    body,
                    after,
                    max_ms,
                } => {
                    let limit = self.sleep(Duration::from_millis(max_ms));
                    tokio::pin!(limit);
                    loop {
                        let changed = self.changed.notified();
                        tokio::pin!(changed);
                        changed.as_mut().enable();
                        if self.read(|m| m.last_applied() != after || m.role() != Role::Primary) {
                            break;
                        }
                        tokio::select! {
                            biased;
                            _ = &mut changed => {}
                            _ = &mut limit => break,
                        }
                    }
                    let now = self.now();
                    handled = self.with(|m| m.command(host, &body, now));
                }
            }
        }
    }
}

/// Serves one connection from `host` until either side closes it.
pub async fn serve_connection<S>(shared: SharedMember, mut stream: S, host: String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut inbuf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    'conn: loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        inbuf.extend_from_slice(&chunk[..n]);
        loop {
            let len = match split_message(&inbuf) {
                Ok(Some(len)) => len,
                Ok(None) => break,
                // A message the server cannot frame ends the connection, as mongod
                // closes it on an invalid message header.
                Err(_) => break 'conn,
            };
            let request = Message::decode(&inbuf[..len]);
            inbuf.drain(..len);
            let Ok(request) = request else {
                break 'conn;
            };
            let reply = shared.run(&host, request.body).await;
            let bytes = Message {
                request_id: request.request_id.wrapping_add(1 << 20),
                response_to: request.request_id,
                flags: 0,
                body: reply,
            }
            .encode();
            if stream.write_all(&bytes).await.is_err() || stream.flush().await.is_err() {
                break 'conn;
            }
        }
    }
}

/// A connection to one peer, dialled when needed and dropped when it fails.
struct Peer {
    index: usize,
    host: String,
    port: u16,
    dialer: Arc<dyn StreamDialer>,
    clock: Arc<dyn Clock>,
    conn: Option<MongoConn>,
}

impl Peer {
    fn new(shared: &SharedMember, index: usize, dialer: Arc<dyn StreamDialer>) -> Option<Peer> {
        let addr = shared.read(|m| m.config().members[index].clone());
        let (host, port) = addr.rsplit_once(':')?;
        Some(Peer {
            index,
            host: host.to_string(),
            port: port.parse().ok()?,
            dialer,
            clock: shared.clock.clone(),
            conn: None,
        })
    }

    async fn call(&mut self, db: &str, body: Document, timeout: Duration) -> Option<Document> {
        if self.conn.as_ref().is_some_and(|c| c.broken().is_some()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let c = MongoConn::connect(
                self.dialer.as_ref(),
                &self.host,
                self.port,
                self.clock.clone(),
                timeout.as_millis() as u64,
            )
            .await
            .ok()?;
            self.conn = Some(c);
        }
        let conn = self.conn.as_mut()?;
        match conn.command_within(db, body, timeout).await {
            Ok(r) => Some(r),
            Err(_) => {
                self.conn = None;
                None
            }
        }
    }
}

/// Starts the member's background tasks (heartbeats, elections, oplog fetching) with
/// `dialer.spawn`.
pub fn start_background(shared: &SharedMember, dialer: Arc<dyn StreamDialer>) {
    let (me, n, heartbeat, election) = shared.read(|m| {
        let c = m.config();
        (
            c.me,
            c.members.len(),
            Duration::from_millis(c.heartbeat_ms.max(1)),
            Duration::from_millis(c.election_timeout_ms.max(1)),
        )
    });
    for i in (0..n).filter(|i| *i != me) {
        let Some(mut peer) = Peer::new(shared, i, dialer.clone()) else {
            continue;
        };
        let s = shared.clone();
        dialer.spawn(Box::pin(async move {
            loop {
                s.sleep(heartbeat).await;
                let req = s.read(|m| m.heartbeat_request());
                if let Some(r) = peer.call("admin", req, election).await {
                    let now = s.now();
                    s.with(|m| m.on_heartbeat_reply(peer.index, &r, now));
                }
            }
        }));
    }
    // The election timer (and a primary's check that it still sees a majority).
    {
        let s = shared.clone();
        let mut voters: Vec<Peer> = (0..n)
            .filter(|i| *i != me)
            .filter_map(|i| Peer::new(shared, i, dialer.clone()))
            .collect();
        dialer.spawn(Box::pin(async move {
            loop {
                // Until the election is due, or the next liveness check.
                let now = s.now();
                let wait = s
                    .read(|m| m.election_deadline())
                    .map_or(heartbeat, |d| d.saturating_sub(now).min(heartbeat));
                s.sleep(wait.max(Duration::from_millis(1))).await;
                let now = s.now();
                let req = s.with(|m| {
                    m.check_liveness(now);
                    m.election_due(now)
                        .then(|| (m.start_election(now), m.term()))
                });
                let Some((req, term)) = req else { continue };
                // Ask every voter at once; each answer counts as it comes, and the
                // election is decided as soon as it can be, as `VoteRequester` (7.0,
                // `vote_requester.cpp`) stops once a majority voted yes or a reply
                // carried a newer term (`hasReceivedSufficientResponses`): a voter
                // that does not answer (dead, cut off) holds nothing up. Each request
                // may take the election timeout, as the real one's
                // `RemoteCommandRequest` timeout (`getElectionTimeoutPeriod()`).
                use futures_util::StreamExt;
                let mut answered = vec![false; n];
                {
                    let mut asks: futures_util::stream::FuturesUnordered<_> = voters
                        .iter_mut()
                        .map(|p| {
                            let req = req.clone();
                            async move { (p.index, p.call("admin", req, election).await) }
                        })
                        .collect();
                    while let Some((from, r)) = asks.next().await {
                        answered[from] = true;
                        let now = s.now();
                        if let Some(r) = r {
                            s.with(|m| m.on_vote_reply(from, &r, term, now));
                        }
                        // Decided: won, or a newer term made it step back.
                        if s.read(|m| m.role() != Role::Candidate || m.term() != term) {
                            break;
                        }
                    }
                }
                // A request left unanswered is abandoned with its connection (its late
                // reply must not be read as the answer to the next request).
                for p in voters.iter_mut().filter(|p| !answered[p.index]) {
                    p.conn = None;
                }
            }
        }));
    }
    // The oplog fetcher: a secondary pulls from the primary it knows.
    {
        let s = shared.clone();
        let mut peers: Vec<Option<Peer>> = (0..n)
            .map(|i| {
                (i != me)
                    .then(|| Peer::new(shared, i, dialer.clone()))
                    .flatten()
            })
            .collect();
        dialer.spawn(Box::pin(async move {
            loop {
                let source =
                    s.read(|m| (m.role() == Role::Secondary).then(|| m.primary()).flatten());
                let Some(source) = source.filter(|p| *p != me) else {
                    s.sleep(heartbeat).await;
                    continue;
                };
                let Some(peer) = peers.get_mut(source).and_then(Option::as_mut) else {
                    s.sleep(heartbeat).await;
                    continue;
                };
                let from = s.read(|m| m.fetch_from());
                let req = s.read(|m| m.fetch_request(from, election.as_millis() as u64 / 2));
                let Some(reply) = peer.call("local", req, election).await else {
                    s.sleep(heartbeat).await;
                    continue;
                };
                let now = s.now();
                match s.with(|m| m.on_fetch_reply(source, from, &reply, now)) {
                    Fetched::Applied(0) => {}
                    Fetched::Applied(_) => {
                        let pos = s.read(|m| m.update_position());
                        peer.call("admin", pos, election).await;
                    }
                    Fetched::Diverged { from_ts } => {
                        let req = s.read(|m| m.fetch_request(from_ts, 0));
                        if let Some(r) = peer.call("local", req, election).await {
                            s.with(|m| m.rollback(source, &r));
                        }
                    }
                }
            }
        }));
    }
}

/// `tokio::net::TcpStream` and `tokio::spawn`, for members on loopback ports.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioPeers;

impl StreamDialer for TokioPeers {
    fn dial(&self, host: &str, port: u16) -> lock_impl::zk::StreamDial<'_> {
        lock_impl::zk::TokioDialer.dial(host, port)
    }
    fn spawn(&self, task: lock_impl::Task) {
        tokio::spawn(task);
    }
}

/// Starts a replica set of `members` members on free loopback ports inside the
/// current tokio runtime (for tests and tools): their addresses and handles. A set of
/// one is primary within `election_timeout_ms`; wait for it with [`wait_for_primary`].
pub async fn spawn_tokio_set(
    members: usize,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    seed: u64,
) -> io::Result<(Vec<SocketAddr>, Vec<SharedMember>)> {
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..members {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        addrs.push(l.local_addr()?);
        listeners.push(l);
    }
    let names: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut shared = Vec::new();
    for (me, listener) in listeners.into_iter().enumerate() {
        let config = MongoConfig {
            set_name: "rs0".into(),
            members: names.clone(),
            me,
            heartbeat_ms,
            election_timeout_ms,
            seed,
        };
        let s = SharedMember::new(config, Durable::default());
        start_background(&s, Arc::new(TokioPeers));
        let s2 = s.clone();
        tokio::spawn(async move {
            loop {
                if let Ok((stream, addr)) = listener.accept().await {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(s2.clone(), stream, addr.to_string()));
                }
            }
        });
        shared.push(s);
    }
    Ok((addrs, shared))
}

/// Waits (up to `limit`) until one of `members` is primary: its index.
pub async fn wait_for_primary(members: &[SharedMember], limit: Duration) -> Option<usize> {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if let Some(i) = members
            .iter()
            .position(|m| m.read(|m| m.role() == Role::Primary))
        {
            return Some(i);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}
