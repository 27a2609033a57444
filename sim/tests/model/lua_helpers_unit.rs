//! The Lua libraries' shared helpers' own tests (moved from
//! `sim/src/redis/lua_libs/helpers.rs`): glibc's `strtod` and the x86-64 casts.

use sim::redis::lua_helpers::{d2i32, d2i64, d2u64, strtod};

#[test]
fn strtod_reads_what_glibc_reads() {
    let cases: &[(&str, f64, usize)] = &[
        ("1", 1.0, 1),
        ("-12.5e2,", -1250.0, 7),
        ("1e", 1.0, 1),
        ("1.", 1.0, 2),
        ("007", 7.0, 3),
        ("0x10", 16.0, 4),
        ("0x", 0.0, 1),
        ("0x1p4", 16.0, 5),
        ("0x.8", 0.5, 4),
        ("-0x1.8p1", -3.0, 8),
        ("inf", f64::INFINITY, 3),
        ("-Infinity", f64::NEG_INFINITY, 9),
        ("infinit", f64::INFINITY, 3),
        ("+5", 5.0, 2),
        ("1e400", f64::INFINITY, 5),
    ];
    for &(s, v, used) in cases {
        assert_eq!(strtod(s.as_bytes()), Some((v, used)), "{s}");
    }
    let (nan, used) = strtod(b"nan(abc)x").unwrap();
    assert!(nan.is_nan());
    assert_eq!(used, 8);
    assert_eq!(strtod(b"-"), None);
    assert_eq!(strtod(b"."), None);
    assert_eq!(strtod(b"- 1"), None);
}

#[test]
fn hex_floats_round_to_nearest_even() {
    assert_eq!(strtod(b"0x1fffffffffffff").unwrap().0, 9007199254740991.0);
    // 2^53 + 1 rounds down to 2^53 (ties to even), 2^53 + 3 up to 2^53 + 4.
    assert_eq!(strtod(b"0x20000000000001").unwrap().0, 9007199254740992.0);
    assert_eq!(strtod(b"0x20000000000003").unwrap().0, 9007199254740996.0);
    assert_eq!(strtod(b"0x1p-1074").unwrap().0, f64::from_bits(1));
    assert_eq!(strtod(b"0x1p-1075").unwrap().0, 0.0);
    assert_eq!(strtod(b"0x1.8p-1075").unwrap().0, f64::from_bits(1));
    assert_eq!(strtod(b"0x1p1024").unwrap().0, f64::INFINITY);
}

#[test]
fn x86_casts() {
    assert_eq!(d2i64(f64::NAN), i64::MIN);
    assert_eq!(d2i64(1e300), i64::MIN);
    assert_eq!(d2i32(3e9), i32::MIN);
    assert_eq!(d2u64(1e19), 10_000_000_000_000_000_000);
    assert_eq!(d2u64(1e20), 0);
    assert_eq!(d2u64(-1.0), u64::MAX);
}
