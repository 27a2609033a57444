//! Asynchronous replication as Redis 7.0 does it: the master's propagation of writes,
//! the replication stream and its offsets, replica acknowledgements, `WAIT`, and
//! `min-replicas-to-write`.
//!
//! What a command propagates follows Redis 7.0 (`call()` and `propagatePendingCommands`
//! in `server.c`; the rewrites in `t_string.c` and `expire.c`):
//! - a command propagates only if it changed the dataset (Redis's `server.dirty`), or
//!   is forced to (`PUBLISH` to replicas, `FLUSHALL`/`FLUSHDB` always);
//! - relative expiries become absolute: `SET k v EX|PX|EXAT|PXAT n` → `SET k v PXAT ms`
//!   (NX/XX/GET dropped), `EXPIRE`/`PEXPIRE`/`EXPIREAT` → `PEXPIREAT k ms` (options kept),
//!   an expiry already in the past → `DEL k`, `GETDEL` → `DEL k`, `GETSET k v` →
//!   `SET k v`, `SET … GET` without an expiry loses the `GET`;
//! - a key found expired while a command runs is propagated as `DEL k` *before* the
//!   command's own effect;
//! - a script propagates its effects (each write `redis.call` as rewritten), never the
//!   `EVAL`;
//! - when one command or script propagates more than one operation they are wrapped in
//!   `MULTI` … `EXEC`; a single one is not;
//! - a `SELECT n` precedes the first operation after a sync and every change of
//!   database;
//! - the master's own expiry (active cycle) propagates one `DEL` per key, unwrapped.
//!
//! Replicas answer `REPLCONF ACK <offset>` about once a second and when the master asks
//! (`REPLCONF GETACK *`, sent when a `WAIT` has to block). The model always does a full
//! sync (no partial resynchronisation from a backlog): a replica that reconnects loads
//! the master's whole dataset again, which is what Redis does when the backlog does not
//! cover the gap and loses nothing Redis would keep.

use std::collections::BTreeMap;

use super::keyspace::{Entry, Value};
use super::reply::Reply;
use super::resp;

/// A replica's `REPLCONF ACK` interval and the master's replication cron period
/// (`replicationCron`, once a second).
pub const REPL_CRON_MS: u64 = 1_000;
/// `repl-ping-replica-period`: the master PINGs its replicas this often (seconds).
pub const REPL_PING_PERIOD_S: u64 = 10;
/// `repl-timeout` (seconds): a link silent this long is dropped.
pub const REPL_TIMEOUT_S: u64 = 60;

/// The replica's link to its master, as `ROLE` names its states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Must connect (the cron dials within a second).
    Connect,
    /// Dialling / handshaking.
    Connecting,
    /// Receiving the master's dataset.
    Sync,
    /// Streaming.
    Connected,
}

impl LinkState {
    fn role_name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// Master or replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes and feeds its replicas.
    Master,
    /// Follows `host:port`.
    Replica {
        /// The master's host (a turmoil host name or an IP).
        host: String,
        /// The master's port.
        port: u16,
        /// The link.
        link: LinkState,
    },
}

/// A replica as its master knows it.
#[derive(Debug, Clone)]
pub struct ReplicaInfo {
    /// Its address as the master sees it (the connection's peer).
    pub ip: String,
    /// `REPLCONF listening-port`.
    pub port: u16,
    /// Its last acknowledged offset.
    pub ack_offset: u64,
    /// When it last acknowledged (master clock, ms).
    pub ack_ms: u64,
}

/// A client blocked in `WAIT`.
#[derive(Debug, Clone)]
pub struct Waiter {
    /// The client's session.
    pub session: u64,
    /// The offset its writes reached.
    pub offset: u64,
    /// Replicas wanted.
    pub numreplicas: u64,
    /// Server time at which it gives up (`None`: `WAIT … 0`, forever).
    pub deadline_us: Option<u64>,
}

