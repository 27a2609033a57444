//! One etcd member's state as a machine without I/O: the MVCC key space (revisions,
//! each key's `create_revision`, `mod_revision`, `version` and lease), its event
//! history (what a watch from an old revision replays), and the lessor (leases with
//! their TTL and expiry on the server's monotonic clock). Every member applies the
//! cluster's log to its own store ([`Store::apply`], from [`super::raft`]); the
//! services read it (watches, the lock service's waits) under one lock; times are the
//! member's [`lock_impl::Clock::now`] readings, passed in.
//!
//! Rules, from etcd v3.4.23 (`mvcc/kvstore_txn.go`, `etcdserver/apply.go`,
//! `lease/lessor.go`, `etcdserver/api/v3rpc/rpctypes/error.go`):
//! - an empty store is at revision 1; every request that writes (a put, a delete that
//!   finds a key, a txn with either, a lease revoke that deletes keys) adds exactly one
//!   revision, and every key it writes gets that revision as its `mod_revision`;
//! - a put of a new key sets `create_revision` to that revision and `version` 1; a put
//!   of an existing one keeps `create_revision` and adds one to `version`; a delete
//!   removes the key (a later put creates it anew);
//! - the operations of a txn apply in order, and a range in a txn sees the txn's own
//!   earlier writes (the mutex's `Then(put, getOwner)` finds its own key);
//! - a txn compare on a missing key compares a zero `KeyValue`, except a `VALUE`
//!   compare, which is false;
//! - a lease's TTL is at least the member's minimum (`ceil(1.5 × election timeout)`:
//!   2 s at etcd's defaults) and at most 9,000,000,000 s; its expiry is `now + TTL` at
//!   its grant and at every renewal (a scaled world's second is shorter, see
//!   [`Store::new`]) on the leader's lessor (the primary; a follower's leases wait
//!   forever, and a new leader gives each its TTL plus an election timeout again); the
//!   primary looks for expired leases every 500 ms and proposes their revokes (each
//!   deletes the lease's keys in one revision when applied); a renewal of a lease that
//!   has expired but is not revoked yet waits for the revoke and then answers
//!   "not found".
//!
//! Not modelled: compaction (history is kept whole, so no revision is ever
//! compacted), auth, the lease checkpoints of 3.4's `--experimental-enable-lease-
//! checkpoint` (off by default), and the request size and txn-op limits other than
//! the 128 operations of a txn.

mod lessor;
mod txn;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::proto::{
    PbDeleteRequest, PbDeleteResponse, PbEvent, PbKeyValue, PbPutRequest, PbPutResponse,
    PbRangeRequest, PbRangeResponse, PbResponseHeader,
};

/// etcd's largest lease TTL, seconds (`lease.MaxLeaseTTL`).
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// How often the lessor looks for expired leases (`lessor.runLoop`: 500 ms), in etcd
/// seconds' thousandths: half a second.
pub const EXPIRY_CHECK_MILLIS: u32 = 500;

/// The most operations a txn may have (`--max-txn-ops`' default).
pub const MAX_TXN_OPS: usize = 128;

/// An error etcd answers with: its gRPC code and message, as
/// `rpctypes.ErrGRPC*` defines them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdError {
    /// The gRPC status code.
    pub code: tonic::Code,
    /// The message, `etcdserver: …`.
    pub message: &'static str,
}

impl EtcdError {
    const fn new(code: tonic::Code, message: &'static str) -> Self {
        EtcdError { code, message }
    }
}

/// `ErrGRPCEmptyKey`.
pub const EMPTY_KEY: EtcdError = EtcdError::new(
    tonic::Code::InvalidArgument,
    "etcdserver: key is not provided",
);
/// `ErrGRPCKeyNotFound` (a put with `ignore_value` or `ignore_lease` on a missing key).
pub const KEY_NOT_FOUND: EtcdError =
    EtcdError::new(tonic::Code::InvalidArgument, "etcdserver: key not found");
