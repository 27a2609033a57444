//! Link faults that behave like TCP: holds (partitions), one-way delays, resets and
//! black holes, applied where the bytes are *received*.
//!
//! turmoil's own partitions drop segments, and its TCP never retransmits, so a dropped
//! segment stalls a connection forever; its link latency is symmetric. Real TCP keeps
//! retransmitting through a partition and delivers everything, in order, once it heals
//! (for the minutes a lock scenario lasts), and a delay can hit one direction only.
//! So every connection in a locksim world (client → Redis, client → storage, Redis
//! accepting) is wrapped in a [`FaultyStream`] that knows its two ends, and a shared
//! [`NetFaults`] registry says, per direction, whether bytes are held and how late they
//! may be handed to the reader:
//!
//! - **hold** `from → to`: bytes `from` sends stay queued at `to` (in the socket, as
//!   unacknowledged segments would be retransmitted) until the hold is lifted, then
//!   arrive all at once, in order. Both directions held is a partition; one is a one-way
//!   partition. Neither end learns anything except by its own timeouts.
//! - **delay** `to` (optionally only from some hosts): bytes are handed to the reader
//!   `latency` after they arrived. Delays of several faults do not add up: the largest
//!   one in force applies.
//! - **process crash** of a host (`kill -9`): its kernel closes its sockets, so each
//!   peer still gets what the host had sent (in flight, delayed or held), then the end
//!   of the stream (see [`NetFaults::process_died`]).
//! - **reset** a host's connections (a rebooted machine, a middlebox): every connection
//!   to or from it fails at once with `ConnectionReset`, queued bytes lost.
//! - **black hole** a host (its *machine* crashed or lost power): nothing it sent is
//!   delivered any more and no FIN or RST comes; peers find out by timeout. When the
//!   machine comes back, its kernel has forgotten every connection, so the old ones are
//!   reset then (the first segment a peer sends gets an RST).
//!
//! Arrival is stamped when the reader's task polls, so bytes reaching a host that is
//! itself paused are stamped when the pause ends: a delay and a pause of the same host
//! add up rather than overlap. Holds are counted per fault, so two overlapping faults on
//! one link compose: the link heals when the last of them ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::clock::true_now;

mod awaiting;
use awaiting::Awaiting;

#[derive(Debug)]
struct Conn {
    local: String,
    peer: String,
    /// What the registry shares with the connection end itself.
    shared: Arc<EndState>,
}

/// A connection end's state that its reads and writes look at on every poll, kept
/// beside the registry's lock so that a poll does not take that lock and look the
/// connection up: whether it was reset, and the waker of the task reading it (woken
/// when a fault changes). Each world runs on one thread: the flag's ordering is
/// `Relaxed`.
#[derive(Debug, Default)]
struct EndState {
    reset: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl EndState {
    fn is_reset(&self) -> bool {
        self.reset.load(Ordering::Relaxed)
    }

    fn reset(&self) {
        self.reset.store(true, Ordering::Relaxed);
    }

    fn waker(&self) -> MutexGuard<'_, Option<Waker>> {
        self.waker.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
struct Delay {
    to: String,
    /// Only bytes from these hosts; empty = from anyone.
    from: BTreeSet<String>,
    latency: Duration,
}

#[derive(Debug, Default)]
struct State {
    /// `(from, to)` → the faults holding that direction.
    holds: BTreeMap<(String, String), BTreeSet<usize>>,
    /// fault → its delay.
    delays: BTreeMap<usize, Delay>,
    /// Hosts whose machine is down.
    black_holes: BTreeSet<String>,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
}

/// The registry of link faults, shared by every wrapped connection and the nemesis.
#[derive(Debug, Clone, Default)]
pub struct NetFaults(Arc<Registry>);

#[derive(Debug, Default)]
struct Registry {
    state: Mutex<State>,
    /// Whether some hold, delay or black hole is in force (`State::faulted`), kept
    /// beside the lock: while none is, every read passes on time without taking it.
    faulted: AtomicBool,
}

impl State {
    fn faulted(&self) -> bool {
        !(self.holds.is_empty() && self.delays.is_empty() && self.black_holes.is_empty())
    }
}

/// The registry's state, locked; on release, it records whether a link fault is in
/// force (see [`Registry::faulted`]).
struct Locked<'a> {
    state: MutexGuard<'a, State>,
    faulted: &'a AtomicBool,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.faulted.store(self.state.faulted(), Ordering::Relaxed);
    }
}

