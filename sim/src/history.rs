//! The history of one run: plain serde data that checkers, reports and replays read
//! without the simulator.
//!
//! Jepsen's shape: every client operation is an *invoke* event followed (unless the
//! client died first) by one completion with the same `op` id: `ok` (it happened),
//! `fail` (it certainly did not happen) or `info` (unknown: it may have happened).
//! Fault starts and ends, the storage's record of every read and write, and the lock
//! servers' record of which key they wrote or removed on whose behalf are events too,
//! all stamped with true simulated time. Readers take a server event's meaning from
//! [`ServerEvent::fact`] and its words from [`ServerEvent::wording`] (the systems'
//! record modules build both), never from a system's own variant.

pub mod fact;

use serde::{Deserialize, Serialize};

use crate::faults::FaultPlan;
use crate::{mongo, mysql, sentinel, zk};
use fact::{LockFact, MonitorStep, Note, Rank, Removal};

/// Everything recorded in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The run's seed: everything random in the run derives from it.
    pub seed: u64,
    /// The lock design's name (for reports; checkers must not read it).
    pub design: String,
    /// The scenario's name (for reports; checkers must not read it).
    pub scenario: String,
    /// Knobs the checkers need (bounds, initial stock).
    pub params: RunParams,
    /// The fault plan that ran.
    pub plan: FaultPlan,
    /// Events in the order they happened (ties in time keep recording order).
    pub events: Vec<Event>,
    /// True simulated time when the run stopped, in microseconds.
    pub end_us: u64,
    /// Counters of the run, for benchmarks.
    #[serde(default)]
    pub stats: RunStats,
}

/// Counters of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStats {
    /// Commands the Redis model executed.
    pub redis_commands: u64,
    /// Requests the storage served.
    pub storage_requests: u64,
    /// Steps the world took (what the run cost, not what happened in it: not part
    /// of the history's form, so a run stepped tick by tick has the same digest).
    #[serde(skip)]
    pub steps: u64,
    /// Timers that fired inside a jump without a hint (see `turmoil::time`): each
    /// one's task ran at its own time, but what it sent left at the jump's end. Zero
    /// for every built-in design and scenario (tested); a design that arms tokio
    /// timers itself instead of sleeping on `Deps::clock` shows up here.
    #[serde(skip)]
    pub unhinted_wakes: u64,
    /// Times a host's runtime ran (catch-ups included): the unit a run's cost is
    /// made of (not part of the history's form, like `steps`).
    #[serde(skip)]
    pub host_runs: u64,
}

/// The knobs of a run that checkers need to judge it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
    /// The lock key every client contends for.
    pub key: String,
    /// The lease each acquisition asks for.
    pub lease_ms: u64,
    /// How long a free lock may stay untaken while someone wants it before the liveness
    /// checker calls it stuck: lease plus slack.
    pub liveness_bound_ms: u64,
    /// The storage counter's value at the start.
    pub initial_stock: i64,
    /// Number of client hosts.
    pub clients: u32,
    /// Independent masters a client locks on (servers configured without `replicaof`):
    /// 1 for a single master (replicated or not), 5 for a Redlock world. A lock held on
    /// fewer than a majority of them is not held.
    #[serde(default = "one")]
    pub masters: u32,
    /// The segmented stock (`Workload::segments`, Dewu's article in docs/designs.md): the stock is split into this
    /// many segments, each its own counter guarded by its own lock key
    /// (`<key>:<segment>`); `None` for the one counter under the one key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u32>,
    /// Whether the lock servers' own record is in the history (`Server` events: which
    /// value the lock key held, who wrote and removed it). Always in a simulated run;
    /// a real run (`locksim run --real`) has none yet, and the checkers that judge by
    /// that record say `Unknown` rather than read its absence as an empty server.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub server_records: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl RunParams {
    /// Each segment's stock at the start ([`segment_stocks`] of the initial stock), or
    /// the one counter's.
    pub fn segment_stocks(&self) -> Vec<i64> {
        match self.segments {
            Some(n) => segment_stocks(self.initial_stock, n),
            None => vec![self.initial_stock],
        }
    }

    /// The lock key of `segment` (`<key>:<segment>`), or the one key.
    pub fn segment_key(&self, segment: Option<u32>) -> String {
        segment_key(&self.key, segment)
    }
}

/// `total` split into `n` segments as evenly as whole units allow, the first
/// `total % n` segments one unit larger (2,000 over 5: 400 each; 1,002 over 5: 201,
/// 201, 200, 200, 200).
pub fn segment_stocks(total: i64, n: u32) -> Vec<i64> {
    let n = i64::from(n.max(1));
    (0..n)
        .map(|i| total / n + i64::from(i < total % n))
        .collect()
}

