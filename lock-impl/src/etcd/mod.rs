//! etcd v3 for the etcd designs, through the published client `etcd-client` (its
//! gRPC stubs over tonic), on a channel dialled over any byte stream
//! ([`crate::zk::StreamDialer`]: turmoil's in the simulator, tokio TCP in production)
//! whose HTTP/2 tasks run on the dialer's spawner (so they freeze with a paused
//! client and die with a crashed one).
//!
//! What Go's `clientv3` (v3.4.23) adds around its stubs, and the designs port because
//! it decides when a lock is lost: the retry interceptor ([`EtcdConn::call`];
//! `clientv3/retry_interceptor.go`, `retry.go`, `options.go`) and the lease keeper
//! ([`session`]; `clientv3/lease.go`). Of the endpoint balancer (3.4's round robin
//! over every member per call) it keeps the part that decides whether a client finds
//! a live member: a client holds one connection, to a member it picked at random
//! first, and each redial tries the members in turn from the next one (so a crashed
//! member's clients move to another). Not ported: a round robin per call on live
//! connections; the lease keeper's `WithRequireLeader` with each new stream on the
//! next ready member (a keeper on a member cut off from the leader stays there; the
//! model would refuse such a stream as etcd does, and `docs/designs.md` marks the
//! verdicts this can change); auth tokens; and gRPC's own connection backoff (tonic
//! redials on the next request).

pub mod session;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::scale::{ETCD_RETRY_BACKOFF, ETCD_SECOND};
use crate::system::{production_system_deps, system_deps};
use crate::zk::StreamDialer;
use crate::{Clock, Deps, Entropy, Spawner, TimeScale};

pub use session::Session;

/// The port etcd serves clients on.
pub const ETCD_PORT: u16 = 2379;

/// How long one design call may take before its outcome is unknown (the context
/// deadline a service gives each call; etcdctl's `--command-timeout` default).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the client's HTTP/2 remembers a stream it reset (real time; see
/// [`EtcdServer::connect`]).
const RESET_STREAM_MEMORY: Duration = Duration::from_secs(3_600);

/// `defaultUnaryMaxRetries`.
pub const MAX_RETRIES: u32 = 100;

/// An etcd design's handle in [`crate::Deps`]: the members to talk to and how to reach
/// them.
#[derive(Clone)]
pub struct EtcdServer {
    /// The members' hosts and ports (`clientv3.Config.Endpoints`).
    pub endpoints: Vec<(String, u16)>,
    /// Opens streams to it and runs the connection's tasks.
    pub dialer: Arc<dyn StreamDialer>,
    /// A call's deadline ([`REQUEST_TIMEOUT`] by default).
    pub request_timeout: Duration,
}

impl EtcdServer {
    /// The member at `host:port`, dialled by `dialer`.
    pub fn new(host: &str, port: u16, dialer: Arc<dyn StreamDialer>) -> Self {
        EtcdServer {
            endpoints: vec![(host.to_string(), port)],
            dialer,
            request_timeout: REQUEST_TIMEOUT,
        }
    }

    /// A client on a lazily dialled channel: the first call dials, and a call after
    /// the connection broke dials again.
    pub async fn connect(
        &self,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        scale: TimeScale,
    ) -> Result<EtcdConn, etcd_client::Error> {
        let endpoints = Arc::new(self.endpoints.clone());
        let first = self.endpoints.first().cloned().unwrap_or_default();
        let dialer = self.dialer.clone();
        // The member dialled next: one at random first, then each redial starts from
        // the member after the last one tried.
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(
            entropy.below(endpoints.len() as u64) as usize,
        ));
        let connector = tower::service_fn(move |_uri: tonic::transport::Uri| {
            let (dialer, endpoints, next) = (dialer.clone(), endpoints.clone(), next.clone());
            async move {
                let n = endpoints.len().max(1);
                let start = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut last = std::io::Error::other("etcd: no endpoints");
                for k in 0..n {
                    let Some((host, port)) = endpoints.get((start + k) % n) else {
                        break;
                    };
                    match dialer.dial(host, *port).await {
                        Ok(s) => return Ok(hyper_util::rt::TokioIo::new(s)),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        });
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://{}:{}", first.0, first.1))?
                .executor(DialerExec(self.dialer.clone()))
                // h2 forgets a locally reset stream (a call given up on) after
                // `reset_stream_duration` of the machine's real time, and a frame for a
                // forgotten one is an error: in a simulation, how much real time a run took
                // would decide that. Remembered for the whole of any run (an hour of real
                // time), up to 1,024 of them, the outcome is the run's own.
                .http2_reset_stream_duration(RESET_STREAM_MEMORY)
                .http2_max_concurrent_reset_streams(1_024)
                .connect_with_connector_lazy(connector);
        let client =
            etcd_client::Client::from_channel(etcd_client::Channel::Tonic(channel), None).await?;
        Ok(EtcdConn {
            client,
            clock,
            entropy,
            timeout: self.request_timeout,
            scale,
        })
    }
}

impl std::fmt::Debug for EtcdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdServer")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl crate::SystemHandle for EtcdServer {
    const BACKEND: crate::Backend = crate::Backend::Etcd;
}

/// etcd's record ([`crate::Backend::Etcd`]).
pub const SYSTEM: crate::BackendInfo = crate::BackendInfo {
    name: "etcd",
    promise: "etcd: a lock key attached to a lease that the holder's client keeps alive; \
              the key goes when the lease expires on the server's clock, whatever the \
              holder believes, and its create revision is a fencing token that only a \
              resource that checks it can use",
    // The lock-service comparison has no etcd row; its lock is the client library's mutex.
    seed_design: "etcd-mutex",
};

/// The channel's tasks on the dialer's spawner.
#[derive(Clone)]
struct DialerExec(Arc<dyn StreamDialer>);

impl hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>> for DialerExec {
    fn execute(&self, fut: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.0.spawn(fut);
    }
}

/// Why a call failed.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The deadline passed: the call may or may not have taken effect.
    Timeout,
    /// The server answered with an error (the call did nothing).
    Server {
        /// The gRPC code.
        code: tonic::Code,
        /// etcd's message.
        message: String,
    },
    /// The connection failed while the call was in flight, or before it could be
    /// sent: it may have taken effect (a mutation) or not.
    Transport(String),
}

