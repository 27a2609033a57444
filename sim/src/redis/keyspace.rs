//! The keyspace: 16 databases of keys with optional absolute expiry (unix ms), and the
//! key-event log every removal and string write goes through.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use super::engine::{KeyCause, KeyEvent};

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

/// All databases plus the event log.
#[derive(Debug)]
pub struct Keyspace {
    dbs: Vec<BTreeMap<Vec<u8>, Entry>>,
    events: Vec<KeyEvent>,
}

impl Default for Keyspace {
    fn default() -> Self {
        Self {
            dbs: vec![BTreeMap::new(); DATABASES],
            events: Vec::new(),
        }
    }
}

/// Lossy key text for events.
fn key_text(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

impl Keyspace {
    /// The live entry at `key` in `db`, removing it first (with an `Expired` event) if
    /// it has expired at `now_ms` (lazy expiry).
    pub fn get(&mut self, db: usize, key: &[u8], now_us: u64) -> Option<&mut Entry> {
        let now_ms = (now_us / 1000) as i64;
        let expired = match self.dbs[db].get(key) {
            None => return None,
            Some(e) => is_expired(e, now_ms),
        };
        if expired {
            self.remove(db, key, now_us, "expiry", KeyCause::Expired);
            return None;
        }
        self.dbs[db].get_mut(key)
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
        self.events.push(KeyEvent::Removed {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: entry.value.describe(),
            cause,
        });
        Some(entry)
    }

    /// Records that `field` of the hash `key` was written (HSET, HINCRBY): a reentrant
    /// lock's owner is a hash field, and the checkers attribute it by this event.
    pub fn record_field_written(&mut self, key: &[u8], field: &[u8], now_us: u64, by: &str) {
        self.events.push(KeyEvent::Written {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            value: String::from_utf8_lossy(field).into_owned(),
        });
    }

    /// Records that a command set a key's expiry (a lease armed or renewed).
    pub fn record_expire_set(&mut self, key: &[u8], expire_at_ms: i64, now_us: u64, by: &str) {
        self.events.push(KeyEvent::ExpireSet {
            at_us: now_us,
            by: by.to_string(),
            key: key_text(key),
            ttl_ms: expire_at_ms - (now_us / 1000) as i64,
        });
    }

    /// Removes a live key on a command's behalf; returns whether it existed.
    pub fn delete(&mut self, db: usize, key: &[u8], now_us: u64, by: &str) -> bool {
        if self.get(db, key, now_us).is_none() {
            return false;
        }
        self.remove(db, key, now_us, by, KeyCause::Command)
            .is_some()
    }

    /// Stores a string (recording `Overwritten` for any previous value and `Written`
    /// for the new one). `expire_at_ms` is the new expiry.
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
        self.events.push(KeyEvent::Written {
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

    /// Replaces a live string's value in place, keeping its expiry (INCR and friends);
    /// records `Written`.
    pub fn update_string(&mut self, db: usize, key: &[u8], value: Vec<u8>, now_us: u64, by: &str) {
        let expire_at_ms = self.get(db, key, now_us).and_then(|e| e.expire_at_ms);
        self.events.push(KeyEvent::Written {
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

    /// Inserts a new entry without any event (hash creation).
    pub fn insert(&mut self, db: usize, key: &[u8], entry: Entry) {
        self.dbs[db].insert(key.to_vec(), entry);
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
                self.events.push(KeyEvent::Removed {
                    at_us: now_us,
                    by: by.to_string(),
                    key: key_text(&key),
                    value: entry.value.describe(),
                    cause,
                });
            }
        }
    }

    /// Removes every expired key of every database (database, then key order).
    pub fn expire_all(&mut self, now_us: u64) -> usize {
        let now_ms = (now_us / 1000) as i64;
        let mut removed = 0;
        for d in 0..DATABASES {
            let expired: Vec<Vec<u8>> = self.dbs[d]
                .iter()
                .filter(|(_, e)| is_expired(e, now_ms))
                .map(|(k, _)| k.clone())
                .collect();
            for key in expired {
                self.remove(d, &key, now_us, "expiry", KeyCause::Expired);
                removed += 1;
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

    /// Drains the event log.
    pub fn take_events(&mut self) -> Vec<KeyEvent> {
        std::mem::take(&mut self.events)
    }
}
