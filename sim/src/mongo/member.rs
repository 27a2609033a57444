//! One replica-set member as a state machine without I/O: it answers commands (the
//! clients' and its peers'), and the driver asks it what to send its peers and tells
//! it what they answered. Time is given (`now`, since the member started), never read.
//!
//! Layout: this file holds the member's state, its oplog and commit-point bookkeeping;
//! `peers` its timers, elections, heartbeats, oplog fetching and rollback; `commands`
//! the dispatch, `hello`, the replication commands and write concern; `crud` the
//! clients' reads and writes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lock_impl::mongo::{Document, Value};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::query::{self, QueryError};

/// An optime: `(term, ts)`, ordered by term, then timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct OpTime {
    /// The term the entry was written in.
    pub t: i64,
    /// Its position in the oplog (1-based): the timestamp's increment.
    pub ts: u64,
}

impl OpTime {
    /// `{ts: Timestamp(1, n), t: term}`.
    pub fn to_doc(self) -> Document {
        Document::new()
            .with(
                "ts",
                Value::Timestamp {
                    t: 1,
                    i: self.ts as u32,
                },
            )
            .with("t", self.t)
    }

    /// Reads `{ts, t}`.
    pub fn from_doc(doc: &Document) -> Option<OpTime> {
        let ts = match doc.get("ts")? {
            Value::Timestamp { i, .. } => u64::from(*i),
            _ => return None,
        };
        Some(OpTime {
            ts,
            t: doc.get_i64("t")?,
        })
    }
}

impl std::fmt::Display for OpTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{ ts: Timestamp(1, {}), t: {} }}", self.ts, self.t)
    }
}

/// What an oplog entry does.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `n`: a no-op (a new primary's "new primary" entry).
    Noop(String),
    /// `i`: insert the document into `ns`.
    Insert {
        /// `db.collection`.
        ns: String,
        /// The document.
        doc: Document,
    },
    /// `u`: the document with this `_id` becomes `doc` (a whole post-image).
    Update {
        /// `db.collection`.
        ns: String,
        /// Its new content.
        doc: Document,
    },
    /// `d`: delete the document with this `_id`.
    Delete {
        /// `db.collection`.
        ns: String,
        /// The `_id`.
        id: Value,
    },
}

/// One oplog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its optime.
    pub optime: OpTime,
    /// What it does.
    pub op: Op,
}

impl Entry {
    /// As a document of `local.oplog.rs`.
    pub fn to_doc(&self) -> Document {
        let base = self.optime.to_doc().with("v", 2i64);
        match &self.op {
            Op::Noop(msg) => base
                .with("op", "n")
                .with("ns", "")
                .with("o", Document::new().with("msg", msg.as_str())),
            Op::Insert { ns, doc } => base
                .with("op", "i")
                .with("ns", ns.as_str())
                .with("o", doc.clone()),
            Op::Update { ns, doc } => base
                .with("op", "u")
                .with("ns", ns.as_str())
                .with(
                    "o2",
                    Document::new().with("_id", doc.get("_id").cloned().unwrap_or(Value::Null)),
                )
                .with("o", doc.clone()),
            Op::Delete { ns, id } => base
                .with("op", "d")
                .with("ns", ns.as_str())
                .with("o", Document::new().with("_id", id.clone())),
        }
    }

    /// Reads an oplog document.
    pub fn from_doc(doc: &Document) -> Option<Entry> {
        let optime = OpTime::from_doc(doc)?;
        let ns = doc.get_str("ns").unwrap_or("").to_string();
        let o = doc.get_document("o")?.clone();
        let op = match doc.get_str("op")? {
            "n" => Op::Noop(o.get_str("msg").unwrap_or("").to_string()),
            "i" => Op::Insert { ns, doc: o },
            "u" => Op::Update { ns, doc: o },
            "d" => Op::Delete {
                ns,
                id: o.get("_id")?.clone(),
            },
            _ => return None,
        };
        Some(Entry { optime, op })
    }
}

/// What a member keeps across a crash (see the module doc: durable at once).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Durable {
    /// The current term.
    pub term: i64,
    /// The last vote cast: (term, candidate index).
    pub last_vote: Option<(i64, usize)>,
    /// The oplog.
    pub oplog: Vec<Entry>,
}

/// A member's configuration (the replica set's, and which member it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MongoConfig {
    /// `replSetName`.
    pub set_name: String,
    /// Every member's `host:port`, in configuration order (`_id` 0, 1, …).
    pub members: Vec<String>,
    /// This member's index.
    pub me: usize,
    /// `heartbeatIntervalMillis` (2 000 in MongoDB).
    pub heartbeat_ms: u64,
    /// `electionTimeoutMillis` (10 000 in MongoDB).
    pub election_timeout_ms: u64,
    /// Seed of the election timeout offsets and generated ObjectIds.
    pub seed: u64,
}