/// `ErrGRPCValueProvided`.
pub const VALUE_PROVIDED: EtcdError = EtcdError::new(
    tonic::Code::InvalidArgument,
    "etcdserver: value is provided",
);
/// `ErrGRPCLeaseProvided`.
pub const LEASE_PROVIDED: EtcdError = EtcdError::new(
    tonic::Code::InvalidArgument,
    "etcdserver: lease is provided",
);
/// `ErrGRPCTooManyOps`.
pub const TOO_MANY_OPS: EtcdError = EtcdError::new(
    tonic::Code::InvalidArgument,
    "etcdserver: too many operations in txn request",
);
/// `ErrGRPCDuplicateKey`.
pub const DUPLICATE_KEY: EtcdError = EtcdError::new(
    tonic::Code::InvalidArgument,
    "etcdserver: duplicate key given in txn request",
);
/// `ErrGRPCFutureRev`.
pub const FUTURE_REV: EtcdError = EtcdError::new(
    tonic::Code::OutOfRange,
    "etcdserver: mvcc: required revision is a future revision",
);
/// `ErrGRPCLeaseNotFound`.
pub const LEASE_NOT_FOUND: EtcdError = EtcdError::new(
    tonic::Code::NotFound,
    "etcdserver: requested lease not found",
);
/// `ErrGRPCLeaseExist`.
pub const LEASE_EXISTS: EtcdError = EtcdError::new(
    tonic::Code::FailedPrecondition,
    "etcdserver: lease already exists",
);
/// `ErrGRPCLeaseTTLTooLarge`.
pub const LEASE_TTL_TOO_LARGE: EtcdError =
    EtcdError::new(tonic::Code::OutOfRange, "etcdserver: too large lease TTL");

/// Why a key went, for the world's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteCause {
    /// A client's delete (or a txn's), by the client host that sent it.
    Command(String),
    /// A client revoked the lease the key was attached to.
    Revoked(String),
    /// The lessor revoked the lease after its TTL ran out.
    Expired,
}

/// A change of the key space, for the world's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `key` was put with `value` at `revision` by client host `by`.
    Put {
        key: String,
        value: String,
        lease: i64,
        revision: i64,
        create_revision: i64,
        by: String,
    },
    /// `key` was deleted at `revision`.
    Delete {
        key: String,
        revision: i64,
        cause: DeleteCause,
    },
    /// A lease was granted with `ttl` seconds (after the minimum), by client host `by`.
    Granted { lease: i64, ttl: i64, by: String },
    /// The lessor revoked `lease` after its TTL ran out.
    LeaseExpired { lease: i64 },
}

/// One version of a key: its value at a revision, or its deletion there.
#[derive(Debug, Clone)]
struct Version {
    revision: i64,
    kv: Option<PbKeyValue>,
}

/// A lease in the lessor.
#[derive(Debug, Clone)]
struct Lease {
    ttl: i64,
    expiry: Duration,
    keys: BTreeSet<Vec<u8>>,
}

/// One member's key space and lessor.
#[derive(Debug, Clone)]
pub struct Store {
    revision: i64,
    /// Every key ever written, with its versions (a deleted key keeps them: etcd keeps
    /// its history until a compaction, which the model never does).
    keys: BTreeMap<Vec<u8>, Vec<Version>>,
    /// The keys that live now (each one's last version), by key: what a read at the
    /// latest revision sees, without walking every key deleted before it (a flash
    /// sale's two thousand tries, each a session with its own key, leave as many
    /// deleted keys under the lock's prefix).
    live: BTreeMap<Vec<u8>, PbKeyValue>,
    /// The highest revision any version was written at (a txn's own, while it writes).
    written: i64,
    /// Every event, in revision order (a watch replays from here).
    events: Vec<PbEvent>,
    leases: BTreeMap<i64, Lease>,
    /// The lessor's minimum TTL, seconds.
    min_ttl: i64,
    /// How long one of etcd's seconds is in this world (a scaled world's is shorter:
    /// `lock_impl::scale::ETCD_SECOND`).
    second: Duration,
    /// The next lease ID the member gives out.
    next_lease: i64,
    /// The header's fixed fields.
    cluster_id: u64,
    member_id: u64,
    raft_term: u64,
    /// What changed since the world last drained it, each with the log index of the
    /// entry whose apply changed it.
    changes: Vec<(u64, Change)>,
    /// The index of the last log entry applied (etcd's consistent index).
    applied: u64,
    /// Whether this member's lessor is the primary (its member leads): only the
    /// primary's leases expire; a follower's wait forever (`lessor.Demote`).
    primary: bool,
    /// Expired leases whose revoke the primary proposed, and when: proposed again
    /// after `EXPIRED_LEASE_RETRY` seconds if still there.
    revoking: BTreeMap<i64, Duration>,
}

