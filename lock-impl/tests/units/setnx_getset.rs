//! The tests of `lock-impl/src/designs/setnx_getset.rs` (once its `#[cfg(test)]` module).

use lock_impl::designs::internals::setnx_getset_timestamp as timestamp;

#[test]
fn a_value_reads_as_its_leading_timestamp() {
    assert_eq!(timestamp("1767225600123:abc"), Some(1_767_225_600_123));
    assert_eq!(timestamp("42"), Some(42));
    assert_eq!(timestamp("owner-value"), None);
    assert_eq!(timestamp(""), None);
}