impl CallError {
    /// Whether the call certainly did nothing on the server.
    pub fn nothing_done(&self) -> bool {
        matches!(self, CallError::Server { .. })
    }

    fn from_client(e: etcd_client::Error) -> Self {
        match e {
            etcd_client::Error::GRpcStatus(s) => {
                if s.code() == tonic::Code::Unavailable || s.code() == tonic::Code::Unknown {
                    CallError::Transport(format!("{:?}: {}", s.code(), s.message()))
                } else if s.code() == tonic::Code::Cancelled
                    || s.code() == tonic::Code::DeadlineExceeded
                {
                    CallError::Timeout
                } else {
                    CallError::Server {
                        code: s.code(),
                        message: s.message().to_string(),
                    }
                }
            }
            other => CallError::Transport(other.to_string()),
        }
    }

    /// Whether the channel could not reach the member at all (gRPC's "there is no
    /// connection available"): tonic's error for a dial that failed.
    fn no_connection(&self) -> bool {
        matches!(self, CallError::Transport(m) if m.contains("connect") || m.contains("Connection refused"))
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout => write!(f, "deadline exceeded"),
            CallError::Server { code, message } => write!(f, "{code:?}: {message}"),
            CallError::Transport(m) => write!(f, "transport: {m}"),
        }
    }
}

/// Whether a call may be retried by the interceptor: `repeatable` (reads, and the
/// lease calls) on any `Unavailable`; the others only when no connection was
/// available (the request was never sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `repeatable`.
    Repeatable,
    /// `nonRepeatable`.
    NonRepeatable,
}

/// A client of one member, with the host's clock and randomness.
#[derive(Clone)]
pub struct EtcdConn {
    /// The published client.
    pub client: etcd_client::Client,
    /// The host's clock (deadlines, backoff).
    pub clock: Arc<dyn Clock>,
    /// Backoff jitter.
    pub entropy: Arc<dyn Entropy>,
    /// A call's deadline.
    pub timeout: Duration,
    /// The world's clock scale: the client's constants and etcd's second.
    pub scale: TimeScale,
}

impl EtcdConn {
    /// The length of etcd's second in this world (lease TTLs count in it).
    pub fn second(&self) -> Duration {
        self.scale.exact(Duration::from_millis(ETCD_SECOND.real_ms))
    }

    /// `ttl` etcd seconds as world time.
    pub fn seconds(&self, ttl: i64) -> Duration {
        self.second() * u32::try_from(ttl.max(0)).unwrap_or(u32::MAX)
    }

    /// `f` under the retry interceptor, within `deadline` on the host's clock (the
    /// call's context): attempts `MAX_RETRIES` times at most, `defaultBackoffWaitBetween`
    /// ± 10 % apart, while the error is one the policy retries. A dial that fails does not
    /// count as an attempt: `clientv3` calls wait for a connection
    /// (`FailFast(false)`) until their deadline.
    pub async fn call<T, F, Fut>(
        &self,
        policy: Policy,
        deadline: Duration,
        mut f: F,
    ) -> Result<T, CallError>
    where
        F: FnMut(etcd_client::Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let attempts = async {
            let mut attempt = 0;
            loop {
                let err = match f(self.client.clone()).await {
                    Ok(v) => return Ok(v),
                    Err(e) => CallError::from_client(e),
                };
                let retry = match policy {
                    Policy::Repeatable => matches!(err, CallError::Transport(_)),
                    Policy::NonRepeatable => err.no_connection(),
                };
                if !err.no_connection() {
                    attempt += 1;
                }
                if !retry || attempt >= MAX_RETRIES {
                    return Err(err);
                }
                // 25 ms ± 10 %, drawn in real microseconds, then scaled.
                let real_us = 22_500 + self.entropy.below(5_001);
                let pause = self.scale.exact(Duration::from_micros(real_us));
                debug_assert_eq!(ETCD_RETRY_BACKOFF.real_ms, 25);
                self.clock.sleep(pause).await;
            }
        };
        tokio::select! {
            biased;
            r = attempts => r,
            _ = self.clock.sleep(deadline) => Err(CallError::Timeout),
        }
    }
}

/// Dependencies for the etcd designs: the member, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis.
pub fn etcd_deps(
    server: EtcdServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    system_deps(server, clock, entropy, spawner)
}

/// Production dependencies for the etcd designs: the member at `host:port` (over
/// tokio TCP) with tokio's clock and OS randomness.
pub fn production_etcd_deps(host: &str, port: u16) -> Deps {
    production_system_deps(EtcdServer::new(
        host,
        port,
        Arc::new(crate::zk::TokioDialer),
    ))
}