/// The lock key guarding `segment` of the stock: `<key>:<segment>`; `key` itself
/// without segments.
pub fn segment_key(key: &str, segment: Option<u32>) -> String {
    match segment {
        Some(s) => format!("{key}:{s}"),
        None => key.to_string(),
    }
}

fn one() -> u32 {
    1
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// True simulated time since the run's start, in microseconds.
    pub at_us: u64,
    /// The host it happened on or to (`client-3`, `redis`, `storage`, `nemesis`).
    pub host: String,
    /// What happened.
    pub kind: EventKind,
}

/// What an event records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum EventKind {
    /// A client operation's invocation or completion.
    Op(Op),
    /// A fault started or ended.
    Fault {
        /// Index into the history's fault plan.
        fault: usize,
        /// `start` or `end`.
        phase: FaultPhase,
        /// Human-readable description with the resolved target.
        detail: String,
        /// A partition's other side: the hosts the event's host was cut off from
        /// (resolved at the fault's start; empty for every other fault). A checker
        /// needs both sides to tell which servers a client could still reach.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        peers: Vec<String>,
    },
    /// The storage served a read or applied (or rejected) a write.
    Storage(StorageEvent),
    /// The Redis server wrote or removed a key (its own record). The event's `host` is
    /// the server's name.
    Server(ServerEvent),
    /// A Sentinel logged an event (`+sdown`, `+odown`, `+elected-leader`,
    /// `+promoted-slave`, `+switch-master`, …), as its log line says it. The event's
    /// `host` is the Sentinel.
    Sentinel {
        /// The event's name, e.g. `+switch-master`.
        event: String,
        /// The rest of the line.
        detail: String,
    },
    /// A host's clock started imperfect (at time zero), or the nemesis stepped it or
    /// changed its rate. The event's `host` is the clock's host.
    Clock {
        /// How far its wall clock is from true time now (positive: ahead), in µs.
        wall_offset_us: i64,
        /// Its rate error from now on, in parts per million (positive: fast).
        drift_ppm: i64,
        /// The step just applied to its wall clock, in ms (0 for a rate change).
        #[serde(default)]
        step_ms: i64,
    },
    /// A client's connection dialled a Redis server (at start-up, and again after a
    /// connection broke): reconnection is visible in the history.
    Connect {
        /// The server dialled.
        server: String,
        /// Whether the dial (TCP and the client's handshake) succeeded.
        ok: bool,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A client's watchdog renewed its lock (`lock_impl::Observer::renewed`): from
    /// now on the client believes its validity runs to `valid_until_us` (true time,
    /// converted with the client's clock as an acquisition's `valid_until_us` is).
    Renewed {
        /// The lock key.
        key: String,
        /// The holder's owner value.
        owner: String,
        /// The believed validity's new end, in true µs.
        valid_until_us: u64,
    },
}

/// A client operation event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Pairs an invocation with its completion; unique in the history.
    pub op: u64,
    /// What the client tried.
    pub f: OpF,
    /// Invoke or one of the completions.
    pub phase: Phase,
    /// The lock key (acquire, release; on a segmented stock, reads and writes too:
    /// their segment's lock key).
    pub key: Option<String>,
    /// The owner value: on an acquire's `ok`, the value it stored; on a release, the
    /// value the client releases.
    pub owner: Option<String>,
    /// A counter value: read's result, write's new value.
    pub value: Option<i64>,
    /// The fencing token, where there is one.
    pub token: Option<u64>,
    /// On an acquire's `ok`: the true time, in µs since the run's start, until which
    /// the client believes the lock is its own (the guard's validity, read on the
    /// client's own clock and converted to true time at the ok); `None` for a lock
    /// that never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until_us: Option<u64>,
    /// Extra text: a release's outcome (`removed`, `not-found`, ...), an error.
    pub detail: Option<String>,
    /// The lock mode of an acquisition (all its phases) and of its release, in a
    /// read/write workload (`Workload::read_share`); `None` elsewhere, where every
    /// acquisition is exclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LockMode>,
}

/// The mode of a read-write lock's acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockMode {
    /// Shared: readers may hold together.
    Read,
    /// Exclusive: no other holder, reader or writer.
    Write,
}

impl LockMode {
    /// Its name in histories and timelines: `read`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            LockMode::Read => "read",
            LockMode::Write => "write",
        }
    }
}

/// Operation kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpF {
    /// Acquire the lock.
    Acquire,
    /// Release the lock.
    Release,
    /// Read the protected counter.
    Read,
    /// Write the protected counter.
    Write,
}

