//! What a lock server's record means, in words every system shares: the
//! [`LockFact`] a server event carries and the kinds it is built from. Checkers,
//! probes, the timeline and the diagram read these, never a system's own event; each
//! system's record module (`<system>/record.rs`) builds them from its events, and
//! `history.rs` dispatches.

/// What a server's own record says happened, system-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum LockFact<'a> {
    /// A key (the lock record, or a hash field) was written.
    Written {
        /// The host whose request wrote it.
        by: &'a str,
        /// The key.
        key: &'a str,
        /// The value (an owner value, for a lock key).
        value: &'a str,
    },
    /// A lease was armed or renewed on a key.
    ExpirySet {
        /// The host whose request set it.
        by: &'a str,
        /// The key.
        key: &'a str,
        /// The time to live it set, ms.
        ttl_ms: i64,
    },
    /// A key was removed.
    Removed {
        /// The host whose request removed it, or `expiry`.
        by: &'a str,
        /// The key.
        key: &'a str,
        /// Its value.
        value: &'a str,
        /// Why, classified.
        why: Removal,
        /// Why, in the system's words.
        cause: &'a str,
    },
    /// One holder's field of a shared key was removed; the key lives on.
    FieldRemoved {
        /// The host whose request removed it.
        by: &'a str,
        /// The key.
        key: &'a str,
        /// The field.
        field: &'a str,
    },
    /// The server's role, at the start or at a change.
    Role {
        /// The role in the system's words.
        role: &'a str,
        /// What the role is, classified.
        rank: Rank,
        /// Whether the server is a member of a consensus quorum (a leader by epoch or
        /// term, a follower, a candidate, looking), whose one record of the lock
        /// stands for every member's.
        quorum: bool,
    },
    /// A notification to a subscriber was dropped.
    MessageDropped {
        /// The channel it was published on.
        channel: &'a str,
    },
    /// A client's command ran (traced runs only).
    Command {
        /// The client host.
        by: &'a str,
        /// The command in the system's words.
        command: &'a str,
    },
    /// A client's session (a session, a connection) began or ended.
    Session(Session<'a>),
    /// The server came back from a crash and recovered from its log.
    Recovered {
        /// The lock's value by its record at the crash, if it held it.
        held: Option<&'a str>,
        /// Whether that lock came back.
        kept: bool,
        /// In the system's words: the crash, the settings, what was lost or kept.
        detail: &'a str,
    },
    /// The server undid writes its sync source never had.
    RolledBack {
        /// The sync source it rolled back against.
        source: &'a str,
        /// The last point it shares with the source.
        common: &'a str,
        /// The last entry undone.
        last_undone: &'a str,
        /// How many entries were undone.
        undone: u64,
    },
    /// A replica served clients while behind its leader (recorded when it caught up).
    Lagged {
        /// Its leader.
        leader: &'a str,
        /// When it fell behind, true µs.
        since_us: u64,
        /// The most entries it was behind.
        behind: u64,
        /// The most client sessions it served meanwhile.
        clients: u32,
    },
    /// An entry of the lock's queue (a node under its directory) was created or
    /// deleted: bookkeeping the timeline shows and no checker reads.
    QueueEntry,
}

/// Why a key was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// A client's command.
    Command,
    /// Its lease ran out on the server.
    Expired,
    /// A rollback undid the write that made it.
    RolledBack,
    /// A crash lost it.
    Lost,
    /// Anything else (overwritten, flushed, replicated, a previous life's command).
    Other,
}

impl Removal {
    /// The classification of a removal's cause as the servers record it.
    pub fn of(cause: &str) -> Removal {
        match cause {
            "command" => Removal::Command,
            "expired" => Removal::Expired,
            "rolled-back" => Removal::RolledBack,
            "lost" => Removal::Lost,
            _ => Removal::Other,
        }
    }
}

/// What a server's role is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// Elected by its peers (a quorum's leader, a replica set's primary).
    Elected,
    /// The writable server of a configured or promoted topology (a master).
    Master,
    /// Looking for a leader (an election under way).
    Looking,
    /// Anything else: a follower, a replica, a secondary.
    Follower,
}

impl Rank {
    /// The classification of a role as the servers record it.
    pub fn of(role: &str) -> Rank {
        if role.starts_with("leader") || role.starts_with("primary") {
            Rank::Elected
        } else if role == "master" {
            Rank::Master
        } else if role.starts_with("looking") {
            Rank::Looking
        } else {
            Rank::Follower
        }
    }
}

