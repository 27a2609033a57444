//! Redis Sentinel, as Redis 7.0's `sentinel.c` does it, for one monitored master.
//!
//! [`Sentinel`] is the state machine, free of I/O: the driver ([`driver`]) calls
//! [`Sentinel::timer`] every 50-100 ms (Redis's `server.hz` of 10 plus a random 0-10,
//! which desynchronises the Sentinels' elections), feeds it the replies of the commands
//! it asked to send and the state of its links, and answers the commands clients send
//! with [`Sentinel::command`]. The same code runs over turmoil TCP in the simulator and
//! over real TCP next to real `redis-server`s in the fidelity tests.

mod command;
pub mod driver;
mod info;
pub mod record;
mod timer;

use std::collections::BTreeMap;
use std::fmt;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::Value;

/// Sentinel's port.
pub const SENTINEL_PORT: u16 = 26379;

const PING_PERIOD: u64 = 1_000;

/// Sentinel's PING period (`SENTINEL_PING_PERIOD`), ms.
pub const PING_PERIOD_MS: u64 = PING_PERIOD;
const INFO_PERIOD: u64 = 10_000;
const ASK_PERIOD: u64 = 1_000;
const PUBLISH_PERIOD: u64 = 2_000;
const TILT_TRIGGER: u64 = 2_000;
const TILT_PERIOD: u64 = PING_PERIOD * 30;
const SLAVE_RECONF_TIMEOUT: u64 = 10_000;
const MIN_LINK_RECONNECT_PERIOD: u64 = 15_000;
const ELECTION_TIMEOUT: u64 = 10_000;
const MAX_DESYNC: u64 = 1_000;
/// The hello channel.
pub const HELLO_CHANNEL: &str = "__sentinel__:hello";

/// A host and port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr {
    /// Host name or IP.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Addr {
    /// `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// A Sentinel's configuration (`sentinel monitor`, `down-after-milliseconds`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelConfig {
    /// The monitored master's name (`mymaster`).
    pub master_name: String,
    /// Where the master is at start.
    pub master: Addr,
    /// Sentinels that must agree the master is down.
    pub quorum: u32,
    /// `down-after-milliseconds` (Redis's default: 30000).
    pub down_after_ms: u64,
    /// `failover-timeout` (Redis's default: 180000).
    pub failover_timeout_ms: u64,
    /// `parallel-syncs` (default 1).
    pub parallel_syncs: u32,
    /// Replicas it knows from its configuration file (`sentinel known-replica`), as a
    /// Sentinel that has run for a while does; others are discovered from `INFO`.
    pub known_replicas: Vec<Addr>,
    /// This Sentinel's own address, as the others reach it.
    pub me: Addr,
    /// The other Sentinels (`known-sentinel`).
    pub peers: Vec<Addr>,
    /// Seeds the run id and the timer's jitter.
    pub seed: u64,
}

/// What the driver should do with the reply of a command it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `PING`: availability.
    Ping,
    /// `INFO`: role, replicas, offsets.
    Info,
    /// `SENTINEL IS-MASTER-DOWN-BY-ADDR`: a peer's view and vote.
    IsMasterDown,
    /// Nothing (the `SLAVEOF` transaction, hellos): effects are seen through `INFO`.
    Discard,
}

/// Something the state machine asks the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Dial `Addr` (its link is down and the reconnect period passed).
    Connect(Addr),
    /// Close the link to `Addr` (it looks stuck); it is dialled again later.
    Close(Addr),
    /// Send these commands, in order, on the link to `to`; hand the reply of the last
    /// to the state machine as `expect` says.
    Send {
        /// The instance.
        to: Addr,
        /// One command, or a transaction.
        commands: Vec<Vec<Vec<u8>>>,
        /// What the reply means.
        expect: Expect,
    },
}

