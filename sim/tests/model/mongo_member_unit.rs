//! `sim::mongo::member`'s own tests (moved from `sim/src/mongo/member/tests.rs`): the
//! member as a state machine, command by command.

use std::time::Duration;

use lock_impl::mongo::{Document, Value};
use sim::mongo::member::{
    ConcernState, Durable, Entry, Fetched, Handled, Member, MemberEvent, MongoConfig, Op, OpTime,
    Origin, Role,
};

fn config(me: usize, n: usize) -> MongoConfig {
    MongoConfig {
        set_name: "rs0".into(),
        members: (1..=n).map(|i| format!("mongo-{i}:27017")).collect(),
        me,
        heartbeat_ms: 100,
        election_timeout_ms: 1_000,
        seed: 1,
    }
}

fn primary_of_one() -> Member {
    let mut m = Member::new(config(0, 1), Durable::default(), Duration::ZERO);
    m.start_election(Duration::from_secs(2));
    assert_eq!(m.role(), Role::Primary);
    m
}

fn reply(h: Handled) -> Document {
    match h {
        Handled::Reply(d) => d,
        Handled::WaitConcern(w) => w.reply,
        other => panic!("{other:?}"),
    }
}

/// `m` hears of `term` (a primary steps down): through a `replSetUpdatePosition` that
/// carries the term and no positions, which does nothing else.
fn see_term(m: &mut Member, term: i64) {
    let update = Document::new()
        .with("replSetUpdatePosition", 1)
        .with("term", term)
        .with("$db", "admin");
    reply(m.command("mongo-3", &update, Duration::ZERO));
}

fn lock(owner: &str, now: i64) -> Document {
    lock_impl::designs::MongoFindAndModify::acquire_command(
        "k",
        owner,
        now,
        100,
        Document::new().with("w", 1),
    )
    .with("$db", "locksim")
}

#[test]
fn find_and_modify_upserts_a_free_lock_refuses_a_live_one_and_takes_an_expired_one() {
    let mut m = primary_of_one();
    let t = Duration::from_secs(3);
    let r = reply(m.command("c1", &lock("a", 1_000), t));
    assert_eq!(r.get_document("value").unwrap().get_str("owner"), Some("a"));
    assert_eq!(
        r.get_document("lastErrorObject").unwrap().get("upserted"),
        Some(&Value::from("k"))
    );
    let r = reply(m.command("c2", &lock("b", 1_050), t));
    assert_eq!(r.get_i64("code"), Some(11000));
    assert_eq!(
        r.get_str("errmsg"),
        Some(
            "E11000 duplicate key error collection: locksim.locks index: _id_ dup key: { _id: \"k\" }"
        )
    );
    let r = reply(m.command("c2", &lock("b", 1_200), t));
    let v = r.get_document("value").unwrap();
    assert_eq!(
        (v.get_str("owner"), v.get_i64("version")),
        (Some("b"), Some(2))
    );
}

#[test]
fn a_secondary_refuses_writes_and_unknown_commands_get_mongods_error() {
    let mut m = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
    let r = reply(m.command("c1", &lock("a", 1), Duration::ZERO));
    assert_eq!(r.get_i64("code"), Some(10107));
    assert_eq!(r.get_str("errmsg"), Some("not primary"));
    assert_eq!(r.get_str("codeName"), Some("NotWritablePrimary"));
    let r = reply(m.command(
        "c1",
        &Document::new().with("frobnicate", 1).with("$db", "x"),
        Duration::ZERO,
    ));
    assert_eq!(r.get_str("errmsg"), Some("no such command: 'frobnicate'"));
    assert_eq!(
        (r.get_i64("code"), r.get_str("codeName")),
        (Some(59), Some("CommandNotFound"))
    );
    assert!(!r.get("ok").unwrap().truthy());
}

