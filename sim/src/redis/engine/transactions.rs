//! `MULTI`/`EXEC` and `WATCH` as Redis 7.0's `multi.c` does them.

use super::{Engine, Session};
use crate::redis::reply::Reply;

/// A session's `WATCH`ed keys (`multi.c`).
#[derive(Debug, Clone, Default)]
pub(super) struct Watches {
    /// (database, key, already expired when watched).
    pub(super) keys: Vec<(usize, Vec<u8>, bool)>,
    /// A watched key changed: `EXEC` fails.
    pub(super) dirty: bool,
}

impl Engine {
    /// Marks the transactions watching a key that changed since `events_before`.
    pub(super) fn touch_watched(&mut self, events_before: usize) {
        if self.watches.is_empty() {
            return;
        }
        let changed = self.core.ks.events_since(events_before);
        if changed.is_empty() {
            return;
        }
        let ks = &self.core.ks;
        for w in self.watches.values_mut() {
            for (db, key, expired) in &mut w.keys {
                if !changed.iter().any(|(d, k)| d == db && k == key) {
                    continue;
                }
                // `touchWatchedKey`: deleting a key that had already expired when it
                // was watched is no change.
                if *expired && ks.peek(*db, key).is_none() {
                    *expired = false;
                } else {
                    w.dirty = true;
                }
            }
        }
    }

    pub(super) fn exec(&mut self, session: &mut Session, now_us: u64) -> Reply {
        let Some(queue) = session.multi.take() else {
            return Reply::err("EXEC without MULTI");
        };
        let watched = self.watches.remove(&session.id);
        if std::mem::take(&mut session.multi_failed) {
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        let now_ms = (now_us / 1000) as i64;
        if let Some(w) = watched {
            // `isWatchedKeyExpired`: a watched key, alive when watched, that has
            // expired since also fails the transaction.
            let expired = w.keys.iter().any(|(db, k, was_expired)| {
                !*was_expired
                    && self
                        .core
                        .ks
                        .peek(*db, k)
                        .is_some_and(|e| crate::redis::keyspace::is_expired(e, now_ms))
            });
            if w.dirty || expired {
                return Reply::NilArray;
            }
        }
        self.in_exec = true;
        let mut replies = Vec::with_capacity(queue.len());
        for argv in &queue {
            replies.push(self.dispatch(session, argv, now_us));
        }
        self.in_exec = false;
        Reply::Array(replies)
    }
}
