//! Finding the master through Redis Sentinel, as Sentinel-aware clients do (redis-py's
//! `SentinelConnectionPool`, Jedis's `JedisSentinelPool`, Redisson's sentinel mode).
//!
//! [`SentinelConnector`] is a [`Connector`]: every dial asks the Sentinels, in order,
//! `SENTINEL GET-MASTER-ADDR-BY-NAME <name>`, dials the address the first one that
//! answers gives, and checks with `ROLE` that the server really is a master (a
//! Sentinel may be stale, and a demoted master still answers). A Sentinel that
//! answered moves to the front, as redis-py does. With [`Conn`](crate::Conn) on top, a
//! connection broken by a failover is redialled and lands on the new master.
//!
//! What it does not do: subscribe to `+switch-master` (so an old master that still
//! answers as master keeps its connections until they break, which is the split-brain
//! window the `split-brain` scenario measures), or ask Sentinels whether they consider
//! the master down.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{MultiplexedConnection, PubSub};
use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::connector::{Connector, Dial};
use crate::Clock;

/// Reaches any server by address: the transport under [`SentinelConnector`].
pub trait AddrConnector: Send + Sync + 'static {
    /// Dials a multiplexed connection to `host:port`.
    fn connect_to(&self, host: &str, port: u16) -> Dial<'_, MultiplexedConnection>;
    /// Dials a subscriber connection to `host:port`.
    fn pubsub_to(&self, host: &str, port: u16) -> Dial<'_, PubSub>;
}

/// The production transport: a `redis::Client` per address.
#[derive(Debug, Clone)]
pub struct ClientAddrConnector {
    config: redis::AsyncConnectionConfig,
}

impl ClientAddrConnector {
    /// Connections whose replies time out after `response_timeout`.
    pub fn new(response_timeout: Duration) -> Self {
        Self {
            config: redis::AsyncConnectionConfig::new()
                .set_response_timeout(Some(response_timeout))
                .set_connection_timeout(Some(Duration::from_secs(2))),
        }
    }
}

impl AddrConnector for ClientAddrConnector {
    fn connect_to(&self, host: &str, port: u16) -> Dial<'_, MultiplexedConnection> {
        let url = format!("redis://{host}:{port}");
        Box::pin(async move {
            let client = redis::Client::open(url)?;
            client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
        })
    }

    fn pubsub_to(&self, host: &str, port: u16) -> Dial<'_, PubSub> {
        let url = format!("redis://{host}:{port}");
        Box::pin(async move { redis::Client::open(url)?.get_async_pubsub().await })
    }
}

/// A [`Connector`] to whichever server the Sentinels name as the master of `name`.
pub struct SentinelConnector {
    master_name: String,
    /// The Sentinels, the last one that answered first.
    sentinels: Mutex<Vec<(String, u16)>>,
    transport: Arc<dyn AddrConnector>,
    clock: Arc<dyn Clock>,
    /// How long one Sentinel may take to answer before the next is asked.
    sentinel_timeout: Duration,
    label: String,
}

fn failed(what: String) -> RedisError {
    RedisError::from((ErrorKind::Io, "sentinel discovery failed", what))
}

impl SentinelConnector {
    /// Asks `sentinels` (host, port) for the master called `master_name`, each given
    /// `sentinel_timeout` on `clock` to answer.
    pub fn new(
        master_name: impl Into<String>,
        sentinels: Vec<(String, u16)>,
        transport: Arc<dyn AddrConnector>,
        clock: Arc<dyn Clock>,
        sentinel_timeout: Duration,
    ) -> Self {
        let master_name = master_name.into();
        Self {
            label: format!("sentinel:{master_name}"),
            master_name,
            sentinels: Mutex::new(sentinels),
            transport,
            clock,
            sentinel_timeout,
        }
    }

    async fn within<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = RedisResult<T>>,
    ) -> RedisResult<T> {
        let expiry = self.clock.sleep(self.sentinel_timeout);
        tokio::pin!(f);
        tokio::select! {
            biased;
            r = &mut f => r,
            () = expiry => Err(failed(format!("{what}: no answer within {} ms", self.sentinel_timeout.as_millis()))),
        }
    }

    /// The master's address as the first Sentinel that knows gives it.
    pub async fn master_addr(&self) -> RedisResult<(String, u16)> {
        let sentinels = self
            .sentinels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut why = Vec::new();
        for (i, (host, port)) in sentinels.iter().enumerate() {
            let asked = self
                .within(&format!("sentinel {host}:{port}"), async {
                    let mut conn = self.transport.connect_to(host, *port).await?;
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(&self.master_name)
                        .query_async::<Option<(String, u16)>>(&mut conn)
                        .await
                })
                .await;
            match asked {
                Ok(Some(addr)) => {
                    if i > 0 {
                        let mut list = self.sentinels.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(pos) = list.iter().position(|s| s.0 == *host && s.1 == *port) {
                            let s = list.remove(pos);
                            list.insert(0, s);
                        }
                    }
                    return Ok(addr);
                }
                Ok(None) => why.push(format!(
                    "{host}:{port} knows no master '{}'",
                    self.master_name
                )),
                Err(e) => why.push(format!("{host}:{port}: {e}")),
            }
        }
        Err(failed(format!(
            "no Sentinel named the master '{}' ({})",
            self.master_name,
            why.join("; ")
        )))
    }
}

impl Connector for SentinelConnector {
    fn server(&self) -> &str {
        &self.label
    }

    fn connect(&self) -> Dial<'_, MultiplexedConnection> {
        Box::pin(async move {
            let (host, port) = self.master_addr().await?;
            let mut conn = self.transport.connect_to(&host, port).await?;
            let role: Value = redis::cmd("ROLE").query_async(&mut conn).await?;
            let is_master = match &role {
                Value::Array(items) => {
                    matches!(items.first(), Some(Value::BulkString(b)) if b == b"master")
                }
                _ => false,
            };
            if !is_master {
                return Err(failed(format!(
                    "{host}:{port}, named master by Sentinel, is not a master (ROLE)"
                )));
            }
            Ok(conn)
        })
    }

    fn pubsub(&self) -> Dial<'_, PubSub> {
        Box::pin(async move {
            let (host, port) = self.master_addr().await?;
            self.transport.pubsub_to(&host, port).await
        })
    }

    fn follows_a_named_master(&self) -> bool {
        true
    }
}