#[test]
fn a_voter_refuses_a_staler_candidate_and_a_second_candidate_in_one_term() {
    // A voter whose oplog has one entry (of term 1), from its durable state.
    let mut voter = Member::new(
        config(0, 3),
        Durable {
            oplog: vec![Entry {
                optime: OpTime { t: 1, ts: 1 },
                op: Op::Noop("x".into()),
            }],
            ..Durable::default()
        },
        Duration::ZERO,
    );
    let mut stale = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
    let req = stale
        .start_election(Duration::from_secs(2))
        .with("$db", "admin");
    let r = reply(voter.command("mongo-2", &req, Duration::from_secs(2)));
    assert!(!r.get("voteGranted").unwrap().truthy());
    assert!(
        r.get_str("reason")
            .unwrap()
            .starts_with("candidate's data is staler than mine")
    );
    let mut fresh = Member::new(
        config(2, 3),
        Durable {
            term: 0,
            last_vote: None,
            oplog: voter.durable().oplog.clone(),
        },
        Duration::ZERO,
    );
    let req = fresh
        .start_election(Duration::from_secs(2))
        .with("$db", "admin");
    let r = reply(voter.command("mongo-3", &req, Duration::from_secs(2)));
    assert!(r.get("voteGranted").unwrap().truthy(), "{r}");
    let again = req.clone().with("candidateIndex", 1);
    let r = reply(voter.command("mongo-2", &again, Duration::from_secs(2)));
    assert!(
        r.get_str("reason")
            .unwrap()
            .starts_with("already voted for another candidate")
    );
}

/// `w: "majority"` waits for a second member's position; a step-down meanwhile is
/// `PrimarySteppedDown` (189), a `wtimeout` `WriteConcernFailed` (64).
#[test]
fn a_majority_write_waits_for_a_majority_and_fails_as_mongod_says() {
    let t = Duration::from_secs(2);
    let mut p = Member::new(config(0, 3), Durable::default(), Duration::ZERO);
    p.initiate(0, Duration::ZERO);
    let cmd = lock_impl::designs::MongoFindAndModify::acquire_command(
        "k",
        "a",
        1,
        100,
        Document::new()
            .with("w", "majority")
            .with("wtimeout", 50i64),
    )
    .with("$db", "locksim");
    let Handled::WaitConcern(w) = p.command("c1", &cmd, t) else {
        panic!("a majority write waits");
    };
    assert_eq!(p.concern_met(&w), ConcernState::Waiting);
    let e = Member::wtimeout_error(&w);
    assert_eq!(
        (
            e.get_i64("code"),
            e.get_str("codeName"),
            e.get_str("errmsg")
        ),
        (
            Some(64),
            Some("WriteConcernFailed"),
            Some("waiting for replication timed out")
        )
    );
    let mut s = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
    s.initiate(0, Duration::ZERO);
    let batch = reply(p.command("mongo-2", &s.fetch_request(1, 0).with("$db", "local"), t));
    assert_eq!(s.on_fetch_reply(0, 1, &batch, t), Fetched::Applied(1));
    reply(p.command("mongo-2", &s.update_position().with("$db", "admin"), t));
    assert_eq!(p.concern_met(&w), ConcernState::Met);
    // A second write, then a higher term: the wait fails with PrimarySteppedDown.
    let mut other_key = cmd.clone();
    other_key.set("query", Document::new().with("_id", "j"));
    let Handled::WaitConcern(w2) = p.command("c1", &other_key, t) else {
        panic!("a majority write waits");
    };
    see_term(&mut p, 5);
    let ConcernState::Failed(e) = p.concern_met(&w2) else {
        panic!("a step-down fails the wait");
    };
    assert_eq!(
        (e.get_i64("code"), e.get_str("codeName")),
        (Some(189), Some("PrimarySteppedDown"))
    );
}