/// Whether `role`, as the servers record it, is a consensus quorum member's.
pub fn in_quorum(role: &str) -> bool {
    [
        "leader (epoch",
        "leader (term",
        "follower of",
        "follower (no leader)",
        "candidate (term",
        "looking",
    ]
    .iter()
    .any(|p| role.starts_with(p))
}

/// A client's session with a lock server: its start or end.
#[derive(Debug, Clone, PartialEq)]
pub struct Session<'a> {
    /// The client host.
    pub client: &'a str,
    /// What happened to it.
    pub state: SessionState,
    /// The session in the system's words (`session 0x…`, `connection 7`).
    pub name: String,
    /// Its timeout, where the server ends it on its own.
    pub timeout_ms: Option<u32>,
    /// Whether every lock its client holds lives and dies with it (an ephemeral
    /// node does); else only the locks whose owner value is [`Session::owner`].
    pub holds_all: bool,
    /// The owner value of a lock scoped to this session, if the system has such
    /// locks (a connection's user lock).
    pub owner: Option<String>,
    /// What its end freed, in order: each lock key with the system's words for it.
    pub freed: Vec<Freed<'a>>,
}

/// One thing a session's end freed.
#[derive(Debug, Clone, PartialEq)]
pub struct Freed<'a> {
    /// The key or node freed.
    pub key: &'a str,
    /// How its end freed it, in the system's words (`releasing …`).
    pub words: String,
}

/// A session's start or end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Created, logged in.
    Opened,
    /// The server ended it on its own (its timeout ran out).
    Expired,
    /// Closed by its client or by the server's end of the connection.
    Closed,
}

/// A note for a sequence diagram, from a server event the diagram shows beside the
/// lock record's writes, removals and roles.
#[derive(Debug, Clone, PartialEq)]
pub struct Note<'a> {
    /// The note's text, in the system's words.
    pub text: String,
    /// The client it concerns, if any (shown only when that client is).
    pub client: Option<&'a str>,
    /// Whether it marks harm (a rollback), else a state change.
    pub bad: bool,
}

/// A step of a failover monitor (its log line), classified for the diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorStep<'a> {
    /// The event's name in the monitor's log.
    pub event: &'a str,
    /// The rest of the line.
    pub detail: &'a str,
    /// Whether the monitor leads a failover by it (elected, selected, promoted).
    pub leads: bool,
    /// Whether it announces the new topology.
    pub announces: bool,
    /// Whether a diagram shows it.
    pub shown: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ServerEvent;

    #[test]
    fn causes_and_roles_are_classified_as_the_servers_record_them() {
        assert_eq!(Removal::of("expired"), Removal::Expired);
        assert_eq!(Removal::of("rolled-back"), Removal::RolledBack);
        assert_eq!(Removal::of("overwritten"), Removal::Other);
        assert_eq!(Rank::of("leader (epoch 2)"), Rank::Elected);
        assert_eq!(Rank::of("primary (term 3): elected"), Rank::Elected);
        assert_eq!(Rank::of("master"), Rank::Master);
        assert_eq!(Rank::of("replica of redis-1"), Rank::Follower);
        assert!(in_quorum("follower of zk-2") && !in_quorum("secondary"));
    }

    #[test]
    fn a_session_and_a_connection_end_as_one_kind_of_fact() {
        let expired = ServerEvent::ZkSession {
            session: "0x1".into(),
            client: "client-1".into(),
            event: "expired".into(),
            timeout_ms: 3000,
            ephemerals: vec!["/lock/n-1".into()],
        };
        let LockFact::Session(s) = expired.fact() else {
            panic!("a session's end is a session fact");
        };
        assert_eq!(
            (s.state, s.client, s.holds_all),
            (SessionState::Expired, "client-1", true)
        );
        assert_eq!(s.freed[0].key, "/lock/n-1");
        let closed = ServerEvent::MySqlConnection {
            connection: 7,
            client: "client-2".into(),
            event: "closed".into(),
            released: vec!["lock".into()],
            row_locks: vec![],
        };
        let LockFact::Session(s) = closed.fact() else {
            panic!("a connection's end is a session fact");
        };
        assert_eq!(
            (s.state, s.name.as_str()),
            (SessionState::Closed, "connection 7")
        );
        assert_eq!(s.owner.as_deref(), Some("connection-7"));
        assert_eq!(s.freed[0].words, "releasing GET_LOCK lock");
        assert_eq!(
            closed.wording(),
            "connection 7 of client-2 closed, releasing GET_LOCK lock"
        );
    }
}
