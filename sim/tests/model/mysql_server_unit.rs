//! `sim::mysql::server`'s own tests (moved from `sim/src/mysql/server/tests.rs`): the
//! server state machine's handshakes, statements, waits, refusals.

use lock_impl::mysql::proto::{
    self, Handshake, HandshakeResponse, Reply, native_password, split_packet,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::mysql::{ConnId, MySqlConfig, MySqlModel, ServerEvent};

fn logged_in(m: &mut MySqlModel) -> ConnId {
    let (id, hello) = m.connect("client-1".into());
    let (_, payload, _) = split_packet(&hello.bytes).unwrap().unwrap();
    let hs = Handshake::decode(payload).unwrap();
    let resp = HandshakeResponse {
        capabilities: lock_impl::mysql::client::CLIENT_CAPABILITIES,
        max_packet: 1 << 24,
        charset: 45,
        user: "locksim".into(),
        auth: native_password(b"locksim", &hs.scramble),
        database: Some("locksim".into()),
        auth_plugin: Some(proto::NATIVE_PASSWORD.into()),
    };
    let out = m.receive(id, 1, &resp.encode());
    assert_eq!(out.bytes[4], 0x00, "login OK");
    id
}

#[test]
fn garbage_is_answered_never_panicked_on() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let words: &[&[u8]] = &[
        b"SELECT",
        b"GET_LOCK",
        b"RELEASE_LOCK",
        b"IS_USED_LOCK",
        b"INSERT",
        b"INTO",
        b"locks",
        b"(",
        b")",
        b",",
        b"'k'",
        b"'",
        b"\\",
        b"NULL",
        b"0",
        b"-",
        b"-1",
        b"99999999999999999999",
        b"DELETE",
        b"FROM",
        b"WHERE",
        b"name",
        b"=",
        b"AND",
        b"owner",
        b"VALUES",
        b"CREATE",
        b"TABLE",
        b" ",
        b"\n",
        b"\xc3\xa9",
        b"\xff",
        b"BEGIN",
        b"COMMIT",
        b"ROLLBACK",
        b"UPDATE",
        b"SET",
        b"FOR",
        b"IGNORE",
        b"<",
        b"+",
        b"LAST_INSERT_ID",
        b"expires_at",
        b"BIGINT",
        b"VARCHAR(255)",
        b"NOT NULL",
        b"PRIMARY KEY",
        b"IF NOT EXISTS",
    ];
    let mut m = MySqlModel::new(MySqlConfig::default());
    let id = logged_in(&mut m);
    for _ in 0..20_000 {
        let mut payload = vec![proto::COM_QUERY];
        for _ in 0..rng.random_range(0..12) {
            payload.extend_from_slice(words[rng.random_range(0..words.len())]);
        }
        let out = m.receive(id, 0, &payload);
        assert!(!out.bytes.is_empty() && !out.close);
    }
    // Arbitrary bytes as a login, and as commands of another connection.
    for _ in 0..2_000 {
        let (other, _) = m.connect("client-2".into());
        let n = rng.random_range(0..64);
        let bytes: Vec<u8> = (0..n).map(|_| rng.random_range(0..=255u8)).collect();
        let _ = m.receive(other, 1, &bytes);
        let _ = m.receive(other, 0, &bytes);
        m.disconnect(other);
    }
}

#[test]
fn a_row_lock_lasts_as_long_as_its_transaction_or_connection() {
    let mut m = MySqlModel::new(MySqlConfig::default());
    let a = logged_in(&mut m);
    let b = logged_in(&mut m);
    let lock = "SELECT name FROM t WHERE name = 'k' FOR UPDATE";
    for sql in [
        "CREATE TABLE IF NOT EXISTS t (name VARCHAR(255) NOT NULL PRIMARY KEY)",
        "INSERT INTO t (name) VALUES ('k')",
        "BEGIN",
        lock,
    ] {
        assert!(!matches!(m.query(a, sql), Reply::Err(_)), "{sql}");
    }
    // b waits (its statement becomes a wait), and at once fails with a timeout of 0.
    let mut payload = vec![proto::COM_QUERY];
    payload.extend_from_slice(lock.as_bytes());
    let out = m.receive(b, 0, &payload);
    let wait = out.wait.expect("b waits for the row lock");
    assert!(out.bytes.is_empty());
    assert_eq!(wait.timeout_ms, 50_000);
    assert_eq!(m.retry(b, &wait), None, "still locked");
    m.query(b, "SET SESSION innodb_lock_wait_timeout = 0");
    let Reply::Err(e) = m.query(b, lock) else {
        panic!("a lock wait timeout")
    };
    assert_eq!((e.code, e.sql_state.as_str()), (1205, "HY000"));
    // a's connection ends: its transaction rolls back and b gets the row.
    m.take_events();
    m.disconnect(a);
    assert!(m.take_events().iter().any(|e| matches!(
        e,
        ServerEvent::Disconnected { row_locks, .. } if row_locks == &["k".to_string()]
    )));
    assert!(m.retry(b, &wait).is_some(), "b got the row");
}