fn argv(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// One command link (`instanceLink`).
#[derive(Debug, Clone)]
struct Link {
    disconnected: bool,
    dialling: bool,
    conn_ms: u64,
    last_reconn_ms: u64,
    /// Time of the oldest unanswered PING (0: none pending).
    act_ping_ms: u64,
    last_ping_ms: u64,
    last_pong_ms: u64,
    last_avail_ms: u64,
    pending: u32,
}

impl Link {
    fn new(now: u64) -> Self {
        Self {
            disconnected: true,
            dialling: false,
            conn_ms: 0,
            last_reconn_ms: 0,
            act_ping_ms: now,
            last_ping_ms: 0,
            last_pong_ms: now,
            last_avail_ms: now,
            pending: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Unknown,
    Master,
    Replica,
}

/// A master or replica as this Sentinel sees it.
#[derive(Debug, Clone)]
struct Instance {
    addr: Addr,
    link: Link,
    runid: Option<String>,
    sdown_since: Option<u64>,
    info_refresh: u64,
    role_reported: Role,
    role_reported_ms: u64,
    slave_conf_change_ms: u64,
    master_link_down_ms: u64,
    slave_master: Option<Addr>,
    slave_link_up: bool,
    priority: u64,
    repl_offset: u64,
    promoted: bool,
    reconf_sent: Option<u64>,
    reconf_inprog: bool,
    reconf_done: bool,
}

impl Instance {
    fn new(addr: Addr, now: u64) -> Self {
        Self {
            addr,
            link: Link::new(now),
            runid: None,
            sdown_since: None,
            info_refresh: 0,
            role_reported: Role::Unknown,
            role_reported_ms: now,
            slave_conf_change_ms: now,
            master_link_down_ms: 0,
            slave_master: None,
            slave_link_up: false,
            priority: 100,
            repl_offset: 0,
            promoted: false,
            reconf_sent: None,
            reconf_inprog: false,
            reconf_done: false,
        }
    }

    fn no_down_for(&self, now: u64, ms: u64) -> bool {
        self.sdown_since.is_none_or(|t| now.saturating_sub(t) > ms)
    }
}

/// Another Sentinel.
#[derive(Debug, Clone)]
struct Peer {
    link: Link,
    master_down: bool,
    last_master_down_reply_ms: u64,
    leader: Option<String>,
    leader_epoch: u64,
    runid: Option<String>,
    last_pub_ms: u64,
}

/// The failover's state (`SENTINEL_FAILOVER_STATE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Failover {
    None,
    WaitStart,
    SelectSlave,
    SendSlaveofNoOne,
    WaitPromotion,
    ReconfSlaves,
    UpdateConfig,
}

/// One event in Sentinel's log (`+sdown master mymaster 10.0.0.1 6379`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelEvent {
    /// When, in the Sentinel's milliseconds.
    pub at_ms: u64,
    /// `+sdown`, `+odown`, `+switch-master`, …
    pub kind: String,
    /// The rest of the line.
    pub detail: String,
}

/// What `sentinel.conf` keeps across a restart (Sentinel rewrites it on every change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    master: Addr,
    current_epoch: u64,
    config_epoch: u64,
    leader: Option<String>,
    leader_epoch: u64,
    replicas: Vec<Addr>,
    myid: String,
}

