//! `zk-curator` and `zk-curator-fenced`: Apache Curator's `InterProcessMutex` (seeds
//! 002 and 004: "ZooKeeper ephemeral sequential nodes", "ZooKeeper as the CP
//! alternative"), read from Curator apache-curator-5.9.0: `InterProcessMutex`,
//! `LockInternals`, `StandardLockInternalsDriver`, `CreateBuilderImpl`, and the retry
//! and connection layers below them (`RetryLoop`, `RetryLoopImpl`,
//! `ExponentialBackoffRetry`, `CuratorZookeeperClient`, `ConnectionState`,
//! `ConnectionStateManager`).
//!
//! Acquire (`LockInternals.attemptLock`):
//! 1. reentrancy is counted locally: a client that holds the key already counts one
//!    more hold and sends nothing (`InterProcessMutex.internalLock`'s `threadData`,
//!    per client here instead of per thread);
//! 2. create an `EPHEMERAL_SEQUENTIAL` node `<root>/<key>/_c_<uuid>-lock-` in
//!    protected mode (`CreateBuilderImpl.withProtection`), its parents created first
//!    if missing (`creatingParentContainersIfNeeded`); if the create's outcome is
//!    unknown (connection loss), list the children and look for our `_c_<uuid>`
//!    prefix before creating another (`findProtectedNodeInForeground`);
//! 3. list the children sorted by the part after `lock-` (`getSortedChildren`): the
//!    first holds the lock; otherwise `getData` with a watch on the immediate
//!    predecessor and wait for any event (or the wait budget), then list again
//!    (`internalLockLoop`); a predecessor already gone (`NONODE`) lists again at once;
//! 4. a wait budget spent deletes our node (`deleteOurPath`) and reports not acquired.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;

use super::check_guard;
use crate::scale;
use crate::zk::proto::{ErrorCode, create_mode};
use crate::zk::{SessionState, ZkClient, ZkEnsemble, ZkError};
use crate::{
    Acquire, AcquireOptions, Clock, Deps, Entropy, Guard, LockDesign, LockError, Release, Spawner,
    Wait,
};

/// Curator's `InterProcessMutex` lock name.
const LOCK_NAME: &str = "lock-";
/// Curator's protected-mode prefix (`CreateBuilderImpl.PROTECTED_PREFIX`).
const PROTECTED_PREFIX: &str = "_c_";
/// `ExponentialBackoffRetry(1000, 3)`: three retries (the base is
/// [`scale::CURATOR_RETRY_BASE`]).
const MAX_RETRIES: u32 = 3;

/// The parent of every lock's node directory, unless [`ZkCurator::with_root`] says
/// otherwise.
pub const ZK_LOCK_ROOT: &str = "/locksim";

struct Hold {
    guard: Guard,
    count: u64,
}