#[test]
fn a_replica_applying_the_binlog_has_the_committed_rows_only() {
    let mut primary = MySqlModel::new(MySqlConfig::default());
    let a = logged_in(&mut primary);
    for sql in [
        "CREATE TABLE IF NOT EXISTS t (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL)",
        "INSERT INTO t (name, owner) VALUES ('kept', 'o1')",
        "BEGIN",
        "INSERT INTO t (name, owner) VALUES ('undone', 'o2')",
        "ROLLBACK",
        "BEGIN",
        "INSERT INTO t (name, owner) VALUES ('committed', 'o3')",
    ] {
        assert!(!matches!(primary.query(a, sql), Reply::Err(_)), "{sql}");
    }
    // The open transaction's row is not in the binlog until it commits.
    assert_eq!(primary.binlog_from(0).len(), 2);
    primary.query(a, "COMMIT");
    let mut replica = MySqlModel::new(MySqlConfig::default());
    for event in primary.binlog_from(0) {
        replica.apply(&event);
    }
    assert_eq!(replica.rows("t"), primary.rows("t"));
    assert_eq!(
        replica.rows("t").unwrap(),
        vec![
            vec!["committed".to_string(), "o3".to_string()],
            vec!["kept".to_string(), "o1".to_string()],
        ]
    );
}

/// A server with `setting` that committed `kept`'s row, flushed, committed
/// `late`'s row and deleted `kept`'s, then took a `GET_LOCK`.
fn server_with_an_unflushed_tail(setting: u8) -> MySqlModel {
    let mut m = MySqlModel::new(MySqlConfig {
        flush_log_at_trx_commit: setting,
        ..MySqlConfig::default()
    });
    let a = logged_in(&mut m);
    for sql in [
        "CREATE TABLE IF NOT EXISTS t (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL)",
        "INSERT INTO t (name, owner) VALUES ('kept', 'o1')",
    ] {
        assert!(!matches!(m.query(a, sql), Reply::Err(_)), "{sql}");
    }
    m.flush_log();
    for sql in [
        "INSERT INTO t (name, owner) VALUES ('late', 'o2')",
        "DELETE FROM t WHERE name = 'kept' AND owner = 'o1'",
        "SELECT GET_LOCK('k', 0)",
    ] {
        assert!(!matches!(m.query(a, sql), Reply::Err(_)), "{sql}");
    }
    m
}

/// The rows a server recovering from `m`'s disk after a crash has.
fn recovered_rows(m: &MySqlModel, machine: bool) -> (Vec<Vec<String>>, usize, MySqlModel) {
    let (log, lost) = m.durable_log(machine);
    let r = MySqlModel::recover(m.config().clone(), &log, m.next_conn_id());
    (r.rows("t").unwrap_or_default(), lost, r)
}

#[test]
fn flush_at_every_commit_keeps_every_committed_row_through_any_crash() {
    for (setting, machine) in [(1, false), (1, true), (3, false), (3, true)] {
        let m = server_with_an_unflushed_tail(setting);
        let (rows, lost, r) = recovered_rows(&m, machine);
        assert_eq!(rows, vec![vec!["late".to_string(), "o2".to_string()]]);
        assert_eq!(lost, 0);
        // No connection survives a restart, nor its GET_LOCK.
        assert!(r.user_locks().is_empty());
        assert_eq!(r.lock_row("late").as_deref(), Some("o2"));
    }
}

#[test]
fn flush_once_a_second_loses_the_unflushed_commits_in_a_machine_crash_only() {
    let m = server_with_an_unflushed_tail(2);
    // mysqld alone: the OS had every commit.
    let (rows, lost, _) = recovered_rows(&m, false);
    assert_eq!(rows, vec![vec!["late".to_string(), "o2".to_string()]]);
    assert_eq!(lost, 0);
    // The machine: back to the last flush (the insert and the delete are gone).
    let (rows, lost, r) = recovered_rows(&m, true);
    assert_eq!(rows, vec![vec!["kept".to_string(), "o1".to_string()]]);
    assert_eq!(lost, 2);
    assert_eq!(r.lock_row("late"), None);
    // Connection ids go on after a restart.
    assert_eq!(r.next_conn_id(), m.next_conn_id());
}

#[test]
fn writing_once_a_second_loses_the_unflushed_commits_even_in_a_mysqld_crash() {
    let m = server_with_an_unflushed_tail(0);
    for machine in [false, true] {
        let (rows, lost, _) = recovered_rows(&m, machine);
        assert_eq!(rows, vec![vec!["kept".to_string(), "o1".to_string()]]);
        assert_eq!(lost, 2);
    }
}

#[test]
fn a_connections_locks_go_with_it() {
    let mut m = MySqlModel::new(MySqlConfig::default());
    let a = logged_in(&mut m);
    let b = logged_in(&mut m);
    assert!(matches!(
        m.query(a, "SELECT GET_LOCK('k', 0)"),
        Reply::Rows(_)
    ));
    assert_eq!(m.user_locks().get("k"), Some(&a));
    let Reply::Rows(rs) = m.query(b, "SELECT GET_LOCK('k', 0)") else {
        panic!("a resultset")
    };
    assert_eq!(rs.rows[0][0].as_deref(), Some(&b"0"[..]));
    m.disconnect(a);
    assert!(m.user_locks().is_empty());
    let Reply::Rows(rs) = m.query(b, "SELECT GET_LOCK('k', 0)") else {
        panic!("a resultset")
    };
    assert_eq!(rs.rows[0][0].as_deref(), Some(&b"1"[..]));
}
