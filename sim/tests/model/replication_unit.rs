//! `sim::redis::replication`'s own tests (moved from the module): the replication
//! stream's framing (`SELECT`, `MULTI`/`EXEC`) and the full-sync snapshot's codec.

use sim::redis::keyspace::{Entry, Value};
use sim::redis::replication::{Repl, decode_snapshot, encode_snapshot};

#[test]
fn one_operation_is_not_wrapped_and_selects_its_database_once() {
    let mut r = Repl::new("x".repeat(40));
    r.backlog_start = Some(1);
    r.propagate(0, vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
    assert!(r.flush());
    r.propagate(0, vec![b"DEL".to_vec(), b"k".to_vec()]);
    r.flush();
    let s = String::from_utf8(r.take_stream()).unwrap();
    assert_eq!(
        s,
        "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n\
         *2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
    );
    assert_eq!(r.offset, s.len() as u64);
}

#[test]
fn several_operations_are_wrapped_in_multi_exec() {
    let mut r = Repl::new("x".repeat(40));
    r.backlog_start = Some(1);
    r.propagate(1, vec![b"DEL".to_vec(), b"a".to_vec()]);
    r.propagate(1, vec![b"SET".to_vec(), b"a".to_vec(), b"1".to_vec()]);
    r.flush();
    let s = String::from_utf8(r.take_stream()).unwrap();
    assert!(s.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*1\r\n$5\r\nMULTI\r\n"));
    assert!(s.ends_with("*1\r\n$4\r\nEXEC\r\n"));
}

#[test]
fn a_snapshot_round_trips() {
    let mut h = indexmap::IndexMap::new();
    h.insert(b"f".to_vec(), b"1".to_vec());
    let entries = vec![
        (
            0,
            b"k".to_vec(),
            Entry {
                value: Value::Str(b"v".to_vec()),
                expire_at_ms: Some(123),
            },
        ),
        (
            3,
            b"h".to_vec(),
            Entry {
                value: Value::Hash(h),
                expire_at_ms: None,
            },
        ),
    ];
    assert_eq!(decode_snapshot(&encode_snapshot(&entries)), Some(entries));
    assert_eq!(decode_snapshot(b"REDIS0009"), None);
}