/// Curator's `InterProcessMutex` (see the module doc).
///
/// Release (`InterProcessMutex.release`): one hold less; at zero, delete our node
/// (version -1). A delete that cannot be confirmed keeps being retried in the
/// background until it succeeds or the session ends (Curator's `guaranteed()`).
///
/// Retries follow Curator's `RetryLoop.callWithRetry` with `ExponentialBackoffRetry(1000,
/// 3)` (the policy of Curator's own examples): the loop first waits for a connection,
/// up to the connection timeout (15 s, `CuratorZookeeperClient.
/// internalBlockUntilConnectedOrTimedOut`), once; then it runs the operation on the
/// current ZooKeeper handle, and after `CONNECTIONLOSS`, `OPERATIONTIMEOUT`,
/// `SESSIONMOVED` or `SESSIONEXPIRED` (`RetryPolicy.allowRetry`) sleeps `base ×
/// max(1, rand(2^(n+1)))` and runs it again, three times at most. A request made while
/// the handle is reconnecting waits in the ZooKeeper client's outgoing queue
/// ([`crate::zk`]). The connection's state is followed as Curator's framework follows
/// it: a `Disconnected` event suspends the connection (`SUSPENDED`); a session timeout
/// spent suspended makes `ConnectionStateManager` inject a session expiration into the
/// handle (`checkSessionExpiration`, `simulatedSessionExpirationPercent` 100); an
/// expired session (`LOST`) is replaced at once by a new handle, which starts
/// connecting (`ConnectionState.handleExpiredSession` → `reset`). Every constant is
/// read at the world's scale ([`crate::scale`]: [`scale::CURATOR_RETRY_BASE`],
/// [`scale::CURATOR_CONNECTION_TIMEOUT`], and the ZooKeeper client's reconnect pauses
/// through [`ZkEnsemble::scale`]).
///
/// The guard carries the lock node's path as its owner value; `zk-curator-fenced` also
/// carries the node's `czxid` as its fencing token (creating with `create2`, which
/// returns the node's Stat): zxids only grow, and a quorum-committed create is never
/// undone, so a later holder's token is always larger.
///
/// Known failure: the lock lives as long as the holder's *session*, not its belief. A
/// holder paused past its session timeout has lost the lock (its node deleted by the
/// session's expiry) while it keeps working: two holders, unless the storage checks the
/// token. Curator's recipe does not watch the connection state for the caller
/// (`InterProcessMutex` registers no `ConnectionStateListener`; a waiter is woken by
/// the `Disconnected` event on its watch and lists the children again through the
/// retry loop).
///
/// Simplifications: parents are created as persistent nodes rather than containers
/// (Curator falls back to that on servers without containers), and the lock node's
/// data is empty rather than the client's IP address.
pub struct ZkCurator {
    deps: Deps,
    name: &'static str,
    fenced: bool,
    root: String,
    /// Curator's `ConnectionState`/`HandleHolder`: the current ZooKeeper handle.
    handles: Arc<Handles>,
    holds: Mutex<BTreeMap<String, Hold>>,
}

/// Curator's `HandleHolder` and `ConnectionState`: the current ZooKeeper handle, made
/// on first use and replaced by a new one once its session expired (`reset`), and what
/// a new handle needs. Each handle has a connection-state task
/// ([`Handles::follow`]).
struct Handles {
    /// The ensemble, at the world's scale.
    ensemble: Option<ZkEnsemble>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
    current: Mutex<Option<ZkClient>>,
}

impl Handles {
    /// The current handle (`ConnectionState.getZooKeeper`), a new one if there is none
    /// yet or its session is over (`ConnectionState.reset`, as `handleExpiredSession`
    /// does on the `Expired` event).
    fn handle(self: &Arc<Self>) -> Result<ZkClient, ZkError> {
        let ensemble = self.ensemble.as_ref().ok_or(ZkError::Closed)?;
        let mut slot = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = &*slot
            && !matches!(c.state(), SessionState::Expired | SessionState::Closed)
        {
            return Ok(c.clone());
        }
        let c = ZkClient::start(ensemble, self.clock.clone(), self.entropy.clone());
        *slot = Some(c.clone());
        drop(slot);
        self.spawner
            .spawn(Box::pin(Self::follow(Arc::downgrade(self), c.clone())));
        Ok(c)
    }

    /// Curator's framework on one handle's connection events: `Disconnected` suspends
    /// the connection (`ConnectionStateManager.setToSuspended`); once a negotiated
    /// session timeout passed suspended, it injects a session expiration
    /// (`checkSessionExpiration`); `Expired` (`LOST`) resets to a new handle at once
    /// (`ConnectionState.handleExpiredSession`). Holds the handle's state and its
    /// expiry switch only, so a dropped design still closes its session.
    async fn follow(handles: Weak<Self>, client: ZkClient) {
        let mut changes = client.state_changes();
        let expire = client.expiry_switch();
        let clock = match handles.upgrade() {
            Some(h) => h.clock.clone(),
            None => return,
        };
        drop(client);
        let mut negotiated = Duration::ZERO;
        loop {
            let state = changes.borrow_and_update().clone();
            let suspended = match state {
                SessionState::Connected { timeout_ms, .. } => {
                    negotiated = Duration::from_millis(u64::from(timeout_ms));
                    false
                }
                SessionState::Connecting => negotiated > Duration::ZERO,
                SessionState::Expired => {
                    // LOST: a new handle at once.
                    if let Some(h) = handles.upgrade() {
                        let _ = h.handle();
                    }
                    return;
                }
                SessionState::Closed => return,
            };
            if suspended {
                let timer = clock.sleep(negotiated);
                tokio::pin!(timer);
                tokio::select! {
                    biased;
                    r = changes.changed() => if r.is_err() { return },
                    () = &mut timer => {
                        // Session timeout elapsed while SUSPENDED: inject an expiry.
                        let _ = expire.send(true);
                        if changes.changed().await.is_err() {
                            return;
                        }
                    }
                }
            } else if changes.changed().await.is_err() {
                return;
            }
        }
    }
}

