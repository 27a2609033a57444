//! A replica's link to its master: the handshake (`PING`, `REPLCONF listening-port`,
//! `REPLCONF capa`, `PSYNC ? -1`), the full sync, then the stream, acknowledged with
//! `REPLCONF ACK <offset>` once a second and whenever the master sends `GETACK`.
//!
//! The link runs over any byte stream, so the same code follows a master over
//! turmoil TCP in the simulator (where delay, partitions and crashes hit it) and over
//! real TCP in the tests. Time comes from the engine's clock and tokio's timers.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Engine;
use super::replication::{LinkState, REPL_CRON_MS, REPL_TIMEOUT_S};
use super::resp::{self, Parsed};
use super::shared::{CommandEngine, SharedEngine};

/// An engine that can follow a master (the model's [`Engine`], or a wrapper of it).
pub trait Replicating: CommandEngine {
    /// The engine inside.
    fn engine(&mut self) -> &mut Engine;
}

impl Replicating for Engine {
    fn engine(&mut self) -> &mut Engine {
        self
    }
}

/// Why a link ended.
#[derive(Debug)]
pub enum LinkEnd {
    /// A `REPLICAOF` replaced the order this link followed.
    Stale,
    /// The master could not be reached or the connection broke.
    Io(io::Error),
    /// The master said something the replica does not accept.
    Protocol(String),
    /// Nothing arrived for `repl-timeout`.
    Timeout,
}

impl From<io::Error> for LinkEnd {
    fn from(e: io::Error) -> Self {
        LinkEnd::Io(e)
    }
}

struct Reader<S> {
    stream: S,
    buf: Vec<u8>,
    chunk: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Reader<S> {
    async fn fill(&mut self) -> Result<(), LinkEnd> {
        let n = self.stream.read(&mut self.chunk).await?;
        if n == 0 {
            return Err(LinkEnd::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "master closed the connection",
            )));
        }
        self.buf.extend_from_slice(&self.chunk[..n]);
        Ok(())
    }

    async fn line(&mut self) -> Result<String, LinkEnd> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                self.buf.drain(..pos + 2);
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    async fn exact(&mut self, n: usize) -> Result<Vec<u8>, LinkEnd> {
        while self.buf.len() < n {
            self.fill().await?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn send(&mut self, argv: &[&[u8]]) -> Result<(), LinkEnd> {
        self.stream.write_all(&resp::encode_request(argv)).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Sends a handshake command and reads its one-line reply, refusing errors.
    async fn ask(&mut self, argv: &[&[u8]]) -> Result<String, LinkEnd> {
        self.send(argv).await?;
        let line = self.line().await?;
        if let Some(err) = line.strip_prefix('-') {
            return Err(LinkEnd::Protocol(format!(
                "master refused {}: {err}",
                String::from_utf8_lossy(argv[0])
            )));
        }
        Ok(line)
    }
}

/// Follows the master over `stream` for the replication order of `generation`, until
/// that order changes or the link breaks. `master` names the master in the replica's
/// record (its key events); `port` is what the replica announces. The link state is
/// left at `connect` when it ends, so the cron dials again.
pub async fn follow_master<E, S>(
    shared: SharedEngine<E>,
    stream: S,
    generation: u64,
    master: &str,
    port: u16,
) -> LinkEnd
where
    E: Replicating,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let end = run_link(&shared, stream, generation, master, port).await;
    shared.with_engine_at(|e, now| e.engine().set_link(generation, LinkState::Connect, now));
    end
}

fn current<E: Replicating>(shared: &SharedEngine<E>, generation: u64) -> bool {
    shared.with_engine(|e| {
        e.engine()
            .link_target()
            .is_some_and(|(_, _, g)| g == generation)
    })
}

async fn run_link<E, S>(
    shared: &SharedEngine<E>,
    stream: S,
    generation: u64,
    master: &str,
    port: u16,
) -> LinkEnd
where
    E: Replicating,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut r = Reader {
        stream,
        buf: Vec::new(),
        chunk: vec![0; 16 * 1024],
    };
    let result: Result<(), LinkEnd> = async {
        let pong = r.ask(&[b"PING"]).await?;
        if pong != "+PONG" {
            return Err(LinkEnd::Protocol(format!("PING answered {pong}")));
        }
        let port = port.to_string();
        r.ask(&[b"REPLCONF", b"listening-port", port.as_bytes()])
            .await?;
        r.ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
            .await?;
        let full = r.ask(&[b"PSYNC", b"?", b"-1"]).await?;
        let mut parts = full.split(' ');
        let (Some("+FULLRESYNC"), Some(replid), Some(offset)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(LinkEnd::Protocol(format!("PSYNC answered {full}")));
        };
        let offset: u64 = offset
            .parse()
            .map_err(|_| LinkEnd::Protocol(format!("bad offset in {full}")))?;
        if !shared.with_engine_at(|e, now| e.engine().set_link(generation, LinkState::Sync, now)) {
            return Err(LinkEnd::Stale);
        }
        let header = r.line().await?;
        let len: usize = header
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| LinkEnd::Protocol(format!("bad payload header {header}")))?;
        let payload = r.exact(len).await?;
        shared
            .with_engine_at(|e, now| {
                e.engine()
                    .full_sync(generation, replid, offset, &payload, master, now)
            })
            .map_err(LinkEnd::Protocol)?;
        stream_loop(shared, &mut r, generation).await
    }
    .await;
    match result {
        Ok(()) => LinkEnd::Stale,
        Err(e) => e,
    }
}