/// A member's state in the replica set (`replSetGetStatus`'s `stateStr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Taking writes.
    Primary,
    /// Following a primary (or looking for one).
    Secondary,
    /// Asking for votes in its current term.
    Candidate,
}

impl Role {
    /// `stateStr`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Primary => "PRIMARY",
            Role::Secondary | Role::Candidate => "SECONDARY",
        }
    }

    /// `state` (1 primary, 2 secondary).
    pub fn code(self) -> i32 {
        match self {
            Role::Primary => 1,
            Role::Secondary | Role::Candidate => 2,
        }
    }
}

/// Why a document changed on this member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A client's command on this member (the primary), from this host.
    Client(String),
    /// An oplog entry pulled from the sync source.
    Replicated,
    /// A rollback undid it.
    RolledBack,
}

/// What the member's record says happened, for the world to move into the history.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberEvent {
    /// It became primary or stopped being one.
    Role {
        /// `PRIMARY` or `SECONDARY`.
        role: &'static str,
        /// Its term then.
        term: i64,
        /// Why.
        why: String,
    },
    /// A document of `ns` changed.
    Changed {
        /// `db.collection`.
        ns: String,
        /// Its `_id`.
        id: Value,
        /// Before (`None`: it did not exist).
        before: Option<Document>,
        /// After (`None`: it is gone).
        after: Option<Document>,
        /// The entry that did it (for a rollback: the common point).
        optime: OpTime,
        /// Why.
        origin: Origin,
    },
    /// A rollback: entries after `common` were undone.
    Rollback {
        /// The last entry the member shares with its sync source.
        common: OpTime,
        /// How many entries were undone.
        undone: usize,
        /// The last undone entry.
        last_undone: OpTime,
        /// The sync source.
        source: String,
    },
}

/// How the driver must finish a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Send this reply.
    Reply(Document),
    /// A write waiting for its write concern: send `reply` once [`Member::concern_met`]
    /// says so, with a `writeConcernError` if it fails first.
    WaitConcern(Waiter),
    /// An oplog read with `awaitData`: run it again when the oplog grows past `after`,
    /// or after `max_ms`.
    WaitOplog {
        /// The command, to run again.
        body: Document,
        /// The last optime the reader has.
        after: OpTime,
        /// How long it may wait, ms.
        max_ms: u64,
    },
}

/// A write waiting for its write concern.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiter {
    /// The reply to send once it is met.
    pub reply: Document,
    /// The write's optime.
    pub optime: OpTime,
    /// How many members must have it (`majority`: a majority).
    pub members: usize,
    /// `wtimeout`, ms (`None`: wait as long as it takes).
    pub wtimeout_ms: Option<u64>,
    /// The `writeConcern` as given (echoed in errors).
    pub concern: Document,
    /// The term it was written in.
    pub term: i64,
}

/// Where a waiting write stands.
#[derive(Debug, Clone, PartialEq)]
pub enum ConcernState {
    /// Not yet.
    Waiting,
    /// Met: send the reply.
    Met,
    /// The member stepped down meanwhile: send the reply with this
    /// `writeConcernError`.
    Failed(Document),
}

/// The oplog fetcher's verdict on a batch from its sync source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Applied this many entries.
    Applied(usize),
    /// The source's oplog diverges from ours: roll back, asking for its entries from
    /// this optime's timestamp on.
    Diverged {
        /// Ask the source for its entries from here.
        from_ts: u64,
    },
}

