//! Deliberately broken lock designs, and the checker that must catch each one.
//!
//! Each design here is modelled on a real class of bug in Redis lock clients and is
//! written only against `lock-impl`'s public API, as a user would write their own lock.
//! Each [`Broken`] entry names the correct design it is a broken copy of (its parent),
//! the scenario and checker that must catch it, and a seed bound. The suite
//! (`scenarios/tests/suite/broken.rs`) asserts that the checker flags the broken design
//! within the bound and never flags the parent on the same seeds, so the catch is
//! attributable to the bug and not to the scenario. When a broken design slips
//! through, the checker or the workload is what gets fixed, never the design.
//!
//! Run one by hand: `locksim run --design broken/constant-owner --scenario gc-pause`.
//! The designs, and the helpers a user's lock writes for itself, are in [`designs`].

pub mod designs;

use std::sync::Arc;

use lock_impl::{Deps, LockDesign};

use crate::sweep::DesignSpec;
use designs::*;

/// The prefix that names a broken design on the command line.
pub const PREFIX: &str = "broken/";

/// One broken design and how it must be caught.
#[derive(Clone, Copy)]
pub struct Broken {
    /// Its name (without [`PREFIX`]).
    pub name: &'static str,
    /// What is wrong, in one sentence.
    pub bug: &'static str,
    /// The built-in design it is a broken copy of: the checker must never flag it on
    /// the same scenario and seeds.
    pub parent: &'static str,
    /// The scenario that exposes it.
    pub scenario: &'static str,
    /// The checker that must flag it.
    pub checker: &'static str,
    /// Caught in at least one seed of `0..seeds`.
    pub seeds: u64,
    build: fn(Deps) -> Arc<dyn LockDesign>,
}

impl Broken {
    /// The design as the sweep runs it (named `broken/<name>`).
    pub fn spec(&self) -> DesignSpec {
        let build = self.build;
        DesignSpec {
            name: format!("{PREFIX}{}", self.name),
            factory: Arc::new(build),
            masters: 1,
            backend: lock_impl::Backend::Redis,
        }
    }
}

impl std::fmt::Debug for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broken")
            .field("name", &self.name)
            .field("checker", &self.checker)
            .finish_non_exhaustive()
    }
}

/// The broken-design catalog.
pub fn catalog() -> Vec<Broken> {
    CATALOG.to_vec()
}

