//! MongoDB's server events as system-neutral facts and in MongoDB's words: a member's
//! rollback of oplog entries its sync source never had.

use crate::history::fact::{LockFact, Note};

/// A rollback as a fact.
pub fn rollback_fact<'a>(
    source: &'a str,
    common: &'a str,
    last_undone: &'a str,
    undone: u64,
) -> LockFact<'a> {
    LockFact::RolledBack {
        source,
        common,
        last_undone,
        undone,
    }
}

/// A rollback in the timeline's words.
pub fn rollback_words(source: &str, common: &str, last_undone: &str, undone: u64) -> String {
    format!(
        "rolled back {undone} oplog entries (to {last_undone}) against {source}: common point {common}"
    )
}

/// A rollback as a diagram note.
pub fn rollback_note(source: &str, common: &str, undone: u64) -> Note<'static> {
    Note {
        text: format!("rolls back {undone} write(s) to {common} (syncing from {source})"),
        client: None,
        bad: true,
    }
}
