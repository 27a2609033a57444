//! The tests of `lock-impl/src/mongo/wire.rs` (once its `#[cfg(test)]` module).

use lock_impl::mongo::wire::*;
use lock_impl::mongo::{Document, Value};

/// `{ hello: 1, $db: "admin" }` as a driver sends it, byte by byte from the
/// specification's layout: header (length 52, requestID 1, responseTo 0, opCode
/// 2013 = 0xdd 0x07), flagBits 0, section kind 0, the document.
#[test]
fn a_hello_request_has_the_layout_the_specification_gives() {
    let msg = Message {
        request_id: 1,
        response_to: 0,
        flags: 0,
        body: Document::new().with("hello", 1).with("$db", "admin"),
    };
    let mut expected = vec![52, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0x07, 0, 0];
    expected.extend_from_slice(&[0, 0, 0, 0, 0]);
    expected.extend_from_slice(
        b"\x1f\x00\x00\x00\x10hello\x00\x01\x00\x00\x00\x02$db\x00\x06\x00\x00\x00admin\x00\x00",
    );
    assert_eq!(msg.encode(), expected);
    assert_eq!(Message::decode(&expected).unwrap(), msg);
    assert_eq!(split_message(&expected[..20]).unwrap(), None);
    assert_eq!(split_message(&expected).unwrap(), Some(52));
}

/// A kind 1 sequence (`documents` of an insert, as drivers send bulk writes) is
/// folded into the body as an array, and a checksum is skipped.
#[test]
fn a_document_sequence_becomes_an_array_field_of_the_body() {
    let body = Document::new().with("insert", "locks").with("$db", "d");
    let doc = Document::new().with("_id", "k");
    let mut section = Vec::new();
    section.extend_from_slice(b"documents\x00");
    section.extend_from_slice(&doc.to_bytes());
    let mut bytes = vec![0; 16];
    bytes.extend_from_slice(&CHECKSUM_PRESENT.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&body.to_bytes());
    bytes.push(1);
    bytes.extend_from_slice(&((section.len() + 4) as i32).to_le_bytes());
    bytes.extend_from_slice(&section);
    bytes.extend_from_slice(&[0xaa; 4]);
    let len = bytes.len() as i32;
    bytes[0..4].copy_from_slice(&len.to_le_bytes());
    bytes[12..16].copy_from_slice(&OP_MSG.to_le_bytes());
    let msg = Message::decode(&bytes).unwrap();
    assert_eq!(
        msg.body.get_array("documents"),
        Some(&[Value::Document(doc)][..])
    );
}

/// Every byte of a valid message replaced by every value, and every prefix: the
/// decoder answers or refuses, never panics.
#[test]
fn damaged_messages_are_refused_never_panicked_on() {
    let good = Message {
        request_id: 7,
        response_to: 0,
        flags: 0,
        body: Document::new()
            .with("findAndModify", "locks")
            .with("query", Document::new().with("_id", "k"))
            .with("$db", "d"),
    }
    .encode();
    for i in 0..good.len() {
        for b in [0u8, 1, 2, 0x7f, 0xff] {
            let mut m = good.clone();
            m[i] = b;
            let _ = Message::decode(&m);
            let _ = split_message(&m);
        }
        let _ = Message::decode(&good[..i]);
    }
}

#[test]
fn other_opcodes_and_fire_and_forget_are_refused_by_name() {
    let mut bytes = Message {
        request_id: 1,
        response_to: 0,
        flags: MORE_TO_COME,
        body: Document::new().with("ping", 1),
    }
    .encode();
    assert!(
        Message::decode(&bytes)
            .unwrap_err()
            .0
            .contains("moreToCome")
    );
    bytes[12..16].copy_from_slice(&2004i32.to_le_bytes());
    assert!(
        Message::decode(&bytes)
            .unwrap_err()
            .0
            .contains("opCode 2004")
    );
    assert!(split_message(&[3, 0, 0, 0]).is_err());
}
