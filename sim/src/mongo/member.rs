//! One replica-set member as a state machine without I/O: it answers commands (the
//! clients' and its peers'), and the driver asks it what to send its peers and tells
//! it what they answered. Time is given (`now`, since the member started), never read.
//!
//! The rules, from MongoDB 7.0's replication (protocol version 1) as its documentation
//! and source (`topology_coordinator.cpp`, `replication_coordinator_impl.cpp`) state
//! them:
//! - **Writes** go to the primary only (others answer `NotWritablePrimary`, 10107,
//!   "not primary"). Each write appends an oplog entry stamped with the optime
//!   `(term, ts)`; optimes order by term, then timestamp.
//! - **Replication**: a secondary pulls the oplog from the primary (a `find` on
//!   `local.oplog.rs` with `ts >= <its last>`, answered as a long poll) and reports
//!   how far it applied (`replSetUpdatePosition`); heartbeats carry the same.
//! - **Commit point**: the highest optime of the primary's current term that a
//!   majority of members have applied; `w: "majority"` is acknowledged once the
//!   commit point passes the write, with a `writeConcernError` on `wtimeout`
//!   (`WriteConcernFailed`, 64, "waiting for replication timed out") or when the
//!   primary steps down meanwhile (`PrimarySteppedDown`, 189).
//! - **Elections**: a secondary that has heard from no primary for the election
//!   timeout (plus a random offset up to 15 % of it, as `electionTimeoutOffsetLimitFraction`)
//!   stands: term + 1, votes for itself, sends `replSetRequestVotes`. A voter refuses
//!   a lower term ("candidate's term is lower than mine"), a candidate whose last
//!   applied optime is behind its own ("candidate's data is staler than mine"), and a
//!   second candidate in a term it voted in ("already voted for another candidate
//!   …"); a majority of votes makes a primary, which writes a no-op ("new primary")
//!   in its term. Any message with a higher term makes a member adopt it, and a
//!   primary step down. A primary that has heard from no majority within the election
//!   timeout steps down too.
//! - **Rollback**: a member whose oplog has entries its sync source never had
//!   (detected when the source's entry at its last timestamp differs, or is missing)
//!   truncates its oplog back to the last entry both share and rebuilds its data to
//!   that point ("recover to a timestamp"): the writes after it are gone.
//!
//! Simplifications (each one a thing real MongoDB does that this model does not):
//! - everything a member writes is durable at once (journal committed per write): a
//!   crash loses nothing a member acknowledged, which is the case `j: true` or
//!   `writeConcernMajorityJournalDefault` gives; the volatile state (role, commit
//!   point, what it knows of its peers) is lost;
//! - one collection namespace per database is as good as any: documents live per
//!   namespace in `_id` order; only the `_id` index exists; no sorts, projections,
//!   collations, cursors beyond the first batch, transactions, sessions, retryable
//!   writes, `$clusterTime` or `operationTime`;
//! - oplog entries carry whole post-images (`op: "u"` with `o` the full document)
//!   rather than update diffs, and their `ts` is `Timestamp(1, n)` for the n-th
//!   entry: the model has no wall clock;
//! - no dry-run election, no catch-up phase, no priority takeover (every member has
//!   priority 1 and one vote), no chaining (secondaries sync from the primary only),
//!   no arbiters, a fixed configuration (version 1) that cannot be reconfigured;
//! - rollback restores data by replaying the oplog to the common point, which is
//!   what recover-to-timestamp achieves, without a stable-timestamp checkpoint and
//!   without rollback files.

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

    // ----- timers -----

    /// Whether it should stand for election now.
    pub fn election_due(&self, now: Duration) -> bool {
        self.role != Role::Primary
            && now
                >= self.primary_contact
                    + Duration::from_millis(self.config.election_timeout_ms + self.offset_ms)
    }

    /// When it will stand for election if it hears from no primary (`None`: it is
    /// primary).
    pub fn election_deadline(&self) -> Option<Duration> {
        (self.role != Role::Primary).then(|| {
            self.primary_contact
                + Duration::from_millis(self.config.election_timeout_ms + self.offset_ms)
        })
    }

    /// Makes a new set's oplog and, for member `primary`, its role as a replica set
    /// whose `rs.initiate()` already ran when the run starts: every member has the
    /// "initiating set" entry of term 1, and `primary` is primary in term 1 (a running
    /// deployment has a primary; the run does not wait for the first election). A
    /// no-op on a member that has an oplog.
    pub fn initiate(&mut self, primary: usize, now: Duration) {
        if !self.durable.oplog.is_empty() {
            return;
        }
        self.durable.term = 1;
        self.durable.last_vote = Some((1, primary));
        self.durable.oplog.push(Entry {
            optime: OpTime { t: 1, ts: 1 },
            op: Op::Noop("initiating set".into()),
        });
        let me = self.config.me;
        self.applied[me] = OpTime { t: 1, ts: 1 };
        self.primary_contact = now;
        if me == primary {
            self.role = Role::Primary;
            self.primary = Some(me);
            for h in self.heard.iter_mut() {
                *h = Some(now);
            }
            self.events.push(MemberEvent::Role {
                role: "PRIMARY",
                term: 1,
                why: "the set was initiated with it as primary".into(),
            });
        } else {
            self.primary = Some(primary);
        }
    }

    /// Stands for election: its vote request to send every other member.
    pub fn start_election(&mut self, now: Duration) -> Document {
        self.durable.term += 1;
        self.durable.last_vote = Some((self.durable.term, self.config.me));
        self.role = Role::Candidate;
        self.primary = None;
        self.votes = BTreeSet::from([self.config.me]);
        self.primary_contact = now;
        self.offset_ms = self
            .rng
            .random_range(0..=self.config.election_timeout_ms * 15 / 100);
        let last = self.last_applied();
        let req = Document::new()
            .with("replSetRequestVotes", 1)
            .with("setName", self.config.set_name.as_str())
            .with("dryRun", false)
            .with("term", self.durable.term)
            .with("candidateIndex", self.config.me as i32)
            .with("configVersion", 1)
            .with("lastAppliedOpTime", last.to_doc());
        if self.votes.len() >= self.majority() {
            self.win(now);
        }
        req
    }

    fn win(&mut self, now: Duration) {
        self.role = Role::Primary;
        self.primary = Some(self.config.me);
        self.primary_contact = now;
        for h in self.heard.iter_mut() {
            *h = Some(now);
        }
        let term = self.durable.term;
        self.events.push(MemberEvent::Role {
            role: "PRIMARY",
            term,
            why: format!(
                "election succeeded with {} of {} votes",
                self.votes.len(),
                self.config.members.len()
            ),
        });
        let optime = self.next_optime();
        self.append(Op::Noop("new primary".into()), Origin::Replicated, optime);
        self.advance_commit();
    }

    /// A vote reply from member `from`.
    pub fn on_vote_reply(&mut self, from: usize, reply: &Document, term: i64, now: Duration) {
        if let Some(t) = reply.get_i64("term") {
            self.see_term(t, "a vote reply with a higher term");
        }
        if self.role == Role::Candidate
            && self.durable.term == term
            && reply.get("voteGranted").is_some_and(Value::truthy)
        {
            self.votes.insert(from);
            if self.votes.len() >= self.majority() {
                self.win(now);
            }
        }
    }

    /// Whether a primary has lost touch with a majority for the election timeout:
    /// then it steps down.
    pub fn check_liveness(&mut self, now: Duration) {
        if self.role != Role::Primary {
            return;
        }
        let limit = Duration::from_millis(self.config.election_timeout_ms);
        let me = self.config.me;
        let seen = (0..self.config.members.len())
            .filter(|&i| i == me || self.heard[i].is_some_and(|t| now < t + limit))
            .count();
        if seen < self.majority() {
            self.step_down("can't see a majority of the set, relinquishing primary");
        }
    }

    /// A heartbeat to send a peer.
    pub fn heartbeat_request(&self) -> Document {
        Document::new()
            .with("replSetHeartbeat", self.config.set_name.as_str())
            .with("configVersion", 1)
            .with("from", self.me_addr())
            .with("fromId", self.config.me as i32)
            .with("term", self.durable.term)
    }

    /// A peer's heartbeat reply.
    pub fn on_heartbeat_reply(&mut self, from: usize, reply: &Document, now: Duration) {
        if reply.get("ok").is_none_or(|v| !v.truthy()) {
            return;
        }
        let term = reply.get_i64("term").unwrap_or(0);
        self.see_term(term, "a heartbeat reply with a higher term");
        self.heard[from] = Some(now);
        if let Some(op) = reply.get_document("opTime").and_then(OpTime::from_doc)
            && op > self.applied[from]
        {
            self.applied[from] = op;
            self.advance_commit();
        }
        if reply.get_i64("state") == Some(1) && term == self.durable.term {
            if self.role == Role::Candidate {
                self.role = Role::Secondary;
            }
            if self.role != Role::Primary {
                self.primary = Some(from);
                self.primary_contact = now;
            }
        }
        if let Some(c) = reply
            .get_document("$replData")
            .and_then(|r| r.get_document("lastOpCommitted"))
            .and_then(OpTime::from_doc)
            && term == self.durable.term
            && self.role != Role::Primary
        {
            self.learn_commit(c);
        }
    }

    /// The oplog read a secondary sends its sync source: entries from `from_ts` on.
    pub fn fetch_request(&self, from_ts: u64, await_ms: u64) -> Document {
        Document::new()
            .with("find", "oplog.rs")
            .with(
                "filter",
                Document::new().with(
                    "ts",
                    Document::new().with(
                        "$gte",
                        Value::Timestamp {
                            t: 1,
                            i: from_ts as u32,
                        },
                    ),
                ),
            )
            .with("tailable", true)
            .with("awaitData", true)
            .with("maxTimeMS", await_ms as i64)
            .with("term", self.durable.term)
    }

    /// Where the next fetch starts: the last entry's timestamp (so the source's first
    /// entry must be it).
    pub fn fetch_from(&self) -> u64 {
        self.last_applied().ts.max(1)
    }

    /// The sync source's answer to a fetch that started at `from_ts`.
    pub fn on_fetch_reply(
        &mut self,
        source: usize,
        from_ts: u64,
        reply: &Document,
        now: Duration,
    ) -> Fetched {
        let repl = reply.get_document("$replData");
        let term = repl.and_then(|r| r.get_i64("term")).unwrap_or(0);
        self.see_term(term, "an oplog batch with a higher term");
        if self.role == Role::Primary {
            return Fetched::Applied(0);
        }
        if term == self.durable.term {
            self.primary_contact = now;
        }
        let batch: Vec<Entry> = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_document().and_then(Entry::from_doc))
            .collect();
        let mine = self.last_applied();
        if mine.ts >= 1 {
            // Our last entry must be the source's first.
            let first_ok = batch.first().is_some_and(|e| {
                e.optime.ts == from_ts
                    && self.entry_at(from_ts).is_some_and(|m| m.optime == e.optime)
            });
            if from_ts == mine.ts && !first_ok {
                let floor = self.commit.ts.max(1);
                return Fetched::Diverged { from_ts: floor };
            }
        }
        let mut applied = 0;
        for e in batch {
            if e.optime.ts <= self.last_applied().ts {
                continue;
            }
            if e.optime.ts != self.last_applied().ts + 1 {
                break;
            }
            self.append(e.op, Origin::Replicated, e.optime);
            applied += 1;
        }
        if let Some(c) = repl
            .and_then(|r| r.get_document("lastOpCommitted"))
            .and_then(OpTime::from_doc)
        {
            self.learn_commit(c);
        }
        let _ = source;
        Fetched::Applied(applied)
    }

    fn entry_at(&self, ts: u64) -> Option<&Entry> {
        self.durable.oplog.get(ts.checked_sub(1)? as usize)
    }

    /// Rolls back to the last entry shared with the source, whose entries from
    /// `from_ts` on are in `reply` (a fetch answered for [`Fetched::Diverged`]).
    pub fn rollback(&mut self, source: usize, reply: &Document) {
        let theirs: BTreeMap<u64, OpTime> = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_document().and_then(Entry::from_doc))
            .map(|e| (e.optime.ts, e.optime))
            .collect();
        let mut common = 0usize;
        for e in &self.durable.oplog {
            match theirs.get(&e.optime.ts) {
                Some(o) if *o == e.optime => common = e.optime.ts as usize,
                Some(_) => break,
                // Before the source's batch: shared (committed) history.
                None if theirs
                    .keys()
                    .next()
                    .is_some_and(|first| e.optime.ts < *first) =>
                {
                    common = e.optime.ts as usize
                }
                None => break,
            }
        }
        if common >= self.durable.oplog.len() {
            return;
        }
        let before = std::mem::take(&mut self.data);
        let last_undone = self.last_applied();
        let undone = self.durable.oplog.len() - common;
        self.durable.oplog.truncate(common);
        self.data = self.replay(common);
        let common_op = self.last_applied();
        let me = self.config.me;
        self.applied[me] = common_op;
        if self.commit > common_op {
            self.commit = common_op;
        }
        self.events.push(MemberEvent::Rollback {
            common: common_op,
            undone,
            last_undone,
            source: self.config.members[source].clone(),
        });
        // Every document the rollback changed.
        let namespaces: BTreeSet<String> = before.keys().chain(self.data.keys()).cloned().collect();
        for ns in namespaces {
            let empty = BTreeMap::new();
            let old = before.get(&ns).unwrap_or(&empty);
            let new = self.data.get(&ns).unwrap_or(&empty);
            let ids: BTreeSet<&Vec<u8>> = old.keys().chain(new.keys()).collect();
            for k in ids {
                let (b, a) = (old.get(k), new.get(k));
                if b != a {
                    let id = b
                        .or(a)
                        .and_then(|d| d.get("_id").cloned())
                        .unwrap_or(Value::Null);
                    self.events.push(MemberEvent::Changed {
                        ns: ns.clone(),
                        id,
                        before: b.cloned(),
                        after: a.cloned(),
                        optime: common_op,
                        origin: Origin::RolledBack,
                    });
                }
            }
        }
    }

    /// What to tell the sync source after applying (`replSetUpdatePosition`).
    pub fn update_position(&self) -> Document {
        let me = self.config.me;
        Document::new()
            .with("replSetUpdatePosition", 1)
            .with(
                "optimes",
                vec![Value::Document(
                    Document::new()
                        .with("memberId", me as i32)
                        .with("cfgver", 1)
                        .with("appliedOpTime", self.last_applied().to_doc())
                        .with("durableOpTime", self.last_applied().to_doc()),
                )],
            )
            .with("term", self.durable.term)
    }

    /// Where a write waiting for its concern stands.
    pub fn concern_met(&self, w: &Waiter) -> ConcernState {
        if self.role != Role::Primary || self.durable.term != w.term {
            return ConcernState::Failed(
                Document::new()
                    .with("code", 189)
                    .with("codeName", "PrimarySteppedDown")
                    .with(
                        "errmsg",
                        "Primary stepped down while waiting for replication",
                    )
                    .with(
                        "errInfo",
                        Document::new().with("writeConcern", w.concern.clone()),
                    ),
            );
        }
        // Is the write still in our oplog (a step-down and back cannot have lost it
        // without a term change, checked above)?
        let have = self.applied.iter().filter(|o| **o >= w.optime).count();
        let majority_ok = w.members == usize::MAX && self.commit >= w.optime;
        if majority_ok || (w.members != usize::MAX && have >= w.members) {
            ConcernState::Met
        } else {
            ConcernState::Waiting
        }
    }

    /// The `writeConcernError` of a write whose `wtimeout` passed.
    pub fn wtimeout_error(w: &Waiter) -> Document {
        Document::new()
            .with("code", 64)
            .with("codeName", "WriteConcernFailed")
            .with("errmsg", "waiting for replication timed out")
            .with(
                "errInfo",
                Document::new()
                    .with("wtimeout", true)
                    .with("writeConcern", w.concern.clone()),
            )
    }

    // ----- commands -----

    /// Runs one command from `host` (a client, or a peer member).
    pub fn command(&mut self, host: &str, body: &Document, now: Duration) -> Handled {
        let Some((name, arg)) = body.first() else {
            return Handled::Reply(error_reply(59, "CommandNotFound", "no such command: ''"));
        };
        let db = body.get_str("$db").unwrap_or("");
        if db.is_empty() {
            return Handled::Reply(error_reply(
                40571,
                "Location40571",
                "OP_MSG requests require a $db argument",
            ));
        }
        let arg = arg.clone();
        match name {
            "hello" | "isMaster" | "ismaster" => Handled::Reply(self.hello(name == "hello")),
            "ping" => Handled::Reply(Document::new().with("ok", 1.0)),
            "findAndModify" | "findandmodify" => self.find_and_modify(host, db, &arg, body),
            "insert" => self.insert(host, db, &arg, body),
            "delete" => self.delete(host, db, &arg, body),
            "find" => self.find(db, &arg, body),
            "replSetHeartbeat" => Handled::Reply(self.heartbeat(body, now)),
            "replSetRequestVotes" => Handled::Reply(self.request_votes(body, now)),
            "replSetUpdatePosition" => Handled::Reply(self.update_position_cmd(body)),
            other => Handled::Reply(error_reply(
                59,
                "CommandNotFound",
                format!("no such command: '{other}'"),
            )),
        }
    }

    fn hello(&self, modern: bool) -> Document {
        let primary = self.role == Role::Primary;
        let mut d = Document::new();
        d.set(
            if modern {
                "isWritablePrimary"
            } else {
                "ismaster"
            },
            primary,
        );
        d.set("topologyVersion", Document::new().with("counter", 0i64));
        d.set(
            "hosts",
            self.config
                .members
                .iter()
                .map(|m| Value::from(m.as_str()))
                .collect::<Vec<_>>(),
        );
        d.set("setName", self.config.set_name.as_str());
        d.set("setVersion", 1);
        d.set("secondary", !primary);
        if let Some(p) = self.primary() {
            d.set("primary", self.config.members[p].as_str());
        }
        d.set("me", self.me_addr());
        d.set(
            "lastWrite",
            Document::new()
                .with("opTime", self.last_applied().to_doc())
                .with("majorityOpTime", self.commit.to_doc()),
        );
        d.set("maxBsonObjectSize", 16_777_216);
        d.set("maxMessageSizeBytes", 48_000_000);
        d.set("maxWriteBatchSize", 100_000);
        d.set("logicalSessionTimeoutMinutes", 30);
        d.set("minWireVersion", 0);
        d.set("maxWireVersion", 21);
        d.set("readOnly", false);
        d.set("ok", 1.0);
        d
    }

    fn heartbeat(&mut self, body: &Document, now: Duration) -> Document {
        if body.get_str("replSetHeartbeat") != Some(self.config.set_name.as_str()) {
            return error_reply(
                93,
                "InconsistentReplicaSetNames",
                format!(
                    "Our set name of {} does not match name {} reported by remote node",
                    self.config.set_name,
                    body.get("replSetHeartbeat")
                        .map(|v| v.to_string())
                        .unwrap_or_default()
                ),
            );
        }
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "a heartbeat with a higher term");
        }
        if let Some(from) = body.get_i64("fromId").map(|i| i as usize)
            && from < self.heard.len()
        {
            self.heard[from] = Some(now);
        }
        Document::new()
            .with("ok", 1.0)
            .with("set", self.config.set_name.as_str())
            .with("state", self.role.code())
            .with("term", self.durable.term)
            .with("configVersion", 1)
            .with("opTime", self.last_applied().to_doc())
            .with("durableOpTime", self.last_applied().to_doc())
            .with(
                "$replData",
                Document::new()
                    .with("term", self.durable.term)
                    .with("lastOpCommitted", self.commit.to_doc())
                    .with("primaryIndex", self.primary().map_or(-1, |p| p as i32)),
            )
    }

    fn request_votes(&mut self, body: &Document, now: Duration) -> Document {
        let term = body.get_i64("term").unwrap_or(0);
        let dry = body.get("dryRun").is_some_and(Value::truthy);
        if !dry {
            self.see_term(term, "a vote request with a higher term");
        }
        let candidate = body.get_i64("candidateIndex").unwrap_or(-1);
        let their_last = body
            .get_document("lastAppliedOpTime")
            .or_else(|| body.get_document("lastWrittenOpTime"))
            .and_then(OpTime::from_doc)
            .unwrap_or_default();
        let mine = self.last_applied();
        let (granted, reason) = if term < self.durable.term {
            (false, "candidate's term is lower than mine".to_string())
        } else if body.get_i64("configVersion") != Some(1) {
            (
                false,
                "candidate's config version differs from mine".to_string(),
            )
        } else if body.get_str("setName") != Some(self.config.set_name.as_str()) {
            (false, "candidate's set name differs from mine".to_string())
        } else if their_last < mine {
            (
                false,
                format!(
                    "candidate's data is staler than mine. candidate's last applied OpTime: {their_last}, my last applied OpTime: {mine}"
                ),
            )
        } else if !dry && self.durable.last_vote.is_some_and(|(t, _)| t >= term) {
            let (t, c) = self.durable.last_vote.unwrap_or_default();
            (
                false,
                format!("already voted for another candidate ({c}) this term ({t})"),
            )
        } else {
            if !dry {
                self.durable.last_vote = Some((term, candidate.max(0) as usize));
                // A vote cast restarts the wait for an election.
                self.primary_contact = now;
            }
            (true, String::new())
        };
        Document::new()
            .with("term", self.durable.term)
            .with("voteGranted", granted)
            .with("reason", reason)
            .with("ok", 1.0)
    }

    fn update_position_cmd(&mut self, body: &Document) -> Document {
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "a position update with a higher term");
        }
        for v in body.get_array("optimes").unwrap_or(&[]) {
            let Some(d) = v.as_document() else { continue };
            let (Some(id), Some(op)) = (
                d.get_i64("memberId"),
                d.get_document("appliedOpTime").and_then(OpTime::from_doc),
            ) else {
                continue;
            };
            let id = id as usize;
            if id < self.applied.len() && op > self.applied[id] {
                self.applied[id] = op;
            }
        }
        self.advance_commit();
        Document::new().with("ok", 1.0)
    }

    /// Parses `writeConcern`: the members to wait for (`usize::MAX`: majority) and
    /// `wtimeout`.
    fn concern(&self, body: &Document) -> Result<(usize, Option<u64>, Document), Document> {
        let Some(wc) = body.get("writeConcern") else {
            // The default write concern of a replica set since 5.0: majority.
            return Ok((usize::MAX, None, Document::new().with("w", "majority")));
        };
        let Some(wc) = wc.as_document() else {
            return Err(error_reply(
                14,
                "TypeMismatch",
                "BSON field 'writeConcern' is the wrong type, expected type 'object'",
            ));
        };
        let members = match wc.get("w") {
            None => usize::MAX,
            Some(Value::String(s)) if s == "majority" => usize::MAX,
            Some(Value::String(s)) => {
                return Err(error_reply(
                    79,
                    "UnknownReplWriteConcern",
                    format!("No write concern mode named '{s}' found in replica set configuration"),
                ));
            }
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => n as usize,
                _ => {
                    return Err(error_reply(
                        9,
                        "FailedToParse",
                        format!(
                            "w has to be a non-negative number and not greater than 50; found: {v}"
                        ),
                    ));
                }
            },
        };
        let wtimeout = wc.get_i64("wtimeout").filter(|t| *t > 0).map(|t| t as u64);
        Ok((members, wtimeout, wc.clone()))
    }

    fn finish_write(
        &self,
        reply: Document,
        concern: (usize, Option<u64>, Document),
        wrote: bool,
    ) -> Handled {
        let (members, wtimeout_ms, concern) = concern;
        if !wrote || members <= 1 && members != usize::MAX {
            return Handled::Reply(reply);
        }
        if members != usize::MAX && members > self.config.members.len() {
            let mut reply = reply;
            reply.set(
                "writeConcernError",
                Document::new()
                    .with("code", 100)
                    .with("codeName", "UnsatisfiableWriteConcern")
                    .with("errmsg", "Not enough data-bearing nodes"),
            );
            return Handled::Reply(reply);
        }
        Handled::WaitConcern(Waiter {
            reply,
            optime: self.last_applied(),
            members,
            wtimeout_ms,
            concern,
            term: self.durable.term,
        })
    }

    fn collection_name(arg: &Value) -> Result<&str, Document> {
        match arg {
            Value::String(s) if !s.is_empty() => Ok(s),
            Value::String(_) => Err(error_reply(
                73,
                "InvalidNamespace",
                "Invalid namespace specified",
            )),
            _ => Err(error_reply(
                73,
                "InvalidNamespace",
                format!("collection name has invalid type {}", query::type_name(arg)),
            )),
        }
    }

    fn new_object_id(&mut self) -> Value {
        self.object_ids += 1;
        let mut b = [0u8; 12];
        b[..8].copy_from_slice(&self.config.seed.to_be_bytes());
        b[8..].copy_from_slice(&self.object_ids.to_be_bytes());
        b[0] = self.config.me as u8;
        Value::ObjectId(b)
    }

    fn dup_key(ns: &str, id: &Value) -> Document {
        error_reply(
            11000,
            "DuplicateKey",
            format!(
                "E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {id} }}"
            ),
        )
        .with("keyPattern", Document::new().with("_id", 1))
        .with("keyValue", Document::new().with("_id", id.clone()))
    }

    fn find_and_modify(&mut self, host: &str, db: &str, arg: &Value, body: &Document) -> Handled {
        let coll = match Self::collection_name(arg) {
            Ok(c) => c.to_string(),
            Err(e) => return Handled::Reply(e),
        };
        if self.role != Role::Primary {
            return Handled::Reply(not_primary());
        }
        let concern = match self.concern(body) {
            Ok(c) => c,
            Err(e) => return Handled::Reply(e),
        };
        let ns = format!("{db}.{coll}");
        let empty = Document::new();
        let filter = match body.get("query") {
            None | Some(Value::Null) => &empty,
            Some(Value::Document(d)) => d,
            Some(v) => {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    format!(
                        "BSON field 'findAndModify.query' is the wrong type '{}', expected type 'object'",
                        query::type_name(v)
                    ),
                ));
            }
        };
        if body.get_document("sort").is_some_and(|s| !s.is_empty()) {
            return Handled::Reply(error_reply(
                2,
                "BadValue",
                "sort is not supported by this model",
            ));
        }
        let remove = body.get("remove").is_some_and(Value::truthy);
        let update = body.get_document("update");
        let (upsert, new) = (
            body.get("upsert").is_some_and(Value::truthy),
            body.get("new").is_some_and(Value::truthy),
        );
        match (remove, update) {
            (true, Some(_)) => {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    "Cannot specify both an update and remove=true",
                ));
            }
            (false, None) => {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    "Either an update or remove=true must be specified",
                ));
            }
            (true, None) if upsert || new => {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    "Cannot specify both upsert=true and remove=true ",
                ));
            }
            _ => {}
        }
        // The filter and the update are parsed before anything is looked up, as mongod
        // parses them: a malformed one is refused even when no document matches.
        if let Err(e) = query::matches(&Document::new(), filter) {
            return Handled::Reply(query_error(e));
        }
        if let Some(u) = update
            && let Err(e) = query::apply_update(&mut Document::new(), u, true)
        {
            return Handled::Reply(query_error(e));
        }
        let mut found = None;
        for doc in self.documents(&ns) {
            match query::matches(doc, filter) {
                Ok(true) => {
                    found = Some(doc.clone());
                    break;
                }
                Ok(false) => {}
                Err(e) => return Handled::Reply(query_error(e)),
            }
        }
        let optime = self.next_optime();
        let origin = Origin::Client(host.to_string());
        let ok = |value: Value, last: Document| {
            Document::new()
                .with("lastErrorObject", last)
                .with("value", value)
                .with("ok", 1.0)
        };
        match (found, update) {
            (Some(doc), None) => {
                let id = doc.get("_id").cloned().unwrap_or(Value::Null);
                self.append(Op::Delete { ns, id }, origin, optime);
                let reply = ok(Value::Document(doc), Document::new().with("n", 1));
                self.finish_write(reply, concern, true)
            }
            (Some(doc), Some(update)) => {
                let mut next = doc.clone();
                if let Err(e) = query::apply_update(&mut next, update, false) {
                    return Handled::Reply(query_error(e));
                }
                let changed = next != doc;
                if changed {
                    self.append(
                        Op::Update {
                            ns,
                            doc: next.clone(),
                        },
                        origin,
                        optime,
                    );
                }
                let value = if new { next } else { doc };
                let reply = ok(
                    Value::Document(value),
                    Document::new().with("n", 1).with("updatedExisting", true),
                );
                self.finish_write(reply, concern, changed)
            }
            (None, Some(update)) if upsert => {
                let mut doc = query::equalities(filter);
                if let Err(e) = query::apply_update(&mut doc, update, true) {
                    return Handled::Reply(query_error(e));
                }
                let id = match doc.get("_id") {
                    Some(id) => id.clone(),
                    None => {
                        let id = self.new_object_id();
                        let mut with_id = Document::new().with("_id", id.clone());
                        for (k, v) in doc.iter() {
                            with_id.set(k, v.clone());
                        }
                        doc = with_id;
                        id
                    }
                };
                if self.document(&ns, &id).is_some() {
                    return Handled::Reply(Self::dup_key(&ns, &id));
                }
                self.append(
                    Op::Insert {
                        ns,
                        doc: doc.clone(),
                    },
                    origin,
                    optime,
                );
                let value = if new {
                    Value::Document(doc)
                } else {
                    Value::Null
                };
                let reply = ok(
                    value,
                    Document::new()
                        .with("n", 1)
                        .with("updatedExisting", false)
                        .with("upserted", id),
                );
                self.finish_write(reply, concern, true)
            }
            (None, _) => {
                let mut last = Document::new().with("n", 0);
                if update.is_some() {
                    last.set("updatedExisting", false);
                }
                Handled::Reply(ok(Value::Null, last))
            }
        }
    }

    fn insert(&mut self, host: &str, db: &str, arg: &Value, body: &Document) -> Handled {
        let coll = match Self::collection_name(arg) {
            Ok(c) => c.to_string(),
            Err(e) => return Handled::Reply(e),
        };
        if self.role != Role::Primary {
            return Handled::Reply(not_primary());
        }
        let concern = match self.concern(body) {
            Ok(c) => c,
            Err(e) => return Handled::Reply(e),
        };
        let Some(docs) = body.get_array("documents") else {
            return Handled::Reply(error_reply(
                40414,
                "Location40414",
                "BSON field 'insert.documents' is missing but a required field",
            ));
        };
        let docs = docs.to_vec();
        let ordered = body.get("ordered").is_none_or(Value::truthy);
        let ns = format!("{db}.{coll}");
        let mut n = 0;
        let mut errors = Vec::new();
        for (i, v) in docs.iter().enumerate() {
            let Value::Document(doc) = v else {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    "BSON field 'insert.documents' is the wrong type, expected type 'object'",
                ));
            };
            let mut doc = doc.clone();
            let id = match doc.get("_id") {
                Some(id) => id.clone(),
                None => {
                    let id = self.new_object_id();
                    let mut with_id = Document::new().with("_id", id.clone());
                    for (k, v) in doc.iter() {
                        with_id.set(k, v.clone());
                    }
                    doc = with_id;
                    id
                }
            };
            if self.document(&ns, &id).is_some() {
                let e = Self::dup_key(&ns, &id);
                errors.push(Value::Document(
                    Document::new()
                        .with("index", i as i32)
                        .with("code", 11000)
                        .with("keyPattern", Document::new().with("_id", 1))
                        .with("keyValue", Document::new().with("_id", id))
                        .with("errmsg", e.get_str("errmsg").unwrap_or("")),
                ));
                if ordered {
                    break;
                }
                continue;
            }
            let optime = self.next_optime();
            self.append(
                Op::Insert {
                    ns: ns.clone(),
                    doc,
                },
                Origin::Client(host.to_string()),
                optime,
            );
            n += 1;
        }
        let mut reply = Document::new().with("n", n);
        if !errors.is_empty() {
            reply.set("writeErrors", errors);
        }
        reply.set("ok", 1.0);
        self.finish_write(reply, concern, n > 0)
    }

    fn delete(&mut self, host: &str, db: &str, arg: &Value, body: &Document) -> Handled {
        let coll = match Self::collection_name(arg) {
            Ok(c) => c.to_string(),
            Err(e) => return Handled::Reply(e),
        };
        if self.role != Role::Primary {
            return Handled::Reply(not_primary());
        }
        let concern = match self.concern(body) {
            Ok(c) => c,
            Err(e) => return Handled::Reply(e),
        };
        let Some(deletes) = body.get_array("deletes") else {
            return Handled::Reply(error_reply(
                40414,
                "Location40414",
                "BSON field 'delete.deletes' is missing but a required field",
            ));
        };
        let deletes = deletes.to_vec();
        let ns = format!("{db}.{coll}");
        let mut n = 0;
        for v in &deletes {
            let Some(d) = v.as_document() else {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    "BSON field 'delete.deletes' is the wrong type, expected type 'object'",
                ));
            };
            let (Some(q), Some(limit)) = (d.get_document("q"), d.get_i64("limit")) else {
                return Handled::Reply(error_reply(
                    40414,
                    "Location40414",
                    "BSON field 'delete.deletes.q' is missing but a required field",
                ));
            };
            if limit != 0 && limit != 1 {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
                ));
            }
            if let Err(e) = query::matches(&Document::new(), q) {
                return Handled::Reply(query_error(e));
            }
            let mut ids = Vec::new();
            for doc in self.documents(&ns) {
                match query::matches(doc, q) {
                    Ok(true) => {
                        ids.push(doc.get("_id").cloned().unwrap_or(Value::Null));
                        if limit == 1 {
                            break;
                        }
                    }
                    Ok(false) => {}
                    Err(e) => return Handled::Reply(query_error(e)),
                }
            }
            for id in ids {
                let optime = self.next_optime();
                self.append(
                    Op::Delete { ns: ns.clone(), id },
                    Origin::Client(host.to_string()),
                    optime,
                );
                n += 1;
            }
        }
        let reply = Document::new().with("n", n).with("ok", 1.0);
        self.finish_write(reply, concern, n > 0)
    }

    fn find(&mut self, db: &str, arg: &Value, body: &Document) -> Handled {
        let coll = match Self::collection_name(arg) {
            Ok(c) => c.to_string(),
            Err(e) => return Handled::Reply(e),
        };
        let empty = Document::new();
        let filter = body.get_document("filter").unwrap_or(&empty);
        if db == "local" && coll == "oplog.rs" {
            return self.find_oplog(filter, body);
        }
        let secondary_ok = body
            .get_document("$readPreference")
            .and_then(|r| r.get_str("mode"))
            .is_some_and(|m| m != "primary");
        if self.role != Role::Primary && !secondary_ok {
            return Handled::Reply(error_reply(
                13435,
                "NotPrimaryNoSecondaryOk",
                "not primary and secondaryOk=false",
            ));
        }
        let level = body
            .get_document("readConcern")
            .and_then(|r| r.get_str("level"))
            .unwrap_or("local");
        let ns = format!("{db}.{coll}");
        let snapshot;
        let docs: Vec<&Document> = match level {
            "local" | "available" => self.documents(&ns),
            "majority" => {
                snapshot = self.replay(self.commit.ts as usize);
                snapshot
                    .get(&ns)
                    .map(|c| c.values().collect())
                    .unwrap_or_default()
            }
            other => {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    format!("readConcern level '{other}' is not supported by this model"),
                ));
            }
        };
        if let Err(e) = query::matches(&Document::new(), filter) {
            return Handled::Reply(query_error(e));
        }
        let limit = body.get_i64("limit").unwrap_or(0).max(0) as usize;
        let mut batch = Vec::new();
        for doc in docs {
            match query::matches(doc, filter) {
                Ok(true) => batch.push(Value::Document(doc.clone())),
                Ok(false) => {}
                Err(e) => return Handled::Reply(query_error(e)),
            }
            if limit > 0 && batch.len() >= limit {
                break;
            }
        }
        Handled::Reply(
            Document::new()
                .with(
                    "cursor",
                    Document::new()
                        .with("firstBatch", batch)
                        .with("id", 0i64)
                        .with("ns", ns),
                )
                .with("ok", 1.0),
        )
    }

    fn find_oplog(&mut self, filter: &Document, body: &Document) -> Handled {
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "an oplog read with a higher term");
        }
        let from = filter
            .get_document("ts")
            .and_then(|c| c.get("$gte"))
            .and_then(|v| match v {
                Value::Timestamp { i, .. } => Some(u64::from(*i)),
                _ => None,
            })
            .unwrap_or(1)
            .max(1);
        let last = self.last_applied();
        let await_data = body.get("awaitData").is_some_and(Value::truthy);
        // Nothing new past the reader's own last entry (which we have too): wait.
        if await_data
            && last.ts <= from
            && self.entry_at(from).is_some()
            && let Some(max) = body.get_i64("maxTimeMS").filter(|m| *m > 0)
            && !body.get("$retried").is_some_and(Value::truthy)
        {
            return Handled::WaitOplog {
                body: body.clone().with("$retried", true),
                after: last,
                max_ms: max as u64,
            };
        }
        let batch: Vec<Value> = self
            .durable
            .oplog
            .iter()
            .skip(from as usize - 1)
            .map(|e| Value::Document(e.to_doc()))
            .collect();
        Handled::Reply(
            Document::new()
                .with(
                    "cursor",
                    Document::new()
                        .with("firstBatch", batch)
                        .with("id", 0i64)
                        .with("ns", "local.oplog.rs"),
                )
                .with(
                    "$replData",
                    Document::new()
                        .with("term", self.durable.term)
                        .with("lastOpCommitted", self.commit.to_doc())
                        .with("lastOpVisible", last.to_doc())
                        .with("primaryIndex", self.primary().map_or(-1, |p| p as i32)),
                )
                .with("ok", 1.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(me: usize, n: usize) -> MongoConfig {
        MongoConfig {
            set_name: "rs0".into(),
            members: (1..=n).map(|i| format!("mongo-{i}:27017")).collect(),
            me,
            heartbeat_ms: 100,
            election_timeout_ms: 1_000,
            seed: 1,
        }
    }

    fn primary_of_one() -> Member {
        let mut m = Member::new(config(0, 1), Durable::default(), Duration::ZERO);
        m.start_election(Duration::from_secs(2));
        assert_eq!(m.role(), Role::Primary);
        m
    }

    fn reply(h: Handled) -> Document {
        match h {
            Handled::Reply(d) => d,
            Handled::WaitConcern(w) => w.reply,
            other => panic!("{other:?}"),
        }
    }

    fn lock(owner: &str, now: i64) -> Document {
        lock_impl::designs::MongoFindAndModify::acquire_command(
            "k",
            owner,
            now,
            100,
            Document::new().with("w", 1),
        )
        .with("$db", "locksim")
    }

    #[test]
    fn find_and_modify_upserts_a_free_lock_refuses_a_live_one_and_takes_an_expired_one() {
        let mut m = primary_of_one();
        let t = Duration::from_secs(3);
        let r = reply(m.command("c1", &lock("a", 1_000), t));
        assert_eq!(r.get_document("value").unwrap().get_str("owner"), Some("a"));
        assert_eq!(
            r.get_document("lastErrorObject").unwrap().get("upserted"),
            Some(&Value::from("k"))
        );
        let r = reply(m.command("c2", &lock("b", 1_050), t));
        assert_eq!(r.get_i64("code"), Some(11000));
        assert_eq!(
            r.get_str("errmsg"),
            Some(
                "E11000 duplicate key error collection: locksim.locks index: _id_ dup key: { _id: \"k\" }"
            )
        );
        let r = reply(m.command("c2", &lock("b", 1_200), t));
        let v = r.get_document("value").unwrap();
        assert_eq!(
            (v.get_str("owner"), v.get_i64("version")),
            (Some("b"), Some(2))
        );
    }

    #[test]
    fn a_secondary_refuses_writes_and_unknown_commands_get_mongods_error() {
        let mut m = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
        let r = reply(m.command("c1", &lock("a", 1), Duration::ZERO));
        assert_eq!(r.get_i64("code"), Some(10107));
        assert_eq!(r.get_str("errmsg"), Some("not primary"));
        assert_eq!(r.get_str("codeName"), Some("NotWritablePrimary"));
        let r = reply(m.command(
            "c1",
            &Document::new().with("frobnicate", 1).with("$db", "x"),
            Duration::ZERO,
        ));
        assert_eq!(r.get_str("errmsg"), Some("no such command: 'frobnicate'"));
        assert_eq!(
            (r.get_i64("code"), r.get_str("codeName")),
            (Some(59), Some("CommandNotFound"))
        );
        assert!(!r.get("ok").unwrap().truthy());
    }

    #[test]
    fn a_voter_refuses_a_staler_candidate_and_a_second_candidate_in_one_term() {
        let mut voter = Member::new(config(0, 3), Durable::default(), Duration::ZERO);
        voter.durable.oplog.push(Entry {
            optime: OpTime { t: 1, ts: 1 },
            op: Op::Noop("x".into()),
        });
        let mut stale = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
        let req = stale
            .start_election(Duration::from_secs(2))
            .with("$db", "admin");
        let r = reply(voter.command("mongo-2", &req, Duration::from_secs(2)));
        assert!(!r.get("voteGranted").unwrap().truthy());
        assert!(
            r.get_str("reason")
                .unwrap()
                .starts_with("candidate's data is staler than mine")
        );
        let mut fresh = Member::new(
            config(2, 3),
            Durable {
                term: 0,
                last_vote: None,
                oplog: voter.durable.oplog.clone(),
            },
            Duration::ZERO,
        );
        let req = fresh
            .start_election(Duration::from_secs(2))
            .with("$db", "admin");
        let r = reply(voter.command("mongo-3", &req, Duration::from_secs(2)));
        assert!(r.get("voteGranted").unwrap().truthy(), "{r}");
        let again = req.clone().with("candidateIndex", 1);
        let r = reply(voter.command("mongo-2", &again, Duration::from_secs(2)));
        assert!(
            r.get_str("reason")
                .unwrap()
                .starts_with("already voted for another candidate")
        );
    }

    /// `w: "majority"` waits for a second member's position; a step-down meanwhile is
    /// `PrimarySteppedDown` (189), a `wtimeout` `WriteConcernFailed` (64).
    #[test]
    fn a_majority_write_waits_for_a_majority_and_fails_as_mongod_says() {
        let t = Duration::from_secs(2);
        let mut p = Member::new(config(0, 3), Durable::default(), Duration::ZERO);
        p.initiate(0, Duration::ZERO);
        let cmd = lock_impl::designs::MongoFindAndModify::acquire_command(
            "k",
            "a",
            1,
            100,
            Document::new()
                .with("w", "majority")
                .with("wtimeout", 50i64),
        )
        .with("$db", "locksim");
        let Handled::WaitConcern(w) = p.command("c1", &cmd, t) else {
            panic!("a majority write waits");
        };
        assert_eq!(p.concern_met(&w), ConcernState::Waiting);
        let e = Member::wtimeout_error(&w);
        assert_eq!(
            (
                e.get_i64("code"),
                e.get_str("codeName"),
                e.get_str("errmsg")
            ),
            (
                Some(64),
                Some("WriteConcernFailed"),
                Some("waiting for replication timed out")
            )
        );
        let mut s = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
        s.initiate(0, Duration::ZERO);
        let batch = reply(p.command("mongo-2", &s.fetch_request(1, 0).with("$db", "local"), t));
        assert_eq!(s.on_fetch_reply(0, 1, &batch, t), Fetched::Applied(1));
        reply(p.command("mongo-2", &s.update_position().with("$db", "admin"), t));
        assert_eq!(p.concern_met(&w), ConcernState::Met);
        // A second write, then a higher term: the wait fails with PrimarySteppedDown.
        let mut other_key = cmd.clone();
        other_key.set("query", Document::new().with("_id", "j"));
        let Handled::WaitConcern(w2) = p.command("c1", &other_key, t) else {
            panic!("a majority write waits");
        };
        p.see_term(5, "test");
        let ConcernState::Failed(e) = p.concern_met(&w2) else {
            panic!("a step-down fails the wait");
        };
        assert_eq!(
            (e.get_i64("code"), e.get_str("codeName")),
            (Some(189), Some("PrimarySteppedDown"))
        );
    }

    /// Malformed commands get mongod's errors (`ok: 0` with a code), never a panic.
    #[test]
    fn malformed_commands_are_refused_with_errors_never_panicked_on() {
        let t = Duration::from_secs(1);
        let mut p = Member::new(config(0, 1), Durable::default(), Duration::ZERO);
        p.initiate(0, Duration::ZERO);
        let bad = [
            Document::new().with("findAndModify", "locks"),
            Document::new().with("findAndModify", 5).with("$db", "d"),
            Document::new()
                .with("findAndModify", "locks")
                .with("update", Document::new().with("$set", 3))
                .with("$db", "d"),
            Document::new()
                .with("findAndModify", "locks")
                .with("remove", true)
                .with("update", Document::new())
                .with("$db", "d"),
            Document::new()
                .with("findAndModify", "locks")
                .with("query", "x")
                .with("update", Document::new())
                .with("$db", "d"),
            Document::new().with("insert", "locks").with("$db", "d"),
            Document::new()
                .with("insert", "locks")
                .with("documents", vec![Value::Int32(1)])
                .with("$db", "d"),
            Document::new()
                .with("delete", "locks")
                .with(
                    "deletes",
                    vec![Value::Document(
                        Document::new().with("q", Document::new()).with("limit", 7),
                    )],
                )
                .with("$db", "d"),
            Document::new()
                .with("insert", "locks")
                .with("documents", vec![Value::Document(Document::new())])
                .with("writeConcern", Document::new().with("w", "nodes"))
                .with("$db", "d"),
            Document::new()
                .with("find", "locks")
                .with("filter", Document::new().with("$where", "1"))
                .with("$db", "d"),
            Document::new(),
        ];
        for cmd in bad {
            let r = reply(p.command("c", &cmd, t));
            assert!(!r.get("ok").unwrap().truthy(), "{cmd} -> {r}");
            assert!(r.get_i64("code").is_some_and(|c| c != 0), "{cmd} -> {r}");
            assert!(
                !r.get_str("errmsg").unwrap_or("").is_empty(),
                "{cmd} -> {r}"
            );
        }
    }

    /// An acknowledged `w: 1` write that only the old primary had is rolled back when
    /// it rejoins the new primary's set.
    #[test]
    fn a_write_the_new_primary_never_had_is_rolled_back() {
        let t = Duration::from_secs(2);
        let mut old = Member::new(config(0, 3), Durable::default(), Duration::ZERO);
        let mut other = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
        let req = old.start_election(t).with("$db", "admin");
        let r = reply(other.command("mongo-1", &req, t));
        old.on_vote_reply(1, &r, 1, t);
        assert_eq!(old.role(), Role::Primary);
        // mongo-2 copies the no-op, then the old primary takes a lock alone.
        let fetch = reply(old.command(
            "mongo-2",
            &other.fetch_request(1, 0).with("$db", "local"),
            t,
        ));
        assert_eq!(other.on_fetch_reply(0, 1, &fetch, t), Fetched::Applied(1));
        reply(old.command("c1", &lock("a", 1), t));
        assert!(old.document("locksim.locks", &Value::from("k")).is_some());
        // mongo-2 is elected in term 2 without it (mongo-3 votes).
        let mut third = Member::new(config(2, 3), Durable::default(), Duration::ZERO);
        let req = other.start_election(t).with("$db", "admin");
        let r = reply(third.command("mongo-2", &req, t));
        other.on_vote_reply(2, &r, 2, t);
        assert_eq!(other.role(), Role::Primary);
        // The old primary hears of term 2, fetches from mongo-2 and rolls back.
        old.see_term(2, "test");
        let from = old.fetch_from();
        let batch = reply(other.command(
            "mongo-1",
            &old.fetch_request(from, 0).with("$db", "local"),
            t,
        ));
        let Fetched::Diverged { from_ts } = old.on_fetch_reply(1, from, &batch, t) else {
            panic!("diverged");
        };
        let batch = reply(other.command(
            "mongo-1",
            &old.fetch_request(from_ts, 0).with("$db", "local"),
            t,
        ));
        old.rollback(1, &batch);
        assert!(old.document("locksim.locks", &Value::from("k")).is_none());
        let events = old.take_events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, MemberEvent::Rollback { undone: 1, .. })),
            "{events:?}"
        );
        assert!(events.iter().any(|e| matches!(
            e,
            MemberEvent::Changed {
                origin: Origin::RolledBack,
                after: None,
                ..
            }
        )));
        assert_eq!(
            old.on_fetch_reply(
                1,
                old.fetch_from(),
                &reply(other.command(
                    "mongo-1",
                    &old.fetch_request(old.fetch_from(), 0).with("$db", "local"),
                    t
                )),
                t
            ),
            Fetched::Applied(1)
        );
        assert_eq!(old.last_applied(), other.last_applied());
    }
}
