//! One server of a ZooKeeper 3.8 ensemble as a state machine without I/O: client
//! frames in and out (as [`super::server::ZkServer`]), quorum messages ([`PeerMsg`]) in
//! and out, timer ticks, and a durable store ([`ZkDisk`]) a restart reads back.
//!
//! Read from ZooKeeper 3.8.0 and modelled here:
//! - `FastLeaderElection`: a LOOKING server votes for itself (its `currentEpoch`, last
//!   logged zxid, id), sends its vote to every peer, adopts any better vote (higher
//!   epoch, then zxid, then id) of the same round (`logicalclock`; a higher round
//!   resets the received votes), and decides once a quorum's votes equal its own; a
//!   server already LEADING or FOLLOWING answers a LOOKING peer with its leader, and a
//!   LOOKING server told so by the leader itself follows it.
//! - `Leader.lead` / `LearnerHandler` / `Learner`: the leader waits for a quorum's
//!   `FOLLOWERINFO` (their `acceptedEpoch`) and proposes the epoch one above the
//!   highest; each learner is synced (`DIFF` after its last zxid if the leader's log
//!   has that zxid, else `SNAP`: the whole log, which also truncates whatever the
//!   learner had that the leader has not); `NEWLEADER` is acknowledged by a quorum
//!   before the leader serves clients (`UPTODATE`); every proposal is logged (and
//!   fsynced: `forceSync=yes`) before it is acknowledged, and committed once a quorum
//!   (the leader included) acknowledged it, in zxid order; learners apply commits in
//!   order and serve reads from their own, possibly stale, tree.
//! - `FollowerRequestProcessor` / `CommitProcessor`: a learner forwards writes (and
//!   `createSession`) to the leader and answers them when the commit reaches it; a
//!   connection's reads wait behind its own earlier writes.
//! - `SessionTrackerImpl` on the leader, `LearnerSessionTracker` on learners: a
//!   learner records the sessions its clients touched and reports them in its reply to
//!   the leader's ping; only the leader expires sessions, with a `closeSession` txn
//!   committed like any other; every server closes the connections of a session whose
//!   `closeSession` it applies.
//! - Failure detection: a follower that hears nothing from its leader for `syncLimit`
//!   ticks (`initLimit` while syncing) and a leader that does not hear a quorum within
//!   `syncLimit` ticks go back to LOOKING, closing their clients' connections
//!   (`ZooKeeperServer.shutdown`).
//! - `ZKDatabase.loadDataBase`: a restarted server rebuilds its tree from its whole
//!   txn log (committed or not) and rejoins as LOOKING.
//!
//! Simplifications, stated: quorum messages are serde frames of this model, not the
//! quorum protocol's jute packets; every peer pair uses two one-way TCP streams
//! (ZooKeeper: one connection per pair for election, one per learner for Zab); the
//! election decides once a quorum agreed with its vote for `finalizeWait` (200 ms)
//! with no better vote meanwhile, judged at its timer's ticks, and re-sends its vote
//! every four ticks while LOOKING (ZooKeeper: on a notification timeout doubling
//! from 200 ms); no snapshots (the log from the first zxid is kept
//! and replayed: `SNAP` sends it whole); `TRUNC` is folded into `SNAP`; a reconnecting
//! session is checked against the learner's own committed sessions
//! (ZooKeeper: `revalidateSession` asks the leader); `sync` on a learner is answered
//! when the leader's reply arrives behind every commit the leader had sent (ZooKeeper
//! also waits for the leader's outstanding proposals); a `multi`'s `create2` results
//! carry the Stat after the whole `multi`; no observers, read-only mode, dynamic
//! reconfiguration, ACL checks or quotas.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use lock_impl::zk::proto::{
    self, ConnectRequest, ConnectResponse, ErrorCode, MultiOp, MultiResult, PING_XID, ReplyHeader,
    Request, Response, op,
};
use serde::{Deserialize, Serialize};