impl NetFaults {
    /// No faults.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            state: self.0.state.lock().unwrap_or_else(|e| e.into_inner()),
            faulted: &self.0.faulted,
        }
    }

    /// Whether some hold, delay or black hole is in force now.
    fn faulted(&self) -> bool {
        self.0.faulted.load(Ordering::Relaxed)
    }

    /// Wraps `stream`, whose local end is host `local` and remote end host `peer`.
    pub fn wrap<S>(&self, stream: S, local: &str, peer: &str) -> FaultyStream<S> {
        let mut st = self.lock();
        let id = st.next_conn;
        st.next_conn += 1;
        let shared = Arc::new(EndState::default());
        st.conns.insert(
            id,
            Conn {
                local: local.to_string(),
                peer: peer.to_string(),
                shared: shared.clone(),
            },
        );
        FaultyStream {
            inner: stream,
            net: self.clone(),
            id,
            shared,
            queue: VecDeque::new(),
            end: None,
            timer: None,
            awaiting: None,
        }
    }

    /// Holds bytes from every host of `from` to every host of `to`, for `fault`.
    pub fn hold(&self, fault: usize, from: &[String], to: &[String]) {
        let mut st = self.lock();
        for f in from {
            for t in to {
                st.holds
                    .entry((f.clone(), t.clone()))
                    .or_default()
                    .insert(fault);
            }
        }
    }

    /// Lifts `fault`'s holds; directions no other fault holds deliver what they queued.
    pub fn release(&self, fault: usize) {
        let mut st = self.lock();
        st.holds.retain(|_, faults| {
            faults.remove(&fault);
            !faults.is_empty()
        });
        wake_all(&st, |_| true);
    }

    /// Delays bytes arriving at `to` (from `from`, or from anyone if empty) by
    /// `latency`, for `fault`.
    pub fn delay(&self, fault: usize, to: &str, from: &[String], latency: Duration) {
        self.lock().delays.insert(
            fault,
            Delay {
                to: to.to_string(),
                from: from.iter().cloned().collect(),
                latency,
            },
        );
    }

    /// Ends `fault`'s delay.
    pub fn end_delay(&self, fault: usize) {
        let mut st = self.lock();
        st.delays.remove(&fault);
        wake_all(&st, |_| true);
    }

    /// `host`'s process died (`kill -9`), called once its software is gone: as a real
    /// kernel closes a dead process's sockets, each peer still reads what `host` had
    /// sent (bytes in flight, bytes held by a delay or a partition), then the end of
    /// the stream, which turmoil sends with the dropped socket (a `FIN`, or an `RST`
    /// when the socket had unread bytes; RFC 9293 §3.10.4). Nothing is cut here.
    ///
    /// An end of `host`'s that is still registered outlived its software (a stream
    /// kept outside the host's tasks), so no `FIN` will come for it: that connection
    /// fails at once on both ends (with every other connection between the two
    /// hosts: they cannot be told apart by name), as before this rule. The number of
    /// such ends: 0 in every locksim world (the crash asserts it in debug builds, so
    /// every test run checks it).
    pub fn process_died(&self, host: &str) -> usize {
        let st = self.lock();
        let mut outlived = Vec::new();
        for conn in st.conns.values() {
            if conn.local == host && !conn.shared.is_reset() {
                conn.shared.reset();
                outlived.push(conn.peer.clone());
            }
        }
        let n = outlived.len();
        for conn in st.conns.values() {
            if conn.peer == host && outlived.contains(&conn.local) {
                conn.shared.reset();
            }
        }
        if n > 0 {
            wake_all(&st, |c| c.local == host || c.peer == host);
        }
        n
    }

    /// Every connection to or from `host` fails at once on both ends (a rebooted
    /// machine's kernel answers the old connections with `RST`).
    pub fn reset_host(&self, host: &str) {
        let st = self.lock();
        for conn in st.conns.values() {
            if conn.local == host || conn.peer == host {
                conn.shared.reset();
            }
        }
        wake_all(&st, |c| c.local == host || c.peer == host);
    }

    /// Every connection between `host` and any of `peers` fails at once on both ends
    /// (a reset by a middlebox); `host`'s other connections and new dials are
    /// untouched. The number of connection ends reset.
    pub fn reset_between(&self, host: &str, peers: &[String]) -> usize {
        let st = self.lock();
        let hit = |c: &Conn| {
            (c.local == host && peers.contains(&c.peer))
                || (c.peer == host && peers.contains(&c.local))
        };
        let mut n = 0;
        for conn in st.conns.values() {
            if hit(conn) && !conn.shared.is_reset() {
                conn.shared.reset();
                n += 1;
            }
        }
        wake_all(&st, hit);
        n
    }

    /// `host`'s machine died: nothing it sent is delivered, and no one is told.
    pub fn black_hole(&self, host: &str) {
        self.lock().black_holes.insert(host.to_string());
    }

    /// `host`'s machine is back with no memory of its connections: the old ones are
    /// reset, new ones work.
    pub fn machine_back(&self, host: &str) {
        self.lock().black_holes.remove(host);
        self.reset_host(host);
    }

    /// Whether `from` can reach `to` now (no hold either way, no black hole): a dial
    /// across a partition waits, as a SYN would be retransmitted.
    pub fn reachable(&self, from: &str, to: &str) -> bool {
        let st = self.lock();
        !st.black_holes.contains(to)
            && !st.black_holes.contains(from)
            && !st.holds.contains_key(&(from.to_string(), to.to_string()))
            && !st.holds.contains_key(&(to.to_string(), from.to_string()))
    }

    /// How bytes from `peer` to `local` (connection `id`, whose shared state is `shared`)
    /// are treated now: reset, held, or handed over after a delay (none while no link
    /// fault is in force: then the registry is not locked).
    fn passage(&self, id: u64, shared: &EndState) -> Passage {
        if shared.is_reset() {
            return Passage::Reset;
        }
        if !self.faulted() {
            return Passage::Open(Duration::ZERO);
        }
        let st = self.lock();
        let Some(conn) = st.conns.get(&id) else {
            return Passage::Reset;
        };
        // (Holds are few and this runs at every read: a scan, not a lookup that
        // would clone both names.)
        if st.black_holes.contains(&conn.peer)
            || st
                .holds
                .keys()
                .any(|(from, to)| *from == conn.peer && *to == conn.local)
        {
            return Passage::Held;
        }
        let latency = st
            .delays
            .values()
            .filter(|d| d.to == conn.local && (d.from.is_empty() || d.from.contains(&conn.peer)))
            .map(|d| d.latency)
            .max()
            .unwrap_or_default();
        Passage::Open(latency)
    }

    fn forget(&self, id: u64) {
        self.lock().conns.remove(&id);
    }
}

