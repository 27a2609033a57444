//! A member's Raft: TiKV's `raft` crate (etcd/raft's algorithm) driven as
//! `etcdserver/raft.go` drives etcd/raft, with etcd v3.4.23's settings: a tick every
//! heartbeat (100 ms), an election timeout of 10 ticks (the leader's quorum check),
//! randomised in `[10, 20)` for a follower's or candidate's election and drawn again at
//! every reset (a new term or role), as etcd/raft does, so a split vote ends (here
//! every draw comes from a stream seeded by the run's seed, one per member; before,
//! each member's timeout was drawn once and kept, and two members whose timeouts
//! differed by less than a message's latency could split their votes again and
//! again), `CheckQuorum` on, `PreVote` off (3.4's default), a proposal forwarded to the
//! leader, and a request that does not commit within `ReqTimeout` (5 s plus two
//! election timeouts) answered `etcdserver: request timed out`.
//!
//! Every member applies every committed entry to its store ([`super::Store::apply`]);
//! the member that proposed it answers its client with the result. A new leader
//! promotes its lessor when it applies its term's first (empty) entry, with the
//! election timeout as the extension, and a member that stops leading demotes its
//! lessor (its leases never expire there). Lease renewals and TTL queries do not go
//! through the log: a follower forwards them to the leader over the members' link
//! (`leasehttp`), retrying until `ReqTimeout`.
//!
//! The members' links carry frames of one kind byte and a body: a Raft message
//! (rust-protobuf), a forwarded lease request or its answer (prost). The world dials
//! and accepts them ([`crate::world`]'s etcd module); here is what a member sends and
//! does with what it receives.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use protobuf::Message as _;
use raft::StateRole;
use raft::prelude::{ConfState, Entry, EntryType, Message};
use raft::storage::MemStorage;
use tokio::sync::{mpsc, oneshot};

use super::op::{Applied, Op};
use super::service::SharedEtcd;
use super::store::EtcdError;

/// The port members talk to each other on.
pub const PEER_PORT: u16 = 2380;

/// etcd's heartbeat (`--heartbeat-interval`), in thousandths of an etcd second.
pub const HEARTBEAT_MILLIS: u32 = 100;

/// etcd's election timeout (`--election-timeout`, 1000 ms), in heartbeats.
pub const ELECTION_TICKS: usize = 10;

/// `ErrTimeout`.
pub const REQUEST_TIMED_OUT: EtcdError = EtcdError {
    code: tonic::Code::Unavailable,
    message: "etcdserver: request timed out",
};

/// A forwarded lease request's answer ([`LeaseFrame::status`]): the lease was found;
/// there is no such lease; the member asked is not the primary lessor (it no longer
/// leads: the forwarding member asks the leader again, as after `ErrNotPrimary`).
const LEASE_FOUND: u32 = 0;
const LEASE_MISSING: u32 = 1;
const LEASE_NOT_PRIMARY: u32 = 2;

/// The cluster as one member sees it.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// This member's Raft ID (1, 2, 3).
    pub me: u64,
    /// Every member: Raft ID and host name.
    pub members: Vec<(u64, String)>,
    /// This member's first election timeout, in ticks (`[ELECTION_TICKS, 2 ×
    /// ELECTION_TICKS)`).
    pub election_ticks: usize,
    /// The stream its later election timeouts are drawn from: etcd/raft draws a new one
    /// at every reset (a new term, a new role), which is what ends a split vote.
    pub timeout_seed: u64,
    /// Whether the member campaigns as soon as it first starts (the world's first
    /// member: a cluster that elected its leader before the run).
    pub campaign_at_start: bool,
}

impl ClusterView {
    /// A cluster of one (a member on its own, e.g. on a real loopback port).
    pub fn single() -> ClusterView {
        ClusterView {
            me: 1,
            members: vec![(1, "etcd-1".into())],
            election_ticks: ELECTION_TICKS,
            timeout_seed: 1,
            campaign_at_start: true,
        }
    }
}

/// What a member's Raft shows the rest of the member and the world.
#[derive(Debug, Clone, Default)]
pub struct RaftStatus {
    /// The leader this member knows (0: none).
    pub leader: u64,
    pub term: u64,
    /// Whether this member leads.
    pub leading: bool,
    /// Role changes since the world last looked (`leader (term N)`, …).
    pub roles: Vec<String>,
}

/// A proposal from a service: the op and where its result goes.
pub(super) struct Proposal {
    pub op: Op,
    pub reply: Option<oneshot::Sender<Result<Applied, EtcdError>>>,
}