/// Malformed commands get mongod's errors (`ok: 0` with a code), never a panic.
#[test]
fn malformed_commands_are_refused_with_errors_never_panicked_on() {
    let t = Duration::from_secs(1);
    let mut p = Member::new(config(0, 1), Durable::default(), Duration::ZERO);
    p.initiate(0, Duration::ZERO);
    let bad = [
        Document::new().with("findAndModify", "locks"),
        Document::new().with("findAndModify", 5).with("$db", "d"),
        Document::new()
            .with("findAndModify", "locks")
            .with("update", Document::new().with("$set", 3))
            .with("$db", "d"),
        Document::new()
            .with("findAndModify", "locks")
            .with("remove", true)
            .with("update", Document::new())
            .with("$db", "d"),
        Document::new()
            .with("findAndModify", "locks")
            .with("query", "x")
            .with("update", Document::new())
            .with("$db", "d"),
        Document::new().with("insert", "locks").with("$db", "d"),
        Document::new()
            .with("insert", "locks")
            .with("documents", vec![Value::Int32(1)])
            .with("$db", "d"),
        Document::new()
            .with("delete", "locks")
            .with(
                "deletes",
                vec![Value::Document(
                    Document::new().with("q", Document::new()).with("limit", 7),
                )],
            )
            .with("$db", "d"),
        Document::new()
            .with("insert", "locks")
            .with("documents", vec![Value::Document(Document::new())])
            .with("writeConcern", Document::new().with("w", "nodes"))
            .with("$db", "d"),
        Document::new()
            .with("find", "locks")
            .with("filter", Document::new().with("$where", "1"))
            .with("$db", "d"),
        Document::new(),
    ];
    for cmd in bad {
        let r = reply(p.command("c", &cmd, t));
        assert!(!r.get("ok").unwrap().truthy(), "{cmd} -> {r}");
        assert!(r.get_i64("code").is_some_and(|c| c != 0), "{cmd} -> {r}");
        assert!(
            !r.get_str("errmsg").unwrap_or("").is_empty(),
            "{cmd} -> {r}"
        );
    }
}

/// An acknowledged `w: 1` write that only the old primary had is rolled back when
/// it rejoins the new primary's set.
#[test]
fn a_write_the_new_primary_never_had_is_rolled_back() {
    let t = Duration::from_secs(2);
    let mut old = Member::new(config(0, 3), Durable::default(), Duration::ZERO);
    let mut other = Member::new(config(1, 3), Durable::default(), Duration::ZERO);
    let req = old.start_election(t).with("$db", "admin");
    let r = reply(other.command("mongo-1", &req, t));
    old.on_vote_reply(1, &r, 1, t);
    assert_eq!(old.role(), Role::Primary);
    // mongo-2 copies the no-op, then the old primary takes a lock alone.
    let fetch = reply(old.command(
        "mongo-2",
        &other.fetch_request(1, 0).with("$db", "local"),
        t,
    ));
    assert_eq!(other.on_fetch_reply(0, 1, &fetch, t), Fetched::Applied(1));
    reply(old.command("c1", &lock("a", 1), t));
    assert!(old.document("locksim.locks", &Value::from("k")).is_some());
    // mongo-2 is elected in term 2 without it (mongo-3 votes).
    let mut third = Member::new(config(2, 3), Durable::default(), Duration::ZERO);
    let req = other.start_election(t).with("$db", "admin");
    let r = reply(third.command("mongo-2", &req, t));
    other.on_vote_reply(2, &r, 2, t);
    assert_eq!(other.role(), Role::Primary);
    // The old primary hears of term 2, fetches from mongo-2 and rolls back.
    see_term(&mut old, 2);
    let from = old.fetch_from();
    let batch = reply(other.command(
        "mongo-1",
        &old.fetch_request(from, 0).with("$db", "local"),
        t,
    ));
    let Fetched::Diverged { from_ts } = old.on_fetch_reply(1, from, &batch, t) else {
        panic!("diverged");
    };
    let batch = reply(other.command(
        "mongo-1",
        &old.fetch_request(from_ts, 0).with("$db", "local"),
        t,
    ));
    old.rollback(1, &batch);
    assert!(old.document("locksim.locks", &Value::from("k")).is_none());
    let events = old.take_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, MemberEvent::Rollback { undone: 1, .. })),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        MemberEvent::Changed {
            origin: Origin::RolledBack,
            after: None,
            ..
        }
    )));
    assert_eq!(
        old.on_fetch_reply(
            1,
            old.fetch_from(),
            &reply(other.command(
                "mongo-1",
                &old.fetch_request(old.fetch_from(), 0).with("$db", "local"),
                t
            )),
            t
        ),
        Fetched::Applied(1)
    );
    assert_eq!(old.last_applied(), other.last_applied());
}