fn wake_all(st: &State, which: impl Fn(&Conn) -> bool) {
    for conn in st.conns.values() {
        if which(conn) {
            let taken = conn.shared.waker().take();
            if let Some(w) = taken {
                w.wake();
            }
        }
    }
}

/// Keeps `waker` as the one a fault change wakes for this end.
fn park(shared: &EndState, waker: &Waker) {
    let mut kept = shared.waker();
    // A task polls its stream again and again with the same waker: keep it rather
    // than clone it each time.
    if !kept.as_ref().is_some_and(|w| w.will_wake(waker)) {
        *kept = Some(waker.clone());
    }
}

enum Passage {
    Open(Duration),
    Held,
    Reset,
}

/// A connection end that receives through the [`NetFaults`] registry.
pub struct FaultyStream<S> {
    inner: S,
    net: NetFaults,
    id: u64,
    /// This end's reset flag and reader's waker, shared with the registry.
    shared: Arc<EndState>,
    /// Bytes read from the socket, with their arrival time, not yet handed over.
    queue: VecDeque<(Duration, Vec<u8>)>,
    /// End of stream (or error) and its arrival time.
    end: Option<(Duration, Option<io::ErrorKind>)>,
    timer: Option<Pin<Box<turmoil::time::Sleep>>>,
    /// The requests awaiting their replies, for the reply timeout of the library
    /// writing to this end (see [`FaultyStream::replies_within`]).
    awaiting: Option<Awaiting>,
}

impl<S> FaultyStream<S> {
    /// Tells the simulation that a timer may fire `timeout` after each request
    /// written, until its reply is handed back: the `redis` crate arms its own tokio
    /// timer for each request's reply, which the simulation cannot see (see
    /// `turmoil::time` and `Awaiting`). A request is written in the instant it is
    /// sent, so the hint matches the library's deadline.
    pub fn replies_within(mut self, timeout: Duration) -> Self {
        self.awaiting = Some(Awaiting::new(timeout));
        self
    }
}

impl<S> Drop for FaultyStream<S> {
    fn drop(&mut self) {
        self.net.forget(self.id);
    }
}

fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by peer")
}