/// Replication state of one server.
#[derive(Debug, Clone)]
pub struct Repl {
    /// Master or replica.
    pub role: Role,
    /// `master_replid`.
    pub replid: String,
    /// `master_replid2` (the previous master's id after a promotion).
    pub replid2: String,
    /// `second_repl_offset` (-1: none).
    pub second_offset: i64,
    /// `master_repl_offset`: bytes of stream fed (master) or processed (replica).
    pub offset: u64,
    /// The database the stream last selected (`None`: the next op selects).
    seldb: Option<usize>,
    /// Operations the running command propagates (Redis's `also_propagate`).
    pending: Vec<(usize, Vec<Vec<u8>>)>,
    /// Replicas by session id.
    pub replicas: BTreeMap<u64, ReplicaInfo>,
    /// Clients blocked in `WAIT`.
    pub waiters: Vec<Waiter>,
    /// `min-replicas-to-write` (0: off).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`, seconds.
    pub min_replicas_max_lag_s: u64,
    /// Replicas whose lag was within the bound at the last cron.
    pub good_replicas: u64,
    /// A `WAIT` blocked: ask the replicas for an ACK.
    pub get_ack: bool,
    /// Bumped by every `REPLICAOF`: a link of an older generation is stale.
    pub generation: u64,
    /// `replica-priority`.
    pub priority: u64,
    /// When the replica's link went down (server clock, us), for INFO.
    pub link_down_since_us: Option<u64>,
    /// When the replica last heard from its master (server clock, us).
    pub last_io_us: u64,
    /// Stream bytes fed since the last drain (the engine writes them to every replica).
    stream_out: Vec<u8>,
    /// `repl_backlog_first_byte_offset` once a backlog exists: Redis 7.0 creates the
    /// backlog when the first replica connects, and until then feeds nothing (the
    /// offset stays 0).
    pub backlog_start: Option<u64>,
}

impl Repl {
    /// A master with a fresh replication id.
    pub fn new(replid: String) -> Self {
        Self {
            role: Role::Master,
            replid,
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            seldb: None,
            pending: Vec::new(),
            replicas: BTreeMap::new(),
            waiters: Vec::new(),
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: 10,
            good_replicas: 0,
            get_ack: false,
            generation: 0,
            priority: 100,
            link_down_since_us: None,
            last_io_us: 0,
            stream_out: Vec::new(),
            backlog_start: None,
        }
    }

    /// Whether this server follows a master.
    pub fn is_replica(&self) -> bool {
        matches!(self.role, Role::Replica { .. })
    }

    /// Queues one operation of the running command (`alsoPropagate`).
    pub fn propagate(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        if self.is_replica() {
            // A read-only replica propagates nothing of its own.
            return;
        }
        self.pending.push((db, argv));
    }

    /// The command (or script, or transaction) ended: its operations go out, wrapped in
    /// `MULTI`/`EXEC` if more than one (`propagatePendingCommands`). Returns whether the
    /// offset moved.
    pub fn flush(&mut self) -> bool {
        let ops = std::mem::take(&mut self.pending);
        if ops.is_empty() {
            return false;
        }
        let wrap = ops.len() > 1;
        if wrap {
            self.feed(ops[0].0, &[b"MULTI".to_vec()]);
        }
        let last_db = ops[ops.len() - 1].0;
        for (db, argv) in &ops {
            self.feed(*db, argv);
        }
        if wrap {
            self.feed(last_db, &[b"EXEC".to_vec()]);
        }
        true
    }

    /// Appends one command to the stream (`replicationFeedSlaves`), with a `SELECT`
    /// first if the stream's database differs. With no replicas Redis 7.0 still counts
    /// the offset only once a backlog exists, i.e. once a replica ever connected.
    pub fn feed(&mut self, db: usize, argv: &[Vec<u8>]) {
        if self.backlog_start.is_none() && self.replicas.is_empty() {
            return;
        }
        if self.seldb != Some(db) {
            let select = resp::encode_request(&[b"SELECT".to_vec(), db.to_string().into_bytes()]);
            self.append(&select);
            self.seldb = Some(db);
        }
        let bytes = resp::encode_request(argv);
        self.append(&bytes);
    }

