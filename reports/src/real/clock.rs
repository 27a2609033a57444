//! Server clock faults made real: a Redis server whose clock a plan moves runs with
//! locksim's clock shim preloaded (`clockshim.c`, built by `build.rs`), which shifts
//! its wall clock by what [`ServerClock`] writes into the server's control file: a
//! step (an NTP step), a rate (a fast or slow clock, NTP's slew). Redis 7.0 counts key
//! expiry on the wall clock (`mstime()`, `gettimeofday`), so a step forward expires
//! the lock early, as the simulator's server clock does. The monotonic clock is left
//! alone (a step does not move it; the simulator's drift moves both, so a real drift
//! changes only what the wall clock decides: the keys' expiry).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The shim, as built for this machine.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liblocksim_clock.so"));

/// The shim written out once per process (its path), or why it could not be.
pub(crate) fn shim_path() -> Result<&'static Path, String> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("locksim-clockshim-{}.so", std::process::id()));
        std::fs::write(&path, SHIM)
            .map(|()| path.clone())
            .map_err(|e| format!("cannot write the clock shim to {}: {e}", path.display()))
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(Clone::clone)
}

/// The real wall clock, in ns since the epoch.
fn real_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One server's clock, through its control file (see `clockshim.c` for the layout).
#[derive(Debug)]
pub(crate) struct ServerClock {
    file: std::fs::File,
    offset_ns: i64,
    rate_ppb: i64,
    anchor_ns: i64,
}

impl ServerClock {
    /// A true clock, its control file created at `path`.
    pub fn create(path: &Path) -> Result<Self, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        file.set_len(4096)
            .map_err(|e| format!("cannot size {}: {e}", path.display()))?;
        Ok(Self {
            file,
            offset_ns: 0,
            rate_ppb: 0,
            anchor_ns: 0,
        })
    }

    fn write(&self) {
        // The anchor and the offset before the rate: a reader between the writes sees
        // at worst the old rate over the new anchor, for an instant.
        let _ = self.file.write_at(&self.anchor_ns.to_le_bytes(), 16);
        let _ = self.file.write_at(&self.offset_ns.to_le_bytes(), 0);
        let _ = self.file.write_at(&self.rate_ppb.to_le_bytes(), 8);
    }

    /// Folds the rate's effect so far into the offset, from now.
    fn settle(&mut self) {
        let now = real_ns();
        if self.rate_ppb != 0 && now > self.anchor_ns {
            let moved = (i128::from(now - self.anchor_ns) * i128::from(self.rate_ppb)
                / 1_000_000_000) as i64;
            self.offset_ns += moved;
        }
        self.anchor_ns = now;
    }

    /// Steps the wall clock by `delta_ms`.
    pub fn step(&mut self, delta_ms: i64) {
        self.settle();
        self.offset_ns += delta_ms.saturating_mul(1_000_000);
        self.write();
    }

    /// How far its wall clock is from the machine's now, in µs (positive: ahead).
    pub fn wall_offset_us(&self) -> i64 {
        let now = real_ns();
        let moved = if self.rate_ppb != 0 && now > self.anchor_ns {
            (i128::from(now - self.anchor_ns) * i128::from(self.rate_ppb) / 1_000_000_000) as i64
        } else {
            0
        };
        (self.offset_ns + moved) / 1_000
    }

    /// Its rate error now, in parts per million.
    pub fn drift_ppm(&self) -> i64 {
        self.rate_ppb / 1_000
    }

    /// Runs it at `ppm` parts per million from now.
    pub fn set_drift(&mut self, ppm: i64) {
        self.settle();
        self.rate_ppb = ppm.saturating_mul(1_000);
        self.write();
    }
}