/// A Sentinel monitoring one master.
///
/// What it follows from `sentinel.c` (7.0.15), with the same constants:
/// - **Monitoring.** `PING` every second (or `down-after-milliseconds` if smaller) once
///   the last reply is older than that; `INFO` every 10 s, every second for the replicas
///   of a master in `ODOWN` or failover and for replicas whose link to their master is
///   down. Replicas are discovered from the master's `INFO` (`slaveN:ip=…,port=…`).
/// - **SDOWN** when no acceptable reply (`PONG`, `LOADING`, `MASTERDOWN`) came for
///   `down-after-milliseconds` since the oldest unanswered `PING` (or since the last
///   reply, while disconnected), or when the master has reported the replica role for
///   longer than `down-after + 2 × info-period`.
/// - **ODOWN** when this Sentinel's SDOWN plus the other Sentinels that answered
///   `SENTINEL IS-MASTER-DOWN-BY-ADDR` with 1 in the last 5 s reach the quorum; asked
///   every second while SDOWN.
/// - **Election.** A Sentinel that sees ODOWN (and started no failover in the last
///   2 × `failover-timeout`) bumps its epoch and asks for votes; each Sentinel votes
///   once per epoch, for the first asker. The winner needs a majority of all the
///   Sentinels it knows and at least the quorum; a candidate that is not elected within
///   min(10 s, `failover-timeout`) gives up. A Sentinel that voted for another delays
///   its own attempt by a random 0-1 s.
/// - **Replica selection.** Excluded: SDOWN, disconnected, no reply to `PING` for 5 s,
///   `INFO` older than 5 s (master SDOWN) or 30 s, a link to the master down for longer
///   than (time the master has been SDOWN) + 10 × `down-after`, priority 0. Then the
///   lowest `replica-priority`, the largest replication offset, the smallest run id.
/// - **Promotion.** `MULTI, SLAVEOF NO ONE, CONFIG REWRITE, CLIENT KILL TYPE normal,
///   CLIENT KILL TYPE pubsub, EXEC` to the chosen replica; once its `INFO` says master,
///   the master's config epoch becomes the failover epoch, the other replicas get the
///   same transaction with `SLAVEOF <new> <port>` (`parallel-syncs` at a time, each
///   counted done when its link is up or after 10 s), and `+switch-master` makes the
///   promoted replica the master and the old master one of its replicas.
/// - **Reconfiguration.** A listed replica that reports the master role (the old master
///   coming back) is sent `SLAVEOF <master>` once it has reported it for 8 s and has not
///   been down for 8 s; a replica following another address is fixed after
///   `failover-timeout`.
/// - **Hello.** Every 2 s each Sentinel sends `PUBLISH __sentinel__:hello
///   ip,port,runid,current-epoch,master-name,master-ip,master-port,config-epoch` to the
///   other Sentinels; a hello with a newer config epoch for another address switches the
///   master (`+config-update-from`, `+switch-master`), and a newer current epoch is
///   adopted.
/// - **TILT.** A timer call 2 s late (or early) enters TILT for 30 s: monitoring goes
///   on, acting stops.
///
/// Simplified, and said so: one master per Sentinel; the other Sentinels are configured
/// (`sentinel known-sentinel`), not discovered through the masters' hello channel, and
/// so may be the replicas (`known-replica`, as in a `sentinel.conf` Sentinel has
/// rewritten; replicas are also discovered from the master's `INFO`), and
/// hellos go straight to them, not through the monitored instances' pub/sub; no
/// scripts, no `SENTINEL SET`/`RESET`/`FAILOVER`, no authentication, no `master-reboot`
/// handling; the pub/sub link to each instance is not modelled (so neither is its
/// reconnection).
pub struct Sentinel {
    cfg: SentinelConfig,
    myid: String,
    current_epoch: u64,
    rng: ChaCha8Rng,
    tilt_since: Option<u64>,
    previous_ms: Option<u64>,
    // The master (`sentinelRedisInstance` with SRI_MASTER).
    master: Instance,
    odown_since: Option<u64>,
    config_epoch: u64,
    leader: Option<String>,
    leader_epoch: u64,
    failover: Failover,
    failover_epoch: u64,
    failover_start_ms: Option<u64>,
    failover_state_change_ms: u64,
    promoted: Option<Addr>,
    replicas: BTreeMap<Addr, Instance>,
    peers: BTreeMap<Addr, Peer>,
    events: Vec<SentinelEvent>,
    /// Actions decided while handling a reply, handed out with the reply's result.
    outbox: Vec<Action>,
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel")
            .field("me", &self.cfg.me)
            .field("master", &self.master.addr)
            .finish_non_exhaustive()
    }
}

fn hex_id(rng: &mut ChaCha8Rng) -> String {
    (0..40)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::SimpleString(s) => Some(s.clone()),
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::ServerError(e) => Some(format!("{} {}", e.code(), e.details().unwrap_or_default())),
        _ => None,
    }
}