impl OpF {
    /// Its name in timelines and reports: `acquire`, `release`, `read`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            OpF::Acquire => "acquire",
            OpF::Release => "release",
            OpF::Read => "read",
            OpF::Write => "write",
        }
    }
}

impl Phase {
    /// Its name in timelines and reports: `invoke`, `ok`, `fail`, `info`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Invoke => "invoke",
            Phase::Ok => "ok",
            Phase::Fail => "fail",
            Phase::Info => "info",
        }
    }
}

/// Jepsen's operation phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The client sent the request.
    Invoke,
    /// It happened.
    Ok,
    /// It certainly did not happen.
    Fail,
    /// Unknown whether it happened.
    Info,
}

/// Fault phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultPhase {
    /// The fault began.
    Start,
    /// The fault ended (a pause resumed, a crashed host restarted, a delay lifted).
    End,
}

/// The storage's own record. Its tag is `action`, not `type`: inside an event it sits
/// beside the event's own `type` (`{"type":"storage","action":"read",…}`): with two
/// `type` keys in one object, serde refused the history and other readers kept the
/// second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum StorageEvent {
    /// A read returned `value` (or was refused: a fencing storage refuses a read whose
    /// token is lower than one it has already seen).
    Read {
        /// Who read.
        reader: String,
        /// What it got.
        value: i64,
        /// The reader's fencing token, if any.
        #[serde(default)]
        token: Option<u64>,
        /// False if a fencing storage refused the read.
        #[serde(default = "accepted_default")]
        accepted: bool,

        /// The stock segment read (a segmented stock); `None`: the one counter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        segment: Option<u32>,
    },
    /// A read-modify-write's write arrived.
    Write {
        /// Who wrote.
        writer: String,
        /// The value the writer had read before.
        read: i64,
        /// The value it wrote.
        wrote: i64,
        /// The storage's value just before this write: if it is not `read`, someone
        /// else wrote in between and an update is lost.
        current: i64,
        /// The writer's fencing token, if any.
        token: Option<u64>,
        /// False if a fencing storage rejected the write.
        accepted: bool,

        /// The stock segment written (a segmented stock); `None`: the one counter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        segment: Option<u32>,
    },
    /// The counter's value when the run ended, read from the storage itself (not
    /// derived from the writes it recorded).
    Final {
        /// The stock at the end.
        value: i64,
        /// The segment (a segmented stock records one `Final` per segment, in order);
        /// `None`: the one counter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        segment: Option<u32>,
    },
}

fn accepted_default() -> bool {
    true
}

