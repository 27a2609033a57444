//! One server of a ZooKeeper 3.8 ensemble as a state machine without I/O: client
//! frames in and out (as [`super::server::ZkServer`]), quorum messages ([`PeerMsg`]) in
//! and out, timer ticks, and a durable store ([`ZkDisk`]) a restart reads back.
//!
//! The peer's state and timer are here; what it does, by concern: `election.rs`
//! (`FastLeaderElection`), `broadcast.rs` (Zab's sync and broadcast, leader and
//! follower sides, commits), `sessions.rs` (client connections, sessions, answers).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use lock_impl::zk::proto::{
    self, ConnectRequest, ConnectResponse, ErrorCode, MultiOp, MultiResult, PING_XID, ReplyHeader,
    Request, Response, op,
};
use serde::{Deserialize, Serialize};

use super::front::{ConnId, Front, Out, other_conns_of};
use super::java::session_password;
use super::server::{ServerEvent, ZkConfig, ZkNow, prep, prep_multi};
use super::tree::{DataTree, Trigger, Txn, TxnBody};

mod broadcast;
mod election;
mod sessions;

/// `FastLeaderElection.finalizeWait`: how long a vote a quorum agreed with waits for
/// a better one before it is final, ms.
pub const FINALIZE_WAIT_MS: u64 = 200;

/// A server's id in the ensemble (`myid`), from 1.
pub type Sid = u64;

/// The ensemble settings every server shares (`zoo.cfg`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleConfig {
    /// The client-facing settings (`tickTime`, session bounds); `server_id` is
    /// replaced by each server's `myid`.
    pub zk: ZkConfig,
    /// Every server's id.
    pub servers: Vec<Sid>,
    /// `initLimit`, ticks: how long a learner may take to connect and sync.
    pub init_limit: u32,
    /// `syncLimit`, ticks: how long a learner and its leader may go unheard.
    pub sync_limit: u32,
}

impl EnsembleConfig {
    /// `n` servers (ids 1..=n) with `zk`'s tick and ZooKeeper's sample limits (10, 5).
    pub fn of(n: u64, zk: ZkConfig) -> Self {
        Self {
            zk,
            servers: (1..=n).collect(),
            init_limit: 10,
            sync_limit: 5,
        }
    }

    fn quorum(&self, count: usize) -> bool {
        count * 2 > self.servers.len()
    }

    fn tick_ms(&self) -> u64 {
        u64::from(self.zk.tick_time_ms.max(1))
    }
}

/// What a server keeps on disk: its txn log (every logged proposal, fsynced before it
/// is acknowledged) and its two epoch files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZkDisk {
    /// The txn log, in zxid order.
    pub log: Vec<Txn>,
    /// `acceptedEpoch`: the highest epoch it agreed to follow.
    pub accepted_epoch: u32,
    /// `currentEpoch`: the epoch of the leader it last synced with.
    pub current_epoch: u32,
}

impl ZkDisk {
    /// The last logged zxid (0 if none).
    pub fn last_zxid(&self) -> i64 {
        self.log.last().map_or(0, |t| t.zxid)
    }
}

/// A durable store shared with the host's control handle: it survives a restart.
pub type SharedDisk = Arc<Mutex<ZkDisk>>;

/// A vote: the server proposed as leader, with the epoch and zxid it was proposed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// The proposed leader.
    pub leader: Sid,
    /// Its last logged zxid.
    pub zxid: i64,
    /// Its `currentEpoch`.
    pub epoch: u32,
}

impl Vote {
    /// `FastLeaderElection.totalOrderPredicate`: higher epoch, then zxid, then id.
    fn beats(&self, other: &Vote) -> bool {
        (self.epoch, self.zxid, self.leader) > (other.epoch, other.zxid, other.leader)
    }
}

/// A server's role, as its votes carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerState {
    /// Electing.
    Looking,
    /// Following a leader.
    Following,
    /// Leading.
    Leading,
}

/// Which client request a txn answers: the server the client is connected to, its
/// session and the request's xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The server that took the request.
    pub sid: Sid,
    /// The session.
    pub session: i64,
    /// The request's xid (0 for `createSession`).
    pub xid: i32,
}

