//! What the client keeps of its holds: the counts per key and owner, and the watchdog
//! that renews a held lock's lease.

use super::*;

impl ReentrantWatchdog {
    /// Counts an acquisition; a watchdog acquisition without a running watchdog starts
    /// one (`scheduleExpirationRenewal`: re-entries do not start a second).
    pub(super) fn acquired(&self, key: &str, owner: &str, lease: Lease, side: Side) {
        let mut holds = self.holds();
        let hold = holds
            .entry((key.to_string(), owner.to_string()))
            .or_insert(Hold {
                count: 0,
                lease_ms: lease.ms(),
                watchdog: None,
            });
        hold.count += 1;
        hold.lease_ms = lease.ms();
        let Lease::Watchdog(lease_ms) = lease else {
            return;
        };
        if hold.watchdog.as_ref().is_some_and(Watchdog::running) {
            return;
        }
        let (stop, stopped) = watch::channel(false);
        let alive = Arc::new(AtomicBool::new(true));
        let turn = Arc::new(tokio::sync::Mutex::new(()));
        hold.watchdog = Some(Watchdog {
            stop,
            alive: alive.clone(),
            turn: turn.clone(),
        });
        drop(holds);
        self.deps.spawner.spawn(Box::pin(renew_loop(
            self.deps.clone(),
            key.to_string(),
            owner.to_string(),
            (lease_ms, side, self.version(), self.synced.clone()),
            stopped,
            turn,
            AliveFlag(alive),
        )));
    }

    /// Counts a release and returns the count left. `server` is what the unlock script
    /// said: `Some(true)` the count is still above zero, `Some(false)` the hold ended
    /// (deleted, or not ours), `None` unknown. A hold whose count reaches zero is
    /// forgotten and its watchdog stopped (`cancelExpirationRenewal`) before this
    /// returns.
    pub(super) async fn released(&self, key: &str, owner: &str, server: Option<bool>) -> u64 {
        let (left, dog) = self.count_release(key, owner, server);
        if let Some(dog) = dog {
            dog.stop().await;
        }
        left
    }

    /// [`Self::released`]'s bookkeeping: the count left, and the watchdog to stop.
    pub(super) fn count_release(
        &self,
        key: &str,
        owner: &str,
        server: Option<bool>,
    ) -> (u64, Option<Watchdog>) {
        let mut holds = self.holds();
        let id = (key.to_string(), owner.to_string());
        let left = match (holds.get_mut(&id), server) {
            (_, Some(false)) => 0,
            // The server says its count is still above zero. The client counts its own
            // holds down whatever the server says, as Redisson's `unlockAsync` does
            // (`cancelExpirationRenewal` in a `handle` that runs on any reply): once the
            // client is done, its watchdog stops, and a lock whose server count went
            // astray (a lost unlock reply, then a re-entry) expires a lease later
            // instead of being renewed for ever.
            (Some(hold), Some(true)) => {
                hold.count = hold.count.saturating_sub(1);
                hold.count
            }
            (None, Some(true)) => return (1, None),
            (Some(hold), None) => {
                hold.count = hold.count.saturating_sub(1);
                hold.count
            }
            (None, None) => 0,
        };
        let dog = if left == 0 {
            holds.remove(&id).and_then(|hold| hold.watchdog)
        } else {
            None
        };
        (left, dog)
    }
}

/// The watchdog: lease/3 on the client's clock after the previous renewal completed,
/// re-arm the lease while this owner still holds the lock, the renewal resent after a
/// lost reply as Redisson's executor does ([`redisson_retry::send`]). Ends on the stop
/// signal (or its sender dropped) and when the renewal finds the lock gone (`0`:
/// `cancelExpirationRenewal`). A renewal that failed after its resends ends it at
/// Redisson 3.20 (`renewExpiration`: the entry removed) and not at 3.52.0
/// (`RenewalTask.run`: logged, next renewal scheduled).
pub(super) async fn renew_loop(
    deps: Deps,
    key: String,
    owner: String,
    (lease_ms, side, version, synced): (u64, Side, Version, ReplicaCount),
    mut stop: watch::Receiver<bool>,
    turn: Arc<tokio::sync::Mutex<()>>,
    _alive: AliveFlag,
) {
    let period = Duration::from_millis(lease_ms / 3);
    loop {
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
            () = deps.clock.sleep(period) => {}
        }
        // From the check of the stop signal to the renewal's reply: a release waits.
        let _turn = turn.lock().await;
        if *stop.borrow() {
            return;
        }
        let (key, owner) = (key.as_str(), owner.as_str());
        let call = match side {
            // `renewReadLock`: `ReadLockTask`'s script, which re-arms the hash and
            // every holder's timeout keys.
            Side::Read => redisson_rw_scripts::renew_read(key, owner, lease_ms),
            // A write lock renews as `RedissonLock` does, under its `:write` field.
            Side::Only | Side::Write => Call {
                script: &RENEW,
                source: REDISSON_RENEW,
                keys: vec![key.to_string()],
                args: vec![lease_ms.to_string(), owner.to_string()],
            },
        };
        // 3.20's `renewExpirationAsync` (`evalWriteAsync`) and 3.52.0's `LockTask` /
        // `ReadLockTask` (`syncedEval`): synced, resent after a lost reply; a renewal
        // no replica acknowledged fails as a lost one does.
        let (renewed, sent_at) =
            redisson_sync::eval::<redis::Value>(&deps, version, true, &synced, &call).await;
        let renewed = match renewed {
            Ok(Synced::Done(value)) => Ok(first_int(&value)),
            Ok(Synced::NotSynced { replicas, .. }) => Err(redisson_sync::not_synced(replicas)),
            Err(e) => Err(e.to_string()),
        };
        match renewed {
            Ok(Some(1)) => {}
            Err(_) if version.watchdog_survives_failed_renewal() => continue,
            _ => return,
        }
        // The holder's validity now runs a lease from the renewal's sending, as an
        // acquisition's does from its request.
        if let Some(observer) = &deps.observer {
            observer.renewed(key, owner, sent_at + Duration::from_millis(lease_ms));
        }
    }
}

/// A renewal's reply: the integer, or the first of a list (`ReadLockTask`'s one per
/// lock).
pub(super) fn first_int(value: &redis::Value) -> Option<i64> {
    match value {
        redis::Value::Int(n) => Some(*n),
        redis::Value::Array(items) => items.first().and_then(first_int),
        _ => None,
    }
}
