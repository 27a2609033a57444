//! The network side of the Redis model: one [`Engine`] shared by every connection,
//! served over turmoil's simulated TCP (the simulator) or tokio's real TCP
//! (`locksim serve-model`, the differential tests).
//!
//! Determinism: the connection loop uses `select! { biased; ... }`; time comes only
//! from a [`ServerClock`] (the simulator passes the server host's clock, never
//! [`SystemClock`]); the engine lock is a `std::sync::Mutex` held only around
//! synchronous engine calls, never across an `.await`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;

use super::engine::{Engine, Session};
use super::reply::Reply;
use super::resp::{self, Parsed};
pub use super::shared::{CommandEngine, FixedClock, ServerClock, SharedEngine, SystemClock};

const READ_CHUNK: usize = 16 * 1024;

/// Serves one connection until the peer closes it, a protocol error, `QUIT`, or an I/O
/// error. Always calls the engine's `disconnect` at the end.
pub async fn serve_connection<E, S>(shared: SharedEngine<E>, stream: S, peer: String)
where
    E: CommandEngine,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut session, mut pushes) = shared.connect(peer);
    let _ = connection_loop(&shared, &mut session, &mut pushes, stream).await;
    shared.disconnect(&session);
}

async fn connection_loop<E, S>(
    shared: &SharedEngine<E>,
    session: &mut Session,
    pushes: &mut UnboundedReceiver<Reply>,
    mut stream: S,
) -> io::Result<()>
where
    E: CommandEngine,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut inbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        // Requests first, then pushes: a reply and the pushes its command caused are
        // written in the order the engine produced them.
        let mut out = Vec::new();
        let mut close = false;
        let mut used = 0;
        while !session.blocked {
            match resp::parse_request(&inbuf[used..]) {
                Parsed::Incomplete => break,
                Parsed::Complete(argv, n) => {
                    used += n;
                    if argv.is_empty() {
                        continue;
                    }
                    let reply = shared.execute(session, &argv);
                    resp::encode_into(&reply, session.protocol, &mut out);
                    // Pushes caused by this very command (e.g. a PUBLISH to a channel
                    // this connection subscribes to) follow its reply.
                    while let Ok(push) = pushes.try_recv() {
                        close |= accept_push(session, &push);
                        resp::encode_into(&push, session.protocol, &mut out);
                    }
                    if session.close_after_reply {
                        close = true;
                        break;
                    }
                }
                Parsed::ProtocolError(text) => {
                    resp::encode_into(&Reply::Error(text), session.protocol, &mut out);
                    close = true;
                    break;
                }
            }
        }
        inbuf.drain(..used);
        if !out.is_empty() {
            stream.write_all(&out).await?;
            stream.flush().await?;
        }
        if close {
            let _ = stream.shutdown().await;
            return Ok(());
        }
        // A client blocked in WAIT wakes up when its timeout passes.
        let wait_timer = async {
            if !session.blocked {
                return std::future::pending::<()>().await;
            }
            match shared.serve_waiters() {
                Some(d) => turmoil::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            push = pushes.recv() => {
                let Some(push) = push else { return Ok(()) };
                let mut close = accept_push(session, &push);
                let mut out = resp::encode(&push, session.protocol);
                while let Ok(push) = pushes.try_recv() {
                    close |= accept_push(session, &push);
                    resp::encode_into(&push, session.protocol, &mut out);
                }
                stream.write_all(&out).await?;
                stream.flush().await?;
                if close {
                    let _ = stream.shutdown().await;
                    return Ok(());
                }
            }
            () = wait_timer => {
                shared.serve_waiters();
            }
            read = stream.read(&mut chunk) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                inbuf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Notes what a push means for the connection: the reply a blocked `WAIT` was waiting
/// for ends the block; [`Reply::Close`] closes the connection (returns true).
fn accept_push(session: &mut Session, push: &Reply) -> bool {
    match push {
        Reply::Close => true,
        Reply::Push(_) | Reply::Raw(_) => false,
        _ => {
            session.blocked = false;
            false
        }
    }
}

/// Accepts connections on a turmoil listener forever, one task per connection. The
/// peer name is the client's turmoil host name (or its address if it has none).
pub async fn serve_turmoil<E: CommandEngine>(
    listener: turmoil::net::TcpListener,
    shared: SharedEngine<E>,
) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            continue;
        };
        let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
        tokio::spawn(serve_connection(shared.clone(), stream, peer));
    }
}

/// Accepts connections on a real tokio listener forever, one task per connection. The
/// peer name is the client's socket address.
pub async fn serve_tokio<E: CommandEngine>(
    listener: tokio::net::TcpListener,
    shared: SharedEngine<E>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(shared.clone(), stream, addr.to_string()));
            }
            Err(_) => turmoil::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Redis's active expiry cycle: every `period` (Redis: 100 ms, `hz 10`) of tokio
/// time, which is simulated time under turmoil.
pub async fn active_expiry_loop<E: CommandEngine>(shared: SharedEngine<E>, period: Duration) {
    loop {
        turmoil::time::sleep(period).await;
        shared.active_expire();
    }
}

/// Redis's default active-expiry period.
pub const ACTIVE_EXPIRY_PERIOD: Duration = Duration::from_millis(100);

/// Binds `addr` and serves a fresh model on it with the real clock until the process
/// ends (`locksim serve-model`). Runs its own multi-threaded tokio runtime.
pub fn serve_model(addr: SocketAddr) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "locksim model of Redis listening on {}",
            listener.local_addr()?
        );
        let port = listener.local_addr()?.port();
        let mut engine = Engine::new();
        engine.set_tcp_port(port);
        let shared = SharedEngine::new(engine, Arc::new(SystemClock));
        tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
        spawn_replication_cron(&shared, port);
        serve_tokio(listener, shared).await;
        Ok(())
    })
}

/// Runs the replication cron of a model served over real TCP (`REPLICAOF` dials the
/// master with tokio).
fn spawn_replication_cron(shared: &SharedEngine, port: u16) {
    let dial = |host: String, port: u16| async move {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        let _ = stream.set_nodelay(true);
        Ok((stream, format!("{host}:{port}")))
    };
    tokio::spawn(super::link::replication_cron(
        shared.clone(),
        port,
        dial,
        |task| {
            tokio::spawn(task);
        },
    ));
}

/// Starts a model server with the real clock on a free loopback port inside the
/// current tokio runtime, following the master at `master` if given (over real TCP,
/// with the replication cron running); returns its address. For tests and tools.
/// Without `active_expiry` no expiry cycle runs (keys expire only when touched).
pub async fn spawn_tokio_model_with(
    master: Option<SocketAddr>,
    active_expiry: bool,
) -> io::Result<(SocketAddr, SharedEngine)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let mut engine = Engine::new();
    engine.set_tcp_port(addr.port());
    if let Some(m) = master {
        engine.follow(m.ip().to_string(), m.port(), SystemClock.now_us());
    }
    let shared = SharedEngine::new(engine, Arc::new(SystemClock));
    if active_expiry {
        tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
    }
    spawn_replication_cron(&shared, addr.port());
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}

/// Starts a model server with the real clock on a free loopback port inside the
/// current tokio runtime; returns its address. For tests and tools.
pub async fn spawn_tokio_model() -> io::Result<(SocketAddr, SharedEngine)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let shared = SharedEngine::new(Engine::new(), Arc::new(SystemClock));
    tokio::spawn(active_expiry_loop(shared.clone(), ACTIVE_EXPIRY_PERIOD));
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}