/// A message between two servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerMsg {
    /// An election notification.
    Vote {
        /// The sender's vote.
        vote: Vote,
        /// Its election round (`logicalclock`).
        round: u64,
        /// Its state.
        state: PeerState,
    },
    /// learner → leader: `FOLLOWERINFO` (its accepted epoch and last logged zxid).
    FollowerInfo {
        /// `acceptedEpoch`.
        accepted_epoch: u32,
        /// Last logged zxid.
        last_zxid: i64,
    },
    /// leader → learner: the new epoch and the txns that make its log the leader's.
    Sync {
        /// The new epoch.
        epoch: u32,
        /// `SNAP`: `txns` is the whole log; else `DIFF`: the txns after `after`.
        snap: bool,
        /// The learner's last zxid the diff starts after.
        after: i64,
        /// The txns.
        txns: Vec<Txn>,
        /// The leader's last committed zxid: apply up to it.
        committed: i64,
    },
    /// learner → leader: `ACK` of `NEWLEADER` (its last logged zxid).
    AckNewLeader {
        /// Last logged zxid.
        last_zxid: i64,
    },
    /// leader → learner: `UPTODATE`: serve clients.
    UpToDate,
    /// learner → leader: a client's write, forwarded (the request frame's payload).
    Request {
        /// Who asked.
        origin: Origin,
        /// The payload (`RequestHeader` and body).
        payload: Vec<u8>,
    },
    /// learner → leader: a client asks for a new session.
    CreateSession {
        /// Who asked (`xid` 0).
        origin: Origin,
        /// The negotiated timeout.
        timeout_ms: u32,
    },
    /// learner → leader: a client's `sync`.
    SyncRequest {
        /// Who asked.
        origin: Origin,
    },
    /// leader → learner: the `sync` is done (every commit before it was sent).
    SyncDone {
        /// Who asked.
        origin: Origin,
    },
    /// leader → learner: `PROPOSAL`.
    Proposal {
        /// The txn.
        txn: Txn,
        /// The client request it answers, if any.
        origin: Option<Origin>,
    },
    /// learner → leader: `ACK` (cumulative: everything logged up to `zxid`).
    Ack {
        /// The zxid.
        zxid: i64,
    },
    /// leader → learner: `COMMIT` (everything up to `zxid`).
    Commit {
        /// The zxid.
        zxid: i64,
    },
    /// leader → learner: `PING`; learner → leader: its reply with the sessions its
    /// clients touched since the last one.
    Ping {
        /// Session id → timeout.
        touches: Vec<(i64, u32)>,
    },
}

/// What the ensemble's record needs to know of a server's role changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleEvent {
    /// It started electing (`why`).
    Looking {
        /// Why.
        why: String,
    },
    /// It leads `epoch`, serving clients (a quorum synced).
    Leading {
        /// The epoch.
        epoch: u32,
    },
    /// It follows `leader`, serving clients (synced).
    Following {
        /// The leader.
        leader: Sid,
        /// The epoch.
        epoch: u32,
    },
}

#[derive(Debug, Clone)]
struct Queued {
    xid: i32,
    req: Request,
    /// Waits for its commit (a write) or the leader's `SyncDone`.
    waiting: bool,
}

#[derive(Debug, Clone)]
struct Conn {
    session: Option<i64>,
    /// A `createSession` in flight for this connection.
    creating: Option<(i64, ConnectRequest, u32)>,
    timeout_ms: u32,
    peer: String,
    queue: VecDeque<Queued>,
}

#[derive(Debug, Clone, Default)]
struct Tracker {
    /// Session → (timeout, expiry bucket).
    sessions: BTreeMap<i64, (u32, u64)>,
    closing: BTreeSet<i64>,
    next_expiration_ms: u64,
}

impl Tracker {
    fn bucket(tick: u64, now_ms: u64, timeout_ms: u32) -> u64 {
        ((now_ms + u64::from(timeout_ms)) / tick + 1) * tick
    }

    fn touch(&mut self, tick: u64, session: i64, timeout_ms: u32, now_ms: u64) -> bool {
        if self.closing.contains(&session) {
            return false;
        }
        match self.sessions.get_mut(&session) {
            Some(s) => {
                s.1 = Self::bucket(tick, now_ms, timeout_ms);
                true
            }
            None => false,
        }
    }

    fn add(&mut self, tick: u64, session: i64, timeout_ms: u32, now_ms: u64) {
        self.sessions.insert(
            session,
            (timeout_ms, Self::bucket(tick, now_ms, timeout_ms)),
        );
    }

    /// The sessions whose bucket is due, in bucket then id order.
    fn expire(&mut self, tick: u64, now_ms: u64) -> Vec<i64> {
        let mut out = Vec::new();
        while now_ms >= self.next_expiration_ms {
            let due = self.next_expiration_ms;
            self.next_expiration_ms += tick;
            for (id, (_, at)) in &self.sessions {
                if *at == due && !self.closing.contains(id) {
                    out.push(*id);
                }
            }
        }
        for id in &out {
            self.closing.insert(*id);
        }
        out
    }
}

