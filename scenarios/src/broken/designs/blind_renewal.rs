//! The broken design `blind-renewal` ([`BlindRenewal`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lock_impl::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};

use super::helpers::{compare_and_delete, set_acquire};

/// `blind-renewal`: `SET NX PX`, and a watchdog that renews every lease/3 with a bare
/// `PEXPIRE key lease`. A holder frozen past its lease wakes up and its watchdog
/// re-arms whatever lock the key now holds: someone else's. Redisson checks
/// `HEXISTS` first for exactly this reason.
pub struct BlindRenewal {
    deps: Deps,
    /// The stop flag of each owner's watchdog.
    watchdogs: Mutex<BTreeMap<String, Arc<AtomicBool>>>,
}

impl BlindRenewal {
    pub(in crate::broken) fn new(deps: Deps) -> Self {
        Self {
            deps,
            watchdogs: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl LockDesign for BlindRenewal {
    fn name(&self) -> &str {
        "broken/blind-renewal"
    }
    async fn acquire(&self, key: &str, o: AcquireOptions) -> Result<Acquire, LockError> {
        let got = set_acquire(
            self.name(),
            &self.deps,
            key,
            o,
            None,
            &["NX", "PX"],
            o.lease_ms,
        )
        .await?;
        let Acquire::Acquired(mut g) = got else {
            return Ok(got);
        };
        g.valid_until = None; // renewed until released
        let stop = Arc::new(AtomicBool::new(false));
        self.watchdogs
            .lock()
            .expect("watchdog map")
            .insert(g.owner.clone(), stop.clone());
        let deps = self.deps.clone();
        let key = key.to_string();
        let every = Duration::from_millis((o.lease_ms / 3).max(1));
        self.deps.spawner.spawn(Box::pin(async move {
            loop {
                deps.clock.sleep(every).await;
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let _: redis::RedisResult<i64> = redis::cmd("PEXPIRE")
                    .arg(&key)
                    .arg(o.lease_ms)
                    .query_async(&mut deps.conn.clone())
                    .await;
            }
        }));
        Ok(Acquire::Acquired(g))
    }
    async fn release(&self, g: &Guard) -> Result<Release, LockError> {
        if let Some(stop) = self
            .watchdogs
            .lock()
            .expect("watchdog map")
            .remove(&g.owner)
        {
            stop.store(true, Ordering::SeqCst);
        }
        compare_and_delete(&self.deps, &g.key, &g.owner).await
    }
}