    /// Appends a command that selects no database (`PING`, `REPLCONF GETACK`).
    pub fn feed_raw(&mut self, argv: &[&[u8]]) {
        let bytes = resp::encode_request(argv);
        self.append(&bytes);
    }

    fn append(&mut self, bytes: &[u8]) {
        if self.backlog_start.is_none() && self.replicas.is_empty() {
            return;
        }
        self.offset += bytes.len() as u64;
        self.stream_out.extend_from_slice(bytes);
    }

    /// Stream bytes fed since the last call (to write to every replica).
    pub fn take_stream(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.stream_out)
    }

    /// A replica finished its sync: the next operation must select its database again.
    pub fn reset_seldb(&mut self) {
        self.seldb = None;
    }

    /// How many replicas acknowledged at least `offset` (`replicationCountAcksByOffset`).
    pub fn acks_for(&self, offset: u64) -> u64 {
        self.replicas
            .values()
            .filter(|r| r.ack_offset >= offset)
            .count() as u64
    }

    /// `refreshGoodSlavesCount`, run by the cron at master time `now_ms`.
    pub fn refresh_good_replicas(&mut self, now_ms: u64) {
        let max_lag = self.min_replicas_max_lag_s;
        self.good_replicas = self
            .replicas
            .values()
            .filter(|r| now_ms / 1000 - (r.ack_ms / 1000).min(now_ms / 1000) <= max_lag)
            .count() as u64;
    }

    /// Whether writes are refused for too few good replicas (`checkGoodReplicasStatus`).
    pub fn too_few_good_replicas(&self) -> bool {
        !self.is_replica()
            && self.min_replicas_to_write > 0
            && self.min_replicas_max_lag_s > 0
            && self.good_replicas < self.min_replicas_to_write
    }

    /// `ROLE`'s reply at master time `now_ms`.
    pub fn role_reply(&self) -> Reply {
        match &self.role {
            Role::Master => Reply::Array(vec![
                Reply::bulk("master"),
                Reply::Integer(self.offset as i64),
                Reply::Array(
                    self.replicas
                        .values()
                        .map(|r| {
                            Reply::Array(vec![
                                Reply::bulk(&r.ip),
                                Reply::bulk(r.port.to_string()),
                                Reply::bulk(r.ack_offset.to_string()),
                            ])
                        })
                        .collect(),
                ),
            ]),
            Role::Replica { host, port, link } => Reply::Array(vec![
                Reply::bulk("slave"),
                Reply::bulk(host),
                Reply::Integer(i64::from(*port)),
                Reply::bulk(link.role_name()),
                Reply::Integer(if *link == LinkState::Connected {
                    self.offset as i64
                } else {
                    -1
                }),
            ]),
        }
    }

    /// `INFO replication`'s lines at server time `now_us`.
    pub fn info_lines(&self, now_us: u64) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.role {
            Role::Master => {
                lines.push("role:master".to_string());
                lines.push(format!("connected_slaves:{}", self.replicas.len()));
                if self.min_replicas_to_write > 0 && self.min_replicas_max_lag_s > 0 {
                    lines.push(format!("min_slaves_good_slaves:{}", self.good_replicas));
                }
                let now_s = now_us / 1_000_000;
                for (i, r) in self.replicas.values().enumerate() {
                    lines.push(format!(
                        "slave{i}:ip={},port={},state=online,offset={},lag={}",
                        r.ip,
                        r.port,
                        r.ack_offset,
                        now_s.saturating_sub(r.ack_ms / 1000)
                    ));
                }
            }
            Role::Replica { host, port, link } => {
                let up = *link == LinkState::Connected;
                lines.push("role:slave".to_string());
                lines.push(format!("master_host:{host}"));
                lines.push(format!("master_port:{port}"));
                lines.push(format!(
                    "master_link_status:{}",
                    if up { "up" } else { "down" }
                ));
                lines.push(format!(
                    "master_last_io_seconds_ago:{}",
                    if up {
                        (now_us.saturating_sub(self.last_io_us) / 1_000_000) as i64
                    } else {
                        -1
                    }
                ));
                lines.push(format!(
                    "master_sync_in_progress:{}",
                    i64::from(*link == LinkState::Sync)
                ));
                lines.push(format!("slave_read_repl_offset:{}", self.offset));
                lines.push(format!("slave_repl_offset:{}", self.offset));
                if !up {
                    let since = self.link_down_since_us.unwrap_or(now_us);
                    lines.push(format!(
                        "master_link_down_since_seconds:{}",
                        now_us.saturating_sub(since) / 1_000_000
                    ));
                }
                lines.push(format!("slave_priority:{}", self.priority));
                lines.push("slave_read_only:1".to_string());
                lines.push("replica_announced:1".to_string());
                lines.push(format!("connected_slaves:{}", self.replicas.len()));
            }
        }
        lines.push("master_failover_state:no-failover".to_string());
        lines.push(format!("master_replid:{}", self.replid));
        lines.push(format!("master_replid2:{}", self.replid2));
        lines.push(format!("master_repl_offset:{}", self.offset));
        lines.push(format!("second_repl_offset:{}", self.second_offset));
        let first = self.backlog_start.unwrap_or(0);
        lines.push(format!(
            "repl_backlog_active:{}",
            u8::from(self.backlog_start.is_some())
        ));
        lines.push("repl_backlog_size:1048576".to_string());
        lines.push(format!("repl_backlog_first_byte_offset:{first}"));
        lines.push(format!(
            "repl_backlog_histlen:{}",
            if first == 0 {
                0
            } else {
                (self.offset + 1 - first).min(1_048_576)
            }
        ));
        lines
    }
}

