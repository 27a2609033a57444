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
    /// The transaction commands (`MULTI`, `DISCARD`, `EXEC`, `WATCH`, `UNWATCH`); `None` for another command.
    pub(super) fn transaction_command(
        &mut self,
        session: &mut Session,
        name: &str,
        argv: &[Vec<u8>],
        queueing: bool,
        now_us: u64,
    ) -> Option<Reply> {
        Some(match name {
            "multi" => {
                if queueing {
                    return Some(Reply::err("MULTI calls can not be nested"));
                }
                session.multi = Some(Vec::new());
                session.multi_failed = false;
                Reply::ok()
            }
            "discard" => {
                if !queueing {
                    return Some(Reply::err("DISCARD without MULTI"));
                }
                session.multi = None;
                self.watches.remove(&session.id);
                Reply::ok()
            }
            "exec" => self.exec(session, now_us),
            "watch" => {
                if queueing {
                    return Some(Reply::err("WATCH inside MULTI is not allowed"));
                }
                let db = self.selected_db(session);
                let now_ms = (now_us / 1000) as i64;
                let entry = self.watches.entry(session.id).or_default();
                for key in &argv[1..] {
                    if !entry.keys.iter().any(|(d, k, _)| *d == db && k == key) {
                        let expired = self
                            .core
                            .ks
                            .peek(db, key)
                            .is_some_and(|e| crate::redis::keyspace::is_expired(e, now_ms));
                        entry.keys.push((db, key.clone(), expired));
                    }
                }
                Reply::ok()
            }
            "unwatch" => {
                self.watches.remove(&session.id);
                Reply::ok()
            }
            _ => return None,
        })
    }

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
