//! Runs a [`Sentinel`] over real byte streams: the timer loop, one command link per
//! instance and per other Sentinel (a `redis` crate multiplexed connection, which
//! pipelines as hiredis does), and the server side through the model's
//! [`serve_connection`](crate::redis::serve_connection).
//!
//! The dialler and the task spawner are given, so the same driver runs over turmoil
//! TCP under a host's pause gate in the simulator and over tokio TCP in the tests
//! against real `redis-server`s.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Action, Addr, Expect, Sentinel};
use crate::redis::server::{CommandEngine, SharedEngine};
use crate::redis::{Reply, Session};

/// A stream a Sentinel's link runs over.
pub trait LinkStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> LinkStream for T {}

/// A boxed local future.
pub type LocalTask = Pin<Box<dyn Future<Output = ()>>>;
/// Dials `host:port`.
pub type DialFn =
    Rc<dyn Fn(String, u16) -> Pin<Box<dyn Future<Output = io::Result<Box<dyn LinkStream>>>>>>;
/// Spawns a task on the Sentinel's host.
pub type SpawnFn = Rc<dyn Fn(LocalTask)>;

/// A dial that has not connected by then is given up (and retried a second later).
const DIAL_TIMEOUT: Duration = Duration::from_millis(1_000);
/// How long a link waits for a reply before it counts as broken: the `redis` crate's
/// default, named so that the dialler can tell the simulation about it (a link's
/// stream hints it at every write; see `turmoil::time`).
pub const LINK_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// A Sentinel as a [`CommandEngine`], so the model's connection loop serves it.
pub struct SentinelEngine {
    /// The state machine.
    pub sentinel: Sentinel,
    next_client: u64,
}

impl SentinelEngine {
    /// Wraps `sentinel`.
    pub fn new(sentinel: Sentinel) -> Self {
        Self {
            sentinel,
            next_client: 0,
        }
    }
}

impl CommandEngine for SentinelEngine {
    fn connect(&mut self, peer: String) -> Session {
        self.next_client += 1;
        Session::new(self.next_client, peer)
    }
    fn disconnect(&mut self, _session: &Session) {}
    fn execute(&mut self, _session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        self.sentinel.command(argv, now_us / 1000)
    }
    fn active_expire(&mut self, _now_us: u64) -> usize {
        0
    }
    fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        Vec::new()
    }
}

struct Slot {
    generation: u64,
    conn: Option<MultiplexedConnection>,
}

/// The links of one Sentinel and what it needs to act.
#[derive(Clone)]
struct Driver {
    shared: SharedEngine<SentinelEngine>,
    links: Rc<RefCell<BTreeMap<Addr, Slot>>>,
    dial: DialFn,
    spawn: SpawnFn,
}

static LINK_INFO: std::sync::LazyLock<redis::RedisConnectionInfo> =
    std::sync::LazyLock::new(|| {
        // Sentinel's links (hiredis) send nothing on connect.
        redis::IntoConnectionInfo::into_connection_info("redis://sentinel-link:6379")
            .expect("static url")
            .redis_settings()
            .clone()
            .set_skip_set_lib_name()
    });