impl ZkCurator {
    /// The design's name.
    pub const NAME: &'static str = "zk-curator";
    /// The fenced variant's name.
    pub const FENCED_NAME: &'static str = "zk-curator-fenced";

    /// `zk-curator` over `deps` (which must carry a [`ZkEnsemble`]: [`Deps::with_system`]).
    pub fn new(deps: Deps) -> Self {
        Self::build(deps, Self::NAME, false)
    }

    /// `zk-curator-fenced`: the same, with the lock node's `czxid` as fencing token.
    pub fn fenced(deps: Deps) -> Self {
        Self::build(deps, Self::FENCED_NAME, true)
    }

    fn build(deps: Deps, name: &'static str, fenced: bool) -> Self {
        let handles = Arc::new(Handles {
            // The ZooKeeper client's own sleeps follow the design's scale.
            ensemble: deps.system::<ZkEnsemble>().map(|e| ZkEnsemble {
                scale: deps.scale,
                ..e.clone()
            }),
            clock: deps.clock.clone(),
            entropy: deps.entropy.clone(),
            spawner: deps.spawner.clone(),
            current: Mutex::new(None),
        });
        Self {
            deps,
            name,
            fenced,
            root: ZK_LOCK_ROOT.to_string(),
            handles,
            holds: Mutex::new(BTreeMap::new()),
        }
    }

    /// Locks live under `root` (an absolute path, no trailing slash) instead of
    /// [`ZK_LOCK_ROOT`].
    pub fn with_root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    fn ensemble(&self) -> Result<&ZkEnsemble, LockError> {
        self.deps
            .system::<ZkEnsemble>()
            .ok_or(LockError::NoZooKeeper { design: self.name })
    }

    fn lock_dir(&self, key: &str) -> String {
        format!("{}/{}", self.root, key)
    }

    /// The current handle (see [`Handles::handle`]).
    pub(crate) fn handle(&self) -> Result<ZkClient, ZkError> {
        self.handles.handle()
    }

    /// `CuratorZookeeperClient.internalBlockUntilConnectedOrTimedOut`: waits until the
    /// current handle is connected, or the connection timeout
    /// ([`scale::CURATOR_CONNECTION_TIMEOUT`]) has passed (then the caller tries
    /// anyway). A handle replaced meanwhile (its session expired) is waited for in its
    /// place.
    async fn block_until_connected_or_timed_out(&self) -> Result<(), ZkError> {
        let deadline =
            self.deps.clock.now() + self.deps.scale.of(&scale::CURATOR_CONNECTION_TIMEOUT);
        loop {
            let c = self.handle()?;
            let mut changes = c.state_changes();
            if matches!(*changes.borrow_and_update(), SessionState::Connected { .. }) {
                return Ok(());
            }
            let now = self.deps.clock.now();
            if now >= deadline {
                return Ok(());
            }
            let expiry = self.deps.clock.sleep(deadline - now);
            tokio::select! {
                biased;
                r = changes.changed() => if r.is_err() { return Ok(()) },
                () = expiry => return Ok(()),
            }
        }
    }

    /// `ExponentialBackoffRetry.getSleepTimeMs` (`SleepingRetry.allowRetry` sleeps it).
    async fn backoff(&self, retry: u32) {
        let spread = 1u64 << (retry + 1);
        let base = self.deps.scale.of(&scale::CURATOR_RETRY_BASE);
        let bases = u32::try_from(self.deps.entropy.below(spread).max(1)).unwrap_or(1);
        self.deps.clock.sleep(base * bases).await;
    }

