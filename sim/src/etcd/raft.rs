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
use std::time::Duration;

use protobuf::Message as _;
use raft::StateRole;
use raft::prelude::{Entry, EntryType, Message};
use tokio::sync::{mpsc, oneshot};

pub use super::link::{
    ClusterView, ELECTION_TICKS, FRAME_LEASE_ANSWER, FRAME_LEASE_REQUEST, FRAME_RAFT,
    HEARTBEAT_MILLIS, LEASE_RENEW, LEASE_TTL, LeaseFrame, PEER_PORT, REQUEST_TIMED_OUT, RaftLink,
    RaftStatus,
};
use super::op::{Applied, Op};
use super::service::{SharedEtcd, answer_lease};
use super::store::EtcdError;

/// A member's Raft settings: etcd v3.4.23's (a tick per heartbeat, the election
/// timeout drawn in `[ELECTION_TICKS, 2 * ELECTION_TICKS)`, `CheckQuorum` on, `PreVote`
/// off), resuming after the `applied` index.
fn node_config(id: u64, applied: u64) -> raft::Config {
    raft::Config {
        id,
        election_tick: ELECTION_TICKS,
        heartbeat_tick: 1,
        min_election_tick: ELECTION_TICKS,
        max_election_tick: 2 * ELECTION_TICKS,
        check_quorum: true,
        pre_vote: false,
        applied,
        max_size_per_msg: 1024 * 1024,
        max_inflight_msgs: 256,
        ..Default::default()
    }
}

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
    let cfg = node_config(view.me, m.with(|s| s.applied()));
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