/// The revision a write in progress will commit at, and whether it wrote.
struct WriteTxn {
    revision: i64,
    wrote: bool,
}

impl WriteTxn {
    /// The revision a read inside the txn sees: the txn's once it wrote.
    fn current(&self, store: &Store) -> i64 {
        if self.wrote {
            self.revision
        } else {
            store.revision
        }
    }

    /// The header of an operation's response inside a txn: its revision only (etcd
    /// fills the member and term of the txn's own header alone).
    fn header(&self, store: &Store) -> PbResponseHeader {
        PbResponseHeader {
            revision: self.current(store),
            ..Default::default()
        }
    }
}

impl Store {
    /// An empty store (revision 1) whose lessor gives leases at least `min_ttl`
    /// seconds, each `second` long, with `member_id` in every header (and in the high
    /// bits of the lease IDs it gives out, as etcd's ID generator does).
    pub fn new(member_id: u64, min_ttl: i64, second: Duration) -> Self {
        Store {
            revision: 1,
            keys: BTreeMap::new(),
            live: BTreeMap::new(),
            written: 1,
            events: Vec::new(),
            leases: BTreeMap::new(),
            min_ttl,
            second,
            // etcd's `idutil.Generator`: the member ID's low 16 bits on top, then a
            // timestamp and a counter; the model starts the counter at a fixed value.
            next_lease: (((member_id & 0xffff) << 48) | 0x0000_1d3a_7e00_0001) as i64 & i64::MAX,
            cluster_id: 0x14b2_ab8b_5e11_d3c4,
            member_id,
            raft_term: 2,
            changes: Vec::new(),
            applied: 0,
            primary: false,
            revoking: BTreeMap::new(),
        }
    }

    /// `n` of etcd's seconds in this world.
    pub fn seconds(&self, n: i64) -> Duration {
        self.second * u32::try_from(n.max(0)).unwrap_or(u32::MAX)
    }

    /// The lessor's period (`EXPIRY_CHECK_MILLIS` of a second).
    pub fn expiry_check(&self) -> Duration {
        self.second * EXPIRY_CHECK_MILLIS / 1000
    }