    /// Runs `op` with Curator's `RetryLoop.callWithRetry`: one wait for a connection,
    /// then tries on the current handle, retried after a backoff.
    pub(crate) async fn retrying<T, F, Fut>(&self, mut op: F) -> Result<T, ZkError>
    where
        F: FnMut(ZkClient) -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, ZkError>> + Send,
        T: Send,
    {
        self.block_until_connected_or_timed_out().await?;
        let mut retry = 0;
        loop {
            let result = match self.handle() {
                Ok(c) => op(c).await,
                Err(e) => Err(e),
            };
            match result {
                Err(e) if retryable(&e) && retry < MAX_RETRIES => {
                    self.backoff(retry).await;
                    retry += 1;
                }
                other => return other,
            }
        }
    }

    /// A random UUID (version 4) from the design's entropy, as `UUID.randomUUID()`.
    fn uuid(&self) -> String {
        let e = &self.deps.entropy;
        let mut words = [0u64; 4];
        for w in &mut words {
            *w = e.below(1 << 32);
        }
        let hi = (words[0] << 32) | words[1];
        let lo = (words[2] << 32) | words[3];
        let hi = (hi & !0xf000) | 0x4000;
        let lo = (lo & !(0xc000 << 48)) | (0x8000 << 48);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }

    /// Creates our lock node (protected mode): its path and czxid. One
    /// `RetryLoop.callWithRetry` (`CreateBuilderImpl.pathInForeground`); a try after an
    /// unknown outcome first looks for our node (`findProtectedNodeInForeground`).
    async fn create_lock_node(&self, dir: &str, protected: &str) -> Result<(String, i64), ZkError> {
        let path = format!("{dir}/{protected}{LOCK_NAME}");
        self.block_until_connected_or_timed_out().await?;
        let mut retry = 0;
        let mut maybe_created = false;
        loop {
            let attempt = async {
                let c = self.handle()?;
                if maybe_created {
                    // findProtectedNodeInForeground: did the lost create happen?
                    let (children, _) = match c.get_children2(dir).await {
                        Ok(r) => r,
                        Err(ZkError::Server(ErrorCode::NO_NODE)) => {
                            (Vec::new(), Default::default())
                        }
                        Err(e) => return Err(e),
                    };
                    if let Some(name) = children.iter().find(|n| n.starts_with(protected)) {
                        let found = format!("{dir}/{name}");
                        let czxid = match c.exists(&found).await? {
                            Some(stat) => stat.czxid,
                            None => return Err(ZkError::Server(ErrorCode::NO_NODE)),
                        };
                        return Ok((found, czxid));
                    }
                }
                self.create_with_parents(&c, dir, &path).await
            };
            match attempt.await {
                Ok(r) => return Ok(r),
                Err(e) if retryable(&e) && retry < MAX_RETRIES => {
                    maybe_created |= e.outcome_unknown();
                    // A new session cannot see the old one's ephemeral node.
                    if matches!(e, ZkError::SessionExpired) {
                        maybe_created = false;
                    }
                    self.backoff(retry).await;
                    retry += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn create_with_parents(
        &self,
        c: &ZkClient,
        dir: &str,
        path: &str,
    ) -> Result<(String, i64), ZkError> {
        for _ in 0..2 {
            let created = if self.fenced {
                c.create2(path, Some(&[]), create_mode::EPHEMERAL_SEQUENTIAL)
                    .await
                    .map(|(p, s)| (p, s.czxid))
            } else {
                c.create(path, Some(&[]), create_mode::EPHEMERAL_SEQUENTIAL)
                    .await
                    .map(|p| (p, 0))
            };
            match created {
                Err(ZkError::Server(ErrorCode::NO_NODE)) => {
                    // ZKPaths.mkdirs: every missing ancestor, in order.
                    let mut at = String::new();
                    for part in dir.split('/').filter(|p| !p.is_empty()) {
                        at.push('/');
                        at.push_str(part);
                        match c.create(&at, None, create_mode::PERSISTENT).await {
                            Ok(_) | Err(ZkError::Server(ErrorCode::NODE_EXISTS)) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                other => return other,
            }
        }
        Err(ZkError::Server(ErrorCode::NO_NODE))
    }

    /// Deletes our node; on an unconfirmed delete, keeps trying in the background
    /// (`guaranteed()`). `Ok(true)`: deleted; `Ok(false)`: it was gone already.
    async fn delete_our_path(&self, path: &str) -> Result<bool, ZkError> {
        let result = self
            .retrying(|c| {
                let path = path.to_string();
                async move { c.delete(&path, -1).await }
            })
            .await;
        match result {
            Ok(()) => Ok(true),
            Err(ZkError::Server(ErrorCode::NO_NODE)) => Ok(false),
            Err(e) => {
                self.guaranteed_delete(path);
                Err(e)
            }
        }
    }

    fn guaranteed_delete(&self, path: &str) {
        let Some(client) = self
            .handles
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .cloned()
        else {
            return;
        };
        let (path, clock) = (path.to_string(), self.deps.clock.clone());
        let pause = self.deps.scale.of(&scale::CURATOR_RETRY_BASE);
        self.deps.spawner.spawn(Box::pin(async move {
            loop {
                match client.delete(&path, -1).await {
                    Ok(()) | Err(ZkError::Server(_)) => return,
                    Err(ZkError::SessionExpired | ZkError::Closed) => return,
                    Err(_) => clock.sleep(pause).await,
                }
            }
        }));
    }

    /// `internalLockLoop`: `Ok(true)` once our node is first, `Ok(false)` when the
    /// budget ran out.
    async fn lock_loop(
        &self,
        dir: &str,
        our_name: &str,
        options: AcquireOptions,
        start: Duration,
    ) -> Result<bool, ZkError> {
        loop {
            let mut children = self
                .retrying(|c| {
                    let dir = dir.to_string();
                    async move { c.get_children2(&dir).await.map(|(ch, _)| ch) }
                })
                .await?;
            children.sort_by(|a, b| fix_for_sorting(a).cmp(fix_for_sorting(b)));
            let Some(index) = children.iter().position(|c| c == our_name) else {
                // validateOurIndex: our node is gone (the session expired).
                return Err(ZkError::Server(ErrorCode::NO_NODE));
            };
            if index == 0 {
                return Ok(true);
            }
            let previous = format!("{dir}/{}", children[index - 1]);
            let watched = self
                .retrying(|c| {
                    let previous = previous.clone();
                    async move { c.get_data_watch(&previous).await.map(|(_, _, w)| w) }
                })
                .await;
            let watch = match watched {
                Ok(w) => w,
                Err(ZkError::Server(ErrorCode::NO_NODE)) => continue,
                Err(e) => return Err(e),
            };
            let budget = match options.wait {
                Wait::TryOnce => Duration::ZERO,
                Wait::Retry { budget_ms, .. } => Duration::from_millis(budget_ms),
            };
            let elapsed = self.deps.clock.now().saturating_sub(start);
            if elapsed >= budget {
                return Ok(false);
            }
            let expiry = self.deps.clock.sleep(budget - elapsed);
            tokio::pin!(watch);
            tokio::select! {
                biased;
                _ = &mut watch => {}
                () = expiry => return Ok(false),
            }
        }
    }
}

/// `RetryLoop.shouldRetry`.
fn retryable(e: &ZkError) -> bool {
    match e {
        ZkError::ConnectionLoss { .. } | ZkError::SessionExpired => true,
        ZkError::Server(c) => matches!(
            *c,
            ErrorCode::CONNECTION_LOSS
                | ErrorCode::OPERATION_TIMEOUT
                | ErrorCode::SESSION_MOVED
                | ErrorCode::SESSION_EXPIRED
        ),
        ZkError::Closed | ZkError::Protocol(_) => false,
    }
}

/// `StandardLockInternalsDriver.standardFixForSorting`: the part after the last
/// `lock-`.
pub fn fix_for_sorting(name: &str) -> &str {
    match name.rfind(LOCK_NAME) {
        Some(i) => &name[i + LOCK_NAME.len()..],
        None => name,
    }
}

fn zk_error(op: &'static str, source: ZkError) -> LockError {
    LockError::ZooKeeper { op, source }
}

#[async_trait]
impl LockDesign for ZkCurator {
    fn name(&self) -> &str {
        self.name
    }

    /// A waiter's longest pause before it sees a freed lock: a reconnect (the ZooKeeper
    /// client's pause below a second plus a second for a turn of its server list) and
    /// the retry policy's longest sleep (7 bases, before its third retry), at the
    /// world's scale.
    fn retry_horizon(&self) -> Duration {
        let s = self.deps.scale;
        s.of(&scale::ZK_RECONNECT_JITTER)
            + s.of(&scale::ZK_HOST_LIST_TURN)
            + s.of(&scale::CURATOR_RETRY_BASE) * scale::CURATOR_MAX_BACKOFF_BASES as u32
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        options.validate()?;
        self.ensemble()?;
        {
            let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hold) = holds.get_mut(key) {
                hold.count += 1;
                return Ok(Acquire::Acquired(hold.guard.clone()));
            }
        }
        let start = self.deps.clock.now();
        let dir = self.lock_dir(key);
        let mut retry = 0;
        loop {
            let protected = format!("{PROTECTED_PREFIX}{}-", self.uuid());
            let sent_at = self.deps.clock.now();
            let (our_path, czxid) = match self.create_lock_node(&dir, &protected).await {
                Ok(r) => r,
                Err(e) if e.outcome_unknown() || retryable(&e) => {
                    return Ok(Acquire::Unknown(format!("create {dir}/{protected}: {e}")));
                }
                Err(e) => return Err(zk_error("create", e)),
            };
            let our_name = our_path[dir.len() + 1..].to_string();
            match self.lock_loop(&dir, &our_name, options, start).await {
                Ok(true) => {
                    let guard = Guard {
                        design: self.name.to_string(),
                        key: key.to_string(),
                        owner: our_path,
                        acquired_at: sent_at,
                        valid_until: None,
                        token: self.fenced.then_some(czxid.max(0) as u64),
                    };
                    self.holds.lock().unwrap_or_else(|e| e.into_inner()).insert(
                        key.to_string(),
                        Hold {
                            guard: guard.clone(),
                            count: 1,
                        },
                    );
                    return Ok(Acquire::Acquired(guard));
                }
                Ok(false) => {
                    return match self.delete_our_path(&our_path).await {
                        Ok(_) => Ok(Acquire::NotAcquired),
                        Err(e) => Ok(Acquire::Unknown(format!(
                            "wait budget spent; delete {our_path}: {e}"
                        ))),
                    };
                }
                // attemptLock: our node vanished (session expired): start over.
                Err(ZkError::Server(ErrorCode::NO_NODE)) if retry < MAX_RETRIES => {
                    self.backoff(retry).await;
                    retry += 1;
                }
                Err(e) => {
                    // deleteOurPathQuietly, then the error: we do not hold the lock.
                    return match self.delete_our_path(&our_path).await {
                        Ok(_) if !e.outcome_unknown() => Err(zk_error("lock loop", e)),
                        Ok(_) => Ok(Acquire::NotAcquired),
                        Err(d) => Ok(Acquire::Unknown(format!(
                            "lock loop: {e}; delete {our_path}: {d}"
                        ))),
                    };
                }
            }
        }
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.name, guard)?;
        let path = {
            let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
            let Some(hold) = holds.get_mut(&guard.key) else {
                return Err(LockError::NotOwner {
                    key: guard.key.clone(),
                    owner: guard.owner.clone(),
                });
            };
            if hold.guard.owner != guard.owner {
                return Err(LockError::NotOwner {
                    key: guard.key.clone(),
                    owner: guard.owner.clone(),
                });
            }
            hold.count -= 1;
            if hold.count > 0 {
                return Ok(Release::StillHeld { count: hold.count });
            }
            holds.remove(&guard.key);
            guard.owner.clone()
        };
        match self.delete_our_path(&path).await {
            Ok(true) => Ok(Release::Removed),
            Ok(false) => Ok(Release::NotFound),
            Err(e) if e.outcome_unknown() || retryable(&e) => {
                Ok(Release::Unknown(format!("delete {path}: {e}")))
            }
            Err(e) => Err(zk_error("delete", e)),
        }
    }
}
