//! The etcd designs: Go `clientv3/concurrency`'s `Mutex` on a `Session` (v3.4.23
//! `mutex.go`, `session.go`, `key.go`), and the `v3lock` service's `Lock` RPC. Each
//! acquisition opens a session of its own: a lease of the acquisition's lease (whole
//! seconds, rounded up; etcd raises it to its minimum, 2 s at its defaults) kept
//! alive by the session's keeper ([`crate::etcd::session`]) until release.
//!
//! - `etcd-mutex`: `Mutex.Lock`: one txn `If(create_revision(pfx/lease) = 0)
//!   Then(Put(pfx/lease, "", lease), Get(pfx, first by create)) Else(Get(pfx/lease),
//!   Get(pfx, first by create))`: the key's create revision is `myRev`; the lock is
//!   ours if no key under the prefix is older. Otherwise `waitDeletes`: get the newest
//!   key created before `myRev`, watch it from the header's revision until it is
//!   deleted, again until none is left. A wait that ends on the budget deletes the key
//!   (`Unlock(client.Ctx())`). With `Wait::TryOnce`, a held lock is refused at once
//!   and the key deleted, as v3.5's `TryLock` does (3.4.23 has none). Release:
//!   `Unlock` (`Delete(pfx/lease)`), then `Session.Close` (revoke). Known failure
//!   (Jepsen, etcd 3.4.3): the lease expires on the server while its holder is paused
//!   or cut off, the next waiter gets the lock, and the old holder, not told, still
//!   acts: two holders.
//! - `etcd-mutex-fenced`: `etcd-mutex` with the key's create revision as the fencing
//!   token: revisions only grow, so a storage that refuses a token below the highest it
//!   saw refuses the old holder.
//! - `etcd-lock-service`: a session as above, then the `Lock` RPC with its lease (the
//!   server runs the same mutex for the caller and answers with the key once it is
//!   ours); release: the `Unlock` RPC with the key, then `Session.Close`. A wait that
//!   ends on the budget cancels the call; the server deletes the waiting key. The
//!   service has no try: `Wait::TryOnce` reads the prefix first and calls `Lock`
//!   only if no key is under it.
//!
//! The owner value is the lock's etcd key (`<key>/<lease in hex>`), as the world's
//! record names it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Compare, CompareOp, GetOptions, SortOrder, SortTarget, Txn, TxnOp, WatchOptions,
};

use super::check_guard;
use crate::LockError;
use crate::etcd::{CallError, EtcdConn, EtcdServer, Policy, Session};
use crate::lock::{Acquire, AcquireOptions, Deps, Guard, LockDesign, Release, Wait};

/// Which of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Fenced,
    LockService,
}

/// The etcd designs (see the module's documentation).
pub struct EtcdMutex {
    deps: Deps,
    kind: Kind,
    conn: tokio::sync::OnceCell<EtcdConn>,
    /// Each held lock's session, by owner value.
    sessions: Mutex<BTreeMap<String, Arc<Session>>>,
}

impl EtcdMutex {
    /// `etcd-mutex`.
    pub const NAME: &'static str = "etcd-mutex";
    /// `etcd-mutex-fenced`.
    pub const FENCED_NAME: &'static str = "etcd-mutex-fenced";
    /// `etcd-lock-service`.
    pub const LOCK_SERVICE_NAME: &'static str = "etcd-lock-service";

    fn with(deps: Deps, kind: Kind) -> Self {
        EtcdMutex {
            deps,
            kind,
            conn: tokio::sync::OnceCell::new(),
            sessions: Mutex::new(BTreeMap::new()),
        }
    }

    /// `etcd-mutex`.
    pub fn new(deps: Deps) -> Self {
        Self::with(deps, Kind::Mutex)
    }

    /// `etcd-mutex-fenced`.
    pub fn fenced(deps: Deps) -> Self {
        Self::with(deps, Kind::Fenced)
    }

    /// `etcd-lock-service`.
    pub fn lock_service(deps: Deps) -> Self {
        Self::with(deps, Kind::LockService)
    }

