//! Connections that are dialled, not given: a [`Connector`] knows how to reach one
//! Redis server, and a [`Conn`] is the reconnecting handle designs send commands on.
//!
//! Real clients survive a server restart: when a connection breaks, the command in
//! flight fails and the next command dials again. [`Conn`] does that for every design,
//! built-in or the user's own, in production (over [`ClientConnector`], a
//! `redis::Client`) and in the simulator (over turmoil TCP) alike, so a design never
//! sees the difference.
//!
//! The rules, and why:
//! - A reply that times out, or a connection that breaks, fails the command in flight
//!   (the design sees the `redis` error and, through its own classification, an
//!   unknown outcome) and **closes** the connection: after a timeout the position in
//!   the reply stream is unknown, so redis-py and Jedis close the socket too.
//! - The next command dials again, no earlier than the backoff allows (doubling from
//!   `backoff_min_ms` to `backoff_max_ms`, reset by a successful dial), and gives up
//!   after `connect_timeout_ms`. A failed dial fails that command with
//!   [`ErrorKind::Client`](redis::ErrorKind::Client) and the text `not connected`: the
//!   command was never sent, so the outcome is known (a `fail`, not an `info`).
//! - Time is the design's [`Clock`], so backoff and dial timeouts freeze with a paused
//!   client and follow a drifting one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection, PubSub};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::Clock;

/// A boxed future returned by a [`Connector`].
pub type Dial<'a, T> = Pin<Box<dyn Future<Output = RedisResult<T>> + Send + 'a>>;

/// Knows how to reach one Redis server.
///
/// The production implementation is [`ClientConnector`]; the simulator dials turmoil
/// TCP under the client's pause gate and records every dial in the history. Sentinel
/// discovery (ask the Sentinels for the master, check it with `ROLE`) is a connector
/// too.
pub trait Connector: Send + Sync + 'static {
    /// The server's name as reports show it (`redis`, `127.0.0.1:6379`).
    fn server(&self) -> &str;
    /// Dials a new multiplexed connection (its driver already running).
    fn connect(&self) -> Dial<'_, MultiplexedConnection>;
    /// Dials a new subscriber connection.
    fn pubsub(&self) -> Dial<'_, PubSub>;
    /// Whether each dial asks a discovery service which server to reach (Sentinel's
    /// `get-master-addr-by-name`): the server behind this connector can change under a
    /// live connection. A client that resends after a reply timeout must then dial
    /// again to reach a promoted master, as Redisson resolves the master entry anew for
    /// each attempt; [`Conn::keeping_after_reply_timeout`] does not keep a connection
    /// of such a connector. Default: a fixed server.
    fn follows_a_named_master(&self) -> bool {
        false
    }
}

/// How a [`Conn`] redials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Smallest wait between two dials after a failure.
    pub backoff_min_ms: u64,
    /// Largest wait between two dials (the wait doubles up to this).
    pub backoff_max_ms: u64,
    /// A dial that has not completed by then fails.
    pub connect_timeout_ms: u64,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            backoff_min_ms: 10,
            backoff_max_ms: 1_000,
            connect_timeout_ms: 1_000,
        }
    }
}

struct State {
    conn: Option<MultiplexedConnection>,
    /// Bumped whenever a connection is dropped, so a late failure of an old connection
    /// does not drop its replacement.
    generation: u64,
    /// Client-clock time before which no dial may start.
    next_dial_at: Duration,
    /// The wait to apply after the next failed dial.
    backoff: Duration,
}

struct Inner {
    connector: Arc<dyn Connector>,
    clock: Arc<dyn Clock>,
    policy: ReconnectPolicy,
    /// An async mutex: concurrent commands of one client wait for one dial rather than
    /// dialling in parallel. Held across the dial, never across a command.
    state: tokio::sync::Mutex<State>,
}

/// A reconnecting connection to one Redis server: cheap to clone (clones share the
/// connection), and a [`ConnectionLike`], so `cmd.query_async(&mut conn)` and
/// `script.invoke_async(&mut conn)` work on it as on a `MultiplexedConnection`.
#[derive(Clone)]
pub struct Conn {
    inner: Arc<Inner>,
    /// Keep the connection when a reply times out (see
    /// [`Conn::keeping_after_reply_timeout`]).
    keep_after_timeout: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("server", &self.inner.connector.server())
            .finish_non_exhaustive()
    }
}

fn not_connected(server: &str, why: impl std::fmt::Display) -> RedisError {
    RedisError::from((
        ErrorKind::Client,
        "not connected",
        format!("server={server}: {why}"),
    ))
}

/// Whether `err` leaves the connection unusable: a timeout (the reply stream's position
/// is unknown) or a broken connection.
fn breaks_connection(err: &RedisError) -> bool {
    err.is_timeout()
        || err.is_io_error()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
}

