//! The keyspace: 16 databases of keys with optional absolute expiry (unix ms), and the
//! key-event log.
//!
//! One write path: nothing outside this module can change an entry (readers get
//! `&Entry`), and every method that changes one records exactly what changed through
//! `Keyspace::emit`, so the history's record of a server cannot miss a write (a
//! `PERSIST`, a hash field, an expiry change) and later readers of the same record
//! (a replication stream) see every change.

use std::collections::BTreeMap;

use indexmap::IndexMap;

/// Why a key left the keyspace, or was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyCause {
    /// `DEL`, `UNLINK`, `GETDEL`, or a hash losing its last field, from a command or a
    /// script.
    Command,
    /// Expired (lazily or by the active cycle).
    Expired,
    /// Replaced by a `SET` that overwrote it.
    Overwritten,
    /// `FLUSHALL` / `FLUSHDB`.
    Flushed,
    /// A replica's full sync replaced its dataset with its master's.
    Resync,
}

/// The server's own record of what happened to keys: the ground truth a checker uses
/// to tell whose lock a release really removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyEvent {
    /// A string key was written (by `SET`, `SETNX`, ...), or a hash field (by `HSET`,
    /// `HINCRBY`; `value` is then the field's name).
    Written {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// The value written (lossy UTF-8).
        value: String,
    },
    /// A command set a key's expiry (`EXPIRE`, `PEXPIRE`, `PEXPIREAT`; from a client or
    /// a script): how a lease is armed or a watchdog renews it.
    ExpireSet {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// Time to live from now, in milliseconds.
        ttl_ms: i64,
    },
    /// `HDEL` removed a field of a hash that still has others (a hash left empty is
    /// removed instead: [`KeyEvent::Removed`]).
    FieldRemoved {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// The field removed (lossy UTF-8).
        field: String,
    },
    /// A key was removed.
    Removed {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer, or `"expiry"` for expiry.
        by: String,
        /// The key.
        key: String,
        /// For a string: its value; for a hash: its field names joined with `,`.
        value: String,
        /// Why.
        cause: KeyCause,
    },
}

/// Number of logical databases, as Redis's default `databases 16`.
pub const DATABASES: usize = 16;

/// A stored value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A hash, in insertion order (as Redis's listpack encoding of small hashes).
    Hash(IndexMap<Vec<u8>, Vec<u8>>),
}