    fn design(&self) -> &'static str {
        match self.kind {
            Kind::Mutex => Self::NAME,
            Kind::Fenced => Self::FENCED_NAME,
            Kind::LockService => Self::LOCK_SERVICE_NAME,
        }
    }

    async fn conn(&self) -> Result<&EtcdConn, LockError> {
        let server: &EtcdServer = self.deps.require(self.design())?;
        self.conn
            .get_or_try_init(|| async {
                server
                    .connect(
                        self.deps.clock.clone(),
                        self.deps.entropy.clone(),
                        self.deps.scale,
                    )
                    .await
                    .map_err(|e| LockError::Etcd {
                        command: "connect",
                        message: e.to_string(),
                    })
            })
            .await
    }

    fn error(&self, command: &'static str, e: CallError) -> LockError {
        LockError::Etcd {
            command,
            message: e.to_string(),
        }
    }

    /// `Mutex.Lock` (or `TryLock`) for the session's key: `Ok(Some(myRev))` once it is
    /// ours, `Ok(None)` if the budget ran out (the key deleted), an error otherwise.
    async fn lock(
        &self,
        conn: &EtcdConn,
        key: &str,
        session: &Session,
        wait: Wait,
    ) -> Result<Option<i64>, CallError> {
        let start = conn.clock.now();
        let budget = match wait {
            Wait::TryOnce => conn.timeout,
            Wait::Retry { budget_ms, .. } => Duration::from_millis(budget_ms),
        };
        let left = |conn: &EtcdConn| budget.saturating_sub(conn.clock.now() - start);
        let pfx = format!("{key}/");
        let my_key = format!("{pfx}{:x}", session.lease);
        let first_create = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let txn = Txn::new()
            .when([Compare::create_revision(
                my_key.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then([
                TxnOp::put(
                    my_key.as_str(),
                    "",
                    Some(etcd_client::PutOptions::new().with_lease(session.lease)),
                ),
                TxnOp::get(pfx.as_str(), Some(first_create.clone())),
            ])
            .or_else([
                TxnOp::get(my_key.as_str(), None),
                TxnOp::get(pfx.as_str(), Some(first_create)),
            ]);
        let resp = conn
            .call(Policy::NonRepeatable, left(conn), |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let header_rev = resp.header().map_or(0, |h| h.revision());
        let ranges: Vec<_> = resp
            .op_responses()
            .into_iter()
            .filter_map(|op| match op {
                etcd_client::TxnOpResponse::Get(g) => Some(g),
                _ => None,
            })
            .collect();
        let mut my_rev = header_rev;
        if !resp.succeeded() {
            my_rev = ranges
                .first()
                .and_then(|g| g.kvs().first())
                .map_or(my_rev, |kv| kv.create_revision());
        }
        let owner_rev = ranges
            .last()
            .and_then(|g| g.kvs().first())
            .map(|kv| kv.create_revision());
        if owner_rev.is_none_or(|r| r == my_rev) {
            return Ok(Some(my_rev));
        }
        if wait == Wait::TryOnce {
            self.unlock(conn, &my_key).await?;
            return Ok(None);
        }
        match self
            .wait_deletes(conn, &pfx, my_rev - 1, start, budget)
            .await
        {
            Ok(()) => Ok(Some(my_rev)),
            Err(e) => {
                // `Unlock(client.Ctx())`: the key goes, whatever ended the wait.
                let _ = self.unlock(conn, &my_key).await;
                match e {
                    CallError::Timeout => Ok(None),
                    other => Err(other),
                }
            }
        }
    }

    /// `waitDeletes`: until no key under `pfx` was created at or before `max_rev`.
    async fn wait_deletes(
        &self,
        conn: &EtcdConn,
        pfx: &str,
        max_rev: i64,
        start: Duration,
        budget: Duration,
    ) -> Result<(), CallError> {
        let left = |conn: &EtcdConn| budget.saturating_sub(conn.clock.now() - start);
        loop {
            let opts = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Descend)
                .with_limit(1)
                .with_max_create_revision(max_rev);
            let resp = conn
                .call(Policy::Repeatable, left(conn), |mut c| {
                    let opts = opts.clone();
                    async move { c.get(pfx, Some(opts)).await }
                })
                .await?;
            let Some(last) = resp.kvs().first() else {
                return Ok(());
            };
            let last_key = last.key().to_vec();
            let rev = resp.header().map_or(0, |h| h.revision());
            self.wait_delete(conn, last_key, rev, left(conn)).await?;
        }
    }

    /// `waitDelete`: watches `key` from `rev` until a delete event, within `budget`.
    /// A watch stream that fails is opened again from the next revision after
    /// `retryConnWait` (clientv3's watcher resumes its watches on a new stream).
    async fn wait_delete(
        &self,
        conn: &EtcdConn,
        key: Vec<u8>,
        rev: i64,
        budget: Duration,
    ) -> Result<(), CallError> {
        let clock = conn.clock.clone();
        let work = async {
            let mut from = rev;
            loop {
                let mut client = conn.client.clone();
                let opened = client
                    .watch(
                        key.clone(),
                        Some(WatchOptions::new().with_start_revision(from)),
                    )
                    .await;
                if let Ok(mut stream) = opened {
                    while let Ok(Some(resp)) = stream.message().await {
                        for ev in resp.events() {
                            if ev.event_type() == etcd_client::EventType::Delete {
                                return;
                            }
                            if let Some(kv) = ev.kv() {
                                from = from.max(kv.mod_revision() + 1);
                            }
                        }
                        if resp.canceled() {
                            break;
                        }
                    }
                }
                clock
                    .sleep(conn.scale.of(&crate::scale::ETCD_RETRY_CONN_WAIT))
                    .await;
            }
        };
        tokio::select! {
            biased;
            _ = work => Ok(()),
            _ = conn.clock.sleep(budget) => Err(CallError::Timeout),
        }
    }

    /// `Unlock`: deletes the key; whether it was there.
    async fn unlock(&self, conn: &EtcdConn, my_key: &str) -> Result<bool, CallError> {
        let resp = conn
            .call(Policy::NonRepeatable, conn.timeout, |mut c| async move {
                c.delete(my_key, None).await
            })
            .await?;
        Ok(resp.deleted() > 0)
    }

    /// The lock service's `Lock` with the session's lease, within the budget.
    async fn lock_rpc(
        &self,
        conn: &EtcdConn,
        key: &str,
        session: &Session,
        wait: Wait,
    ) -> Result<Option<String>, CallError> {
        let budget = match wait {
            Wait::TryOnce => {
                // The service has no try: look for a holder first, and call `Lock`
                // only if there is none (a race with another taker makes the call
                // wait, up to the request deadline).
                let pfx = format!("{key}/");
                let held = conn
                    .call(Policy::Repeatable, conn.timeout, |mut c| {
                        let pfx = pfx.clone();
                        async move {
                            c.get(pfx, Some(GetOptions::new().with_prefix().with_count_only()))
                                .await
                        }
                    })
                    .await?;
                if held.count() > 0 {
                    return Ok(None);
                }
                conn.timeout
            }
            Wait::Retry { budget_ms, .. } => Duration::from_millis(budget_ms),
        };
        let lease = session.lease;
        let r = conn
            .call(Policy::NonRepeatable, budget, |mut c| async move {
                c.lock(key, Some(etcd_client::LockOptions::new().with_lease(lease)))
                    .await
            })
            .await;
        match r {
            Ok(resp) => Ok(Some(String::from_utf8_lossy(resp.key()).into_owned())),
            Err(CallError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl LockDesign for EtcdMutex {
    fn name(&self) -> &str {
        self.design()
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        let conn = self.conn().await?;
        // The lease in etcd's whole seconds, rounded up (at the world's scale).
        let second = conn.second().as_nanos().max(1);
        let ttl = (u128::from(options.lease_ms) * 1_000_000).div_ceil(second) as i64;
        let sent = conn.clock.now();
        let k = key.to_string();
        let session = match Session::grant(
            conn,
            ttl,
            &self.deps.spawner,
            self.deps.observer.clone(),
            move |lease| (k.clone(), format!("{k}/{lease:x}")),
        )
        .await
        {
            Ok(s) => Arc::new(s),
            Err(e) if e.nothing_done() => return Err(self.error("LeaseGrant", e)),
            // A grant whose answer was lost leaves a lease nobody holds a key on: it
            // expires by itself; no lock was taken.
            Err(_) => return Ok(Acquire::NotAcquired),
        };
        let my_key = format!("{key}/{:x}", session.lease);
        let outcome = match self.kind {
            Kind::Mutex | Kind::Fenced => self
                .lock(conn, key, &session, options.wait)
                .await
                .map(|r| r.map(|rev| (my_key.clone(), Some(rev)))),
            Kind::LockService => self
                .lock_rpc(conn, key, &session, options.wait)
                .await
                .map(|r| r.map(|k| (k, None))),
        };
        match outcome {
            Ok(Some((owner, rev))) => {
                let guard = Guard {
                    design: self.design().to_string(),
                    key: key.to_string(),
                    owner: owner.clone(),
                    acquired_at: sent,
                    valid_until: Some(session.valid_until()),
                    token: match self.kind {
                        Kind::Fenced => rev.map(|r| r as u64),
                        _ => None,
                    },
                };
                self.sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(owner, session);
                Ok(Acquire::Acquired(guard))
            }
            Ok(None) => {
                let _ = session.close(conn).await;
                Ok(Acquire::NotAcquired)
            }
            Err(e) => {
                // `defer s.Close()`: the session ends with the failed call; its key (if
                // the call took effect) goes with the lease.
                let _ = session.close(conn).await;
                if e.nothing_done() {
                    Err(self.error("Txn", e))
                } else {
                    Ok(Acquire::Unknown(e.to_string()))
                }
            }
        }
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.design(), guard)?;
        let conn = self.conn().await?;
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&guard.owner);
        let known = session.is_some();
        let removed = match self.kind {
            Kind::LockService => {
                let owner = guard.owner.clone();
                conn.call(Policy::NonRepeatable, conn.timeout, |mut c| {
                    let owner = owner.clone();
                    async move { c.unlock(owner).await }
                })
                .await
                .map(|_| None)
            }
            _ => self.unlock(conn, &guard.owner).await.map(Some),
        };
        if let Some(s) = session {
            let _ = s.close(conn).await;
        }
        // `Unlock` answers nil either way: the delete's count tells the mutex whether
        // its key was there; the lock service's `Unlock` answers nothing of the kind,
        // so only a lock this client took (its session is here) counts as removed.
        match removed {
            Ok(Some(true)) => Ok(Release::Removed),
            Ok(None) if known => Ok(Release::Removed),
            Ok(Some(false)) | Ok(None) => Ok(Release::NotRemoved),
            Err(e) if e.nothing_done() => Err(self.error("DeleteRange", e)),
            Err(e) => Ok(Release::Unknown(e.to_string())),
        }
    }

    fn retry_horizon(&self) -> Duration {
        // A stream that failed is opened again after `retryConnWait`.
        self.deps.scale.of(&crate::scale::ETCD_RETRY_CONN_WAIT)
    }
}