/// A member's Raft plumbing: the channels into its node loop, what it shows, and its
/// links to the other members.
pub struct RaftLink {
    pub view: ClusterView,
    pub(super) proposals: mpsc::UnboundedSender<Proposal>,
    pub(super) inbox: mpsc::UnboundedSender<Message>,
    /// The node loop's ends of the channels, taken when it starts.
    pub(super) receivers: Mutex<
        Option<(
            mpsc::UnboundedReceiver<Proposal>,
            mpsc::UnboundedReceiver<Message>,
        )>,
    >,
    pub(super) status: Mutex<RaftStatus>,
    /// Frames to each other member (the world's link writer sends them).
    pub(super) outbox: BTreeMap<u64, mpsc::UnboundedSender<Vec<u8>>>,
    /// The member's log and hard state: its disk, which outlives a crash.
    pub storage: MemStorage,
    /// The next request ID this member gives (member ID on top).
    next_id: std::sync::atomic::AtomicU64,
    /// Forwarded lease requests waiting for the leader's answer, by token.
    pub(super) lease_waiters: Mutex<BTreeMap<u64, oneshot::Sender<LeaseFrame>>>,
    /// Whether the disk was empty at this start (the member's first).
    fresh: bool,
}

impl RaftLink {
    /// The plumbing of member `view.me`, on `storage` (a first start: empty, with the
    /// cluster's members as voters), with `outbox` to the others.
    pub fn new(
        view: ClusterView,
        storage: Option<MemStorage>,
        outbox: BTreeMap<u64, mpsc::UnboundedSender<Vec<u8>>>,
    ) -> RaftLink {
        let fresh = storage.is_none();
        let storage = storage.unwrap_or_else(|| {
            let voters: Vec<u64> = view.members.iter().map(|(id, _)| *id).collect();
            MemStorage::new_with_conf_state(ConfState::from((voters, Vec::<u64>::new())))
        });
        let (ptx, prx) = mpsc::unbounded_channel();
        let (itx, irx) = mpsc::unbounded_channel();
        RaftLink {
            next_id: std::sync::atomic::AtomicU64::new(view.me << 48),
            view,
            proposals: ptx,
            inbox: itx,
            receivers: Mutex::new(Some((prx, irx))),
            status: Mutex::default(),
            outbox,
            storage,
            lease_waiters: Mutex::default(),
            fresh,
        }
    }

    /// A new request ID.
    pub(super) fn next_id(&self) -> u64 {
        self.next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// What the member's Raft shows now.
    pub fn status(&self) -> RaftStatus {
        let s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        RaftStatus {
            leader: s.leader,
            term: s.term,
            leading: s.leading,
            roles: Vec::new(),
        }
    }

    /// The role changes since the last call.
    pub fn take_roles(&self) -> Vec<String> {
        std::mem::take(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()).roles)
    }

    /// The host name of member `id`.
    pub fn name_of(&self, id: u64) -> String {
        self.view
            .members
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, n)| n.clone())
            .unwrap_or_default()
    }

    /// Sends frame `kind` with `body` to member `to` (dropped if there is no link).
    pub(super) fn send(&self, to: u64, kind: u8, body: Vec<u8>) {
        if let Some(tx) = self.outbox.get(&to) {
            let mut f = Vec::with_capacity(body.len() + 5);
            f.extend(((body.len() + 1) as u32).to_be_bytes());
            f.push(kind);
            f.extend(body);
            let _ = tx.send(f);
        }
    }
}

/// Frame kinds on the members' links.
pub const FRAME_RAFT: u8 = 0;
pub const FRAME_LEASE_REQUEST: u8 = 1;
pub const FRAME_LEASE_ANSWER: u8 = 2;

/// A forwarded lease request (`leasehttp`'s renew or TTL) or its answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseFrame {
    #[prost(uint64, tag = "1")]
    pub token: u64,
    /// The member that asks.
    #[prost(uint64, tag = "2")]
    pub from: u64,
    /// 0: renew; 1: time to live.
    #[prost(uint32, tag = "3")]
    pub kind: u32,
    #[prost(int64, tag = "4")]
    pub id: i64,
    /// The answer: `LEASE_FOUND`, `LEASE_MISSING` or `LEASE_NOT_PRIMARY`.
    #[prost(uint32, tag = "5")]
    pub status: u32,
    #[prost(int64, tag = "6")]
    pub ttl: i64,
    #[prost(int64, tag = "7")]
    pub granted_ttl: i64,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub keys: Vec<Vec<u8>>,
}

/// A lease request's kind.
pub const LEASE_RENEW: u32 = 0;
pub const LEASE_TTL: u32 = 1;

