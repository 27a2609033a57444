//! Redis, the system most designs lock on: its record ([`SYSTEM`]), the reconnecting
//! connection the designs send commands on ([`Conn`] over a [`Connector`]), finding
//! the master through Sentinel ([`SentinelConnector`]), and production dependencies
//! ([`production_deps`], [`production_deps_multi`]).

mod connector;
mod sentinel;

use std::sync::Arc;
use std::time::Duration;

pub use connector::{ClientConnector, Conn, Connector, Dial, ReconnectPolicy};
pub use sentinel::{AddrConnector, ClientAddrConnector, SentinelConnector};

use crate::{Clock, Deps, LockError, OsEntropy, PubSubConnector, TokioClock, TokioSpawner};

/// Redis's record ([`crate::Backend::Redis`]).
pub const SYSTEM: crate::BackendInfo = crate::BackendInfo {
    name: "Redis",
    promise: "Redis: a key with a TTL on one master, so a lock holds only while that \
              master lives, its clock keeps time and the holder finishes within the \
              lease; replication is asynchronous, so a failover can promote a replica \
              that never had the lock, and Redlock's majority of independent masters \
              still leans on their clocks and persistence",
    // The row "基于redis Lua脚本能力" (`SET lock_name random_value EX seconds NX`,
    // release by the Lua compare-and-delete): see `scenarios::family`.
    seed_design: "set-nx-px-lua",
};

/// Connects to a real Redis at `url` (e.g. `redis://127.0.0.1:6379`) with a
/// `response_timeout` per reply: the production way to get [`Deps::conn`].
pub async fn connect(
    url: &str,
    response_timeout: Duration,
) -> Result<redis::aio::MultiplexedConnection, LockError> {
    let connect_err = |source| LockError::Connect {
        addr: url.to_string(),
        source,
    };
    let client = redis::Client::open(url).map_err(connect_err)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(response_timeout))
        .set_connection_timeout(Some(Duration::from_secs(2)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(connect_err)
}

/// Subscriber connections to the server a [`Connector`] reaches: the
/// [`Deps::pubsub`] of a world whose lock connection is that connector's.
pub struct ConnectorPubSub(pub Arc<dyn Connector>);

impl PubSubConnector for ConnectorPubSub {
    fn connect(
        &self,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = redis::RedisResult<redis::aio::PubSub>> + Send + '_>,
    > {
        self.0.pubsub()
    }
}

/// Production dependencies: a reconnecting connection to `url`, tokio's clock, OS
/// randomness, `tokio::spawn`, and subscriber connections to the same server.
pub async fn production_deps(url: &str, response_timeout: Duration) -> Result<Deps, LockError> {
    production_deps_multi(&[url], response_timeout).await
}

/// Production dependencies over several independent servers (Redlock): `conn` is the
/// first, `servers` all of them in the order given. Every server is dialled once up
/// front so a wrong URL fails here, naming it; later breaks are redialled.
pub async fn production_deps_multi(
    urls: &[&str],
    response_timeout: Duration,
) -> Result<Deps, LockError> {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mut servers = Vec::with_capacity(urls.len());
    for url in urls {
        let connector: Arc<dyn Connector> = Arc::new(ClientConnector::new(url, response_timeout)?);
        let conn = Conn::new(connector, clock.clone(), ReconnectPolicy::default());
        conn.ensure_connected()
            .await
            .map_err(|source| LockError::Connect {
                addr: url.to_string(),
                source,
            })?;
        servers.push(conn);
    }
    let Some(first) = servers.first().cloned() else {
        return Err(LockError::NoServers);
    };
    Ok(Deps {
        pubsub: Some(Arc::new(ConnectorPubSub(first.connector().clone()))),
        ..Deps::new(
            first,
            servers,
            clock,
            Arc::new(OsEntropy),
            Arc::new(TokioSpawner),
        )
    })
}