use super::front::{Front, other_conns_of};
use super::java::session_password;
use super::server::{ConnId, Out, ServerEvent, ZkConfig, ZkNow, prep, prep_multi};
use super::tree::{DataTree, Trigger, Txn, TxnBody};

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

    // ----- election -----

    fn my_initial_vote(&self) -> Vote {
        let d = lock(&self.disk);
        Vote {
            leader: self.me,
            zxid: d.last_zxid(),
            epoch: d.current_epoch,
        }
    }

    fn broadcast_vote(&mut self, now_ms: u64) {
        let (vote, round) = (self.vote, self.round);
        for s in self.others() {
            self.to(
                s,
                PeerMsg::Vote {
                    vote,
                    round,
                    state: PeerState::Looking,
                },
            );
        }
        if let Role::Looking { last_sent_ms, .. } = &mut self.role {
            *last_sent_ms = now_ms;
        }
    }

    /// Goes back to electing: every client connection closes, the tree is rebuilt
    /// from the log as a restart would (`ZooKeeperServer.shutdown`, then
    /// `loadDataBase` at the next start).
    fn look(&mut self, now: ZkNow, why: &str) {
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.close_conn(c);
        }
        {
            let d = lock(&self.disk);
            let (tree, sessions) = replay(&d.log, i64::MAX);
            self.tree = tree;
            self.sessions = sessions;
        }
        self.origins.clear();
        self.round += 1;
        self.vote = self.my_initial_vote();
        let mut round_votes = BTreeMap::new();
        round_votes.insert(self.me, self.vote);
        self.role = Role::Looking {
            round_votes,
            last_sent_ms: now.elapsed_ms,
            decide_at_ms: None,
        };
        self.roles.push(RoleEvent::Looking { why: why.into() });
        self.broadcast_vote(now.elapsed_ms);
        self.try_decide(now);
    }

    fn try_decide(&mut self, now: ZkNow) {
        let quorum = &self.cfg;
        let vote = self.vote;
        let Role::Looking {
            round_votes,
            decide_at_ms,
            ..
        } = &mut self.role
        else {
            return;
        };
        let agree = round_votes.values().filter(|v| **v == vote).count();
        if !quorum.quorum(agree) {
            *decide_at_ms = None;
            return;
        }
        // `finalizeWait`: a quorum agrees; a better vote may still be on its way.
        match decide_at_ms {
            None => {
                *decide_at_ms = Some(now.elapsed_ms + FINALIZE_WAIT_MS);
                return;
            }
            Some(at) if now.elapsed_ms < *at => return,
            Some(_) => {}
        }
        let leader = self.vote.leader;
        if leader == self.me {
            self.lead(now);
        } else {
            self.follow(leader, now);
        }
    }

    fn on_vote(&mut self, from: Sid, vote: Vote, round: u64, their: PeerState, now: ZkNow) {
        let looking = matches!(self.role, Role::Looking { .. });
        if !looking {
            // A LOOKING peer is told who leads.
            if their == PeerState::Looking
                && let Some(leader) = self.leader()
            {
                let v = Vote {
                    leader,
                    zxid: self.vote.zxid,
                    epoch: self.vote.epoch,
                };
                let (round, state) = (self.round, self.state());
                self.to(
                    from,
                    PeerMsg::Vote {
                        vote: v,
                        round,
                        state,
                    },
                );
            }
            return;
        }
        if their != PeerState::Looking {
            // Told by the leader itself that it leads: follow it.
            if their == PeerState::Leading && vote.leader == from {
                self.vote = vote;
                self.follow(from, now);
            }
            return;
        }
        if round > self.round {
            self.round = round;
            let initial = self.my_initial_vote();
            self.vote = if vote.beats(&initial) { vote } else { initial };
            if let Role::Looking { round_votes, .. } = &mut self.role {
                round_votes.clear();
            }
            self.broadcast_vote(now.elapsed_ms);
        } else if round < self.round {
            let (v, r) = (self.vote, self.round);
            self.to(
                from,
                PeerMsg::Vote {
                    vote: v,
                    round: r,
                    state: PeerState::Looking,
                },
            );
            return;
        } else if vote.beats(&self.vote) {
            self.vote = vote;
            if let Role::Looking { decide_at_ms, .. } = &mut self.role {
                *decide_at_ms = None;
            }
            self.broadcast_vote(now.elapsed_ms);
        }
        let mine = self.vote;
        if let Role::Looking { round_votes, .. } = &mut self.role {
            round_votes.insert(from, vote);
            round_votes.insert(self.me, mine);
        }
        self.try_decide(now);
    }

    fn lead(&mut self, now: ZkNow) {
        let (accepted, last) = {
            let d = lock(&self.disk);
            (d.accepted_epoch, d.last_zxid())
        };
        let mut infos = BTreeMap::new();
        infos.insert(self.me, (accepted, last));
        let tick = self.tick_ms();
        self.role = Role::Leading(Box::new(Leading {
            since_ms: now.elapsed_ms,
            epoch: None,
            infos,
            established: false,
            counter: 0,
            prep_tree: self.tree.clone(),
            outstanding: BTreeSet::new(),
            learners: BTreeMap::new(),
            tracker: Tracker {
                next_expiration_ms: (now.elapsed_ms / tick + 1) * tick,
                ..Tracker::default()
            },
            expiring: BTreeMap::new(),
        }));
        self.try_fix_epoch(now);
    }

    fn follow(&mut self, leader: Sid, now: ZkNow) {
        let (accepted_epoch, last_zxid) = {
            let d = lock(&self.disk);
            (d.accepted_epoch, d.last_zxid())
        };
        self.role = Role::Following(Following {
            leader,
            epoch: 0,
            last_heard_ms: now.elapsed_ms,
            uptodate: false,
            touched: BTreeMap::new(),
        });
        self.to(
            leader,
            PeerMsg::FollowerInfo {
                accepted_epoch,
                last_zxid,
            },
        );
    }

    // ----- leader -----

    fn leading(&mut self) -> Option<&mut Leading> {
        match &mut self.role {
            Role::Leading(l) => Some(l),
            _ => None,
        }
    }

    fn try_fix_epoch(&mut self, now: ZkNow) {
        let quorum = {
            let Some(l) = self.leading() else { return };
            if l.epoch.is_some() {
                return;
            }
            l.infos.len()
        };
        if !self.cfg.quorum(quorum) {
            return;
        }
        let me = self.me;
        let Some(l) = self.leading() else { return };
        let epoch = l.infos.values().map(|(e, _)| *e).max().unwrap_or(0) + 1;
        l.epoch = Some(epoch);
        let waiting: Vec<(Sid, i64)> = l
            .infos
            .iter()
            .filter(|(s, _)| **s != me)
            .map(|(s, (_, z))| (*s, *z))
            .collect();
        lock(&self.disk).accepted_epoch = epoch;
        for (sid, last) in waiting {
            self.send_sync(sid, last, now);
        }
        self.try_establish(now);
    }

    fn send_sync(&mut self, sid: Sid, last: i64, now: ZkNow) {
        let committed = self.tree.last_zxid();
        let (snap, txns) = {
            let d = lock(&self.disk);
            let has = last == 0 || d.log.iter().any(|t| t.zxid == last);
            if has {
                let from = d.log.partition_point(|t| t.zxid <= last);
                (false, d.log[from..].to_vec())
            } else {
                (true, d.log.clone())
            }
        };
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        let learner = l.learners.entry(sid).or_default();
        learner.forwarding = true;
        learner.synced = false;
        learner.last_heard_ms = now.elapsed_ms;
        self.to(
            sid,
            PeerMsg::Sync {
                epoch,
                snap,
                after: last,
                txns,
                committed,
            },
        );
    }

    fn try_establish(&mut self, now: ZkNow) {
        let tick = self.tick_ms();
        let sessions = self.sessions.clone();
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        if l.established {
            return;
        }
        let synced = 1 + l.learners.values().filter(|x| x.synced).count();
        if !self.cfg.quorum(synced) {
            return;
        }
        let Some(l) = self.leading() else { return };
        l.established = true;
        for (id, timeout) in sessions {
            l.tracker.add(tick, id, timeout, now.elapsed_ms);
        }
        let synced = l.learners_where(|x| x.synced);
        lock(&self.disk).current_epoch = epoch;
        self.vote.epoch = epoch;
        for s in synced {
            self.to(s, PeerMsg::UpToDate);
        }
        self.roles.push(RoleEvent::Leading { epoch });
    }

    /// Proposes `body` for `session` (answering `origin`): logged, sent to the
    /// learners, committed once a quorum logged it.
    fn propose(&mut self, session: i64, body: TxnBody, origin: Option<Origin>, now: ZkNow) {
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        l.counter += 1;
        let txn = Txn {
            zxid: (i64::from(epoch) << 32) | l.counter,
            time_ms: now.wall_ms,
            session_id: session,
            body,
        };
        l.prep_tree.apply(&txn);
        l.outstanding.insert(txn.zxid);
        let to = l.learners_where(|x| x.forwarding);
        if let Some(o) = origin {
            self.origins.insert(txn.zxid, o);
        }
        lock(&self.disk).log.push(txn.clone());
        for s in to {
            self.to(
                s,
                PeerMsg::Proposal {
                    txn: txn.clone(),
                    origin,
                },
            );
        }
        self.try_commit();
    }

    fn try_commit(&mut self) {
        loop {
            let Some(l) = self.leading() else { return };
            let Some(&z) = l.outstanding.first() else {
                return;
            };
            let acks = 1 + l
                .learners
                .values()
                .filter(|x| x.forwarding && x.acked >= z)
                .count();
            if !self.cfg.quorum(acks) {
                return;
            }
            let Some(l) = self.leading() else { return };
            l.outstanding.remove(&z);
            let to = l.learners_where(|x| x.forwarding);
            for s in to {
                self.to(s, PeerMsg::Commit { zxid: z });
            }
            self.apply_committed(z);
        }
    }

    /// The leader takes a client write (from its own client or forwarded).
    fn submit(&mut self, origin: Origin, req: Request, now: ZkNow) {
        let Some(l) = self.leading() else { return };
        let body = match &req {
            Request::CloseSession => {
                l.tracker.closing.insert(origin.session);
                TxnBody::CloseSession
            }
            Request::Create { op: code, req } => {
                let one = MultiOp::Create {
                    op: *code,
                    req: req.clone(),
                };
                prep(&l.prep_tree, &one, origin.session).map_or_else(TxnBody::Error, |(b, _)| b)
            }
            Request::Delete { path, version } => prep(
                &l.prep_tree,
                &MultiOp::Delete {
                    path: path.clone(),
                    version: *version,
                },
                origin.session,
            )
            .map_or_else(TxnBody::Error, |(b, _)| b),
            Request::SetData {
                path,
                data,
                version,
            } => prep(
                &l.prep_tree,
                &MultiOp::SetData {
                    path: path.clone(),
                    data: data.clone(),
                    version: *version,
                },
                origin.session,
            )
            .map_or_else(TxnBody::Error, |(b, _)| b),
            Request::Multi(ops) => prep_multi(&l.prep_tree, ops, origin.session, now.wall_ms).0,
            _ => return,
        };
        self.propose(origin.session, body, Some(origin), now);
    }

    fn on_leader_msg(&mut self, from: Sid, msg: PeerMsg, now: ZkNow) {
        let tick = self.tick_ms();
        let Some(l) = self.leading() else { return };
        if let Some(x) = l.learners.get_mut(&from) {
            x.last_heard_ms = now.elapsed_ms;
        }
        match msg {
            PeerMsg::FollowerInfo {
                accepted_epoch,
                last_zxid,
            } => {
                l.infos.insert(from, (accepted_epoch, last_zxid));
                l.learners.insert(
                    from,
                    Learner {
                        last_heard_ms: now.elapsed_ms,
                        ..Learner::default()
                    },
                );
                if l.epoch.is_some() {
                    self.send_sync(from, last_zxid, now);
                } else {
                    self.try_fix_epoch(now);
                }
            }
            PeerMsg::AckNewLeader { last_zxid } => {
                let established = l.established;
                if let Some(x) = l.learners.get_mut(&from) {
                    x.synced = true;
                    x.acked = x.acked.max(last_zxid);
                }
                if established {
                    self.to(from, PeerMsg::UpToDate);
                } else {
                    self.try_establish(now);
                }
                self.try_commit();
            }
            PeerMsg::Ack { zxid } => {
                if let Some(x) = l.learners.get_mut(&from) {
                    x.acked = x.acked.max(zxid);
                }
                self.try_commit();
            }
            PeerMsg::Ping { touches } => {
                for (s, t) in touches {
                    l.tracker.touch(tick, s, t, now.elapsed_ms);
                }
            }
            PeerMsg::Request { origin, payload } => {
                if !l.established {
                    return;
                }
                if let Ok((_, req)) = Request::read(&payload) {
                    self.submit(origin, req, now);
                }
            }
            PeerMsg::CreateSession { origin, timeout_ms } => {
                if !l.established {
                    return;
                }
                l.tracker
                    .add(tick, origin.session, timeout_ms, now.elapsed_ms);
                self.propose(
                    origin.session,
                    TxnBody::CreateSession { timeout_ms },
                    Some(origin),
                    now,
                );
            }
            PeerMsg::SyncRequest { origin } => {
                // Behind every commit already sent on this link.
                self.to(from, PeerMsg::SyncDone { origin });
            }
            _ => {}
        }
    }

    // ----- follower -----

    fn on_follower_msg(&mut self, from: Sid, msg: PeerMsg, now: ZkNow) {
        let Role::Following(f) = &mut self.role else {
            return;
        };
        if from != f.leader {
            return;
        }
        f.last_heard_ms = now.elapsed_ms;
        match msg {
            PeerMsg::Sync {
                epoch,
                snap,
                after,
                txns,
                committed,
            } => {
                let last = {
                    let mut d = lock(&self.disk);
                    if epoch < d.accepted_epoch {
                        drop(d);
                        return self.look(now, "the leader proposed an older epoch");
                    }
                    d.accepted_epoch = epoch;
                    d.current_epoch = epoch;
                    if snap {
                        d.log = txns;
                    } else {
                        d.log.retain(|t| t.zxid <= after);
                        d.log.extend(txns);
                    }
                    let (tree, sessions) = replay(&d.log, committed);
                    self.tree = tree;
                    self.sessions = sessions;
                    d.last_zxid()
                };
                if let Role::Following(f) = &mut self.role {
                    f.epoch = epoch;
                }
                self.vote = Vote {
                    leader: from,
                    zxid: last,
                    epoch,
                };
                self.to(from, PeerMsg::AckNewLeader { last_zxid: last });
            }
            PeerMsg::UpToDate if !f.uptodate => {
                f.uptodate = true;
                let (leader, epoch) = (f.leader, f.epoch);
                self.roles.push(RoleEvent::Following { leader, epoch });
            }
            PeerMsg::Proposal { txn, origin } => {
                let zxid = txn.zxid;
                {
                    let mut d = lock(&self.disk);
                    if zxid <= d.last_zxid() {
                        return;
                    }
                    d.log.push(txn);
                }
                if let Some(o) = origin {
                    self.origins.insert(zxid, o);
                }
                self.to(from, PeerMsg::Ack { zxid });
            }
            PeerMsg::Commit { zxid } => self.apply_committed(zxid),
            PeerMsg::Ping { .. } => {
                let touches = std::mem::take(&mut f.touched).into_iter().collect();
                self.to(from, PeerMsg::Ping { touches });
            }
            PeerMsg::SyncDone { origin } => self.finish_origin(origin, None),
            _ => {}
        }
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

    // ----- commits -----

    /// Applies every logged txn up to `zxid` not applied yet, in order.
    fn apply_committed(&mut self, zxid: i64) {
        let txns = {
            let d = lock(&self.disk);
            let done = self.tree.last_zxid();
            let from = d.log.partition_point(|t| t.zxid <= done);
            d.log[from..]
                .iter()
                .take_while(|t| t.zxid <= zxid)
                .cloned()
                .collect::<Vec<_>>()
        };
        for txn in txns {
            let triggers = self.tree.apply(&txn);
            track_session(&mut self.sessions, &txn);
            self.fire(&triggers);
            let origin = self.origins.remove(&txn.zxid);
            if let TxnBody::CloseSession = txn.body {
                let expired = self
                    .leading()
                    .and_then(|l| {
                        l.tracker.sessions.remove(&txn.session_id);
                        l.tracker.closing.remove(&txn.session_id);
                        l.expiring.remove(&txn.session_id)
                    })
                    .map(|e| (txn.session_id, e));
                if let Some((session_id, ephemerals)) = expired {
                    self.events.push(ServerEvent::SessionExpired {
                        session_id,
                        ephemerals,
                    });
                } else if origin.is_some_and(|o| o.sid == self.me) {
                    self.events.push(ServerEvent::SessionClosed {
                        session_id: txn.session_id,
                    });
                }
            }
            if let Some(o) = origin.filter(|o| o.sid == self.me) {
                self.finish_origin(o, Some(&txn));
            }
            if let TxnBody::CloseSession = txn.body {
                let conns: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.session == Some(txn.session_id))
                    .map(|(id, _)| *id)
                    .collect();
                for c in conns {
                    self.close_conn(c);
                }
            }
        }
    }

    /// Answers the request `origin` names (its commit, or `SyncDone`), then the reads
    /// queued behind it.
    fn finish_origin(&mut self, o: Origin, txn: Option<&Txn>) {
        if let Some(TxnBody::CreateSession { timeout_ms }) = txn.map(|t| &t.body) {
            let conn = self
                .conns
                .iter()
                .find(|(_, c)| c.creating.as_ref().is_some_and(|(s, _, _)| *s == o.session))
                .map(|(id, _)| *id);
            let Some(conn) = conn else { return };
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let Some((id, req, _)) = c.creating.take() else {
                return;
            };
            c.session = Some(id);
            c.timeout_ms = *timeout_ms;
            let peer = c.peer.clone();
            self.events.push(ServerEvent::SessionCreated {
                session_id: id,
                peer,
                timeout_ms: *timeout_ms,
            });
            if let Role::Following(f) = &mut self.role {
                f.touched.insert(id, *timeout_ms);
            }
            let resp = ConnectResponse {
                protocol_version: 0,
                timeout_ms: *timeout_ms as i32,
                session_id: id,
                passwd: session_password(id),
                read_only: req.read_only.map(|_| false),
            };
            self.send(conn, resp.to_frame());
            return;
        }
        let conn = self.conns.iter().find(|(_, c)| {
            c.session == Some(o.session) && c.queue.front().is_some_and(|q| q.xid == o.xid)
        });
        let Some((&conn, _)) = conn else { return };
        let Some(q) = self.conns.get_mut(&conn).and_then(|c| c.queue.pop_front()) else {
            return;
        };
        match txn {
            Some(t) => self.reply_write(conn, q.xid, &q.req, t),
            None => self.serve_read(conn, q.xid, q.req),
        }
        self.drain_reads(conn);
    }

    fn drain_reads(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.queue.front().is_none_or(|q| q.waiting) {
                return;
            }
            let Some(q) = c.queue.pop_front() else { return };
            self.serve_read(conn, q.xid, q.req);
        }
    }

    fn reply_write(&mut self, conn: ConnId, xid: i32, req: &Request, txn: &Txn) {
        let stat_of =
            |tree: &DataTree, p: &str| tree.get(p).map(|n| n.wire_stat()).unwrap_or_default();
        if let TxnBody::Error(e) = txn.body {
            return self.reply(conn, xid, e, &Response::Empty);
        }
        match (req, &txn.body) {
            (Request::CloseSession, _) => {
                let frame = proto::reply_frame(
                    ReplyHeader {
                        xid,
                        zxid: txn.zxid,
                        err: ErrorCode::OK,
                    },
                    &Response::Empty,
                );
                self.send(conn, frame);
                self.close_conn(conn);
            }
            (Request::Create { op: code, .. }, TxnBody::Create { path, .. }) => {
                let body = if *code == op::CREATE2 {
                    Response::Create2(path.clone(), stat_of(&self.tree, path))
                } else {
                    Response::Create(path.clone())
                };
                self.reply(conn, xid, ErrorCode::OK, &body);
            }
            (Request::SetData { path, .. }, _) => {
                let body = Response::Stat(stat_of(&self.tree, path));
                self.reply(conn, xid, ErrorCode::OK, &body);
            }
            (Request::Multi(ops), TxnBody::Multi(subs)) => {
                let results = ops
                    .iter()
                    .zip(subs)
                    .map(|(one, sub)| match (one, sub) {
                        (_, TxnBody::Error(e)) => MultiResult::Error(*e),
                        (MultiOp::Create { op: code, .. }, TxnBody::Create { path, .. }) => {
                            if *code == op::CREATE2 {
                                MultiResult::Create2(path.clone(), stat_of(&self.tree, path))
                            } else {
                                MultiResult::Create(path.clone())
                            }
                        }
                        (MultiOp::SetData { path, .. }, _) => {
                            MultiResult::SetData(stat_of(&self.tree, path))
                        }
                        (MultiOp::Check { .. }, _) => MultiResult::Check,
                        _ => MultiResult::Delete,
                    })
                    .collect();
                self.reply(conn, xid, ErrorCode::OK, &Response::Multi(results));
            }
            _ => self.reply(conn, xid, ErrorCode::OK, &Response::Empty),
        }
    }

    // ----- clients -----

    /// A new client connection from `peer`.
    pub fn connect(&mut self, peer: impl Into<String>) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                session: None,
                creating: None,
                timeout_ms: 0,
                peer: peer.into(),
                queue: VecDeque::new(),
            },
        );
        id
    }

    /// The connection is gone: its watches go with it; its session stays.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.forget(conn);
    }

    fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.front.send(conn, frame);
    }

    fn close_conn(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.front.close(conn);
    }

    fn reply(&mut self, conn: ConnId, xid: i32, err: ErrorCode, body: &Response) {
        self.front.reply(&self.tree, conn, xid, err, body);
    }

    fn fire(&mut self, triggers: &[Trigger]) {
        self.front.fire(triggers);
    }

    /// Records that `session` was heard from: the leader's tracker, or the learner's
    /// table for the next ping. False if the leader knows it gone or closing.
    fn touch(&mut self, session: i64, timeout_ms: u32, now_ms: u64) -> bool {
        let tick = self.tick_ms();
        match &mut self.role {
            Role::Leading(l) => l.tracker.touch(tick, session, timeout_ms, now_ms),
            Role::Following(f) => {
                f.touched.insert(session, timeout_ms);
                true
            }
            Role::Looking { .. } => false,
        }
    }

    /// A frame from client connection `conn`.
    pub fn receive(&mut self, conn: ConnId, payload: &[u8], now: ZkNow) {
        if !self.serving() {
            // "ZooKeeperServer not running": the connection is closed.
            return self.close_conn(conn);
        }
        let Some(c) = self.conns.get(&conn).cloned() else {
            return;
        };
        if c.creating.is_some() {
            return;
        }
        let Some(session) = c.session else {
            return self.on_connect(conn, payload, now);
        };
        let Ok((xid, req)) = Request::read(payload) else {
            return self.close_conn(conn);
        };
        if !self.touch(session, c.timeout_ms, now.elapsed_ms) {
            return self.close_conn(conn);
        }
        if matches!(req, Request::Ping) {
            let header = ReplyHeader {
                xid: PING_XID,
                zxid: self.tree.last_zxid(),
                err: ErrorCode::OK,
            };
            return self.send(conn, proto::reply_frame(header, &Response::Empty));
        }
        let origin = Origin {
            sid: self.me,
            session,
            xid,
        };
        let leader = self.leader().unwrap_or(self.me);
        let is_sync = matches!(req, Request::Sync { .. });
        let waiting = req.is_write() || (is_sync && leader != self.me);
        let idle = c.queue.is_empty();
        if let Some(c) = self.conns.get_mut(&conn) {
            c.queue.push_back(Queued {
                xid,
                req: req.clone(),
                waiting,
            });
        }
        if req.is_write() {
            if leader == self.me {
                self.submit(origin, req, now);
            } else {
                self.to(
                    leader,
                    PeerMsg::Request {
                        origin,
                        payload: payload.to_vec(),
                    },
                );
            }
        } else if is_sync && leader != self.me {
            self.to(leader, PeerMsg::SyncRequest { origin });
        } else if idle {
            self.drain_reads(conn);
        }
    }

    fn on_connect(&mut self, conn: ConnId, payload: &[u8], now: ZkNow) {
        let Ok(req) = ConnectRequest::read(payload) else {
            return self.close_conn(conn);
        };
        if req.last_zxid_seen > self.tree.last_zxid() {
            // "Refusing session request for client ... as it has seen zxid ..."
            return self.close_conn(conn);
        }
        let (min, max) = self.cfg.zk.timeout_bounds();
        let timeout = (req.timeout_ms.max(0) as u32).clamp(min, max.max(min));
        if req.session_id == 0 {
            let id = self.next_session_id;
            self.next_session_id += 1;
            if let Some(c) = self.conns.get_mut(&conn) {
                c.creating = Some((id, req, timeout));
            }
            let origin = Origin {
                sid: self.me,
                session: id,
                xid: 0,
            };
            match self.leader() {
                Some(l) if l == self.me => {
                    let tick = self.tick_ms();
                    if let Some(lead) = self.leading() {
                        lead.tracker.add(tick, id, timeout, now.elapsed_ms);
                    }
                    self.propose(
                        id,
                        TxnBody::CreateSession {
                            timeout_ms: timeout,
                        },
                        Some(origin),
                        now,
                    );
                }
                Some(l) => self.to(
                    l,
                    PeerMsg::CreateSession {
                        origin,
                        timeout_ms: timeout,
                    },
                ),
                None => self.close_conn(conn),
            }
            return;
        }
        for o in other_conns_of(&self.conns, conn, req.session_id, |c| c.session) {
            self.close_conn(o);
        }
        let valid = req.passwd == session_password(req.session_id)
            && self.sessions.contains_key(&req.session_id)
            && self.touch(req.session_id, timeout, now.elapsed_ms);
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: if valid { timeout as i32 } else { 0 },
            session_id: if valid { req.session_id } else { 0 },
            passwd: if valid {
                session_password(req.session_id)
            } else {
                vec![0; 16]
            },
            read_only: req.read_only.map(|_| false),
        };
        self.send(conn, resp.to_frame());
        if valid {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session = Some(req.session_id);
                c.timeout_ms = timeout;
            }
        } else {
            self.close_conn(conn);
        }
    }

    fn serve_read(&mut self, conn: ConnId, xid: i32, req: Request) {
        self.front.read(&self.tree, conn, xid, req);
    }
}