impl<S: AsyncRead + Unpin> FaultyStream<S> {
    /// Moves whatever the socket has into the queue, stamped with the time now (read
    /// through `now` only if something came).
    fn pull(&mut self, cx: &mut Context<'_>, now: &mut impl FnMut() -> Duration) {
        // Uninitialised: a zeroed 8 KiB array per call was a third of a world's
        // instructions (a memset on every poll of every stream).
        let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        while self.end.is_none() {
            let mut buf = ReadBuf::uninit(&mut chunk);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                    self.end = Some((now(), None));
                }
                Poll::Ready(Ok(())) => self.queue.push_back((now(), buf.filled().to_vec())),
                Poll::Ready(Err(e)) => self.end = Some((now(), Some(e.kind()))),
                Poll::Pending => break,
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FaultyStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        // Time does not move within a poll: read it once, and only if needed (most
        // polls find nothing new, and reading the host's clock is not free).
        let mut read = None;
        let mut now = || *read.get_or_insert_with(true_now);
        this.pull(cx, &mut now);
        let latency = match this.net.passage(this.id, &this.shared) {
            Passage::Reset => return Poll::Ready(Err(reset_error())),
            Passage::Held => {
                park(&this.shared, cx.waker());
                return Poll::Pending;
            }
            Passage::Open(latency) => latency,
        };
        let head = this
            .queue
            .front()
            .map(|(at, _)| *at)
            .or(this.end.map(|(at, _)| at));
        let Some(arrived) = head else {
            // Nothing yet: the socket has our waker; a fault change wakes us too.
            park(&this.shared, cx.waker());
            return Poll::Pending;
        };
        let now = now();
        let due = arrived + latency;
        if due > now {
            park(&this.shared, cx.waker());
            let deadline = tokio::time::Instant::now() + (due - now);
            let timer = this
                .timer
                .get_or_insert_with(|| Box::pin(turmoil::time::sleep_until(deadline)));
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        this.timer = None;
        let mut handed = false;
        while let Some((at, bytes)) = this.queue.front_mut() {
            if *at + latency > now || out.remaining() == 0 {
                break;
            }
            let n = bytes.len().min(out.remaining());
            out.put_slice(&bytes[..n]);
            if let Some(awaiting) = &mut this.awaiting {
                awaiting.handed(&bytes[..n]);
            }
            handed = true;
            if n == bytes.len() {
                this.queue.pop_front();
            } else {
                bytes.drain(..n);
            }
        }
        if handed {
            return Poll::Ready(Ok(()));
        }
        match this.end {
            Some((_, None)) => Poll::Ready(Ok(())),
            Some((_, Some(kind))) => Poll::Ready(Err(io::Error::from(kind))),
            None => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FaultyStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.shared.is_reset() {
            return Poll::Ready(Err(reset_error()));
        }
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let (Some(awaiting), Poll::Ready(Ok(n))) = (&mut self.awaiting, &written)
            && *n > 0
        {
            awaiting.wrote(&buf[..*n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shared.is_reset() {
            return Poll::Ready(Err(reset_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Waits until `from` can reach `to` (see [`NetFaults::reachable`]), checking every
/// millisecond of simulated time: a dial across a partition or to a dead machine hangs
/// until it heals or the dialler's own timeout gives up.
pub async fn until_reachable(net: &NetFaults, from: &str, to: &str) {
    while !net.reachable(from, to) {
        turmoil::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Dials `host:port` from host `me` over turmoil TCP once it is reachable (a dial
/// across a partition or to a dead machine hangs, as an unanswered SYN does): the
/// stream wrapped by the link-fault registry and `me`'s pause gate, and the name the
/// peer resolves to.
/// Reads frames of a 4-byte big-endian length and a body from `stream`, handing each
/// body to `f` in order, until the stream ends, fails, or `f` answers `false` (the
/// servers' peer links: a ZooKeeper ensemble's, an etcd cluster's).
pub(crate) async fn read_frames<S: AsyncRead + Unpin>(
    mut stream: S,
    mut f: impl FnMut(&[u8]) -> bool,
) {
    use tokio::io::AsyncReadExt;
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut used = 0;
        while buf.len() >= used + 4 {
            let len = u32::from_be_bytes([buf[used], buf[used + 1], buf[used + 2], buf[used + 3]])
                as usize;
            if buf.len() < used + 4 + len {
                break;
            }
            let body = &buf[used + 4..used + 4 + len];
            used += 4 + len;
            if !f(body) {
                return;
            }
        }
        buf.drain(..used);
    }
}

pub(crate) async fn dial_host(
    net: &NetFaults,
    me: &str,
    gate: &crate::pause::PauseGate,
    host: &str,
    port: u16,
    replies_within: Option<Duration>,
) -> std::io::Result<(
    crate::pause::GatedIo<FaultyStream<turmoil::net::TcpStream>>,
    String,
)> {
    until_reachable(net, me, host).await;
    let stream = turmoil::net::TcpStream::connect((host, port)).await?;
    let peer = stream
        .peer_addr()
        .ok()
        .and_then(|a| turmoil::reverse_lookup(a.ip()))
        .unwrap_or_else(|| host.to_string());
    let mut stream = net.wrap(stream, me, &peer);
    if let Some(timeout) = replies_within {
        stream = stream.replies_within(timeout);
    }
    Ok((gate.wrap_io(stream), peer))
}
