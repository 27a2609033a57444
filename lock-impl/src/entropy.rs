//! Owner values and retry jitter.
//!
//! Every random choice a design makes goes through [`Entropy`], so the simulator can
//! derive all of them from a run's seed. Production code passes [`OsEntropy`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A source of unique owner values and of jitter.
pub trait Entropy: Send + Sync + 'static {
    /// A value no other acquisition, by this or any other client, will use.
    fn owner_value(&self) -> String;
    /// A uniformly random integer in `0..bound` (`0` when `bound` is `0`).
    fn below(&self, bound: u64) -> u64;
}

/// Operating-system randomness: 128 random bits per owner value, like a UUID v4.
#[derive(Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn owner_value(&self) -> String {
        let bits: u128 = rand::rng().random();
        format!("{bits:032x}")
    }

    fn below(&self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            rand::rng().random_range(0..bound)
        }
    }
}

/// Seeded randomness for deterministic runs.
///
/// Owner values read `{prefix}-{n}-{8 random hex digits}`: the prefix names the client
/// and `n` counts its acquisitions, so a history stays readable, while the random tail
/// keeps two clients with the same prefix apart.
#[derive(Debug)]
pub struct SeededEntropy {
    prefix: String,
    counter: AtomicU64,
    rng: Mutex<ChaCha8Rng>,
}

impl SeededEntropy {
    /// Entropy derived only from `seed`; `prefix` starts every owner value.
    pub fn new(seed: u64, prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            counter: AtomicU64::new(0),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        }
    }
}

impl Entropy for SeededEntropy {
    fn owner_value(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let tail: u32 = self.rng.lock().expect("entropy lock poisoned").random();
        format!("{}-{n}-{tail:08x}", self.prefix)
    }

    fn below(&self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        self.rng
            .lock()
            .expect("entropy lock poisoned")
            .random_range(0..bound)
    }
}