/// The dataset a master sends in a full sync. Not Redis's RDB format: only a model
/// replica reads it (a real replica cannot follow a model master).
pub fn encode_snapshot(entries: &[(usize, Vec<u8>, Entry)]) -> Vec<u8> {
    let mut out = b"LOCKSIM-SNAPSHOT-1\n".to_vec();
    let put = |out: &mut Vec<u8>, bytes: &[u8]| {
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    for (db, key, entry) in entries {
        out.push(*db as u8);
        put(&mut out, key);
        out.extend_from_slice(&entry.expire_at_ms.unwrap_or(-1).to_le_bytes());
        match &entry.value {
            Value::Str(s) => {
                out.push(b's');
                put(&mut out, s);
            }
            Value::Hash(h) => {
                out.push(b'h');
                out.extend_from_slice(&(h.len() as u32).to_le_bytes());
                for (f, v) in h {
                    put(&mut out, f);
                    put(&mut out, v);
                }
            }
        }
    }
    out
}

/// Reads what [`encode_snapshot`] wrote; `None` if it is not such a snapshot.
pub fn decode_snapshot(bytes: &[u8]) -> Option<Vec<(usize, Vec<u8>, Entry)>> {
    let mut rest = bytes.strip_prefix(b"LOCKSIM-SNAPSHOT-1\n".as_slice())?;
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if rest.len() < n {
            return None;
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Some(head)
    }
    fn u32_at(rest: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize)
    }
    fn bytes_at(rest: &mut &[u8]) -> Option<Vec<u8>> {
        let n = u32_at(rest)?;
        Some(take(rest, n)?.to_vec())
    }
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let db = take(&mut rest, 1)?[0] as usize;
        let key = bytes_at(&mut rest)?;
        let expire = i64::from_le_bytes(take(&mut rest, 8)?.try_into().ok()?);
        let value = match take(&mut rest, 1)?[0] {
            b's' => Value::Str(bytes_at(&mut rest)?),
            b'h' => {
                let n = u32_at(&mut rest)?;
                let mut h = indexmap::IndexMap::new();
                for _ in 0..n {
                    let f = bytes_at(&mut rest)?;
                    let v = bytes_at(&mut rest)?;
                    h.insert(f, v);
                }
                Value::Hash(h)
            }
            _ => return None,
        };
        entries.push((
            db,
            key,
            Entry {
                value,
                expire_at_ms: (expire >= 0).then_some(expire),
            },
        ));
    }
    Some(entries)
}