/// One member.
///
/// The rules, from MongoDB 7.0's replication (protocol version 1) as its documentation
/// and source (`topology_coordinator.cpp`, `replication_coordinator_impl.cpp`) state
/// them:
/// - **Writes** go to the primary only (others answer `NotWritablePrimary`, 10107,
///   "not primary"). Each write appends an oplog entry stamped with the optime
///   `(term, ts)`; optimes order by term, then timestamp.
/// - **Replication**: a secondary pulls the oplog from the primary (a `find` on
///   `local.oplog.rs` with `ts >= <its last>`, answered as a long poll) and reports
///   how far it applied (`replSetUpdatePosition`); heartbeats carry the same.
/// - **Commit point**: the highest optime of the primary's current term that a
///   majority of members have applied; `w: "majority"` is acknowledged once the
///   commit point passes the write, with a `writeConcernError` on `wtimeout`
///   (`WriteConcernFailed`, 64, "waiting for replication timed out") or when the
///   primary steps down meanwhile (`PrimarySteppedDown`, 189).
/// - **Elections**: a secondary that has heard from no primary for the election
///   timeout (plus a random offset up to 15 % of it, as `electionTimeoutOffsetLimitFraction`)
///   stands: term + 1, votes for itself, sends `replSetRequestVotes`. A voter refuses
///   a lower term ("candidate's term is lower than mine"), a candidate whose last
///   applied optime is behind its own ("candidate's data is staler than mine"), and a
///   second candidate in a term it voted in ("already voted for another candidate
///   …"); a majority of votes makes a primary, which writes a no-op ("new primary")
///   in its term. Any message with a higher term makes a member adopt it, and a
///   primary step down. A primary that has heard from no majority within the election
///   timeout steps down too.
/// - **Rollback**: a member whose oplog has entries its sync source never had
///   (detected when the source's entry at its last timestamp differs, or is missing)
///   truncates its oplog back to the last entry both share and rebuilds its data to
///   that point ("recover to a timestamp"): the writes after it are gone.
///
/// Simplifications (each one a thing real MongoDB does that this model does not):
/// - everything a member writes is durable at once (journal committed per write): a
///   crash loses nothing a member acknowledged, which is the case `j: true` or
///   `writeConcernMajorityJournalDefault` gives; the volatile state (role, commit
///   point, what it knows of its peers) is lost;
/// - one collection namespace per database is as good as any: documents live per
///   namespace in `_id` order; only the `_id` index exists; no sorts, projections,
///   collations, cursors beyond the first batch, transactions, sessions, retryable
///   writes, `$clusterTime` or `operationTime`;
/// - oplog entries carry whole post-images (`op: "u"` with `o` the full document)
///   rather than update diffs, and their `ts` is `Timestamp(1, n)` for the n-th
///   entry: the model has no wall clock;
/// - no dry-run election, no catch-up phase, no priority takeover (every member has
///   priority 1 and one vote), no chaining (secondaries sync from the primary only),
///   no arbiters, a fixed configuration (version 1) that cannot be reconfigured;
/// - rollback restores data by replaying the oplog to the common point, which is
///   what recover-to-timestamp achieves, without a stable-timestamp checkpoint and
///   without rollback files.
#[derive(Debug)]
pub struct Member {
    config: MongoConfig,
    durable: Durable,
    /// Documents by namespace and encoded `_id`.
    data: BTreeMap<String, BTreeMap<Vec<u8>, Document>>,
    role: Role,
    /// The primary it last heard from, and when.
    primary: Option<usize>,
    primary_contact: Duration,
    /// The election timeout offset for the current wait.
    offset_ms: u64,
    /// What it knows of each member: last applied optime, and when it heard from it.
    applied: Vec<OpTime>,
    heard: Vec<Option<Duration>>,
    commit: OpTime,
    votes: BTreeSet<usize>,
    rng: ChaCha8Rng,
    object_ids: u32,
    events: Vec<MemberEvent>,
}

/// The key a document is stored under: its `_id`'s BSON bytes.
fn id_key(id: &Value) -> Vec<u8> {
    Document::new().with("_id", id.clone()).to_bytes()
}

fn error_reply(code: i32, code_name: &str, errmsg: impl Into<String>) -> Document {
    Document::new()
        .with("ok", 0.0)
        .with("errmsg", errmsg.into())
        .with("code", code)
        .with("codeName", code_name)
}

fn query_error(e: QueryError) -> Document {
    error_reply(e.code, e.code_name, e.errmsg)
}

fn not_primary() -> Document {
    error_reply(10107, "NotWritablePrimary", "not primary")
}