fn breaks(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() || e.is_timeout()
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.shared.now_us() / 1000
    }

    fn perform(&self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Connect(addr) => self.connect(addr),
                Action::Close(addr) => {
                    let mut links = self.links.borrow_mut();
                    let slot = links.entry(addr).or_insert(Slot {
                        generation: 0,
                        conn: None,
                    });
                    slot.generation += 1;
                    slot.conn = None;
                }
                Action::Send {
                    to,
                    commands,
                    expect,
                } => self.send(to, commands, expect),
            }
        }
    }

    fn connect(&self, addr: Addr) {
        let generation = {
            let mut links = self.links.borrow_mut();
            let slot = links.entry(addr.clone()).or_insert(Slot {
                generation: 0,
                conn: None,
            });
            slot.generation += 1;
            slot.conn = None;
            slot.generation
        };
        let this = self.clone();
        (self.spawn)(Box::pin(async move {
            let dial = (this.dial)(addr.host.clone(), addr.port);
            let result = turmoil::time::timeout(DIAL_TIMEOUT, async {
                let stream = dial.await?;
                let config = redis::AsyncConnectionConfig::new()
                    .set_response_timeout(Some(LINK_RESPONSE_TIMEOUT));
                MultiplexedConnection::new_with_config(&LINK_INFO, stream, config)
                    .await
                    .map_err(io::Error::other)
            })
            .await;
            let current = this
                .links
                .borrow()
                .get(&addr)
                .is_some_and(|s| s.generation == generation);
            if !current {
                return;
            }
            match result {
                Ok(Ok((conn, driver))) => {
                    (this.spawn)(Box::pin(driver));
                    if let Some(slot) = this.links.borrow_mut().get_mut(&addr) {
                        slot.conn = Some(conn);
                    }
                    let now = this.now_ms();
                    let actions = this.shared.with_engine(|e| e.sentinel.link_up(&addr, now));
                    this.perform(actions);
                }
                _ => {
                    let now = this.now_ms();
                    this.shared
                        .with_engine(|e| e.sentinel.link_down(&addr, now));
                }
            }
        }));
    }

    fn send(&self, to: Addr, commands: Vec<Vec<Vec<u8>>>, expect: Expect) {
        let (conn, generation) = match self.links.borrow().get(&to) {
            Some(Slot {
                conn: Some(c),
                generation,
            }) => (c.clone(), *generation),
            _ => {
                let now = self.now_ms();
                let actions = self
                    .shared
                    .with_engine(|e| e.sentinel.reply(&to, expect, None, now));
                self.perform(actions);
                return;
            }
        };
        let this = self.clone();
        (self.spawn)(Box::pin(async move {
            let mut conn = conn;
            let mut pipe = redis::pipe();
            for argv in &commands {
                let mut cmd = redis::cmd(&String::from_utf8_lossy(&argv[0]));
                for a in &argv[1..] {
                    cmd.arg(a.as_slice());
                }
                pipe.add_command(cmd);
            }
            let result: redis::RedisResult<Vec<Value>> = pipe.query_async(&mut conn).await;
            let now = this.now_ms();
            let reply = match result {
                Ok(mut values) => values.pop(),
                Err(e) if breaks(&e) => {
                    let current = {
                        let mut links = this.links.borrow_mut();
                        match links.get_mut(&to) {
                            Some(slot) if slot.generation == generation => {
                                slot.conn = None;
                                slot.generation += 1;
                                true
                            }
                            _ => false,
                        }
                    };
                    if current {
                        this.shared.with_engine(|e| e.sentinel.link_down(&to, now));
                    }
                    None
                }
                Err(e) => redis::ServerError::try_from(e).ok().map(Value::ServerError),
            };
            let actions = this
                .shared
                .with_engine(|e| e.sentinel.reply(&to, expect, reply.as_ref(), now));
            this.perform(actions);
        }));
    }
}

/// Runs the Sentinel in `shared` forever: its timer and its links. Serve its port with
/// [`serve_connection`](crate::redis::serve_connection) on the same `shared`.
pub async fn run(shared: SharedEngine<SentinelEngine>, dial: DialFn, spawn: SpawnFn) {
    run_after(Duration::ZERO, shared, dial, spawn).await
}

/// [`run`], its timer starting after `phase` (a Sentinel that was up before the run
/// began: its rhythm's phase; see `world/redis/sentinels.rs`).
pub async fn run_after(
    phase: Duration,
    shared: SharedEngine<SentinelEngine>,
    dial: DialFn,
    spawn: SpawnFn,
) {
    if !phase.is_zero() {
        turmoil::time::sleep(phase).await;
    }
    let driver = Driver {
        shared: shared.clone(),
        links: Rc::default(),
        dial,
        spawn,
    };
    loop {
        let period = shared.with_engine(|e| e.sentinel.next_period_ms());
        turmoil::time::sleep(Duration::from_millis(period)).await;
        let now = driver.now_ms();
        let actions = shared.with_engine(|e| {
            let mut a = e.sentinel.take_actions();
            a.extend(e.sentinel.timer(now));
            a
        });
        driver.perform(actions);
    }
}

/// A dialler over tokio TCP (for running the model Sentinel next to real servers).
pub fn tokio_dial() -> DialFn {
    Rc::new(|host: String, port: u16| {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            let _ = stream.set_nodelay(true);
            let stream: Box<dyn LinkStream> = Box::new(stream);
            Ok(stream)
        })
    })
}

/// Spawns on the current `LocalSet`.
pub fn local_spawn() -> SpawnFn {
    Rc::new(|task| {
        tokio::task::spawn_local(task);
    })
}
