//! `clientv3/concurrency.Session` (v3.4.23 `session.go`) with the lease keeper it
//! starts (`clientv3/lease.go`'s `KeepAlive` and its three loops), for one lease:
//!
//! - `NewSession`: `LeaseGrant` of the session's TTL, then keep-alive until the
//!   session is orphaned or closed;
//! - `sendKeepAliveLoop`: every `retryConnWait` (500 ms), a keep-alive request if the
//!   next one is due (at once at first, then a third of the TTL after each answer);
//! - `recvKeepAliveLoop`: an answer with TTL > 0 sets the next keep-alive (TTL/3 on)
//!   and the deadline (TTL on); TTL ≤ 0 means the lease is gone: the keeper stops; a
//!   stream that fails is opened again after `retryConnWait`;
//! - `deadlineLoop`: every second, a keeper whose deadline passed without an answer
//!   stops (the lease may be gone). Its first deadline is `firstKeepAliveTimeout`
//!   (`defaultTTL`, 5 s, with no dial timeout configured).
//!
//! Once the keeper stops, nothing renews the lease again; the session is `Done`.
//! The holder is not told otherwise: `Mutex` never looks (as in Go).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CallError, EtcdConn, Policy};
use crate::{Observer, Spawner};

use crate::scale::{ETCD_DEADLINE_LOOP, ETCD_FIRST_KEEPALIVE_TIMEOUT, ETCD_RETRY_CONN_WAIT};

/// What the keeper knows, shared with the session.
#[derive(Debug, Default)]
struct KeeperState {
    /// Client time until which the lease is alive by the last answer: the send time
    /// of the keep-alive it answered (or of the grant) plus the TTL.
    valid_until: Duration,
    /// The keeper stopped (orphaned, lease gone, or deadline passed).
    done: bool,
}

/// A leased session kept alive in the background.
pub struct Session {
    /// The lease.
    pub lease: i64,
    /// Its TTL as granted, seconds.
    pub ttl: i64,
    state: Arc<Mutex<KeeperState>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Session {
    /// `NewSession(client, WithTTL(ttl))`: grants the lease and starts its keeper on
    /// `spawner`. `observer` hears each renewal as one of `key` by `owner` (the
    /// design's lock key and its owner value, which the lease ID names).
    pub async fn grant(
        conn: &EtcdConn,
        ttl: i64,
        spawner: &Arc<dyn Spawner>,
        observer: Option<Arc<dyn Observer>>,
        name: impl Fn(i64) -> (String, String) + Send + 'static,
    ) -> Result<Session, CallError> {
        let sent = conn.clock.now();
        let resp = conn
            .call(Policy::Repeatable, conn.timeout, |mut c| async move {
                c.lease_grant(ttl, None).await
            })
            .await?;
        let (lease, ttl) = (resp.id(), resp.ttl());
        let state = Arc::new(Mutex::new(KeeperState {
            valid_until: sent + conn.seconds(ttl),
            ..Default::default()
        }));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (key, owner) = name(lease);
        let lease_of = LeaseOf {
            lease,
            ttl_s: ttl,
            key,
            owner,
            observer,
        };
        spawner.spawn(Box::pin(keeper(
            conn.clone(),
            lease_of,
            state.clone(),
            stopped,
        )));
        Ok(Session {
            lease,
            ttl,
            state,
            stop,
        })
    }

    /// Client time until which the lease lives by the keeper's last answer.
    pub fn valid_until(&self) -> Duration {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .valid_until
    }

    /// Whether the keeper stopped (`Session.Done()` closed).
    pub fn done(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).done
    }

    /// `Orphan`: stops the keeper.
    pub fn orphan(&self) {
        let _ = self.stop.send(true);
    }

    /// `Close`: orphans the session and revokes its lease, within the TTL ("if revoke
    /// takes longer than the ttl, lease is expired anyway").
    pub async fn close(&self, conn: &EtcdConn) -> Result<(), CallError> {
        self.orphan();
        let lease = self.lease;
        conn.call(
            Policy::Repeatable,
            conn.seconds(self.ttl),
            |mut c| async move { c.lease_revoke(lease).await },
        )
        .await
        .map(|_| ())
    }
}

/// The lease a keeper keeps, and who hears of its renewals.
struct LeaseOf {
    lease: i64,
    /// Its TTL as granted, etcd seconds.
    ttl_s: i64,
    /// The design's lock key and owner value, for the observer.
    key: String,
    owner: String,
    observer: Option<Arc<dyn Observer>>,
}