/// A lock server's record of a key change, stamped with true time. Its tag is
/// `record` (`{"type":"server","record":"role",…}`), for the reason
/// [`StorageEvent`]'s is `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub enum ServerEvent {
    /// A string key was written, or a hash field (then `value` is the field).
    Written {
        /// The host whose connection wrote it.
        by: String,
        /// The key.
        key: String,
        /// The value (an owner value, for a lock key).
        value: String,
    },
    /// A command set a key's expiry (a lease armed, or renewed by a watchdog).
    ExpireSet {
        /// The host whose command (or script) set it.
        by: String,
        /// The key.
        key: String,
        /// Time to live it set, in milliseconds.
        ttl_ms: i64,
    },
    /// The server's replication role (`master`, or `replica of <host>`): recorded
    /// once when the world first sees the server (its role at the start), then at
    /// every change: a promotion, a `REPLICAOF`, a restart into its configured role.
    Role {
        /// `master` or `replica of <host>`.
        role: String,
    },
    /// A pub/sub message on `channel` was dropped on its way to a subscriber (a
    /// `drop-pushes` fault): one event per subscriber that never heard it.
    MessageDropped {
        /// The channel it was published on.
        channel: String,
    },
    /// A client's command reached the server and ran (only in runs that trace
    /// commands: `Workload::trace_commands`, for `locksim explore`).
    Command {
        /// The client host.
        by: String,
        /// The command's name and key (no values; a script by its digest's start).
        command: String,
    },
    /// `HDEL` removed one field of a hash that keeps others (a read-write lock's reader
    /// leaving while others hold): the field's hold on the key ended, the key lives on.
    FieldRemoved {
        /// The host whose command removed it.
        by: String,
        /// The key.
        key: String,
        /// The field.
        field: String,
    },
    /// A key was removed.
    Removed {
        /// The host whose command removed it, or `expiry`.
        by: String,
        /// The key.
        key: String,
        /// Its value (for a hash: the field names).
        value: String,
        /// `command`, `expired`, `overwritten` or `flushed`; for a ZooKeeper ensemble
        /// also `command-before-crash` (a request its client sent before it crashed,
        /// committed after: its previous life's act); for a MongoDB member also
        /// `replicated` (a secondary applied a release from the oplog: the client's
        /// command ran on the primary, whose record has it as `command`) and
        /// `rolled-back`.
        cause: String,
    },
    /// A ZooKeeper session was created, expired or closed, by the ZooKeeper server's
    /// own record (a session's expiry deletes its ephemeral nodes).
    ZkSession {
        /// The session id, `0x…` as ZooKeeper logs it.
        session: String,
        /// The client host that created it.
        client: String,
        /// `created`, `expired` or `closed`.
        event: String,
        /// Its negotiated timeout, ms.
        timeout_ms: u32,
        /// The ephemeral nodes deleted with it (`expired`, `closed`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ephemerals: Vec<String>,
    },
    /// A client's connection to the MySQL server logged in or ended, by the server's
    /// own record (an ended connection's user locks are released with it).
    MySqlConnection {
        /// The connection id.
        connection: u32,
        /// The client host.
        client: String,
        /// `opened` or `closed`.
        event: String,
        /// The user locks (`GET_LOCK`) released by its end.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        released: Vec<String>,
        /// The row locks (`SELECT ... FOR UPDATE`) freed by its end: its open
        /// transaction rolled back.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        row_locks: Vec<String>,
    },
    /// A MySQL server started again after a crash and recovered from its redo log:
    /// what the crash cost, by the server's own record of the lock before it and
    /// what recovery found (recorded before the `Removed` (`lost`) or `Written` that
    /// follow from it, at the restart).
    MySqlRestart {
        /// Its `innodb_flush_log_at_trx_commit`.
        flush_log_at_trx_commit: u8,
        /// Whether its machine crashed (else mysqld alone).
        machine: bool,
        /// Committed log entries the crash lost (committed after the last flush).
        lost_commits: u64,
        /// The lock's value by its record at the crash, if it held it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        held: Option<String>,
        /// Whether that lock came back.
        kept: bool,
        /// In words: the crash, the setting, the last flush, what was lost or kept.
        detail: String,
    },
    /// A MongoDB member rolled back oplog entries its sync source never had (the
    /// writes after the common point are gone from its data), by its own record.
    MongoRollback {
        /// The sync source it rolled back against (`host:port`).
        source: String,
        /// The last optime it shares with the source, `{ ts: Timestamp(1, n), t: term }`.
        common: String,
        /// The last optime undone.
        last_undone: String,
        /// How many oplog entries were undone.
        undone: u64,
    },
    /// A node under the lock's directory was created or deleted on the ZooKeeper
    /// server.
    ZkNode {
        /// The client host whose session asked for it (for a delete by expiry: the
        /// session's host).
        by: String,
        /// The session, `0x…`.
        session: String,
        /// The node's path.
        path: String,
        /// `created`, `deleted` or `deleted-with-session` (expired or closed).
        op: String,
    },
    /// A ZooKeeper follower served clients while behind its leader's commits for a
    /// tick or more (recorded on the follower when it caught up or stopped serving):
    /// its clients read a stale tree meanwhile.
    ZkFollowerLag {
        /// Its leader.
        leader: String,
        /// When it fell behind, µs of true time.
        since_us: u64,
        /// The most txns it was behind.
        txns_behind: u64,
        /// The most client sessions it served meanwhile.
        clients: u32,
    },
}

