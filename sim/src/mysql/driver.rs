//! Runs a [`MySqlModel`] over a network: turmoil's TCP in the simulator, tokio's on a
//! real loopback port for the differential test. The model's lock is held only around
//! synchronous calls, never across an `.await`.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use lock_impl::mysql::proto::split_packet;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use std::time::Duration;

use super::server::{ConnId, MySqlConfig, MySqlModel, Waiting};

/// The port MariaDB serves clients on.
pub const MYSQL_PORT: u16 = 3306;

/// One model server shared by its connections. Cheap to clone.
#[derive(Clone)]
pub struct SharedMySql {
    model: Arc<Mutex<MySqlModel>>,
    /// Woken after every call on the model: a waiting statement tries again.
    changed: Arc<tokio::sync::Notify>,
    /// The host's monotonic clock, which the server's timeouts run on
    /// (`innodb_lock_wait_timeout`, a `GET_LOCK` timeout, `wait_timeout`: each a
    /// timed wait on a steady clock in `mariadbd`): a clock that drifts bends them.
    clock: Arc<dyn lock_impl::Clock>,
}

impl std::fmt::Debug for SharedMySql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMySql")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl SharedMySql {
    /// A fresh server.
    pub fn new(config: MySqlConfig) -> Self {
        Self::from_model(MySqlModel::new(config))
    }

    /// A server running `model` (one recovered after a crash).
    pub fn from_model(model: MySqlModel) -> Self {
        SharedMySql {
            model: Arc::new(Mutex::new(model)),
            changed: Arc::new(tokio::sync::Notify::new()),
            clock: Arc::new(crate::clock::RuntimeClock::new()),
        }
    }

    /// This server with its timeouts on the host clock `clock`.
    pub fn on_clock(mut self, clock: Arc<dyn lock_impl::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sleeps `duration` of the host's clock.
    pub fn sleep(&self, duration: Duration) -> lock_impl::Sleep {
        self.clock.sleep(duration)
    }

    fn lock(&self) -> MutexGuard<'_, MySqlModel> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the model.
    pub fn with<R>(&self, f: impl FnOnce(&mut MySqlModel) -> R) -> R {
        let r = f(&mut self.lock());
        self.changed.notify_waiters();
        r
    }

    /// Waits for connection `id`'s statement that waits for a lock (a `GET_LOCK`, a
    /// row lock): its reply once it ran, or its timeout's reply (`GET_LOCK`'s 0, 1205)
    /// when the timeout runs out (turmoil's hinted sleep, so a simulation that jumps
    /// in time sees the deadline).
    async fn wait_for_lock(&self, id: ConnId, wait: &Waiting) -> Vec<u8> {
        let deadline = self.sleep(Duration::from_millis(wait.timeout_ms));
        tokio::pin!(deadline);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(reply) = self.lock().retry(id, wait) {
                self.changed.notify_waiters();
                return reply;
            }
            tokio::select! {
                biased;
                _ = &mut changed => {}
                _ = &mut deadline => {
                    self.lock().leave_queue(wait.ticket);
                    self.changed.notify_waiters();
                    return wait.timed_out();
                }
            }
        }
    }
}

/// Serves one connection from `host` until either side closes it; the connection's
/// user locks are released when it ends, however it ends.
pub async fn serve_connection<S>(shared: SharedMySql, mut stream: S, host: String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (id, hello) = shared.with(|m| m.connect(host));
    if stream.write_all(&hello.bytes).await.is_ok() && stream.flush().await.is_ok() {
        let mut inbuf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        'conn: loop {
            // Idle between commands past the session's `wait_timeout`: the server
            // closes the connection (hinted sleep: a jumping simulation sees it).
            let idle = shared.lock().idle_timeout(id);
            let n = tokio::select! {
                biased;
                read = stream.read(&mut chunk) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                },
                _ = shared.sleep(idle), if inbuf.is_empty() => {
                    let _ = stream.shutdown().await;
                    break;
                }
            };
            inbuf.extend_from_slice(&chunk[..n]);
            let mut used = 0;
            loop {
                match split_packet(&inbuf[used..]) {
                    Ok(Some((seq, payload, len))) => {
                        let mut out = shared.with(|m| m.receive(id, seq, payload));
                        used += len;
                        if let Some(wait) = &out.wait {
                            out.bytes = shared.wait_for_lock(id, wait).await;
                        }
                        if !out.bytes.is_empty()
                            && (stream.write_all(&out.bytes).await.is_err()
                                || stream.flush().await.is_err())
                        {
                            break 'conn;
                        }
                        if out.close {
                            let _ = stream.shutdown().await;
                            break 'conn;
                        }
                    }
                    Ok(None) => break,
                    // A packet the server refuses ("Got a packet bigger than
                    // 'max_allowed_packet'") ends the connection.
                    Err(_) => break 'conn,
                }
            }
            inbuf.drain(..used);
        }
    }
    shared.with(|m| m.disconnect(id));
}

/// Accepts connections on a real tokio listener forever; a loopback peer is named
/// `localhost`, as the real server's reverse lookup names it.
pub async fn serve_tokio(listener: tokio::net::TcpListener, shared: SharedMySql) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let host = if addr.ip().is_loopback() {
                    "localhost".to_string()
                } else {
                    addr.ip().to_string()
                };
                tokio::spawn(serve_connection(shared.clone(), stream, host));
            }
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

/// Starts a model server on a free loopback port inside the current tokio runtime
/// (for the differential test and tools): its address.
pub async fn spawn_tokio_mysql(config: MySqlConfig) -> io::Result<(SocketAddr, SharedMySql)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let shared = SharedMySql::new(config);
    tokio::spawn(serve_tokio(listener, shared.clone()));
    Ok((addr, shared))
}
