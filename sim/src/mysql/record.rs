//! MySQL's server events as system-neutral facts and in MySQL's words: a connection's
//! login or end (an end releases its `GET_LOCK`s and rolls back its transaction's row
//! locks) and a restart after a crash (what recovery from the redo log kept or lost).

use crate::history::fact::{Freed, LockFact, Session, SessionState};

/// A connection's event (`opened`, `closed`) as a fact: the locks scoped to it are
/// the ones whose owner value names it.
pub fn connection_fact<'a>(
    connection: u32,
    client: &'a str,
    event: &str,
    released: &'a [String],
    row_locks: &'a [String],
) -> LockFact<'a> {
    let freed = released
        .iter()
        .map(|k| Freed {
            key: k,
            words: format!("releasing GET_LOCK {k}"),
        })
        .chain(row_locks.iter().map(|k| Freed {
            key: k,
            words: format!("rolling back the transaction that held row {k} FOR UPDATE"),
        }))
        .collect();
    LockFact::Session(Session {
        client,
        state: if event == "opened" {
            SessionState::Opened
        } else {
            SessionState::Closed
        },
        name: format!("connection {connection}"),
        timeout_ms: None,
        holds_all: false,
        owner: Some(lock_impl::designs::get_lock_owner(connection)),
        freed,
    })
}

/// A connection's event in the timeline's words.
pub fn connection_words(
    connection: u32,
    client: &str,
    event: &str,
    released: &[String],
    row_locks: &[String],
) -> String {
    let mut locks = if released.is_empty() {
        String::new()
    } else {
        format!(", releasing GET_LOCK {}", released.join(", "))
    };
    if !row_locks.is_empty() {
        locks.push_str(&format!(
            ", rolling back the transaction that locked row {}",
            row_locks.join(", ")
        ));
    }
    format!("connection {connection} of {client} {event}{locks}")
}

/// A restart after a crash as a fact.
pub fn restart_fact<'a>(held: Option<&'a str>, kept: bool, detail: &'a str) -> LockFact<'a> {
    LockFact::Recovered { held, kept, detail }
}
