//! The members' link and what crosses it: each member's view of the cluster and its
//! Raft status, the proposals the services queue for the node, and the frames of one
//! kind byte and a body the members send each other (a Raft message, a forwarded lease
//! request or its answer), with etcd v3.4.23's timing constants.

use std::collections::BTreeMap;
use std::sync::Mutex;

use raft::prelude::{ConfState, Message};
use raft::storage::MemStorage;
use tokio::sync::{mpsc, oneshot};

use super::op::{Applied, Op};
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
pub(super) const LEASE_FOUND: u32 = 0;
pub(super) const LEASE_MISSING: u32 = 1;
pub(super) const LEASE_NOT_PRIMARY: u32 = 2;

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
    pub(super) fresh: bool,
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