/// Every broken design, in the order `locksim list` prints them.
static CATALOG: &[Broken] = &[
    Broken {
        name: "constant-owner",
        bug: "every client stores the same owner value, so a compare-and-delete cannot tell its own lock from the next holder's",
        parent: "set-nx-px-lua",
        scenario: "gc-pause",
        checker: "ownership",
        seeds: 10,
        build: |d| Arc::new(ConstantOwner(d)),
    },
    Broken {
        name: "ex-for-px",
        bug: "the lease in milliseconds is passed to EX (seconds): a crashed holder's lock lives 1000 times too long",
        parent: "set-nx-px-lua",
        scenario: "client-crash",
        checker: "liveness",
        seeds: 10,
        build: |deps| SetSlip::boxed("broken/ex-for-px", deps, &["NX", "EX"], |lease_ms| lease_ms),
    },
    Broken {
        name: "px-given-seconds",
        bug: "a lease configured in seconds is passed to PX: the lock expires after a millisecond while its holder believes the whole lease",
        parent: "set-nx-px-lua",
        scenario: "no-faults",
        checker: "mutual-exclusion",
        seeds: 10,
        build: |deps| {
            SetSlip::boxed("broken/px-given-seconds", deps, &["NX", "PX"], |lease_ms| {
                lease_ms.div_ceil(1000)
            })
        },
    },
    Broken {
        name: "blind-renewal",
        bug: "the watchdog renews with a bare PEXPIRE, so a holder back from a pause re-arms the next holder's lock",
        parent: "reentrant-watchdog",
        scenario: "gc-pause",
        checker: "ownership",
        seeds: 10,
        build: |d| Arc::new(BlindRenewal::new(d)),
    },
    Broken {
        name: "unknown-as-acquired",
        bug: "a SET whose reply timed out is taken for a success: the client believes a lock the server may have refused",
        parent: "set-nx-px-lua",
        scenario: "network-delay",
        checker: "belief",
        seeds: 20,
        build: |d| Arc::new(UnknownAsAcquired(d)),
    },
    Broken {
        name: "release-ignores-count",
        bug: "a reentrant lock that counts holds on the client but deletes the key on every release: the first nested release frees the lock",
        parent: "reentrant-watchdog",
        scenario: "reentrancy",
        checker: "reentrancy",
        seeds: 10,
        build: |d| Arc::new(ReleaseIgnoresCount::new(d)),
    },
    Broken {
        name: "per-client-token",
        bug: "fencing tokens come from a counter in each client, not from the server: two holders get the same token",
        parent: "fenced",
        scenario: "no-faults",
        checker: "token-order",
        seeds: 10,
        build: |d| Arc::new(PerClientToken::new(d)),
    },
    Broken {
        name: "token-before-lock",
        bug: "the fencing token is taken once before waiting for the lock: a waiter that wins later carries a lower token than the holder before it",
        parent: "fenced",
        scenario: "no-faults",
        checker: "token-order",
        seeds: 10,
        build: |d| Arc::new(TokenBeforeLock(d)),
    },
    Broken {
        name: "waiter-ignores-ttl",
        bug: "a waiter sleeps until the unlock message and never falls back on the lock's TTL: a lost message strands it",
        parent: "reentrant-watchdog",
        scenario: "unlock-message-lost",
        checker: "waiter-liveness",
        seeds: 10,
        build: |d| Arc::new(WaiterIgnoresTtl(d)),
    },
    Broken {
        name: "validity-from-reply",
        bug: "the lease is counted from when the reply arrived, not from when the request was sent: a slow reply stretches the believed validity past the server's expiry",
        parent: "set-nx-px-lua",
        scenario: "network-delay",
        checker: "validity",
        seeds: 20,
        build: |d| Arc::new(ValidityFromReply(d)),
    },
    Broken {
        name: "wall-clock-validity",
        bug: "the validity is measured on the wall clock from a reading taken before the wait (node-redlock 5.0.0-beta.2's start = Date.now()): a backward step of the client's clock while it waits stretches the believed validity past the key's expiry",
        parent: "set-nx-px-lua",
        scenario: "client-clock-step",
        checker: "validity",
        seeds: 30,
        build: |d| Arc::new(WallClockValidity(d)),
    },
    Broken {
        name: "getset-timestamp",
        bug: "the old SETNX + GETSET recipe: two waiters that see an expired timestamp both GETSET, and the loser overwrites the winner's lock",
        parent: "set-nx-px-lua",
        scenario: "gc-pause",
        checker: "ownership",
        seeds: 20,
        build: |d| Arc::new(GetsetTimestamp(d)),
    },
    Broken {
        name: "shared-reentrant-id",
        bug: "a reentrant hash lock whose owner id is the service's name, the same in every instance: every client re-enters every other's lock",
        parent: "reentrant-watchdog",
        scenario: "no-faults",
        checker: "mutual-exclusion",
        seeds: 10,
        build: |d| Arc::new(SharedReentrantId(d)),
    },
    Broken {
        name: "xx-for-nx",
        bug: "SET XX instead of SET NX: the lock is only ever set when it already exists, so nobody ever gets it",
        parent: "set-nx-px-lua",
        scenario: "no-faults",
        checker: "liveness",
        seeds: 10,
        build: |deps| SetSlip::boxed("broken/xx-for-nx", deps, &["XX", "PX"], |lease_ms| lease_ms),
    },
    Broken {
        name: "ex-truncated",
        bug: "the lease in milliseconds becomes whole seconds for EX by integer division: a sub-second lease is EX 0, which Redis refuses with an error, so nobody ever gets the lock",
        parent: "set-nx-px-lua",
        scenario: "no-faults",
        checker: "liveness",
        seeds: 10,
        build: |deps| {
            SetSlip::boxed("broken/ex-truncated", deps, &["NX", "EX"], |lease_ms| {
                lease_ms / 1000
            })
        },
    },
    Broken {
        name: "release-falls-back-to-del",
        bug: "when the compare-and-delete removes nothing, release \"makes sure\" with a plain DEL, deleting the next holder's lock",
        parent: "set-nx-px-lua",
        scenario: "gc-pause",
        checker: "ownership",
        seeds: 10,
        build: |d| Arc::new(ReleaseFallsBackToDel(d)),
    },
    Broken {
        name: "check-then-set",
        bug: "GET, and SET without NX if the key was absent: two clients that both saw it absent both take the lock",
        parent: "set-nx-px-lua",
        scenario: "no-faults",
        checker: "mutual-exclusion",
        seeds: 10,
        build: |d| Arc::new(CheckThenSet(d)),
    },
    Broken {
        name: "write-ignores-readers",
        bug: "a read-write lock whose write script only looks for another writer: a writer walks in on readers (WeiJiadong/redislock's wlock.lua checks the writer field alone)",
        parent: "redisson-rw",
        scenario: "read-write-contention",
        checker: "rw-exclusion",
        seeds: 10,
        build: |d| {
            Arc::new(RedissonRwCopy::new(
                "broken/write-ignores-readers",
                d,
                RwEdit::WriteIgnoresReaders,
            ))
        },
    },
    Broken {
        name: "read-unlock-deletes-hash",
        bug: "a read-write lock whose read unlock deletes the whole lock, other readers or not: the first reader out lets a writer in under the rest (WeiJiadong/redislock's runlock.lua; Redisson's read unlock ignored a write hold until issue #891)",
        parent: "redisson-rw",
        scenario: "read-write-contention",
        checker: "rw-exclusion",
        seeds: 10,
        build: |d| {
            Arc::new(RedissonRwCopy::new(
                "broken/read-unlock-deletes-hash",
                d,
                RwEdit::ReadUnlockDeletesHash,
            ))
        },
    },
    Broken {
        name: "read-renewal-skips-timeouts",
        bug: "a read-write lock whose read watchdog re-arms the hash but not the readers' timeout keys: the next reader to leave finds none alive and deletes the lock under readers still reading (Redisson 3.5.4 to 3.7.5, issue #1604)",
        parent: "redisson-rw",
        scenario: "read-write-long-work",
        checker: "rw-exclusion",
        seeds: 10,
        build: |d| {
            Arc::new(RedissonRwCopy::new(
                "broken/read-renewal-skips-timeouts",
                d,
                RwEdit::ReadRenewalSkipsTimeouts,
            ))
        },
    },
];

/// The broken design named `name` (with or without [`PREFIX`]).
pub fn find(name: &str) -> Option<Broken> {
    let name = name.strip_prefix(PREFIX).unwrap_or(name);
    catalog().into_iter().find(|b| b.name == name)
}