/// One lease's keeper: the three loops of `clientv3/lease.go` for it.
async fn keeper(
    conn: EtcdConn,
    of: LeaseOf,
    state: Arc<Mutex<KeeperState>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let LeaseOf {
        lease,
        ttl_s,
        key,
        owner,
        observer,
    } = of;
    let clock = conn.clock.clone();
    let (retry_conn_wait, deadline_check) = (
        conn.scale.of(&ETCD_RETRY_CONN_WAIT),
        conn.scale.of(&ETCD_DEADLINE_LOOP),
    );
    let now = clock.now();
    let mut next_keepalive = now;
    let mut deadline = now + conn.scale.of(&ETCD_FIRST_KEEPALIVE_TIMEOUT);
    let mut next_deadline_check = now + deadline_check;
    // The send time of the request not answered yet. Go sends again every 500 ms
    // while no answer comes (its next keep-alive moves only on answers); the port sends
    // one and waits for its answer, which on one ordered stream comes first anyway.
    let mut pending_since: Option<Duration>;
    let finish = |state: &Arc<Mutex<KeeperState>>| {
        state.lock().unwrap_or_else(|e| e.into_inner()).done = true;
    };
    'stream: loop {
        if *stopped.borrow() {
            return finish(&state);
        }
        // `resetRecv`: a new keep-alive stream. `etcd-client` opens it with a first
        // keep-alive and waits for its answer (an answer with TTL ≤ 0 is an error);
        // Go's would send one only if it were due. The deadline still runs.
        pending_since = None;
        let sent = clock.now();
        let mut lease_client = conn.client.lease_client();
        let open = lease_client.keep_alive(lease);
        let wait = deadline.saturating_sub(sent).max(Duration::from_millis(1));
        let mut opened = tokio::select! {
            biased;
            r = open => match r {
                Ok(pair) => Some(pair),
                Err(etcd_client::Error::LeaseKeepAliveError(_)) => return finish(&state),
                Err(_) => None,
            },
            _ = clock.sleep(wait) => return finish(&state),
            _ = stopped.changed() => return finish(&state),
        };
        if opened.is_some() {
            let now = clock.now();
            let ttl = conn.seconds(ttl_s);
            next_keepalive = now + ttl / 3;
            deadline = now + ttl;
            answered(&state, &observer, &key, &owner, sent + ttl);
        }
        while let Some((keeper, responses)) = opened.as_mut() {
            let now = clock.now();
            // `sendKeepAliveLoop`.
            if next_keepalive <= now && pending_since.is_none() {
                if keeper.keep_alive().await.is_err() {
                    break;
                }
                pending_since = Some(now);
            }
            let tick = retry_conn_wait.min(next_deadline_check.saturating_sub(now));
            tokio::select! {
                biased;
                msg = responses.message() => match msg {
                    Ok(Some(resp)) => {
                        if resp.ttl() <= 0 {
                            // The lease is gone.
                            return finish(&state);
                        }
                        let now = clock.now();
                        let ttl = conn.seconds(resp.ttl());
                        next_keepalive = now + ttl / 3;
                        deadline = now + ttl;
                        let sent = pending_since.take().unwrap_or(now);
                        answered(&state, &observer, &key, &owner, sent + ttl);
                        continue;
                    }
                    _ => break,
                },
                _ = clock.sleep(tick.max(Duration::from_millis(1))) => {}
                _ = stopped.changed() => return finish(&state),
            }
            // `deadlineLoop`.
            let now = clock.now();
            if now >= next_deadline_check {
                next_deadline_check = now + deadline_check;
                if deadline < now {
                    return finish(&state);
                }
            }
        }
        // The stream failed: `retryConnWait`, then a new one.
        let until = clock.now() + retry_conn_wait;
        while clock.now() < until {
            let now = clock.now();
            tokio::select! {
                biased;
                _ = clock.sleep(until - now) => {}
                _ = stopped.changed() => return finish(&state),
            }
        }
        let now = clock.now();
        if now >= next_deadline_check {
            next_deadline_check = now + deadline_check;
            if deadline < now {
                return finish(&state);
            }
        }
        continue 'stream;
    }
}

/// An answer that renews the lease until `until`.
fn answered(
    state: &Arc<Mutex<KeeperState>>,
    observer: &Option<Arc<dyn Observer>>,
    key: &str,
    owner: &str,
    until: Duration,
) {
    state.lock().unwrap_or_else(|e| e.into_inner()).valid_until = until;
    if let Some(o) = observer {
        o.renewed(key, owner, until);
    }
}
