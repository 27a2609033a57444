//! ZooKeeper's server events as system-neutral facts and in ZooKeeper's words: a
//! session's creation, expiry or close (an expiry deletes its ephemeral nodes), a node
//! of the lock's directory, a follower that served clients while behind its leader.

use crate::history::fact::{Freed, LockFact, Note, Session, SessionState};

/// A session's event (`created`, `expired`, `closed`) as a fact: every lock of its
/// client is an ephemeral node that lives with it.
pub fn session_fact<'a>(
    session: &str,
    client: &'a str,
    event: &str,
    timeout_ms: u32,
    ephemerals: &'a [String],
) -> LockFact<'a> {
    LockFact::Session(Session {
        client,
        state: match event {
            "created" => SessionState::Opened,
            "expired" => SessionState::Expired,
            _ => SessionState::Closed,
        },
        name: format!("session {session}"),
        timeout_ms: Some(timeout_ms),
        holds_all: true,
        owner: None,
        freed: ephemerals
            .iter()
            .map(|p| Freed {
                key: p,
                words: p.clone(),
            })
            .collect(),
    })
}

/// A session's event in the timeline's words.
pub fn session_words(
    session: &str,
    client: &str,
    event: &str,
    timeout_ms: u32,
    ephemerals: &[String],
) -> String {
    let nodes = if ephemerals.is_empty() {
        String::new()
    } else {
        format!(", deleting {}", ephemerals.join(", "))
    };
    format!("session {session} of {client} {event} (timeout {timeout_ms} ms){nodes}")
}

/// A session's end as a diagram note (its creation is none).
pub fn session_note<'a>(
    session: &str,
    client: &'a str,
    event: &str,
    ephemerals: &[String],
) -> Option<Note<'a>> {
    if event == "created" {
        return None;
    }
    let mut text = format!("session {session} of {client} {event}");
    if !ephemerals.is_empty() {
        text.push_str(&format!(": deletes {}", ephemerals.join(", ")));
    }
    Some(Note {
        text,
        client: Some(client),
        bad: false,
    })
}

/// A node's creation or deletion in the timeline's words.
pub fn node_words(by: &str, session: &str, path: &str, op: &str) -> String {
    format!("node {path} {op} (session {session} of {by})")
}

/// A follower's lag as a fact.
pub fn lag_fact(leader: &str, since_us: u64, txns_behind: u64, clients: u32) -> LockFact<'_> {
    LockFact::Lagged {
        leader,
        since_us,
        behind: txns_behind,
        clients,
    }
}

/// A follower's lag in the timeline's words.
pub fn lag_words(leader: &str, since_us: u64, txns_behind: u64, clients: u32) -> String {
    format!(
        "caught up with {leader}: behind since {:.3} s by up to {txns_behind} txns while serving {clients} clients",
        since_us as f64 / 1e6
    )
}