#[derive(Debug, Clone, Default)]
struct Learner {
    last_heard_ms: u64,
    /// Acknowledged `NEWLEADER`.
    synced: bool,
    /// Highest zxid it logged (cumulative acks).
    acked: i64,
    /// Receives proposals and commits (sync sent).
    forwarding: bool,
}

#[derive(Debug, Clone)]
struct Leading {
    since_ms: u64,
    /// `None` until a quorum's `FOLLOWERINFO` fixed it.
    epoch: Option<u32>,
    infos: BTreeMap<Sid, (u32, i64)>,
    established: bool,
    counter: i64,
    /// The tree with every outstanding proposal applied (`outstandingChanges`).
    prep_tree: DataTree,
    /// Proposed, not yet committed.
    outstanding: BTreeSet<i64>,
    learners: BTreeMap<Sid, Learner>,
    tracker: Tracker,
    /// Sessions whose `closeSession` is an expiry: their ephemerals then.
    expiring: BTreeMap<i64, Vec<String>>,
}

impl Leading {
    /// The learners `f` picks, in id order.
    fn learners_where(&self, f: impl Fn(&Learner) -> bool) -> Vec<Sid> {
        self.learners
            .iter()
            .filter(|(_, x)| f(x))
            .map(|(s, _)| *s)
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Following {
    leader: Sid,
    epoch: u32,
    last_heard_ms: u64,
    uptodate: bool,
    touched: BTreeMap<i64, u32>,
}

#[derive(Debug, Clone)]
enum Role {
    Looking {
        round_votes: BTreeMap<Sid, Vote>,
        last_sent_ms: u64,
        /// A quorum agreed with our vote: decide at this time unless a better vote
        /// comes first (`finalizeWait`).
        decide_at_ms: Option<u64>,
    },
    Following(Following),
    Leading(Box<Leading>),
}

/// One server of an ensemble (see the module doc).
///
/// Read from ZooKeeper 3.8.0 and modelled here:
/// - `FastLeaderElection`: a LOOKING server votes for itself (its `currentEpoch`, last
///   logged zxid, id), sends its vote to every peer, adopts any better vote (higher
///   epoch, then zxid, then id) of the same round (`logicalclock`; a higher round
///   resets the received votes), and decides once a quorum's votes equal its own; a
///   server already LEADING or FOLLOWING answers a LOOKING peer with its leader, and a
///   LOOKING server told so by the leader itself follows it.
/// - `Leader.lead` / `LearnerHandler` / `Learner`: the leader waits for a quorum's
///   `FOLLOWERINFO` (their `acceptedEpoch`) and proposes the epoch one above the
///   highest; each learner is synced (`DIFF` after its last zxid if the leader's log
///   has that zxid, else `SNAP`: the whole log, which also truncates whatever the
///   learner had that the leader has not); `NEWLEADER` is acknowledged by a quorum
///   before the leader serves clients (`UPTODATE`); every proposal is logged (and
///   fsynced: `forceSync=yes`) before it is acknowledged, and committed once a quorum
///   (the leader included) acknowledged it, in zxid order; learners apply commits in
///   order and serve reads from their own, possibly stale, tree.
/// - `FollowerRequestProcessor` / `CommitProcessor`: a learner forwards writes (and
///   `createSession`) to the leader and answers them when the commit reaches it; a
///   connection's reads wait behind its own earlier writes.
/// - `SessionTrackerImpl` on the leader, `LearnerSessionTracker` on learners: a
///   learner records the sessions its clients touched and reports them in its reply to
///   the leader's ping; only the leader expires sessions, with a `closeSession` txn
///   committed like any other; every server closes the connections of a session whose
///   `closeSession` it applies.
/// - Failure detection: a follower that hears nothing from its leader for `syncLimit`
///   ticks (`initLimit` while syncing) and a leader that does not hear a quorum within
///   `syncLimit` ticks go back to LOOKING, closing their clients' connections
///   (`ZooKeeperServer.shutdown`).
/// - `ZKDatabase.loadDataBase`: a restarted server rebuilds its tree from its whole
///   txn log (committed or not) and rejoins as LOOKING.
///
/// Simplifications, stated: quorum messages are serde frames of this model, not the
/// quorum protocol's jute packets; every peer pair uses two one-way TCP streams
/// (ZooKeeper: one connection per pair for election, one per learner for Zab); the
/// election decides once a quorum agreed with its vote for `finalizeWait` (200 ms)
/// with no better vote meanwhile, judged at its timer's ticks, and re-sends its vote
/// every four ticks while LOOKING (ZooKeeper: on a notification timeout doubling
/// from 200 ms); no snapshots (the log from the first zxid is kept
/// and replayed: `SNAP` sends it whole); `TRUNC` is folded into `SNAP`; a reconnecting
/// session is checked against the learner's own committed sessions
/// (ZooKeeper: `revalidateSession` asks the leader); `sync` on a learner is answered
/// when the leader's reply arrives behind every commit the leader had sent (ZooKeeper
/// also waits for the leader's outstanding proposals); a `multi`'s `create2` results
/// carry the Stat after the whole `multi`; no observers, read-only mode, dynamic
/// reconfiguration, ACL checks or quotas.
#[derive(Debug)]
pub struct Peer {
    cfg: EnsembleConfig,
    me: Sid,
    disk: SharedDisk,
    tree: DataTree,
    /// Committed live sessions → timeout.
    sessions: BTreeMap<i64, u32>,
    origins: BTreeMap<i64, Origin>,
    round: u64,
    vote: Vote,
    role: Role,
    next_session_id: i64,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    front: Front,
    peer_out: Vec<(Sid, PeerMsg)>,
    events: Vec<ServerEvent>,
    roles: Vec<RoleEvent>,
}

fn lock(d: &SharedDisk) -> MutexGuard<'_, ZkDisk> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rebuilds a tree and its live sessions from `log` up to `upto`.
fn replay(log: &[Txn], upto: i64) -> (DataTree, BTreeMap<i64, u32>) {
    let mut tree = DataTree::new();
    let mut sessions = BTreeMap::new();
    for t in log.iter().take_while(|t| t.zxid <= upto) {
        tree.apply(t);
        track_session(&mut sessions, t);
    }
    (tree, sessions)
}

fn track_session(sessions: &mut BTreeMap<i64, u32>, t: &Txn) {
    match t.body {
        TxnBody::CreateSession { timeout_ms } => {
            sessions.insert(t.session_id, timeout_ms);
        }
        TxnBody::CloseSession => {
            sessions.remove(&t.session_id);
        }
        _ => {}
    }
}

impl Peer {
    /// Server `me` starting at `now` from what `disk` holds (empty on a first start):
    /// its tree rebuilt from the whole log, LOOKING.
    pub fn new(cfg: EnsembleConfig, me: Sid, disk: SharedDisk, now: ZkNow) -> Self {
        let (tree, sessions, vote) = {
            let d = lock(&disk);
            let (tree, sessions) = replay(&d.log, i64::MAX);
            let vote = Vote {
                leader: me,
                zxid: d.last_zxid(),
                epoch: d.current_epoch,
            };
            (tree, sessions, vote)
        };
        let mut next_session_id =
            (((now.elapsed_ms as i64) << 24) as u64 >> 8) as i64 | ((me as i64) << 56);
        if next_session_id == i64::MIN {
            next_session_id += 1;
        }
        let mut p = Self {
            cfg,
            me,
            disk,
            tree,
            sessions,
            origins: BTreeMap::new(),
            round: 0,
            vote,
            role: Role::Looking {
                round_votes: BTreeMap::new(),
                last_sent_ms: 0,
                decide_at_ms: None,
            },
            next_session_id,
            conns: BTreeMap::new(),
            next_conn: 1,
            front: Front::default(),
            peer_out: Vec::new(),
            events: Vec::new(),
            roles: Vec::new(),
        };
        p.look(now, "started");
        p
    }

    /// Its id.
    pub fn id(&self) -> Sid {
        self.me
    }

    /// Its applied tree.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// Its state.
    pub fn state(&self) -> PeerState {
        match self.role {
            Role::Looking { .. } => PeerState::Looking,
            Role::Following(_) => PeerState::Following,
            Role::Leading(_) => PeerState::Leading,
        }
    }

    /// Whether it serves clients (an established leader, or a synced follower).
    pub fn serving(&self) -> bool {
        match &self.role {
            Role::Looking { .. } => false,
            Role::Following(f) => f.uptodate,
            Role::Leading(l) => l.established,
        }
    }

    /// The leader it follows or is (`None` while electing).
    pub fn leader(&self) -> Option<Sid> {
        match &self.role {
            Role::Looking { .. } => None,
            Role::Following(f) => Some(f.leader),
            Role::Leading(_) => Some(self.me),
        }
    }

    /// The committed txns it applied with a zxid above `after`, in order.
    pub fn applied_after(&self, after: i64) -> Vec<Txn> {
        let last = self.tree.last_zxid();
        let d = lock(&self.disk);
        let from = d.log.partition_point(|t| t.zxid <= after);
        d.log[from..]
            .iter()
            .take_while(|t| t.zxid <= last)
            .cloned()
            .collect()
    }

    /// How many client connections have a session here.
    pub fn client_sessions(&self) -> usize {
        self.conns.values().filter(|c| c.session.is_some()).count()
    }

    /// Takes the frames and closes queued for client connections.
    pub fn take_output(&mut self) -> Vec<(ConnId, Out)> {
        self.front.take_output()
    }

    /// Takes the messages queued for peers.
    pub fn take_peer_output(&mut self) -> Vec<(Sid, PeerMsg)> {
        std::mem::take(&mut self.peer_out)
    }

    /// Takes the session events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    /// Takes the role changes recorded since the last call.
    pub fn take_roles(&mut self) -> Vec<RoleEvent> {
        std::mem::take(&mut self.roles)
    }

    fn tick_ms(&self) -> u64 {
        self.cfg.tick_ms()
    }

    fn others(&self) -> Vec<Sid> {
        self.cfg
            .servers
            .iter()
            .copied()
            .filter(|s| *s != self.me)
            .collect()
    }

    fn to(&mut self, sid: Sid, msg: PeerMsg) {
        self.peer_out.push((sid, msg));
    }

    /// A message from peer `from`.
    pub fn on_peer(&mut self, from: Sid, msg: PeerMsg, now: ZkNow) {
        if let PeerMsg::Vote { vote, round, state } = msg {
            return self.on_vote(from, vote, round, state, now);
        }
        match self.role {
            Role::Looking { .. } => {}
            Role::Leading(_) => self.on_leader_msg(from, msg, now),
            Role::Following(_) => self.on_follower_msg(from, msg, now),
        }
    }

    /// When the timer must next run (monotonic ms).
    pub fn next_tick_ms(&self, now_ms: u64) -> u64 {
        let tick = self.tick_ms();
        (now_ms / tick + 1) * tick
    }

    /// The timer: votes re-sent, failures detected, pings, session expiry.
    pub fn tick(&mut self, now: ZkNow) {
        let t = now.elapsed_ms;
        let tick = self.tick_ms();
        let (init, sync) = (
            u64::from(self.cfg.init_limit) * tick,
            u64::from(self.cfg.sync_limit) * tick,
        );
        match &mut self.role {
            Role::Looking { last_sent_ms, .. } => {
                if t >= *last_sent_ms + 4 * tick {
                    self.broadcast_vote(t);
                }
                self.try_decide(now);
            }
            Role::Following(f) => {
                let limit = if f.uptodate { sync } else { init };
                if t > f.last_heard_ms + limit {
                    return self.look(now, "no word from the leader within the limit");
                }
                if f.epoch == 0 {
                    // No sync yet: the leader may not have been leading when our
                    // FOLLOWERINFO came (a learner retries its connection to the
                    // leader until `initLimit`).
                    let leader = f.leader;
                    let (accepted_epoch, last_zxid) = {
                        let d = lock(&self.disk);
                        (d.accepted_epoch, d.last_zxid())
                    };
                    self.to(
                        leader,
                        PeerMsg::FollowerInfo {
                            accepted_epoch,
                            last_zxid,
                        },
                    );
                }
            }
            Role::Leading(l) => {
                if !l.established {
                    if t > l.since_ms + init {
                        self.look(now, "no quorum synced within initLimit");
                    }
                    return;
                }
                let heard = 1 + l
                    .learners
                    .values()
                    .filter(|x| x.synced && t <= x.last_heard_ms + sync)
                    .count();
                if !self.cfg.quorum(heard) {
                    return self.look(now, "not a quorum of followers within syncLimit");
                }
                let to = l.learners_where(|x| x.forwarding);
                let expired = l.tracker.expire(tick, t);
                for s in to {
                    self.to(s, PeerMsg::Ping { touches: vec![] });
                }
                for session in expired {
                    let Some(l) = self.leading() else { return };
                    let ephemerals = l.prep_tree.ephemerals(session);
                    l.expiring.insert(session, ephemerals);
                    self.propose(session, TxnBody::CloseSession, None, now);
                }
            }
        }
    }
}
