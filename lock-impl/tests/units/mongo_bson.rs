//! The tests of `lock-impl/src/mongo/bson.rs` (once its `#[cfg(test)]` module).

use lock_impl::mongo::bson::*;

/// bsonspec.org's first example, `{"hello": "world"}`.
#[test]
fn the_spec_hello_world_example_encodes_to_its_published_bytes() {
    let doc = Document::new().with("hello", "world");
    let bytes = b"\x16\x00\x00\x00\x02hello\x00\x06\x00\x00\x00world\x00\x00";
    assert_eq!(doc.to_bytes(), bytes.to_vec());
    assert_eq!(Document::from_bytes(bytes).unwrap(), doc);
}

/// bsonspec.org's second example, `{"BSON": ["awesome", 5.05, 1986]}`.
#[test]
fn the_spec_array_example_encodes_to_its_published_bytes() {
    let doc = Document::new().with(
        "BSON",
        vec![
            Value::from("awesome"),
            Value::Double(5.05),
            Value::Int32(1986),
        ],
    );
    let bytes = b"\x31\x00\x00\x00\x04BSON\x00\x26\x00\x00\x00\x020\x00\x08\x00\x00\x00awesome\x00\x011\x00\x33\x33\x33\x33\x33\x33\x14\x40\x102\x00\xc2\x07\x00\x00\x00\x00";
    assert_eq!(doc.to_bytes(), bytes.to_vec());
    assert_eq!(Document::from_bytes(bytes).unwrap(), doc);
}

#[test]
fn every_supported_type_survives_a_round_trip() {
    let doc = Document::new()
        .with("d", 1.5)
        .with("s", "x")
        .with("o", Document::new().with("a", 1))
        .with("a", vec![Value::Null, Value::Bool(true)])
        .with("id", Value::ObjectId([7; 12]))
        .with("b", false)
        .with("t", Value::DateTime(-5))
        .with("n", Value::Null)
        .with("i", 3)
        .with("ts", Value::Timestamp { t: 9, i: 2 })
        .with("l", 1i64 << 40);
    assert_eq!(Document::from_bytes(&doc.to_bytes()).unwrap(), doc);
}

#[test]
fn damaged_documents_are_refused_with_a_reason_not_a_panic() {
    let good = Document::new().with("k", "v").to_bytes();
    for cut in 0..good.len() {
        assert!(Document::from_bytes(&good[..cut]).is_err(), "cut at {cut}");
    }
    let mut bad_type = good.clone();
    bad_type[4] = 0x13; // decimal128: not supported
    let e = Document::from_bytes(&bad_type).unwrap_err();
    assert!(e.0.contains("type 0x13"), "{e}");
    let mut long = good.clone();
    long[0] = 200;
    assert!(Document::from_bytes(&long).is_err());
}
