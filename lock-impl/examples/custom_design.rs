//! A design written outside lock-impl, against the public trait only: what a user does
//! to have locksim check *their* lock.
//!
//! `set-nx-ex-lua`: `SET key owner NX EX seconds` (the lease rounded up to whole
//! seconds, as code written against `EX` does) and a release script of its own that
//! deletes only its own value and says which of "absent" and "someone else's" it met.
//!
//! Run it against a local server: `cargo run -p lock-impl --example custom_design`
//! (`REDIS_URL` overrides `redis://127.0.0.1:6379`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use lock_impl::{
    Acquire, AcquireOptions, Attempt, Deps, Guard, LockDesign, LockError, Release, retry_acquire,
};

/// Returns 1 if it deleted our lock, 0 if there was none, -1 if it is someone else's.
static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "local v = redis.call('get', KEYS[1])
         if not v then return 0 end
         if v == ARGV[1] then return redis.call('del', KEYS[1]) end
         return -1",
    )
});

/// `SET NX EX` with a three-way Lua release.
pub struct SetNxExLua {
    deps: Deps,
}

impl SetNxExLua {
    /// The design's name.
    pub const NAME: &'static str = "set-nx-ex-lua";

    /// A design over `deps`.
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }
}

fn redis_err(command: &'static str) -> impl Fn(redis::RedisError) -> LockError {
    move |source| LockError::Redis { command, source }
}

#[async_trait]
impl LockDesign for SetNxExLua {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        let deps = &self.deps;
        let lease_s = options.lease_ms.div_ceil(1000);
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sent_at = deps.clock.now();
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&owner)
                .arg("NX")
                .arg("EX")
                .arg(lease_s)
                .query_async(&mut deps.conn.clone())
                .await
                .map_err(redis_err("SET NX EX"))?;
            Ok(match set {
                None => Attempt::Held,
                Some(_) => Attempt::Acquired(Guard {
                    design: Self::NAME.into(),
                    key: key.into(),
                    owner,
                    acquired_at: sent_at,
                    // Believe only the lease asked for, not the rounded-up one.
                    valid_until: Some(sent_at + Duration::from_millis(options.lease_ms)),
                    token: None,
                }),
            })
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        let n: i64 = RELEASE
            .key(&guard.key)
            .arg(&guard.owner)
            .invoke_async(&mut self.deps.conn.clone())
            .await
            .map_err(redis_err("EVALSHA"))?;
        Ok(match n {
            1 => Release::Removed,
            0 => Release::NotFound,
            _ => Release::HeldByOther,
        })
    }
}

#[allow(dead_code)] // Unused when the tests include this file for the design alone.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let lock = Arc::new(SetNxExLua::new(
        lock_impl::production_deps(&url, Duration::from_secs(1)).await?,
    ));
    let options = AcquireOptions::new(2_000, 500)?;
    match lock.acquire("locksim:example", options).await? {
        Acquire::Acquired(guard) => {
            println!("acquired {} as {}", guard.key, guard.owner);
            println!("released: {:?}", lock.release(&guard).await?);
        }
        other => println!("not acquired: {other:?}"),
    }
    Ok(())
}
