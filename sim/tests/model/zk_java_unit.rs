//! `sim::zk::java`'s own tests (moved from the module): `String.hashCode`,
//! `java.util.Random` and the `HashSet` model.

use sim::zk::java::{JavaHashSet, JavaRandom, string_hash};

#[test]
fn string_hashes_are_javas() {
    assert_eq!(string_hash(""), 0);
    assert_eq!(string_hash("a"), 97);
    // "zookeeper".hashCode() in Java.
    assert_eq!(string_hash("zookeeper"), 1_600_681_804);
}

#[test]
fn java_random_matches_the_jdk() {
    // new Random(42).nextInt() == -1170105035 in every JDK.
    let mut r = JavaRandom::new(42);
    assert_eq!(r.next(32), -1_170_105_035);
}

#[test]
fn a_set_grows_past_its_threshold_and_keeps_every_name() {
    let mut s = JavaHashSet::new();
    for i in 0..100 {
        assert!(s.insert(format!("n-{i:010}")));
    }
    assert!(!s.insert("n-0000000007".into()));
    assert_eq!(s.len(), 100);
    assert_eq!(s.iter().count(), 100);
    assert!(s.remove("n-0000000007"));
    assert!(!s.contains("n-0000000007"));
    assert_eq!(s.iter().count(), 99);
}