impl Value {
    /// What a [`KeyEvent`] records for this value: a string's bytes, or a hash's field
    /// names joined with `,` (lossy UTF-8).
    pub fn describe(&self) -> String {
        match self {
            Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
            Value::Hash(h) => h
                .keys()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// The key holds a value of another type (Redis's `WRONGTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// One key's value and its absolute expiry in unix milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute expiry, unix ms; `None` = persistent.
    pub expire_at_ms: Option<i64>,
}

/// Redis's rule (`keyIsExpired` in db.c): a key is expired when `now > when`.
pub fn is_expired(entry: &Entry, now_ms: i64) -> bool {
    matches!(entry.expire_at_ms, Some(when) if now_ms > when)
}

/// How lookups treat a key whose time has passed (Redis's `expireIfNeeded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpiryMode {
    /// A master: the key is deleted (and the deletion propagated as `DEL`).
    #[default]
    Delete,
    /// A replica serving a client: the key is reported missing but kept, waiting for
    /// the master's `DEL`.
    Hide,
    /// A replica applying its master's stream: keys are never expired.
    Keep,
}

/// All databases plus the event log.
#[derive(Debug)]
pub struct Keyspace {
    dbs: Vec<BTreeMap<Vec<u8>, Entry>>,
    events: Vec<KeyEvent>,
    /// How lookups treat expired keys now (set by the engine per command).
    pub mode: ExpiryMode,
    /// Keys deleted by lazy expiry since the last drain: each propagates as `DEL`.
    lazily_expired: Vec<(usize, Vec<u8>)>,
}

impl Default for Keyspace {
    fn default() -> Self {
        Self {
            dbs: vec![BTreeMap::new(); DATABASES],
            events: Vec::new(),
            mode: ExpiryMode::Delete,
            lazily_expired: Vec::new(),
        }
    }
}

/// Lossy key text for events.
fn key_text(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

impl Keyspace {
    /// The one place every change is recorded.
    fn emit(&mut self, event: KeyEvent) {
        self.events.push(event);
    }

    /// The live entry at `key` in `db`, removing it first (with an `Expired` event) if
    /// it has expired at `now_ms` (lazy expiry). Read-only: changes go through the
    /// methods below.
    pub fn get(&mut self, db: usize, key: &[u8], now_us: u64) -> Option<&Entry> {
        let now_ms = (now_us / 1000) as i64;
        let expired = match self.dbs[db].get(key) {
            None => return None,
            Some(e) => is_expired(e, now_ms),
        };
        if expired {
            match self.mode {
                ExpiryMode::Keep => {}
                ExpiryMode::Hide => return None,
                ExpiryMode::Delete => {
                    self.remove(db, key, now_us, "expiry", KeyCause::Expired);
                    self.lazily_expired.push((db, key.to_vec()));
                    return None;
                }
            }
        }
        self.dbs[db].get(key)
    }

    /// Keys lazily expired since the last call (each propagates as `DEL`).
    pub fn take_lazily_expired(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.lazily_expired)
    }

    /// The entry at `key` in `db` whatever its expiry, without touching it.
    pub fn peek(&self, db: usize, key: &[u8]) -> Option<&Entry> {
        self.dbs[db].get(key)
    }

    /// Sets (or, with `None`, removes: `PERSIST`) a live key's absolute expiry and
    /// records it (`ttl_ms` −1 for no expiry, as `PTTL` says). False if the key is
    /// absent.
    pub fn set_expiry(
        &mut self,
        db: usize,
        key: &[u8],
        expire_at_ms: Option<i64>,
        now_us: u64,
        by: &str,
    ) -> bool {
        if self.get(db, key, now_us).is_none() {
            return false;
        }
        if let Some(entry) = self.dbs[db].get_mut(key) {
            entry.expire_at_ms = expire_at_ms;
        }
        self.emit(KeyEvent::ExpireSet {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            ttl_ms: expire_at_ms.map_or(-1, |when| when - (now_us / 1000) as i64),
        });
        true
    }

    /// Writes `field` of the hash at `key` (created empty if absent) and records it.
    /// `Ok(true)` if the field is new; `Err(WrongType)` if the key holds another type.
    pub fn hash_write(
        &mut self,
        db: usize,
        key: &[u8],
        field: &[u8],
        value: Vec<u8>,
        now_us: u64,
        by: &str,
    ) -> Result<bool, WrongType> {
        if self.get(db, key, now_us).is_none() {
            self.dbs[db].insert(
                key.to_vec(),
                Entry {
                    value: Value::Hash(IndexMap::new()),
                    expire_at_ms: None,
                },
            );
        }
        let Some(Entry {
            value: Value::Hash(h),
            ..
        }) = self.dbs[db].get_mut(key)
        else {
            return Err(WrongType);
        };
        let created = h.insert(field.to_vec(), value).is_none();
        self.emit(KeyEvent::Written {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: String::from_utf8_lossy(field).into_owned(),
        });
        Ok(created)
    }

    /// Removes `fields` from the hash at `key`; a hash left empty is removed, recorded
    /// with the fields it held before. The number removed; `Err(WrongType)` for another
    /// type.
    pub fn hash_delete(
        &mut self,
        db: usize,
        key: &[u8],
        fields: &[Vec<u8>],
        now_us: u64,
        by: &str,
    ) -> Result<i64, WrongType> {
        let before = match self.get(db, key, now_us) {
            None => return Ok(0),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => h.keys().cloned().collect::<Vec<_>>(),
            Some(_) => return Err(WrongType),
        };
        let Some(Entry {
            value: Value::Hash(h),
            ..
        }) = self.dbs[db].get_mut(key)
        else {
            return Err(WrongType);
        };
        let mut n = 0;
        let mut gone = Vec::new();
        for f in fields {
            if h.shift_remove(f).is_some() {
                n += 1;
                gone.push(String::from_utf8_lossy(f).into_owned());
            }
        }
        let emptied = h.is_empty();
        if !emptied {
            for field in gone {
                self.emit(KeyEvent::FieldRemoved {
                    at_us: now_us,
                    by: by.to_string(),
                    key: key_text(key),
                    field,
                });
            }
        }
        if emptied {
            self.dbs[db].remove(key);
            self.emit(KeyEvent::Removed {
                at_us: now_us,
                by: by.to_string(),
                key: key_text(key),
                value: before
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect::<Vec<_>>()
                    .join(","),
                cause: KeyCause::Command,
            });
        }
        Ok(n)
    }

    /// Removes `key` (if present, live or not) and records a `Removed` event.
    pub fn remove(
        &mut self,
        db: usize,
        key: &[u8],
        now_us: u64,
        by: &str,
        cause: KeyCause,
    ) -> Option<Entry> {
        let entry = self.dbs[db].remove(key)?;
        self.emit(KeyEvent::Removed {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: entry.value.describe(),
            cause,
        });
        Some(entry)
    }

    /// Removes a live key on a command's behalf; returns whether it existed.
    pub fn delete(&mut self, db: usize, key: &[u8], now_us: u64, by: &str) -> bool {
        if self.get(db, key, now_us).is_none() {
            return false;
        }
        self.remove(db, key, now_us, by, KeyCause::Command)
            .is_some()
    }

    /// Stores a string (recording `Overwritten` for any previous value, `Written` for
    /// the new one, and `ExpireSet` if it has an expiry). `expire_at_ms` is the new
    /// expiry.
    pub fn set_string(
        &mut self,
        db: usize,
        key: &[u8],
        value: Vec<u8>,
        expire_at_ms: Option<i64>,
        now_us: u64,
        by: &str,
    ) {
        if self.get(db, key, now_us).is_some() {
            self.remove(db, key, now_us, by, KeyCause::Overwritten);
        }
        self.emit(KeyEvent::Written {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: String::from_utf8_lossy(&value).into_owned(),
        });
        if let Some(when) = expire_at_ms {
            // `SET … PX` arms the lease in the same command: the record says so, as
            // it does for `PEXPIRE`.
            self.emit(KeyEvent::ExpireSet {
                at_us: now_us,
                by: by.to_string(),
                key: key_text(key),
                ttl_ms: when - (now_us / 1000) as i64,
            });
        }
        self.dbs[db].insert(
            key.to_vec(),
            Entry {
                value: Value::Str(value),
                expire_at_ms,
            },
        );
    }

    /// Replaces a live string's value in place, keeping its expiry (INCR and friends);
    /// records `Written`.
    pub fn update_string(&mut self, db: usize, key: &[u8], value: Vec<u8>, now_us: u64, by: &str) {
        let expire_at_ms = self.get(db, key, now_us).and_then(|e| e.expire_at_ms);
        self.emit(KeyEvent::Written {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: String::from_utf8_lossy(&value).into_owned(),
        });
        self.dbs[db].insert(
            key.to_vec(),
            Entry {
                value: Value::Str(value),
                expire_at_ms,
            },
        );
    }

    /// Restores a saved entry without any event: a restart loading its disk, the one
    /// change that is not a write of this server's life (the observer compares what
    /// came back with the record).
    pub fn restore(&mut self, db: usize, key: &[u8], entry: Entry) {
        self.dbs[db].insert(key.to_vec(), entry);
    }

    /// A replica's full sync: everything it held is dropped (recorded as removed,
    /// cause `Resync`, by `by`, the master) and the master's dataset loaded (recorded
    /// as written by `by`, with its expiry).
    pub fn replace_all(&mut self, entries: Vec<(usize, Vec<u8>, Entry)>, now_us: u64, by: &str) {
        for d in 0..DATABASES {
            for (key, entry) in std::mem::take(&mut self.dbs[d]) {
                self.emit(KeyEvent::Removed {
                    at_us: now_us,
                    by: by.to_string(),
                    key: key_text(&key),
                    value: entry.value.describe(),
                    cause: KeyCause::Resync,
                });
            }
        }
        for (db, key, entry) in entries {
            if db >= DATABASES {
                continue;
            }
            self.emit(KeyEvent::Written {
                at_us: now_us,
                by: by.to_string(),
                key: key_text(&key),
                value: entry.value.describe(),
            });
            if let Some(when) = entry.expire_at_ms {
                self.emit(KeyEvent::ExpireSet {
                    at_us: now_us,
                    by: by.to_string(),
                    key: key_text(&key),
                    ttl_ms: when - (now_us / 1000) as i64,
                });
            }
            self.dbs[db].insert(key, entry);
        }
    }

    /// Keys stored in `db`, counting expired keys not yet reclaimed (as Redis's DBSIZE).
    pub fn len(&self, db: usize) -> usize {
        self.dbs[db].len()
    }

    /// Keys in `db` that carry an expiry (reclaimed or not).
    pub fn expires(&self, db: usize) -> usize {
        self.dbs[db]
            .values()
            .filter(|e| e.expire_at_ms.is_some())
            .count()
    }

    /// Whether no database holds any key.
    pub fn is_empty(&self) -> bool {
        self.dbs.iter().all(BTreeMap::is_empty)
    }

    /// Empties `db` (or all databases): keys already expired are recorded as
    /// `Expired` by `"expiry"`, the others as `Flushed` by `by`. Key order.
    pub fn flush(&mut self, db: Option<usize>, now_us: u64, by: &str) {
        let now_ms = (now_us / 1000) as i64;
        let range = match db {
            Some(d) => d..d + 1,
            None => 0..DATABASES,
        };
        for d in range {
            let map = std::mem::take(&mut self.dbs[d]);
            for (key, entry) in map {
                let (by, cause) = if is_expired(&entry, now_ms) {
                    ("expiry", KeyCause::Expired)
                } else {
                    (by, KeyCause::Flushed)
                };
                self.emit(KeyEvent::Removed {
                    at_us: now_us,
                    by: by.to_string(),
                    key: key_text(&key),
                    value: entry.value.describe(),
                    cause,
                });
            }
        }
    }

    /// Removes every expired key of every database (database, then key order); returns
    /// them, in that order.
    pub fn expire_all(&mut self, now_us: u64) -> Vec<(usize, Vec<u8>)> {
        let now_ms = (now_us / 1000) as i64;
        let mut removed = Vec::new();
        for d in 0..DATABASES {
            let expired: Vec<Vec<u8>> = self.dbs[d]
                .iter()
                .filter(|(_, e)| is_expired(e, now_ms))
                .map(|(k, _)| k.clone())
                .collect();
            for key in expired {
                self.remove(d, &key, now_us, "expiry", KeyCause::Expired);
                removed.push((d, key));
            }
        }
        removed
    }

    /// Every stored entry (expired or not), database then key order: what a
    /// persistence layer saves.
    pub fn entries(&self) -> Vec<(usize, Vec<u8>, Entry)> {
        self.dbs
            .iter()
            .enumerate()
            .flat_map(|(db, map)| map.iter().map(move |(k, e)| (db, k.clone(), e.clone())))
            .collect()
    }

    /// Events recorded and not yet drained (a script's writes are the growth of this
    /// during its run).
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The keys changed by the events recorded since `index`, paired with every
    /// database (events carry no database, so a watched key of any database that
    /// shares the name counts as touched: a transaction may fail spuriously, never
    /// succeed wrongly).
    pub fn events_since(&self, index: usize) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        for event in self.events.iter().skip(index) {
            let key = match event {
                KeyEvent::Written { key, .. }
                | KeyEvent::ExpireSet { key, .. }
                | KeyEvent::FieldRemoved { key, .. }
                | KeyEvent::Removed { key, .. } => key.as_bytes().to_vec(),
            };
            for db in 0..DATABASES {
                out.push((db, key.clone()));
            }
        }
        out
    }

    /// The keys written (`Written` events) since `index`.
    pub fn written_since(&self, index: usize) -> Vec<String> {
        self.events
            .iter()
            .skip(index)
            .filter_map(|e| match e {
                KeyEvent::Written { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect()
    }

    /// Drains the event log.
    pub fn take_events(&mut self) -> Vec<KeyEvent> {
        std::mem::take(&mut self.events)
    }
}