impl Sentinel {
    /// A Sentinel that starts monitoring at `now_ms`.
    pub fn new(cfg: SentinelConfig, now_ms: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let myid = hex_id(&mut rng);
        let peers = cfg
            .peers
            .iter()
            .filter(|p| **p != cfg.me)
            .map(|p| {
                (
                    p.clone(),
                    Peer {
                        link: Link::new(now_ms),
                        master_down: false,
                        last_master_down_reply_ms: 0,
                        leader: None,
                        leader_epoch: 0,
                        runid: None,
                        last_pub_ms: 0,
                    },
                )
            })
            .collect();
        let master = Instance::new(cfg.master.clone(), now_ms);
        let replicas = cfg
            .known_replicas
            .iter()
            .filter(|a| **a != cfg.master)
            .map(|a| (a.clone(), Instance::new(a.clone(), now_ms)))
            .collect();
        Self {
            cfg,
            myid,
            current_epoch: 0,
            rng,
            tilt_since: None,
            previous_ms: None,
            master,
            odown_since: None,
            config_epoch: 0,
            leader: None,
            leader_epoch: 0,
            failover: Failover::None,
            failover_epoch: 0,
            failover_start_ms: None,
            failover_state_change_ms: 0,
            promoted: None,
            replicas,
            peers,
            events: Vec::new(),
            outbox: Vec::new(),
        }
    }

    /// What its configuration file holds now.
    pub fn saved(&self) -> Saved {
        Saved {
            master: self.master.addr.clone(),
            current_epoch: self.current_epoch,
            config_epoch: self.config_epoch,
            leader: self.leader.clone(),
            leader_epoch: self.leader_epoch,
            replicas: self.replicas.keys().cloned().collect(),
            myid: self.myid.clone(),
        }
    }

    /// Starts from a configuration file written by an earlier run of this Sentinel.
    pub fn restore(&mut self, saved: Saved, now: u64) {
        self.master = Instance::new(saved.master, now);
        self.current_epoch = saved.current_epoch;
        self.config_epoch = saved.config_epoch;
        self.leader = saved.leader;
        self.leader_epoch = saved.leader_epoch;
        self.myid = saved.myid;
        self.replicas = saved
            .replicas
            .into_iter()
            .map(|a| (a.clone(), Instance::new(a, now)))
            .collect();
    }

    /// This Sentinel's run id.
    pub fn myid(&self) -> &str {
        &self.myid
    }

    /// Its address.
    pub fn me(&self) -> &Addr {
        &self.cfg.me
    }

    /// The master's address as `GET-MASTER-ADDR-BY-NAME` gives it.
    pub fn master_addr(&self) -> &Addr {
        if self.failover >= Failover::ReconfSlaves
            && let Some(p) = &self.promoted
        {
            return p;
        }
        &self.master.addr
    }

    /// The current epoch.
    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    /// The events logged since the last call.
    pub fn take_events(&mut self) -> Vec<SentinelEvent> {
        std::mem::take(&mut self.events)
    }

    /// The timer's next period (Redis's `hz` is 10 + rand() % 10).
    pub fn next_period_ms(&mut self) -> u64 {
        1_000 / (10 + self.rng.random_range(0..10u64))
    }

    fn event(&mut self, now: u64, kind: &str, detail: String) {
        self.events.push(SentinelEvent {
            at_ms: now,
            kind: kind.into(),
            detail,
        });
    }

    /// How Sentinel's log names an instance (`%@`).
    fn describe(&self, addr: &Addr) -> String {
        if *addr == self.master.addr {
            format!(
                "master {} {} {}",
                self.cfg.master_name, addr.host, addr.port
            )
        } else if self.replicas.contains_key(addr) {
            self.replica_name(addr)
        } else {
            format!("sentinel {addr}")
        }
    }

    fn replica_name(&self, addr: &Addr) -> String {
        format!(
            "slave {addr} {} {} @ {} {} {}",
            addr.host,
            addr.port,
            self.cfg.master_name,
            self.master.addr.host,
            self.master.addr.port
        )
    }

    /// Lists a replica of the master (`+slave`).
    fn add_replica(&mut self, addr: Addr, now: u64) {
        let name = self.replica_name(&addr);
        self.replicas.insert(addr.clone(), Instance::new(addr, now));
        self.event(now, "+slave", name);
    }

    /// The master or a listed replica at `addr`.
    fn instance_at(&mut self, addr: &Addr) -> Option<&mut Instance> {
        if *addr == self.master.addr {
            Some(&mut self.master)
        } else {
            self.replicas.get_mut(addr)
        }
    }

    fn link_mut(&mut self, addr: &Addr) -> Option<&mut Link> {
        if self.instance_at(addr).is_some() {
            return self.instance_at(addr).map(|i| &mut i.link);
        }
        self.peers.get_mut(addr).map(|p| &mut p.link)
    }