impl History {
    /// FNV-1a 64 over the canonical JSON form: equal for byte-identical histories.
    pub fn digest(&self) -> u64 {
        let json = serde_json::to_vec(self).expect("a history always serializes");
        json.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// Operation events only, with their times and hosts.
    pub fn ops(&self) -> impl Iterator<Item = (&Event, &Op)> {
        self.events.iter().filter_map(|e| match &e.kind {
            EventKind::Op(op) => Some((e, op)),
            _ => None,
        })
    }
}

impl ServerEvent {
    /// What the event means, in words every system shares.
    pub fn fact(&self) -> LockFact<'_> {
        match self {
            ServerEvent::Written { by, key, value } => LockFact::Written { by, key, value },
            ServerEvent::ExpireSet { by, key, ttl_ms } => LockFact::ExpirySet {
                by,
                key,
                ttl_ms: *ttl_ms,
            },
            ServerEvent::Role { role } => LockFact::Role {
                role,
                rank: Rank::of(role),
                quorum: fact::in_quorum(role),
            },
            ServerEvent::MessageDropped { channel } => LockFact::MessageDropped { channel },
            ServerEvent::Command { by, command } => LockFact::Command { by, command },
            ServerEvent::FieldRemoved { by, key, field } => {
                LockFact::FieldRemoved { by, key, field }
            }
            ServerEvent::Removed {
                by,
                key,
                value,
                cause,
            } => LockFact::Removed {
                by,
                key,
                value,
                why: Removal::of(cause),
                cause,
            },
            ServerEvent::ZkSession {
                session,
                client,
                event,
                timeout_ms,
                ephemerals,
            } => zk::record::session_fact(session, client, event, *timeout_ms, ephemerals),
            ServerEvent::MySqlConnection {
                connection,
                client,
                event,
                released,
                row_locks,
            } => mysql::record::connection_fact(*connection, client, event, released, row_locks),
            ServerEvent::MySqlRestart {
                held, kept, detail, ..
            } => mysql::record::restart_fact(held.as_deref(), *kept, detail),
            ServerEvent::MongoRollback {
                source,
                common,
                last_undone,
                undone,
            } => mongo::record::rollback_fact(source, common, last_undone, *undone),
            ServerEvent::ZkNode { .. } => LockFact::QueueEntry,
            ServerEvent::ZkFollowerLag {
                leader,
                since_us,
                txns_behind,
                clients,
            } => zk::record::lag_fact(leader, *since_us, *txns_behind, *clients),
        }
    }

    /// The event in its system's words, for a timeline.
    pub fn wording(&self) -> String {
        match self {
            ServerEvent::Written { by, key, value } => {
                format!("wrote {key} (owner={value} by {by})")
            }
            ServerEvent::Removed {
                by,
                key,
                value,
                cause,
            } => format!("removed {key} (owner={value} by {by}, {cause})"),
            ServerEvent::FieldRemoved { by, key, field } => {
                format!("removed field {field} of {key} (by {by})")
            }
            ServerEvent::ExpireSet { by, key, ttl_ms } => {
                format!("expiry of {key} set to {ttl_ms} ms by {by}")
            }
            ServerEvent::Role { role } => format!("is now {role}"),
            ServerEvent::MessageDropped { channel } => {
                format!("dropped a message on {channel} to a subscriber")
            }
            ServerEvent::Command { by, command } => format!("ran {command} from {by}"),
            ServerEvent::ZkSession {
                session,
                client,
                event,
                timeout_ms,
                ephemerals,
            } => zk::record::session_words(session, client, event, *timeout_ms, ephemerals),
            ServerEvent::ZkNode {
                by,
                session,
                path,
                op,
            } => zk::record::node_words(by, session, path, op),
            ServerEvent::ZkFollowerLag {
                leader,
                since_us,
                txns_behind,
                clients,
            } => zk::record::lag_words(leader, *since_us, *txns_behind, *clients),
            ServerEvent::MySqlConnection {
                connection,
                client,
                event,
                released,
                row_locks,
            } => mysql::record::connection_words(*connection, client, event, released, row_locks),
            ServerEvent::MySqlRestart { detail, .. } => detail.clone(),
            ServerEvent::MongoRollback {
                source,
                common,
                last_undone,
                undone,
            } => mongo::record::rollback_words(source, common, last_undone, *undone),
        }
    }

    /// The note a sequence diagram draws for the event beyond the lock record's
    /// writes, removals and roles (a session's end, a rollback), if any.
    pub fn note(&self) -> Option<Note<'_>> {
        match self {
            ServerEvent::ZkSession {
                session,
                client,
                event,
                ephemerals,
                ..
            } => zk::record::session_note(session, client, event, ephemerals),
            ServerEvent::MongoRollback {
                source,
                common,
                undone,
                ..
            } => Some(mongo::record::rollback_note(source, common, *undone)),
            _ => None,
        }
    }
}

impl EventKind {
    /// A failover monitor's log line, classified, if the event is one.
    pub fn monitor(&self) -> Option<MonitorStep<'_>> {
        match self {
            EventKind::Sentinel { event, detail } => Some(sentinel::record::step(event, detail)),
            _ => None,
        }
    }

    /// A failover monitor's log line in its words, for a timeline.
    pub fn monitor_words(&self) -> Option<String> {
        match self {
            EventKind::Sentinel { event, detail } => {
                Some(sentinel::record::line_words(event, detail))
            }
            _ => None,
        }
    }
}

/// Whether `host` is a failover monitor by the world's names (not a lock server).
pub fn is_monitor_host(host: &str) -> bool {
    sentinel::record::is_sentinel_host(host)
}

/// The failover monitors, as a witness names them.
pub const MONITORS: &str = sentinel::record::SENTINELS;
