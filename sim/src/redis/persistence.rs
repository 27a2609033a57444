//! Persistence: what of a server's data survives a crash.
//!
//! Redis's default keeps nothing across a restart without a snapshot (no RDB is
//! modelled here: `save ""`). With `appendonly yes` every write is appended to the AOF,
//! and Redis 7.0's rules decide what is on the *page cache* (survives a process crash:
//! the kernel still has it) and what is on *disk* (survives a machine crash):
//!
//! - the AOF buffer is `write()`n in `beforeSleep`, before any reply of that event-loop
//!   iteration is sent (`flushAppendOnlyFile`, `server.c`), so a reply never reports a
//!   write the page cache does not have;
//! - `appendfsync always` also `fsync`s there, before the replies: an acknowledged write
//!   survives a machine crash;
//! - `appendfsync everysec` `fsync`s in the background about once a second: a machine
//!   crash loses up to the last second or two;
//! - `appendfsync no` leaves it to the kernel. Modelled on Linux's defaults: the flusher
//!   wakes every 5 s (`dirty_writeback_centisecs`) and writes pages dirty for 30 s
//!   (`dirty_expire_centisecs`), so a machine crash loses the last 30-35 s.
//!
//! The store keeps *states* rather than the AOF's bytes: after every command (one
//! event-loop iteration each, in the model) the page cache holds the keyspace as it now
//! is; replaying the AOF at restart rebuilds exactly that state, so the state is what
//! is kept. A restart loads the surviving state into a fresh engine; keys whose
//! absolute expiry has passed by the server's clock are gone to every client (removed
//! when first touched or by the expiry cycle, as after Redis loads an AOF).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::keyspace::Entry;

/// How a server persists its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Persistence {
    /// No persistence (`appendonly no`, `save ""`): a restart starts empty.
    #[default]
    None,
    /// `appendonly yes` with an `appendfsync` policy.
    Aof {
        /// The fsync policy.
        fsync: Fsync,
    },
}

/// `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fsync {
    /// `fsync` before replying.
    Always,
    /// `fsync` about once a second.
    Everysec,
    /// The kernel writes back when it likes (30 s).
    No,
}

/// A keyspace as saved: (database, key, entry).
pub type State = Vec<(usize, Vec<u8>, Entry)>;

const EVERYSEC_US: u64 = 1_000_000;
const FLUSHER_PERIOD_US: u64 = 5_000_000;
const DIRTY_EXPIRE_US: u64 = 30_000_000;

/// The server's disk: what reached the page cache and what reached the platter.
#[derive(Debug, Clone, Default)]
pub struct DurableStore {
    policy: Persistence,
    /// In the page cache (survives a process crash).
    written: State,
    /// On disk (survives a machine crash).
    synced: State,
    last_fsync_us: Option<u64>,
    last_flusher_us: Option<u64>,
    /// `no`: states the page cache held, by time, until they are old enough to flush.
    dirty: VecDeque<(u64, State)>,
}

impl DurableStore {
    /// An empty disk for a server persisting by `policy`.
    pub fn new(policy: Persistence) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// The policy.
    pub fn policy(&self) -> Persistence {
        self.policy
    }

    /// Whether anything is persisted at all.
    pub fn enabled(&self) -> bool {
        self.policy != Persistence::None
    }

    /// One event-loop iteration ended at server time `now_us` with the keyspace in
    /// `state` (`beforeSleep`: write, and fsync if the policy says so).
    pub fn after_iteration(&mut self, state: impl FnOnce() -> State, now_us: u64) {
        let Persistence::Aof { fsync } = self.policy else {
            return;
        };
        self.written = state();
        match fsync {
            Fsync::Always => {
                self.synced = self.written.clone();
                self.last_fsync_us = Some(now_us);
            }
            Fsync::Everysec | Fsync::No => self.tick(now_us),
        }
    }

    /// Time passes (the server's cron, every 100 ms): background fsyncs and kernel
    /// writeback happen.
    pub fn tick(&mut self, now_us: u64) {
        let Persistence::Aof { fsync } = self.policy else {
            return;
        };
        match fsync {
            Fsync::Always => {}
            Fsync::Everysec => {
                let due = self
                    .last_fsync_us
                    .is_none_or(|t| now_us.saturating_sub(t) >= EVERYSEC_US);
                if due {
                    self.synced = self.written.clone();
                    self.last_fsync_us = Some(now_us);
                }
            }
            Fsync::No => {
                let last = *self.last_flusher_us.get_or_insert(now_us);
                if now_us.saturating_sub(last) < FLUSHER_PERIOD_US {
                    return;
                }
                self.last_flusher_us = Some(now_us);
                self.dirty.push_back((now_us, self.written.clone()));
                while let Some((at, _)) = self.dirty.front() {
                    if now_us.saturating_sub(*at) < DIRTY_EXPIRE_US {
                        break;
                    }
                    let (_, state) = self.dirty.pop_front().expect("front exists");
                    self.synced = state;
                }
            }
        }
    }

    /// The process died: the page cache survives, and the kernel will write it.
    pub fn crash_process(&mut self) {
        self.synced = self.written.clone();
        self.dirty.clear();
    }

    /// The machine died: only what was on disk survives.
    pub fn crash_machine(&mut self) {
        self.written = self.synced.clone();
        self.dirty.clear();
    }

    /// What a restart loads.
    pub fn surviving(&self) -> State {
        match self.policy {
            Persistence::None => Vec::new(),
            Persistence::Aof { .. } => self.written.clone(),
        }
    }
}