    /// The driver's dial to `addr` succeeded.
    pub fn link_up(&mut self, addr: &Addr, now: u64) -> Vec<Action> {
        let Some(link) = self.link_mut(addr) else {
            return vec![Action::Close(addr.clone())];
        };
        link.dialling = false;
        link.disconnected = false;
        link.conn_ms = now;
        link.pending = 0;
        // `sentinelReconnectInstance` pings at once on a new command link.
        self.ping(addr, now).into_iter().collect()
    }

    /// The link to `addr` failed to dial or broke.
    pub fn link_down(&mut self, addr: &Addr, _now: u64) {
        if let Some(link) = self.link_mut(addr) {
            link.dialling = false;
            link.disconnected = true;
            link.pending = 0;
        }
    }

    fn ping(&mut self, addr: &Addr, now: u64) -> Option<Action> {
        let link = self.link_mut(addr)?;
        link.pending += 1;
        link.last_ping_ms = now;
        if link.act_ping_ms == 0 {
            link.act_ping_ms = now;
        }
        Some(Action::Send {
            to: addr.clone(),
            commands: vec![argv(&["PING"])],
            expect: Expect::Ping,
        })
    }

    /// A reply (or `None`: the command failed without a reply) to a command sent with
    /// `expect`.
    /// Returns what to do about it (a replica to reconfigure).
    pub fn reply(
        &mut self,
        from: &Addr,
        expect: Expect,
        reply: Option<&Value>,
        now: u64,
    ) -> Vec<Action> {
        self.handle_reply(from, expect, reply, now);
        std::mem::take(&mut self.outbox)
    }

    fn handle_reply(&mut self, from: &Addr, expect: Expect, reply: Option<&Value>, now: u64) {
        if let Some(link) = self.link_mut(from) {
            link.pending = link.pending.saturating_sub(1);
        }
        let Some(reply) = reply else { return };
        match expect {
            Expect::Ping => {
                let acceptable = value_text(reply).is_some_and(|t| {
                    t.starts_with("PONG") || t.starts_with("LOADING") || t.starts_with("MASTERDOWN")
                });
                if let Some(link) = self.link_mut(from) {
                    if acceptable {
                        link.last_avail_ms = now;
                        link.act_ping_ms = 0;
                    }
                    link.last_pong_ms = now;
                }
            }
            Expect::Info => {
                if let Value::BulkString(b) = reply {
                    let text = String::from_utf8_lossy(b).into_owned();
                    self.refresh_info(from, &text, now);
                } else if let Value::VerbatimString { text, .. } = reply {
                    let text = text.clone();
                    self.refresh_info(from, &text, now);
                }
            }
            Expect::IsMasterDown => {
                let Value::Array(items) = reply else { return };
                let [Value::Int(down), leader, Value::Int(epoch)] = items.as_slice() else {
                    return;
                };
                let Some(leader) = value_text(leader) else {
                    return;
                };
                if let Some(peer) = self.peers.get_mut(from) {
                    peer.last_master_down_reply_ms = now;
                    peer.master_down = *down == 1;
                    if leader != "*" {
                        peer.leader = Some(leader);
                        peer.leader_epoch = *epoch as u64;
                    }
                }
            }
            Expect::Discard => {}
        }
    }

    /// The `SLAVEOF` transaction (`sentinelSendSlaveOf`).
    fn slaveof(&self, to: &Addr, master: Option<&Addr>) -> Action {
        let port;
        let (host, port) = match master {
            Some(m) => {
                port = m.port.to_string();
                (m.host.as_str(), port.as_str())
            }
            None => ("NO", "ONE"),
        };
        Action::Send {
            to: to.clone(),
            commands: vec![
                argv(&["MULTI"]),
                argv(&["SLAVEOF", host, port]),
                argv(&["CONFIG", "REWRITE"]),
                argv(&["CLIENT", "KILL", "TYPE", "normal"]),
                argv(&["CLIENT", "KILL", "TYPE", "pubsub"]),
                argv(&["EXEC"]),
            ],
            expect: Expect::Discard,
        }
    }
}