async fn stream_loop<E, S>(
    shared: &SharedEngine<E>,
    r: &mut Reader<S>,
    generation: u64,
) -> Result<(), LinkEnd>
where
    E: Replicating,
    S: AsyncRead + AsyncWrite + Unpin,
{
    // Deadlines on the host's clock, not counters advanced when a sleep wins the
    // `select!`: with stream bytes arriving more often than the sleep, a counter never
    // moved, and a busy replica never acknowledged (Redis's `replicationCron` sends
    // `REPLCONF ACK` every second whatever the traffic).
    let check = Duration::from_millis(100);
    let ack_every = Duration::from_millis(REPL_CRON_MS);
    let start = tokio::time::Instant::now();
    let mut next_ack = start + ack_every;
    let mut next_check = start + check;
    let mut last_read = start;
    loop {
        // Apply every complete command received.
        let mut used = 0;
        let mut acks = Vec::new();
        loop {
            match resp::parse_request(&r.buf[used..]) {
                Parsed::Incomplete => break,
                Parsed::ProtocolError(e) => return Err(LinkEnd::Protocol(e)),
                Parsed::Complete(argv, n) => {
                    used += n;
                    let applied = shared.with_engine_at(|e, now| {
                        e.engine()
                            .apply_from_master(generation, &argv, n as u64, now)
                    });
                    match applied {
                        Err(_) => return Err(LinkEnd::Stale),
                        Ok(Some(offset)) => acks.push(offset),
                        Ok(None) => {}
                    }
                }
            }
        }
        r.buf.drain(..used);
        for offset in acks {
            send_ack(r, offset).await?;
        }
        let now = tokio::time::Instant::now();
        if now >= next_check {
            next_check = now + check;
            if !current(shared, generation) {
                return Err(LinkEnd::Stale);
            }
        }
        if now >= next_ack {
            next_ack = now + ack_every;
            if !current(shared, generation) {
                return Err(LinkEnd::Stale);
            }
            let offset = shared.with_engine(|e| e.engine().replica_offset());
            send_ack(r, offset).await?;
        }
        if now.duration_since(last_read) >= Duration::from_secs(REPL_TIMEOUT_S) {
            return Err(LinkEnd::Timeout);
        }
        tokio::select! {
            biased;
            read = r.stream.read(&mut r.chunk) => {
                let n = read?;
                if n == 0 {
                    return Err(LinkEnd::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "master closed the connection",
                    )));
                }
                r.buf.extend_from_slice(&r.chunk[..n]);
                last_read = tokio::time::Instant::now();
            }
            () = turmoil::time::sleep_until(next_ack.min(next_check)) => {}
        }
    }
}

async fn send_ack<S: AsyncRead + AsyncWrite + Unpin>(
    r: &mut Reader<S>,
    offset: u64,
) -> Result<(), LinkEnd> {
    let offset = offset.to_string();
    r.send(&[b"REPLCONF", b"ACK", offset.as_bytes()]).await
}

/// The replication cron of one server (`replicationCron`): once a second the master
/// side counts good replicas and PINGs them, and a replica whose link is down dials
/// its master with `dial` and runs the link (as a task spawned by `spawn`).
pub async fn replication_cron<E, D, F, S, P>(shared: SharedEngine<E>, port: u16, dial: D, spawn: P)
where
    E: Replicating,
    D: Fn(String, u16) -> F + Clone + Send + 'static,
    F: Future<Output = io::Result<(S, String)>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    P: Fn(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>),
{
    let mut tick: u64 = 0;
    loop {
        turmoil::time::sleep(Duration::from_millis(REPL_CRON_MS)).await;
        tick += 1;
        shared.with_engine_at(|e, now| e.engine().replication_cron(now, tick));
        let target = shared.with_engine_at(|e, now| {
            let engine = e.engine();
            let (host, mport, generation) = engine.link_target()?;
            let idle = matches!(
                engine.replication().role,
                super::replication::Role::Replica {
                    link: LinkState::Connect,
                    ..
                }
            );
            (idle && engine.set_link(generation, LinkState::Connecting, now))
                .then_some((host, mport, generation))
        });
        let Some((host, mport, generation)) = target else {
            continue;
        };
        let shared = shared.clone();
        let dial = dial.clone();
        spawn(Box::pin(async move {
            match dial(host, mport).await {
                Ok((stream, master)) => {
                    let _ = follow_master(shared, stream, generation, &master, port).await;
                }
                Err(_) => {
                    shared.with_engine_at(|e, now| {
                        e.engine().set_link(generation, LinkState::Connect, now)
                    });
                }
            }
        }));
    }
}