/// Runs member `m`'s Raft node until dropped: ticks on the member's clock, steps the
/// other members' messages, proposes the services' requests, and persists, sends and
/// applies what each `Ready` holds, in etcd/raft's order.
pub async fn run_node(m: SharedEtcd) {
    let link = &m.raft;
    let Some((mut proposals, mut inbox)) = link
        .receivers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    else {
        return;
    };
    let view = link.view.clone();
    let cfg = raft::Config {
        id: view.me,
        election_tick: ELECTION_TICKS,
        heartbeat_tick: 1,
        min_election_tick: ELECTION_TICKS,
        max_election_tick: 2 * ELECTION_TICKS,
        check_quorum: true,
        pre_vote: false,
        applied: m.with(|s| s.applied()),
        max_size_per_msg: 1024 * 1024,
        max_inflight_msgs: 256,
        ..Default::default()
    };
    let logger = slog::Logger::root(slog::Discard, slog::o!());
    let first_start = link.fresh;
    let Ok(mut node) = raft::RawNode::new(&cfg, link.storage.clone(), &logger) else {
        return;
    };
    // The crate draws each reset's randomised timeout from `rand::thread_rng()`
    // (unseeded); every draw is replaced here, before the node ticks again, by one from
    // the member's seeded stream, so runs stay byte-identical.
    let mut timeouts = {
        use rand::SeedableRng;
        rand_chacha::ChaCha8Rng::seed_from_u64(view.timeout_seed)
    };
    // (The crate asserts the range: a view's out of it is brought into it.)
    node.raft.set_randomized_election_timeout(
        view.election_ticks
            .clamp(cfg.min_election_tick, cfg.max_election_tick - 1),
    );
    let mut last_reset = (node.raft.term, node.raft.state);
    if first_start && view.campaign_at_start {
        let _ = node.campaign();
    }
    let tick = m.seconds_millis(HEARTBEAT_MILLIS);
    let extend = tick * ELECTION_TICKS as u32;
    let mut next_tick = m.now() + tick;
    // The sleep to the next tick, kept while that tick is the next: a member receives
    // several messages per tick (heartbeats, appends, their answers), and a sleep made
    // again after each (its wake hint and timer registered and dropped again) was a
    // tenth of an etcd world's instructions. It ends at the same instant either way.
    let mut tick_sleep: Option<(Duration, lock_impl::Sleep)> = None;
    let mut waiters: BTreeMap<u64, oneshot::Sender<Result<Applied, EtcdError>>> = BTreeMap::new();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut was_leading = false;
    loop {
        // A new term or role reset the node's election timeout: draw it again.
        if (node.raft.term, node.raft.state) != last_reset {
            use rand::RngExt;
            last_reset = (node.raft.term, node.raft.state);
            node.raft.set_randomized_election_timeout(
                timeouts.random_range(cfg.min_election_tick..cfg.max_election_tick),
            );
        }
        let now = m.now();
        if now >= next_tick {
            // Every tick instant counts, two in one step of the world when a tick is
            // shorter than the step (an etcd heartbeat at the catalog's scale is 0.67
            // ms, the step 1 ms): its election timeouts are etcd's at the world's
            // scale. A member stopped past its next tick (a pause) counts one when it
            // resumes and ticks on from there, as Go's `time.Ticker` (one buffered
            // tick) gives a stopped process.
            node.tick();
            let late = now - next_tick;
            next_tick += tick;
            if late >= tick.max(crate::step::STEP) {
                next_tick = now + tick;
            }
        } else {
            let sleep = match &mut tick_sleep {
                Some((at, sleep)) if *at == next_tick => sleep,
                _ => {
                    &mut tick_sleep
                        .insert((next_tick, m.clock().sleep(next_tick - now)))
                        .1
                }
            };
            let mut slept = false;
            tokio::select! {
                biased;
                msg = inbox.recv() => {
                    let Some(msg) = msg else { return };
                    let _ = node.step(msg);
                }
                p = proposals.recv() => {
                    let Some(p) = p else { return };
                    if let Some(reply) = p.reply {
                        waiters.insert(p.op.id, reply);
                    }
                    held.push(p.op.encode());
                }
                _ = sleep => slept = true,
            }
            if slept {
                tick_sleep = None;
            }
        }
        // Proposals wait for a leader (a follower forwards them to it).
        if node.raft.leader_id != raft::INVALID_ID && !held.is_empty() {
            for data in std::mem::take(&mut held) {
                if node.propose(Vec::new(), data.clone()).is_err() {
                    held.push(data);
                }
            }
        }
        if !node.has_ready() {
            continue;
        }
        let mut ready = node.ready();
        send_all(link, ready.take_messages());
        if let Some(ss) = ready.ss() {
            let leading = ss.raft_state == StateRole::Leader;
            let role = match ss.raft_state {
                StateRole::Leader => format!("leader (term {})", node.raft.term),
                StateRole::Candidate | StateRole::PreCandidate => {
                    format!("candidate (term {})", node.raft.term)
                }
                StateRole::Follower if ss.leader_id != raft::INVALID_ID => {
                    format!("follower of {}", link.name_of(ss.leader_id))
                }
                StateRole::Follower => "follower (no leader)".to_string(),
            };
            {
                let mut st = link.status.lock().unwrap_or_else(|e| e.into_inner());
                st.leader = ss.leader_id;
                st.leading = leading;
                st.roles.push(role);
            }
            if was_leading && !leading {
                m.with(|s| s.demote());
            }
            was_leading = leading;
        }
        let applied = apply_entries(&m, ready.take_committed_entries(), &mut waiters, extend);
        if !ready.entries().is_empty() {
            let _ = link.storage.wl().append(ready.entries());
        }
        if let Some(hs) = ready.hs() {
            link.storage.wl().set_hardstate(hs.clone());
        }
        send_all(link, ready.take_persisted_messages());
        let mut light = node.advance(ready);
        if let Some(commit) = light.commit_index() {
            link.storage.wl().mut_hard_state().set_commit(commit);
        }
        send_all(link, light.take_messages());
        let applied_more = apply_entries(&m, light.take_committed_entries(), &mut waiters, extend);
        node.advance_apply();
        let term = node.raft.term;
        link.status.lock().unwrap_or_else(|e| e.into_inner()).term = term;
        m.with(|s| s.set_term(term));
        if applied || applied_more {
            m.changes.bump();
        }
    }
}