impl Member {
    /// A member starting from `durable` (empty for a new one): a secondary, looking
    /// for a primary, with its data rebuilt from its oplog.
    pub fn new(config: MongoConfig, durable: Durable, now: Duration) -> Member {
        let n = config.members.len();
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ ((config.me as u64 + 1) * 0x9e37));
        let offset_ms = rng.random_range(0..=config.election_timeout_ms * 15 / 100);
        let mut m = Member {
            applied: vec![OpTime::default(); n],
            heard: vec![None; n],
            config,
            durable,
            data: BTreeMap::new(),
            role: Role::Secondary,
            primary: None,
            primary_contact: now,
            offset_ms,
            commit: OpTime::default(),
            votes: BTreeSet::new(),
            rng,
            object_ids: 0,
            events: Vec::new(),
        };
        m.data = m.replay(m.durable.oplog.len());
        let me = m.config.me;
        m.applied[me] = m.last_applied();
        m.events.push(MemberEvent::Role {
            role: "SECONDARY",
            term: m.durable.term,
            why: "starting up".into(),
        });
        m
    }

    /// Its configuration.
    pub fn config(&self) -> &MongoConfig {
        &self.config
    }

    /// What survives a crash.
    pub fn durable(&self) -> &Durable {
        &self.durable
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Its term.
    pub fn term(&self) -> i64 {
        self.durable.term
    }

    /// The primary it follows, if it knows one (itself, if primary).
    pub fn primary(&self) -> Option<usize> {
        if self.role == Role::Primary {
            Some(self.config.me)
        } else {
            self.primary
        }
    }

    /// The last entry's optime.
    pub fn last_applied(&self) -> OpTime {
        self.durable
            .oplog
            .last()
            .map(|e| e.optime)
            .unwrap_or_default()
    }

    /// The commit point it knows.
    pub fn commit_point(&self) -> OpTime {
        self.commit
    }

    /// Its documents of `ns`.
    pub fn documents(&self, ns: &str) -> Vec<&Document> {
        self.data
            .get(ns)
            .map(|c| c.values().collect())
            .unwrap_or_default()
    }

    /// The document of `ns` with this `_id`.
    pub fn document(&self, ns: &str, id: &Value) -> Option<&Document> {
        self.data.get(ns)?.get(&id_key(id))
    }

    /// The events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<MemberEvent> {
        std::mem::take(&mut self.events)
    }

    fn majority(&self) -> usize {
        self.config.members.len() / 2 + 1
    }

    fn me_addr(&self) -> &str {
        &self.config.members[self.config.me]
    }

    /// The data as the first `len` oplog entries leave it.
    fn replay(&self, len: usize) -> BTreeMap<String, BTreeMap<Vec<u8>, Document>> {
        let mut data: BTreeMap<String, BTreeMap<Vec<u8>, Document>> = BTreeMap::new();
        for e in &self.durable.oplog[..len] {
            match &e.op {
                Op::Noop(_) => {}
                Op::Insert { ns, doc } | Op::Update { ns, doc } => {
                    let id = doc.get("_id").cloned().unwrap_or(Value::Null);
                    data.entry(ns.clone())
                        .or_default()
                        .insert(id_key(&id), doc.clone());
                }
                Op::Delete { ns, id } => {
                    data.entry(ns.clone()).or_default().remove(&id_key(id));
                }
            }
        }
        data
    }

    /// Applies `op` to the data, appends it to the oplog, records the change.
    fn append(&mut self, op: Op, origin: Origin, optime: OpTime) {
        let change = match &op {
            Op::Noop(_) => None,
            Op::Insert { ns, doc } | Op::Update { ns, doc } => {
                let id = doc.get("_id").cloned().unwrap_or(Value::Null);
                let before = self
                    .data
                    .entry(ns.clone())
                    .or_default()
                    .insert(id_key(&id), doc.clone());
                Some((ns.clone(), id, before, Some(doc.clone())))
            }
            Op::Delete { ns, id } => {
                let before = self.data.entry(ns.clone()).or_default().remove(&id_key(id));
                Some((ns.clone(), id.clone(), before, None))
            }
        };
        self.durable.oplog.push(Entry { optime, op });
        let me = self.config.me;
        self.applied[me] = optime;
        if let Some((ns, id, before, after)) = change {
            self.events.push(MemberEvent::Changed {
                ns,
                id,
                before,
                after,
                optime,
                origin,
            });
        }
    }

    fn next_optime(&self) -> OpTime {
        OpTime {
            t: self.durable.term,
            ts: self.last_applied().ts + 1,
        }
    }

    /// Adopts a higher term seen in any message: a primary or candidate steps down.
    fn see_term(&mut self, term: i64, why: &str) {
        if term > self.durable.term {
            self.durable.term = term;
            self.votes.clear();
            if self.role != Role::Secondary {
                let was_primary = self.role == Role::Primary;
                self.role = Role::Secondary;
                if was_primary {
                    self.events.push(MemberEvent::Role {
                        role: "SECONDARY",
                        term,
                        why: format!("stepping down: {why}"),
                    });
                }
            }
            self.primary = None;
        }
    }

    fn step_down(&mut self, why: &str) {
        if self.role == Role::Primary {
            self.role = Role::Secondary;
            self.primary = None;
            self.events.push(MemberEvent::Role {
                role: "SECONDARY",
                term: self.durable.term,
                why: why.to_string(),
            });
        }
    }

    /// Moves the commit point (on the primary) to the highest optime of its term a
    /// majority has applied.
    fn advance_commit(&mut self) {
        if self.role != Role::Primary {
            return;
        }
        let mut applied = self.applied.clone();
        applied.sort_unstable_by(|a, b| b.cmp(a));
        let candidate = applied[self.majority() - 1];
        if candidate.t == self.durable.term && candidate > self.commit {
            self.commit = candidate;
        }
    }

    fn learn_commit(&mut self, commit: OpTime) {
        // A secondary's commit point is the primary's, as far as its own oplog agrees.
        let mine = self.last_applied();
        let c = commit.min(mine);
        if c > self.commit
            && self
                .durable
                .oplog
                .get(c.ts.saturating_sub(1) as usize)
                .is_some_and(|e| e.optime == c)
        {
            self.commit = c;
        }
    }
}

mod commands;
mod crud;
mod peers;
