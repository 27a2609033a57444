//! `sim::mongo::query`'s own tests (moved from the module): the lock filter, updates,
//! and mongod's refusals.

use lock_impl::mongo::{Document, Value};
use sim::mongo::query::{apply_update, matches};

fn d() -> Document {
    Document::new()
        .with("_id", "k")
        .with("owner", "a")
        .with("expiresAt", Value::DateTime(1_000))
        .with("version", 3i64)
}

#[test]
fn the_lock_filter_matches_only_an_expired_document_of_the_key() {
    let f = |now: i64| {
        Document::new().with("_id", "k").with(
            "expiresAt",
            Document::new().with("$lt", Value::DateTime(now)),
        )
    };
    assert!(!matches(&d(), &f(1_000)).unwrap());
    assert!(matches(&d(), &f(1_001)).unwrap());
    // Type bracketing: a number is never $lt a date.
    let g = Document::new().with("expiresAt", Document::new().with("$lt", 5_000i64));
    assert!(!matches(&d(), &g).unwrap());
    let other = Document::new().with("_id", "j");
    assert!(!matches(&d(), &other).unwrap());
    let or = Document::new().with(
        "$or",
        vec![
            Value::Document(other),
            Value::Document(Document::new().with("owner", "a")),
        ],
    );
    assert!(matches(&d(), &or).unwrap());
}

#[test]
fn updates_set_and_increment_and_never_change_the_id() {
    let mut doc = d();
    let up = Document::new()
        .with("$set", Document::new().with("owner", "b"))
        .with("$inc", Document::new().with("version", 1i64));
    apply_update(&mut doc, &up, false).unwrap();
    assert_eq!(doc.get_str("owner"), Some("b"));
    assert_eq!(doc.get_i64("version"), Some(4));
    let bad = Document::new().with("$set", Document::new().with("_id", "z"));
    assert_eq!(apply_update(&mut doc, &bad, false).unwrap_err().code, 66);
    let unknown = Document::new().with("$push", Document::new().with("a", 1));
    assert_eq!(apply_update(&mut doc, &unknown, false).unwrap_err().code, 9);
}

#[test]
fn an_unknown_operator_is_refused_as_mongod_refuses_it() {
    let f = Document::new().with("a", Document::new().with("$near", 1));
    let e = matches(&d(), &f).unwrap_err();
    assert_eq!((e.code, e.errmsg.as_str()), (2, "unknown operator: $near"));
}