impl Conn {
    /// A connection to the server `connector` reaches, redialling by `policy` on
    /// `clock`. Nothing is dialled until the first command.
    pub fn new(
        connector: Arc<dyn Connector>,
        clock: Arc<dyn Clock>,
        policy: ReconnectPolicy,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                connector,
                clock,
                policy,
                state: tokio::sync::Mutex::new(State {
                    conn: None,
                    generation: 0,
                    next_dial_at: Duration::ZERO,
                    backoff: Duration::from_millis(policy.backoff_min_ms.max(1)),
                }),
            }),
            keep_after_timeout: false,
        }
    }

    /// A handle on the same connection that keeps it when a reply times out, as a
    /// client that tracks the replies it no longer waits for does (Redisson's
    /// `CommandsQueue` keeps the channel and drops the late reply; the `redis` crate's
    /// multiplexed pipeline does the same for a request whose caller gave up), so a
    /// command resent on it goes out on the same socket, in order behind the one that
    /// timed out. A broken connection is still dropped, and so is one whose connector
    /// follows a named master ([`Connector::follows_a_named_master`]: the resend asks
    /// Sentinel again, so it reaches the master Sentinel names now).
    /// [`Conn::drop_current`] drops it on purpose.
    pub fn keeping_after_reply_timeout(&self) -> Conn {
        Conn {
            inner: self.inner.clone(),
            keep_after_timeout: true,
        }
    }

    /// Drops the current connection, if any, so the next command dials again (what a
    /// reply timeout does to a handle that does not keep it).
    pub async fn drop_current(&self) {
        let mut state = self.inner.state.lock().await;
        if state.conn.is_some() {
            state.conn = None;
            state.generation += 1;
        }
    }

    /// Whether `err` should drop the connection on this handle.
    fn drops_on(&self, err: &RedisError) -> bool {
        breaks_connection(err)
            && !(self.keep_after_timeout
                && err.is_timeout()
                && !self.inner.connector.follows_a_named_master())
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        self.inner.connector.server()
    }

    /// The connector, for subscriber connections to the same server.
    pub fn connector(&self) -> &Arc<dyn Connector> {
        &self.inner.connector
    }

    /// Dials now if there is no connection (honouring the backoff), so the next
    /// command does not pay for the dial. Errors as a command would.
    pub async fn ensure_connected(&self) -> RedisResult<()> {
        self.current().await.map(|_| ())
    }

    /// The live connection and its generation, dialling one if needed.
    async fn current(&self) -> RedisResult<(MultiplexedConnection, u64)> {
        let inner = &self.inner;
        let mut state = inner.state.lock().await;
        if let Some(conn) = &state.conn {
            return Ok((conn.clone(), state.generation));
        }
        let now = inner.clock.now();
        if now < state.next_dial_at {
            inner.clock.sleep(state.next_dial_at - now).await;
        }
        let timeout = Duration::from_millis(inner.policy.connect_timeout_ms.max(1));
        let dialled = {
            let dial = inner.connector.connect();
            let expiry = inner.clock.sleep(timeout);
            tokio::pin!(dial);
            tokio::select! {
                biased;
                r = &mut dial => r.map_err(|e| not_connected(inner.connector.server(), e)),
                () = expiry => Err(not_connected(
                    inner.connector.server(),
                    format!("dial timed out after {} ms", timeout.as_millis()),
                )),
            }
        };
        match dialled {
            Ok(conn) => {
                state.generation += 1;
                state.backoff = Duration::from_millis(inner.policy.backoff_min_ms.max(1));
                state.next_dial_at = Duration::ZERO;
                state.conn = Some(conn.clone());
                Ok((conn, state.generation))
            }
            Err(e) => {
                state.next_dial_at = inner.clock.now() + state.backoff;
                let max = Duration::from_millis(inner.policy.backoff_max_ms.max(1));
                state.backoff = (state.backoff * 2).min(max);
                Err(e)
            }
        }
    }

    /// Drops the connection of `generation` (if it is still the current one), so the
    /// next command dials again.
    async fn drop_connection(&self, generation: u64) {
        let mut state = self.inner.state.lock().await;
        if state.generation == generation && state.conn.is_some() {
            state.conn = None;
            state.generation += 1;
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (mut conn, generation) = self.current().await?;
            let result = conn.req_packed_command(cmd).await;
            if let Err(e) = &result
                && self.drops_on(e)
            {
                self.drop_connection(generation).await;
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (mut conn, generation) = self.current().await?;
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &result
                && self.drops_on(e)
            {
                self.drop_connection(generation).await;
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// The production connector: a `redis::Client` with a response timeout per reply.
#[derive(Debug, Clone)]
pub struct ClientConnector {
    client: redis::Client,
    name: String,
    config: redis::AsyncConnectionConfig,
}

impl ClientConnector {
    /// A connector to `url` (e.g. `redis://127.0.0.1:6379`) whose connections time a
    /// reply out after `response_timeout`.
    pub fn new(url: &str, response_timeout: Duration) -> Result<Self, crate::LockError> {
        let client = redis::Client::open(url).map_err(|source| crate::LockError::Connect {
            addr: url.to_string(),
            source,
        })?;
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(response_timeout))
            .set_connection_timeout(Some(Duration::from_secs(2)));
        let name = client.get_connection_info().addr().to_string();
        Ok(Self {
            client,
            name,
            config,
        })
    }
}

impl Connector for ClientConnector {
    fn server(&self) -> &str {
        &self.name
    }

    fn connect(&self) -> Dial<'_, MultiplexedConnection> {
        Box::pin(
            self.client
                .get_multiplexed_async_connection_with_config(&self.config),
        )
    }

    fn pubsub(&self) -> Dial<'_, PubSub> {
        Box::pin(self.client.get_async_pubsub())
    }
}