fn send_all(link: &RaftLink, msgs: Vec<Message>) {
    for msg in msgs {
        let to = msg.to;
        if let Ok(body) = msg.write_to_bytes() {
            link.send(to, FRAME_RAFT, body);
        }
    }
}

/// Applies committed `entries` to the member's store, answering the proposals this
/// member made; a leader's own empty entry promotes its lessor. Whether it applied any.
fn apply_entries(
    m: &SharedEtcd,
    entries: Vec<Entry>,
    waiters: &mut BTreeMap<u64, oneshot::Sender<Result<Applied, EtcdError>>>,
    extend: Duration,
) -> bool {
    let any = !entries.is_empty();
    for e in entries {
        let now = m.now();
        let op = (e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty())
            .then(|| Op::decode(&e.data))
            .flatten();
        match op {
            Some(op) => {
                let r = m.with_quiet(|s| s.apply(e.index, &op, now));
                if let Some(w) = waiters.remove(&op.id) {
                    let _ = w.send(r);
                }
            }
            None => {
                let leading = m.raft.status().leading;
                m.with_quiet(|s| {
                    s.applied_empty(e.index);
                    if leading && e.data.is_empty() {
                        s.promote(now, extend);
                    }
                });
            }
        }
    }
    any
}

/// A frame from another member's link: a Raft message goes to the node; a lease
/// request is answered (by `spawn`, as it may wait); an answer goes to its waiter.
pub fn on_frame(m: &SharedEtcd, frame: &[u8], spawn: &dyn Fn(super::LocalTask)) {
    let Some((&kind, body)) = frame.split_first() else {
        return;
    };
    match kind {
        FRAME_RAFT => {
            if let Ok(msg) = Message::parse_from_bytes(body) {
                let _ = m.raft.inbox.send(msg);
            }
        }
        FRAME_LEASE_REQUEST => {
            if let Ok(req) = <LeaseFrame as prost::Message>::decode(body) {
                let m = m.clone();
                spawn(Box::pin(async move {
                    let answer = answer_lease(&m, &req).await;
                    m.raft.send(
                        req.from,
                        FRAME_LEASE_ANSWER,
                        prost::Message::encode_to_vec(&answer),
                    );
                }));
            }
        }
        FRAME_LEASE_ANSWER => {
            if let Ok(ans) = <LeaseFrame as prost::Message>::decode(body)
                && let Some(w) = m
                    .raft
                    .lease_waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&ans.token)
            {
                let _ = w.send(ans);
            }
        }
        _ => {}
    }
}