    /// The current revision.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// A response header at the current revision.
    pub fn header(&self) -> PbResponseHeader {
        PbResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision: self.revision,
            raft_term: self.raft_term,
        }
    }

    /// The changes since the last call, each with the log index whose apply made it.
    pub fn take_changes(&mut self) -> Vec<(u64, Change)> {
        std::mem::take(&mut self.changes)
    }

    fn note(&mut self, c: Change) {
        self.changes.push((self.applied, c));
    }

    /// The index of the last log entry applied.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The Raft term the member's headers carry.
    pub fn set_term(&mut self, term: u64) {
        self.raft_term = term;
    }

    /// Applies log entry `index`, `op`, at member time `now`: what it answers.
    pub fn apply(
        &mut self,
        index: u64,
        op: &super::op::Op,
        now: Duration,
    ) -> Result<super::op::Applied, EtcdError> {
        use super::op::{Applied, Request};
        self.applied = self.applied.max(index);
        let by = op.by.as_str();
        Ok(match &op.request {
            None => Applied::Done,
            Some(Request::Range(r)) => Applied::Range(self.range(r)?),
            Some(Request::Put(p)) => Applied::Put(self.put(p, by)?),
            Some(Request::Delete(d)) => Applied::Delete(self.delete_range(d, by)?),
            Some(Request::Txn(t)) => Applied::Txn(self.txn(t, by)?),
            Some(Request::Grant(g)) => {
                let (id, ttl) = self.grant(g.id, g.ttl, now, by)?;
                Applied::Grant {
                    id,
                    ttl,
                    header: self.header(),
                }
            }
            Some(Request::Revoke(r)) => {
                self.revoke(r.id, by)?;
                Applied::Revoke(self.header())
            }
            Some(Request::Expire(id)) => {
                self.expire_lease(*id);
                Applied::Done
            }
        })
    }

    /// An entry without a request (a new leader's empty entry) was applied.
    pub fn applied_empty(&mut self, index: u64) {
        self.applied = self.applied.max(index);
    }

    /// Every live key under `prefix` with its create revision and lease, by key.
    pub fn keys_with_prefix(&self, prefix: &[u8]) -> Vec<PbKeyValue> {
        self.live
            .range::<[u8], _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect()
    }

    fn begin(&self) -> WriteTxn {
        WriteTxn {
            revision: self.revision + 1,
            wrote: false,
        }
    }

    fn commit(&mut self, w: WriteTxn) {
        if w.wrote {
            self.revision = w.revision;
        }
    }

    /// The value of `key` at `revision` (the latest at or before it).
    fn at(&self, key: &[u8], revision: i64) -> Option<&PbKeyValue> {
        let versions = self.keys.get(key)?;
        versions
            .iter()
            .rev()
            .find(|v| v.revision <= revision)
            .and_then(|v| v.kv.as_ref())
    }

    /// The keys of `[key, range_end)` in etcd's sense (empty end: `key` alone; `\0`:
    /// every key from `key` on) that live at `revision`, by key.
    fn range_at(&self, key: &[u8], range_end: &[u8], revision: i64) -> Vec<PbKeyValue> {
        self.range_refs(key, range_end, revision)
            .into_iter()
            .cloned()
            .collect()
    }

    /// `range_at` by reference: a read at the latest revision walks the live keys
    /// alone, an older one every key's versions.
    fn range_refs(&self, key: &[u8], range_end: &[u8], revision: i64) -> Vec<&PbKeyValue> {
        if range_end.is_empty() {
            return self.at(key, revision).into_iter().collect();
        }
        let from = (std::ops::Bound::Included(key), std::ops::Bound::Unbounded);
        let before_end = |k: &[u8]| range_end == [0] || k < range_end;
        if revision >= self.written {
            return self
                .live
                .range::<[u8], _>(from)
                .take_while(|(k, _)| before_end(k))
                .map(|(_, kv)| kv)
                .collect();
        }
        self.keys
            .range::<[u8], _>(from)
            .take_while(|(k, _)| before_end(k))
            .filter_map(|(k, _)| self.at(k, revision))
            .collect()
    }

    /// `Range`.
    pub fn range(&self, r: &PbRangeRequest) -> Result<PbRangeResponse, EtcdError> {
        let (kvs, more, count) = self.range_kvs(r)?;
        Ok(PbRangeResponse {
            header: Some(self.header()),
            kvs,
            more,
            count,
        })
    }

    fn range_kvs(&self, r: &PbRangeRequest) -> Result<(Vec<PbKeyValue>, bool, i64), EtcdError> {
        self.range_kvs_in(r, self.revision)
    }

    /// A range as of `current` (the store's revision, or inside a write txn that
    /// wrote, the txn's: a write txn reads its own writes).
    fn range_kvs_in(
        &self,
        r: &PbRangeRequest,
        current: i64,
    ) -> Result<(Vec<PbKeyValue>, bool, i64), EtcdError> {
        if r.key.is_empty() {
            return Err(EMPTY_KEY);
        }
        if r.revision > current {
            return Err(FUTURE_REV);
        }
        let rev = if r.revision <= 0 { current } else { r.revision };
        // Filtered, sorted and cut by reference; only what the answer keeps is copied.
        let mut kvs = self.range_refs(&r.key, &r.range_end, rev);
        let count = kvs.len() as i64;
        if r.max_mod_revision != 0 {
            kvs.retain(|kv| kv.mod_revision <= r.max_mod_revision);
        }
        if r.min_mod_revision != 0 {
            kvs.retain(|kv| kv.mod_revision >= r.min_mod_revision);
        }
        if r.max_create_revision != 0 {
            kvs.retain(|kv| kv.create_revision <= r.max_create_revision);
        }
        if r.min_create_revision != 0 {
            kvs.retain(|kv| kv.create_revision >= r.min_create_revision);
        }
        // `apply.go`: a target other than the key sorts ascending when no order is
        // given (the store's own order is by key).
        let mut order = r.sort_order;
        if r.sort_target != 0 && order == 0 {
            order = 1;
        }
        if order != 0 {
            let target = r.sort_target;
            kvs.sort_by(|a, b| {
                let o = match target {
                    1 => a.version.cmp(&b.version),
                    2 => a.create_revision.cmp(&b.create_revision),
                    3 => a.mod_revision.cmp(&b.mod_revision),
                    4 => a.value.cmp(&b.value),
                    _ => a.key.cmp(&b.key),
                };
                if order == 2 { o.reverse() } else { o }
            });
        }
        let mut more = false;
        if r.limit > 0 && kvs.len() > r.limit as usize {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        if r.count_only {
            kvs.clear();
        }
        let mut kvs: Vec<PbKeyValue> = kvs.into_iter().cloned().collect();
        if r.keys_only {
            for kv in &mut kvs {
                kv.value.clear();
            }
        }
        Ok((kvs, more, count))
    }

    /// Checks a put before it applies (`checkRequestPut`): its lease exists, and an
    /// `ignore_*` put names a key that exists.
    fn check_put(&self, p: &PbPutRequest) -> Result<(), EtcdError> {
        if p.key.is_empty() {
            return Err(EMPTY_KEY);
        }
        if p.ignore_value && !p.value.is_empty() {
            return Err(VALUE_PROVIDED);
        }
        if p.ignore_lease && p.lease != 0 {
            return Err(LEASE_PROVIDED);
        }
        if (p.ignore_value || p.ignore_lease) && self.at(&p.key, self.revision).is_none() {
            return Err(KEY_NOT_FOUND);
        }
        if p.lease != 0 && !p.ignore_lease && !self.leases.contains_key(&p.lease) {
            return Err(LEASE_NOT_FOUND);
        }
        Ok(())
    }

    fn apply_put(&mut self, w: &mut WriteTxn, p: &PbPutRequest, by: &str) -> PbPutResponse {
        let prev = self.at(&p.key, w.revision).cloned();
        let value = if p.ignore_value {
            prev.as_ref().map(|kv| kv.value.clone()).unwrap_or_default()
        } else {
            p.value.clone()
        };
        let lease = if p.ignore_lease {
            prev.as_ref().map(|kv| kv.lease).unwrap_or(0)
        } else {
            p.lease
        };
        let kv = PbKeyValue {
            key: p.key.clone(),
            create_revision: prev.as_ref().map_or(w.revision, |kv| kv.create_revision),
            mod_revision: w.revision,
            version: prev.as_ref().map_or(1, |kv| kv.version + 1),
            value,
            lease,
        };
        if let Some(old) = prev.as_ref().map(|kv| kv.lease).filter(|l| *l != 0)
            && let Some(l) = self.leases.get_mut(&old)
        {
            l.keys.remove(&p.key);
        }
        if lease != 0
            && let Some(l) = self.leases.get_mut(&lease)
        {
            l.keys.insert(p.key.clone());
        }
        self.write_version(w, &p.key, Some(kv.clone()), prev.clone());
        self.note(Change::Put {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            value: String::from_utf8_lossy(&kv.value).into_owned(),
            lease,
            revision: w.revision,
            create_revision: kv.create_revision,
            by: by.to_string(),
        });
        PbPutResponse {
            header: None,
            prev_kv: if p.prev_kv { prev } else { None },
        }
    }

    fn write_version(
        &mut self,
        w: &mut WriteTxn,
        key: &[u8],
        kv: Option<PbKeyValue>,
        prev: Option<PbKeyValue>,
    ) {
        w.wrote = true;
        let event = match &kv {
            Some(kv) => PbEvent {
                r#type: 0,
                kv: Some(kv.clone()),
                prev_kv: prev,
            },
            None => PbEvent {
                r#type: 1,
                kv: Some(PbKeyValue {
                    key: key.to_vec(),
                    mod_revision: w.revision,
                    ..Default::default()
                }),
                prev_kv: prev,
            },
        };
        self.events.push(event);
        self.written = self.written.max(w.revision);
        match &kv {
            Some(kv) => {
                self.live.insert(key.to_vec(), kv.clone());
            }
            None => {
                self.live.remove(key);
            }
        }
        let versions = self.keys.entry(key.to_vec()).or_default();
        // A txn may write one key twice (a put, then a delete of a range holding it):
        // the key keeps its last write of the revision.
        if versions.last().is_some_and(|v| v.revision == w.revision) {
            versions.pop();
        }
        versions.push(Version {
            revision: w.revision,
            kv,
        });
    }

    fn apply_delete(
        &mut self,
        w: &mut WriteTxn,
        d: &PbDeleteRequest,
        cause: &DeleteCause,
    ) -> PbDeleteResponse {
        let victims = self.range_at(&d.key, &d.range_end, w.revision);
        for kv in &victims {
            self.delete_key(w, kv, cause.clone());
        }
        PbDeleteResponse {
            header: None,
            deleted: victims.len() as i64,
            prev_kvs: if d.prev_kv { victims } else { Vec::new() },
        }
    }

    fn delete_key(&mut self, w: &mut WriteTxn, kv: &PbKeyValue, cause: DeleteCause) {
        if kv.lease != 0
            && let Some(l) = self.leases.get_mut(&kv.lease)
        {
            l.keys.remove(&kv.key);
        }
        self.write_version(w, &kv.key, None, Some(kv.clone()));
        self.note(Change::Delete {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            revision: w.revision,
            cause,
        });
    }

    /// `Put`, by client host `by`.
    pub fn put(&mut self, p: &PbPutRequest, by: &str) -> Result<PbPutResponse, EtcdError> {
        self.check_put(p)?;
        let mut w = self.begin();
        let mut resp = self.apply_put(&mut w, p, by);
        self.commit(w);
        resp.header = Some(self.header());
        Ok(resp)
    }

    /// `DeleteRange`, by client host `by`.
    pub fn delete_range(
        &mut self,
        d: &PbDeleteRequest,
        by: &str,
    ) -> Result<PbDeleteResponse, EtcdError> {
        if d.key.is_empty() {
            return Err(EMPTY_KEY);
        }
        let mut w = self.begin();
        let mut resp = self.apply_delete(&mut w, d, &DeleteCause::Command(by.to_string()));
        self.commit(w);
        resp.header = Some(self.header());
        Ok(resp)
    }

    /// The events at revisions `from..` on keys of `[key, range_end)`.
    pub fn events_since(&self, from: i64, key: &[u8], range_end: &[u8]) -> Vec<PbEvent> {
        let start = self.events.partition_point(|e| event_revision(e) < from);
        self.events[start..]
            .iter()
            .filter(|e| {
                let k = e.kv.as_ref().map(|kv| kv.key.as_slice()).unwrap_or(&[]);
                in_range(k, key, range_end)
            })
            .cloned()
            .collect()
    }
}

/// The revision an event happened at.
pub fn event_revision(e: &PbEvent) -> i64 {
    e.kv.as_ref().map_or(0, |kv| kv.mod_revision)
}

/// Whether `k` is in etcd's range `[key, range_end)`.
pub fn in_range(k: &[u8], key: &[u8], range_end: &[u8]) -> bool {
    if range_end.is_empty() {
        return k == key;
    }
    k >= key && (range_end == [0] || k < range_end)
}