/// The leader's answer to a forwarded lease request.
async fn answer_lease(m: &SharedEtcd, req: &LeaseFrame) -> LeaseFrame {
    let mut ans = LeaseFrame {
        token: req.token,
        from: m.raft.view.me,
        kind: req.kind,
        id: req.id,
        ..Default::default()
    };
    if !m.with(|s| s.is_primary()) {
        ans.status = LEASE_NOT_PRIMARY;
        return ans;
    }
    match local_lease(m, req.kind, req.id).await {
        Some((ttl, granted, keys)) => {
            ans.ttl = ttl;
            ans.granted_ttl = granted;
            ans.keys = keys;
        }
        None => ans.status = LEASE_MISSING,
    }
    ans
}

/// A lease request on the primary lessor: (TTL, granted TTL, keys), or `None` if no
/// such lease. A renewal of a lease that expired but is not revoked yet waits for the
/// revoke (`lessor.Renew`).
pub(super) async fn local_lease(
    m: &SharedEtcd,
    kind: u32,
    id: i64,
) -> Option<(i64, i64, Vec<Vec<u8>>)> {
    if kind == LEASE_TTL {
        return m.with(|s| s.time_to_live(id, m.now()));
    }
    let period = m.with(|s| s.expiry_check());
    loop {
        let seen = m.changes.seen();
        if !m.with(|s| s.expired(id, m.now())) {
            break;
        }
        m.wait_change(seen, period).await;
    }
    let now = m.now();
    m.with(|s| s.renew(id, now))
        .map(|ttl| (ttl, ttl, Vec::new()))
}

/// A lease request answered by the primary lessor, wherever it is: this member's if it
/// is the primary, else the leader's through the link, asked again (a tick later if
/// there is no leader) until `ReqTimeout` (`EtcdServer.LeaseRenew`,
/// `LeaseTimeToLive`). `Ok(None)`: no such lease.
pub(super) async fn lease_at_primary(
    m: &SharedEtcd,
    kind: u32,
    id: i64,
) -> Result<Option<(i64, i64, Vec<Vec<u8>>)>, EtcdError> {
    let deadline = m.now() + m.request_timeout();
    let tick = m.seconds_millis(HEARTBEAT_MILLIS);
    loop {
        let now = m.now();
        if now >= deadline {
            return Err(REQUEST_TIMED_OUT);
        }
        if m.with(|s| s.is_primary()) {
            return Ok(local_lease(m, kind, id).await);
        }
        let leader = m.raft.status().leader;
        if leader == raft::INVALID_ID || leader == m.raft.view.me {
            m.clock().sleep(tick).await;
            continue;
        }
        let token = m.raft.next_id();
        let (tx, rx) = oneshot::channel();
        m.raft
            .lease_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token, tx);
        let req = LeaseFrame {
            token,
            from: m.raft.view.me,
            kind,
            id,
            ..Default::default()
        };
        m.raft.send(
            leader,
            FRAME_LEASE_REQUEST,
            prost::Message::encode_to_vec(&req),
        );
        let wait = (deadline - now).min(tick * ELECTION_TICKS as u32);
        let answer = tokio::select! {
            biased;
            a = rx => a.ok(),
            _ = m.clock().sleep(wait) => None,
        };
        m.raft
            .lease_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&token);
        match answer {
            Some(a) if a.status == LEASE_FOUND => {
                return Ok(Some((a.ttl, a.granted_ttl, a.keys)));
            }
            Some(a) if a.status == LEASE_MISSING => return Ok(None),
            Some(_) => m.clock().sleep(tick).await,
            None => {}
        }
    }
}

/// Writes a member's frames to one other member over connections `dial` opens,
/// dialling again a heartbeat (`retry`) after a link broke; frames queued while the
/// link was down are dropped (rafthttp drops messages to a peer it cannot reach, and
/// Raft sends them again).
pub async fn write_link<S, D, F>(
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    mut dial: D,
    clock: std::sync::Arc<dyn lock_impl::Clock>,
    retry: Duration,
) where
    S: tokio::io::AsyncWrite + Unpin,
    D: FnMut() -> F,
    F: std::future::Future<Output = std::io::Result<S>>,
{
    use tokio::io::AsyncWriteExt;
    loop {
        let dialed = dial().await;
        while rx.try_recv().is_ok() {}
        if let Ok(mut stream) = dialed {
            while let Some(frame) = rx.recv().await {
                if stream.write_all(&frame).await.is_err() {
                    break;
                }
            }
        }
        clock.sleep(retry).await;
    }
}

/// Reads one other member's frames into member `m` until the link closes; `spawn`
/// runs what may wait (a lease request's answer).
pub async fn read_link<S: tokio::io::AsyncRead + Unpin>(
    m: SharedEtcd,
    stream: S,
    spawn: impl Fn(super::LocalTask),
) {
    crate::net::read_frames(stream, |frame| {
        on_frame(&m, frame, &spawn);
        true
    })
    .await;
}
