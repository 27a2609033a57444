//! Differential test of the Lua libraries Redis 7.0 gives scripts (`cjson`,
//! `cmsgpack`, `bit`, `struct`): the same `EVAL`s against the model and a real
//! `redis-server`, raw reply bytes compared.
//!
//! Every case runs after `SCRIPT FLUSH` on both servers (which also resets `cjson`'s
//! settings, as Redis's new Lua state does). Hand-written cases cover each function's
//! edge cases and error texts; proptest generates JSON texts, nested Lua values for
//! MessagePack, integers and doubles for the bit operations, and `struct` formats.
//! Numbers that a reply would truncate to integers are returned as
//! `string.format('%.17g')` or packed bytes, so every bit is compared.
//!
//! `LOCKSIM_LUA_LIBS_CASES` sets the number of generated cases per property (default
//! 300). `model_only_known_values` needs no `redis-server`.

use std::net::SocketAddr;

use crate::common;

use common::{Conn, runtime_and_model, servers};
use lock_impl::testing::RealRedis;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

// ---------------------------------------------------------------------------------
// Fixture and comparison

fn cases() -> u32 {
    common::cases_from_env("LOCKSIM_LUA_LIBS_CASES", 300)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `Ok` if the two replies are the same bytes.
fn compare(what: &str, real: &[u8], model: &[u8]) -> Result<(), String> {
    if real == model {
        return Ok(());
    }
    Err(format!(
        "{what}\n  redis: {:?}\n  model: {:?}",
        lossy(real),
        lossy(model)
    ))
}

/// `EVAL script 0 args...` on both, after `SCRIPT FLUSH`.
struct Pair {
    real: Conn,
    model: Conn,
}

impl Pair {
    fn open(real: SocketAddr, model: SocketAddr) -> Self {
        Pair {
            real: Conn::open(real),
            model: Conn::open(model),
        }
    }

    fn eval(&mut self, script: &str, args: &[&[u8]]) -> Result<(), String> {
        let flush: [&[u8]; 2] = [b"SCRIPT", b"FLUSH"];
        let io = |e: std::io::Error| format!("i/o: {e}");
        self.real.call(&flush).map_err(io)?;
        self.model.call(&flush).map_err(io)?;
        let mut argv: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"0"];
        argv.extend_from_slice(args);
        let a = self.real.call(&argv).map_err(io)?;
        let b = self
            .model
            .call(&argv)
            .map_err(|e| format!("{script}: model i/o: {e}"))?;
        let what = format!(
            "EVAL {script:?} 0 {:?}",
            args.iter().map(|a| lossy(a)).collect::<Vec<_>>()
        );
        compare(&what, &a, &b)
    }

    /// Runs every case; fails with all the differences.
    fn all(&mut self, cases: &[(&str, &[&str])]) {
        let mut diffs = Vec::new();
        for (script, args) in cases {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            if let Err(e) = self.eval(script, &args) {
                diffs.push(e);
            }
        }
        assert!(
            diffs.is_empty(),
            "{} of {} cases differ:\n{}",
            diffs.len(),
            cases.len(),
            diffs.join("\n")
        );
    }
}

fn hand_written(cases: &[(&str, &[&str])]) {
    let Some(s) = servers() else { return };
    Pair::open(s.real.addr(), s.model).all(cases);
}

/// Runs a property: `script_of` turns a generated value into an EVAL.
fn generated<T: std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
    script_of: impl Fn(&T) -> (String, Vec<Vec<u8>>),
) {
    let Some(s) = servers() else { return };
    let mut pair = Pair::open(s.real.addr(), s.model);
    let pair = std::cell::RefCell::new(&mut pair);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |v| {
        let (script, args) = script_of(&v);
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        pair.borrow_mut()
            .eval(&script, &args)
            .map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, v)) => {
            panic!("the model differs from Redis.\nminimal case: {v:?}\n{reason}")
        }
        Err(e) => panic!("{e}"),
    }
}

// ---------------------------------------------------------------------------------
// Hand-written cases

#[test]
fn cjson_encode_matches_redis() {
    hand_written(&[
        ("return cjson.encode({1,2,3})", &[]),
        ("return cjson.encode({})", &[]),
        ("return cjson.encode({a=1})", &[]),
        ("return cjson.encode({a=1,b=2,c={1,2},d='x'})", &[]),
        (
            "local t = {} for i=1,20 do t['k'..i]=i end return cjson.encode(t)",
            &[],
        ),
        (
            "local t = {} for i=20,1,-1 do t['k'..i]=i end return cjson.encode(t)",
            &[],
        ),
        ("return cjson.encode({1,2,a=3,[5]=4})", &[]),
        ("return cjson.encode({1,nil,3})", &[]),
        (
            "local t = {} t[1] = 1 t[20] = 2 return cjson.encode(t)",
            &[],
        ),
        ("local t = {} t[11] = 1 return cjson.encode(t)", &[]),
        ("local t = {} t[10] = 1 return cjson.encode(t)", &[]),
        (
            "local t = {} t[6] = 1 t[1] = 1 t[2] = 1 return cjson.encode(t)",
            &[],
        ),
        ("return cjson.encode({[1.5]=1})", &[]),
        ("return cjson.encode({[0]=1})", &[]),
        ("return cjson.encode({[-1]='x'})", &[]),
        ("return cjson.encode({[2^40]=1})", &[]),
        ("return cjson.encode({[2^31]=1, [1]=2})", &[]),
        ("return cjson.encode({[1/0]=1})", &[]),
        ("return cjson.encode({[true]=1})", &[]),
        ("return cjson.encode({[{}]=1})", &[]),
        (
            "return cjson.encode({0.1, 1/3, 1e300, -1e-300, 123456789012345678})",
            &[],
        ),
        (
            "return cjson.encode({2^53, 0.5, -0.0, 1e21, 1e15, 1e14, 3.14159265358979, 100, -7})",
            &[],
        ),
        (
            "return cjson.encode({1e-5, 0.0001, 123456.789e3, 5e-324, 1.7976931348623157e308})",
            &[],
        ),
        ("return cjson.encode(1/0)", &[]),
        ("return cjson.encode(-1/0)", &[]),
        ("return cjson.encode(0/0)", &[]),
        ("return cjson.encode({math.huge})", &[]),
        (
            "return cjson.encode('a\"b\\\\c/d\\n\\r\\t\\b\\f\\1\\31\\127\\128\\255 \\0 end')",
            &[],
        ),
        (
            "return cjson.encode(ARGV[1])",
            &["h\u{e9}llo \u{1F600} \x7f"],
        ),
        ("return cjson.encode(true)", &[]),
        ("return cjson.encode({false, true})", &[]),
        ("return cjson.encode(nil)", &[]),
        ("return cjson.encode(cjson.null)", &[]),
        ("return cjson.encode({cjson.null, 1})", &[]),
        ("return cjson.encode(type)", &[]),
        ("return cjson.encode({1, type})", &[]),
        ("return cjson.encode(coroutine.create(type))", &[]),
        ("return cjson.encode(12)", &[]),
        ("return cjson.encode('12')", &[]),
        ("local t = {} t[1] = t return cjson.encode(t)", &[]),
        ("local t = {} t.a = t return cjson.encode(t)", &[]),
        ("return cjson.encode()", &[]),
        ("return cjson.encode(1, 2)", &[]),
        ("local e = cjson.encode return e()", &[]),
        ("return {pcall(cjson.encode)}", &[]),
        ("return {pcall(function() return cjson.encode() end)}", &[]),
        ("return {pcall(cjson.encode, {[true] = 1})}", &[]),
        ("local t = cjson return t.encode({t.null})", &[]),
        ("return cjson.encode({{{{{{{{{{'deep'}}}}}}}}}})", &[]),
        ("return cjson.encode({a={b={c={1,{d=2}}}}})", &[]),
        ("return cjson.encode({['a b']=1, ['\\n']=2, ['']=3})", &[]),
    ]);
}

#[test]
fn cjson_settings_match_redis() {
    hand_written(&[
        ("return {cjson.encode_sparse_array()}", &[]),
        ("return {cjson.encode_sparse_array(true)}", &[]),
        ("return {cjson.encode_sparse_array(true, 3, 5)}", &[]),
        (
            "cjson.encode_sparse_array(true) local t = {} t[1] = 1 t[20] = 2 return cjson.encode(t)",
            &[],
        ),
        (
            "cjson.encode_sparse_array('on', 0) local t = {} t[1] = 1 t[20] = 2 return cjson.encode(t)",
            &[],
        ),
        ("return {cjson.encode_sparse_array('maybe')}", &[]),
        ("return {cjson.encode_sparse_array(1, -1)}", &[]),
        ("return {cjson.encode_sparse_array(1, 2, 3, 4)}", &[]),
        ("return {cjson.encode_sparse_array({})}", &[]),
        ("return {cjson.encode_sparse_array(nil, 'x')}", &[]),
        ("return cjson.encode_max_depth()", &[]),
        ("cjson.encode_max_depth(2) return cjson.encode({{1}})", &[]),
        (
            "cjson.encode_max_depth(2) return cjson.encode({{{1}}})",
            &[],
        ),
        ("return cjson.encode_max_depth(0)", &[]),
        ("return cjson.encode_max_depth(2.9)", &[]),
        ("return cjson.decode_max_depth(3)", &[]),
        (
            "cjson.decode_max_depth(2) return cjson.decode('[[1]]')",
            &[],
        ),
        (
            "cjson.decode_max_depth(2) return cjson.decode('[[[1]]]')",
            &[],
        ),
        (
            "cjson.decode_max_depth(1) return cjson.decode('{\"a\":{}}')",
            &[],
        ),
        ("return cjson.encode_number_precision()", &[]),
        (
            "cjson.encode_number_precision(3) return cjson.encode({1/3, 1234567, 0.0001234})",
            &[],
        ),
        (
            "cjson.encode_number_precision(1) return cjson.encode({1/3, 15, 0.95})",
            &[],
        ),
        ("return cjson.encode_number_precision(0)", &[]),
        ("return cjson.encode_number_precision(15)", &[]),
        ("return cjson.encode_number_precision('4')", &[]),
        ("return cjson.encode_number_precision('x')", &[]),
        ("return cjson.encode_keep_buffer()", &[]),
        ("return cjson.encode_keep_buffer(false)", &[]),
        ("return cjson.encode_keep_buffer('off')", &[]),
        (
            "cjson.encode_keep_buffer(false) return cjson.encode({1, 'a'})",
            &[],
        ),
        ("return cjson.encode_invalid_numbers()", &[]),
        ("return cjson.encode_invalid_numbers('null')", &[]),
        ("return cjson.encode_invalid_numbers('on')", &[]),
        ("return cjson.encode_invalid_numbers('bogus')", &[]),
        ("return cjson.encode_invalid_numbers(1)", &[]),
        (
            "cjson.encode_invalid_numbers('null') return cjson.encode({1/0, -1/0, 0/0, 1})",
            &[],
        ),
        (
            "cjson.encode_invalid_numbers(true) return cjson.encode({1/0, -1/0, 0/0, 1})",
            &[],
        ),
        (
            "cjson.encode_invalid_numbers(true) return cjson.encode({[1/0] = 1})",
            &[],
        ),
        ("return cjson.decode_invalid_numbers()", &[]),
        ("return cjson.decode_invalid_numbers(false)", &[]),
        ("return cjson.decode_invalid_numbers(1, 2)", &[]),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('0x10')",
            &[],
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('[1, -inf]')",
            &[],
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('[1, nan]')",
            &[],
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('+1')",
            &[],
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('012')",
            &[],
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('-0.5e1')",
            &[],
        ),
        // Settings last until SCRIPT FLUSH: set here, read in the same script.
        (
            "cjson.encode_number_precision(5) cjson.encode_number_precision() return cjson.encode(1/3)",
            &[],
        ),
        // cjson.new(): its own settings.
        (
            "local j = cjson.new() j.encode_number_precision(2) return {j.encode(1/3), cjson.encode(1/3)}",
            &[],
        ),
        (
            "local j = cjson.new() j.x = 1 return {j.x, j._NAME, j._VERSION, type(j.null)}",
            &[],
        ),
        (
            "return {cjson._NAME, cjson._VERSION, type(cjson.null), tostring(cjson.null == nil)}",
            &[],
        ),
        ("return type(cjson.new)", &[]),
    ]);
}

#[test]
fn cjson_settings_last_until_script_flush_like_redis() {
    let Some(s) = servers() else { return };
    let mut diffs = Vec::new();
    for addr in [s.real.addr(), s.model] {
        let mut c = Conn::open(addr);
        let mut out = Vec::new();
        for argv in [
            vec!["EVAL", "return cjson.encode_number_precision(3)", "0"],
            vec!["EVAL", "return cjson.encode(1/3)", "0"],
            vec!["SCRIPT", "FLUSH"],
            vec!["EVAL", "return cjson.encode(1/3)", "0"],
        ] {
            out.push(c.reply(&argv));
        }
        diffs.push(out);
    }
    assert_eq!(diffs[0], diffs[1]);
    assert_eq!(diffs[0][1], b"$5\r\n0.333\r\n");
}

const DECODE: &str = "local v = cjson.decode(ARGV[1]) \
     if type(v) == 'number' then return {'n', string.format('%.17g', v)} end \
     if type(v) == 'table' then return {'t', cjson.encode(v)} end \
     return {type(v), tostring(v)}";

#[test]
fn cjson_decode_matches_redis() {
    let inputs: &[&str] = &[
        "[1,2,3]",
        "{\"a\":1}",
        "  {\"a\" : [1, {\"b\": null}, \"x\"] , \"c\":true}  ",
        "[1,null,3]",
        "null",
        "true",
        "false",
        "\"str\\u00e9\\ud83d\\ude00\\u0041\\n\\t\\\"\\\\\\/\\b\\f\\r\"",
        "\"\\u0000x\"",
        "1e2",
        "-0",
        "0x10",
        "-0x1p4",
        "+1",
        "007",
        "inf",
        "-Infinity",
        "INF",
        "nan",
        "-nan",
        "NaN",
        "1.5",
        "1.",
        "1e400",
        "-1e-400",
        "4.9e-324",
        "123456789012345678901234567890",
        "0.1",
        "2.2250738585072011e-308",
        "{}",
        "[]",
        "[[]]",
        "{\"a\":{},\"b\":[]}",
        "{\"a\":1,\"a\":2}",
        "{\"k3\":3,\"k1\":1,\"k2\":2,\"k10\":10}",
        "",
        " ",
        "[1,2",
        "{\"a\"}",
        "{\"a\":}",
        "{1:2}",
        "{\"a\":1,}",
        "[1,]",
        "[,1]",
        "tru",
        "nul",
        "fals",
        "True",
        "\"abc",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"\\ud800\"",
        "\"\\ud800\\u0041\"",
        "\"\\udc00\"",
        "\"\\ud800x\"",
        "[1] x",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "01",
        "-",
        ".5",
        "1e",
        "1e+",
        "- 1",
        "--1",
        "0x",
        "0xg",
        "nana",
        "infinityx",
        "Infinity",
        "@",
        "]",
        "}",
        ":",
        "\u{e9}",
        "[\"a\", \u{e9}]",
    ];
    let mut cases: Vec<(&str, Vec<&str>)> = inputs.iter().map(|i| (DECODE, vec![*i])).collect();
    let deep_ok = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    let deep_bad = format!("{}{}", "[".repeat(1001), "]".repeat(1001));
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(1001), "}".repeat(1001));
    cases.push((
        "return #cjson.encode(cjson.decode(ARGV[1]))",
        vec![&deep_ok],
    ));
    cases.push((DECODE, vec![&deep_bad]));
    cases.push((DECODE, vec![&deep_obj]));
    let nul_inputs: &[&str] = &["[1]\0garbage", "\0\0", "1\0", "\0", "\"a\0b\""];
    for i in nul_inputs {
        cases.push((DECODE, vec![*i]));
    }
    let owned: Vec<(&str, &[&str])> = cases.iter().map(|(s, a)| (*s, a.as_slice())).collect();
    let mut more: Vec<(&str, &[&str])> = vec![
        ("return cjson.decode('[1,2,3]')", &[]),
        ("return cjson.decode('[1,null,3]')", &[]),
        ("return cjson.decode('[\"a\",[\"b\",[1.9]]]')", &[]),
        ("return cjson.decode('{\"a\":[1,2]}').a", &[]),
        ("return cjson.decode(123)", &[]),
        ("return cjson.decode(1.5)", &[]),
        ("return cjson.decode({})", &[]),
        ("return cjson.decode()", &[]),
        ("return cjson.decode('1', '2')", &[]),
        ("return cjson.decode(nil)", &[]),
        ("return {pcall(cjson.decode, '[')}", &[]),
        ("return type(cjson.decode('null'))", &[]),
        ("return cjson.decode('null') == cjson.null", &[]),
        ("return cjson.decode('[null]')[1] == cjson.null", &[]),
        ("return {1, cjson.null, 3}", &[]),
        (
            "local t = cjson.decode('{\"b\":1,\"a\":[1,null,{\"x\":true}]}') return {t.a[3].x, t.b}",
            &[],
        ),
        (
            "local t = cjson.decode(ARGV[1]) t.z = 1 return cjson.encode(t)",
            &["{\"x\":1,\"y\":2}"],
        ),
    ];
    more.extend(owned);
    hand_written(&more);
}

#[test]
fn cmsgpack_matches_redis() {
    hand_written(&[
        ("return cmsgpack.pack(nil)", &[]),
        ("return cmsgpack.pack(1, 2, 3)", &[]),
        ("return cmsgpack.pack({})", &[]),
        ("return cmsgpack.pack({1, 2, 3})", &[]),
        ("return cmsgpack.pack({a = 1})", &[]),
        (
            "return cmsgpack.pack({a = 1, b = {1, 2}, c = 'x', d = true})",
            &[],
        ),
        (
            "local t = {} for i=1,20 do t['k'..i]=i end return cmsgpack.pack(t)",
            &[],
        ),
        (
            "local t = {} for i=1,20 do t[i]=i end return cmsgpack.pack(t)",
            &[],
        ),
        (
            "local t = {} for i=1,70000 do t[i]=i % 3 end return #cmsgpack.pack(t)",
            &[],
        ),
        (
            "local t = {} for i=1,70000 do t['k'..i]=1 end return #cmsgpack.pack(t)",
            &[],
        ),
        (
            "return cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1)",
            &[],
        ),
        (
            "return cmsgpack.pack(0, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53)",
            &[],
        ),
        ("return cmsgpack.pack(2^63, -2^63, 2^64, -2^64)", &[]),
        (
            "return cmsgpack.pack(0.5, 0.1, -1.25, 1e300, 1/3, -0.0)",
            &[],
        ),
        ("return cmsgpack.pack(1/0, -1/0)", &[]),
        ("return cmsgpack.pack(true, false)", &[]),
        (
            "return cmsgpack.pack('', 'abc', string.rep('x', 31), string.rep('x', 32))",
            &[],
        ),
        (
            "return cmsgpack.pack(string.rep('x', 255), string.rep('y', 256))",
            &[],
        ),
        (
            "return #cmsgpack.pack(string.rep('x', 65535)) .. ' ' .. #cmsgpack.pack(string.rep('x', 65536))",
            &[],
        ),
        (
            "return cmsgpack.pack(string.rep('x', 65536)):sub(1, 8)",
            &[],
        ),
        (
            "local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return cmsgpack.pack(t)",
            &[],
        ),
        ("local t = {} t[1] = t return cmsgpack.pack(t)", &[]),
        ("return cmsgpack.pack(type)", &[]),
        ("return cmsgpack.pack(cjson.null)", &[]),
        ("return cmsgpack.pack({1, nil, 3})", &[]),
        ("return cmsgpack.pack({[1.5] = 1})", &[]),
        ("return cmsgpack.pack({[0] = 1})", &[]),
        ("return cmsgpack.pack({[2] = 1})", &[]),
        ("return cmsgpack.pack({[2^31] = 1})", &[]),
        ("return cmsgpack.pack({[true] = 1})", &[]),
        ("return cmsgpack.pack()", &[]),
        ("local p = cmsgpack.pack return p()", &[]),
        (
            "return cmsgpack.unpack(cmsgpack.pack({1, 2, {3, 'x'}}))",
            &[],
        ),
        ("return {cmsgpack.unpack(cmsgpack.pack(1, 2, 3))}", &[]),
        ("return cmsgpack.unpack('')", &[]),
        ("return select('#', cmsgpack.unpack(''))", &[]),
        ("return cmsgpack.unpack(string.char(0xc1))", &[]),
        ("return cmsgpack.unpack(string.char(0xc4, 1, 65))", &[]),
        ("return cmsgpack.unpack(string.char(0xd4, 1, 65))", &[]),
        ("return cmsgpack.unpack(string.char(0x92, 1))", &[]),
        ("return cmsgpack.unpack(string.char(0xcd, 1))", &[]),
        (
            "return cmsgpack.unpack(string.char(0xdb, 0, 0, 0, 9, 65))",
            &[],
        ),
        (
            "return string.format('%.17g', cmsgpack.unpack(string.char(0xcf, 255, 255, 255, 255, 255, 255, 255, 255)))",
            &[],
        ),
        (
            "return string.format('%.17g', cmsgpack.unpack(string.char(0xcf, 128, 0, 0, 0, 0, 0, 0, 1)))",
            &[],
        ),
        (
            "return string.format('%.17g', cmsgpack.unpack(string.char(0xd3, 128, 0, 0, 0, 0, 0, 0, 1)))",
            &[],
        ),
        (
            "return {cmsgpack.unpack(string.char(0xd0, 0x80, 0xd1, 0x80, 0, 0xd2, 0x80, 0, 0, 0, 0xce, 0xff, 0xff, 0xff, 0xff))}",
            &[],
        ),
        (
            "return {cmsgpack.unpack(string.char(0xcc, 0xff, 0xcd, 0xff, 0xff, 0xe0, 0xff, 0x7f))}",
            &[],
        ),
        (
            "return string.format('%.17g', cmsgpack.unpack(string.char(0xca, 0x3d, 0xcc, 0xcc, 0xcd)))",
            &[],
        ),
        (
            "return string.format('%.17g', cmsgpack.unpack(string.char(0xcb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a)))",
            &[],
        ),
        ("return cmsgpack.unpack(string.char(0x81, 0xc0, 1))", &[]),
        (
            "return cmsgpack.unpack(string.char(0x81, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0, 1))",
            &[],
        ),
        ("return cmsgpack.unpack(string.char(0x81, 0xc0, 0x92))", &[]),
        ("return cmsgpack.unpack(string.char(0x93, 1, 0xc0, 3))", &[]),
        (
            "return cmsgpack.unpack(string.char(0x82, 1, 2, 1, 3))[1]",
            &[],
        ),
        (
            "return {cmsgpack.unpack(string.char(0xc3, 0xc2, 0xc0, 0xc3))}",
            &[],
        ),
        (
            "return {cmsgpack.unpack(string.char(0xd9, 2, 65, 66, 0xda, 0, 1, 67, 0xa1, 68))}",
            &[],
        ),
        ("return cmsgpack.unpack(5)", &[]),
        ("return cmsgpack.unpack({})", &[]),
        ("return cmsgpack.unpack()", &[]),
        (
            "return {cmsgpack.unpack(cmsgpack.pack(1, 2), 'extra')}",
            &[],
        ),
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}", &[]),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 3)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 4)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), -1)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 'x')}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), '1')}",
            &[],
        ),
        ("return {cmsgpack.unpack_one('')}", &[]),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 1)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0, 0)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0, 1)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), -1)}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3))}",
            &[],
        ),
        (
            "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 1, 2.7)}",
            &[],
        ),
        (
            "return select('#', cmsgpack.unpack(string.rep(string.char(1), 5000)))",
            &[],
        ),
        (
            "return select('#', cmsgpack.unpack(string.rep(string.char(1), 7997)))",
            &[],
        ),
        (
            "return select('#', cmsgpack.unpack(string.rep(string.char(1), 7998)))",
            &[],
        ),
        (
            "return select('#', cmsgpack.unpack(string.rep(string.char(1), 9000)))",
            &[],
        ),
        (
            "local t = cmsgpack.unpack(string.rep(string.char(0x91), 2000) .. string.char(1)) return 'ok'",
            &[],
        ),
        (
            "local t = cmsgpack.unpack(string.rep(string.char(0x91), 4500) .. string.char(1)) return 'ok'",
            &[],
        ),
        (
            "local t = cmsgpack.unpack(string.rep(string.char(0x81, 1), 2000) .. string.char(1)) return 'ok'",
            &[],
        ),
        (
            "local t = cmsgpack.unpack(string.rep(string.char(0x81, 1), 4500) .. string.char(1)) return 'ok'",
            &[],
        ),
        (
            "return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}",
            &[],
        ),
        (
            "return cmsgpack.pack(cmsgpack.unpack(cmsgpack.pack({b = 1, a = {x = 1, y = 2}, c = 'z'})))",
            &[],
        ),
    ]);
}

#[test]
fn bit_matches_redis() {
    hand_written(&[
        (
            "return {bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(2^31), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-2.5)}",
            &[],
        ),
        (
            "return {bit.tobit('12'), bit.tobit('0x10'), bit.tobit(' 7 '), bit.tobit(2^52), bit.tobit(2^60 + 3), bit.tobit(1e300)}",
            &[],
        ),
        (
            "return {bit.tobit(0/0), bit.tobit(1/0), bit.tobit(-1/0), bit.tobit(2^53 + 1), bit.tobit(-2^51)}",
            &[],
        ),
        ("return bit.tobit('abc')", &[]),
        ("return bit.tobit()", &[]),
        ("return bit.tobit(true)", &[]),
        ("return bit.tobit({})", &[]),
        ("return bit.tobit('0')", &[]),
        (
            "return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(255, 0), bit.tohex(255, 20), bit.tohex(255, -20)}",
            &[],
        ),
        (
            "return {bit.tohex(0x12345678, 3), bit.tohex(2^32 + 1), bit.tohex(-2^31)}",
            &[],
        ),
        ("return bit.tohex(1, 'x')", &[]),
        ("return {bit.bnot(0), bit.bnot(-1), bit.bnot(5)}", &[]),
        (
            "return {bit.band(1, 3, 7), bit.band(-1), bit.bor(1, 2, 4, 8), bit.bxor(1), bit.bxor(7, 2, 1)}",
            &[],
        ),
        (
            "return {bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(1, 33), bit.lshift(1, -1)}",
            &[],
        ),
        (
            "return {bit.rshift(-1, 28), bit.rshift(-1, 0), bit.arshift(-256, 4), bit.arshift(-1, 31), bit.arshift(2^31, 1)}",
            &[],
        ),
        (
            "return {bit.rol(0x12345678, 4), bit.rol(0x12345678, 0), bit.ror(0x12345678, 36), bit.ror(1, 1), bit.rol(-1, 7)}",
            &[],
        ),
        (
            "return {bit.bswap(0x12345678), bit.bswap(-1), bit.bswap(255)}",
            &[],
        ),
        ("return bit.band('a')", &[]),
        ("return bit.band(1, 'x')", &[]),
        ("return bit.bor(1, 2, nil)", &[]),
        ("return bit.lshift(1)", &[]),
        ("local b = bit.band return b()", &[]),
        ("return {pcall(bit.bnot)}", &[]),
        ("return {pcall(bit.bnot, 1)}", &[]),
        ("return type(bit.tobit)", &[]),
        ("bit.band = nil", &[]),
        ("bit.x = 1", &[]),
    ]);
}

#[test]
fn struct_matches_redis() {
    hand_written(&[
        ("return struct.pack('>I2', 258)", &[]),
        ("return struct.pack('<i', -2)", &[]),
        ("return struct.pack('b', 200)", &[]),
        (
            "return struct.pack('bBhHlLTiI', 1, 2, 3, 4, 5, 6, 7, 8, 9)",
            &[],
        ),
        (
            "return struct.pack('>bBhHlLTiI', -1, 255, -3, 65535, -5, 6, 7, -8, 9)",
            &[],
        ),
        ("return struct.pack('>!4 b i h', 1, 2, 3)", &[]),
        ("return struct.pack('!b d', 1, 0.5)", &[]),
        ("return struct.pack('!2 b i', 1, 2)", &[]),
        ("return struct.pack('!3 b i', 1, 2)", &[]),
        ("return struct.pack('!0 b', 1)", &[]),
        ("return struct.pack('i33', 1)", &[]),
        ("return struct.pack('i99999999999', 1)", &[]),
        ("return struct.pack('i3', 0x123456)", &[]),
        ("return struct.pack('>i3', -2)", &[]),
        ("return struct.pack('i16', -1)", &[]),
        ("return struct.pack('>I16', 2^64 + 2^13)", &[]),
        ("return struct.pack('L', 2^63)", &[]),
        ("return struct.pack('L', 2^64)", &[]),
        ("return struct.pack('L', 1e30)", &[]),
        ("return struct.pack('l', -2^63 - 5000)", &[]),
        ("return struct.pack('l', -1e30)", &[]),
        ("return struct.pack('L', 0/0)", &[]),
        ("return struct.pack('i', 1.9)", &[]),
        ("return struct.pack('i', '12')", &[]),
        ("return struct.pack('i', 'x')", &[]),
        ("return struct.pack('i')", &[]),
        ("return struct.pack('z', 1)", &[]),
        ("return struct.pack('=i', 1)", &[]),
        ("return struct.pack('4', 1)", &[]),
        ("return struct.pack('c5', 'ab')", &[]),
        ("return struct.pack('c2', 'abc')", &[]),
        ("return struct.pack('c0', 'hello')", &[]),
        ("return struct.pack('c', 'hello')", &[]),
        ("return struct.pack('s', 'hi')", &[]),
        ("return struct.pack('s', 'a\\0b')", &[]),
        ("return struct.pack('c3', 123)", &[]),
        ("return struct.pack('c3', {})", &[]),
        ("return struct.pack('f', 1.5)", &[]),
        ("return struct.pack('>f', 0.1)", &[]),
        ("return struct.pack('>d', 0.1)", &[]),
        ("return struct.pack('<d', -1/0)", &[]),
        ("return struct.pack('x')", &[]),
        ("return struct.pack('bxb', 1, 2)", &[]),
        ("return struct.pack('')", &[]),
        ("return struct.pack()", &[]),
        ("return struct.pack({})", &[]),
        ("return struct.pack('b\\0b', 1, 2)", &[]),
        ("return struct.pack(12, 1)", &[]),
        ("return {struct.unpack('>I2', '\\1\\2')}", &[]),
        ("return {struct.unpack('i', 'abcd')}", &[]),
        ("return {struct.unpack('b', '\\200')}", &[]),
        ("return {struct.unpack('B', '\\200')}", &[]),
        ("return {struct.unpack('c0', 'abc')}", &[]),
        ("return {struct.unpack('bc0', '\\3abcd')}", &[]),
        ("return {struct.unpack('c1c0', '3abcd')}", &[]),
        ("return {struct.unpack('c1c0', 'xabcd')}", &[]),
        ("return {struct.unpack('bc0', '\\9abcd')}", &[]),
        ("return {struct.unpack('s', 'ab\\0cd')}", &[]),
        ("return {struct.unpack('ss', 'ab\\0cd\\0')}", &[]),
        ("return {struct.unpack('s', 'abc')}", &[]),
        ("return {struct.unpack('i', 'ab')}", &[]),
        ("return {struct.unpack('b', 'abc', 2)}", &[]),
        ("return {struct.unpack('b', 'abc', 3)}", &[]),
        ("return {struct.unpack('b', 'abc', 4)}", &[]),
        ("return {struct.unpack('b', 'abc', 0)}", &[]),
        ("return {struct.unpack('b', 'abc', -1)}", &[]),
        ("return {struct.unpack('', 'abc', -5)}", &[]),
        ("return {struct.unpack('', 'abc')}", &[]),
        ("return {struct.unpack('b', 'abc', 'x')}", &[]),
        ("return {struct.unpack('b', 'abc', 1.9)}", &[]),
        ("return {struct.unpack('b')}", &[]),
        (
            "return {struct.unpack('>i16', string.rep('\\255', 16))}",
            &[],
        ),
        (
            "return {struct.unpack('<i16', string.rep('\\255', 15) .. '\\127')}",
            &[],
        ),
        ("return {struct.unpack('i9', string.rep('\\255', 9))}", &[]),
        ("return {struct.unpack('I9', string.rep('\\255', 9))}", &[]),
        ("return {struct.unpack('>i3', '\\255\\255\\254')}", &[]),
        (
            "return string.format('%.17g', struct.unpack('L', string.rep('\\255', 8)))",
            &[],
        ),
        (
            "return string.format('%.17g', struct.unpack('l', '\\1\\0\\0\\0\\0\\0\\0\\128'))",
            &[],
        ),
        (
            "return string.format('%.17g', struct.unpack('d', struct.pack('d', 0.1)))",
            &[],
        ),
        (
            "return string.format('%.17g', struct.unpack('>f', struct.pack('>f', 0.1)))",
            &[],
        ),
        (
            "return {struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2))}",
            &[],
        ),
        ("return {struct.unpack('bxxb', 'a..b')}", &[]),
        ("return {struct.unpack('z', 'abc')}", &[]),
        ("return {struct.unpack('i', {})}", &[]),
        ("return {struct.unpack('>!4 h i', 'ab..cdef')}", &[]),
        ("return struct.size('i')", &[]),
        ("return struct.size('!8 b d')", &[]),
        ("return struct.size('!4 b d')", &[]),
        ("return struct.size('bhilfdxc5i7')", &[]),
        ("return struct.size('s')", &[]),
        ("return struct.size('c0')", &[]),
        ("return struct.size('z')", &[]),
        ("return struct.size('z9')", &[]),
        ("return struct.size('=')", &[]),
        ("return struct.size('!5')", &[]),
        ("return struct.size('i40')", &[]),
        ("return struct.size()", &[]),
        ("return struct.size('')", &[]),
        ("return {pcall(struct.size, 's')}", &[]),
        ("local s = struct.size return s('s')", &[]),
        (
            "return select('#', struct.unpack(string.rep('b', 7990), string.rep('a', 7990)))",
            &[],
        ),
        (
            "return select('#', struct.unpack(string.rep('b', 7996), string.rep('a', 7996)))",
            &[],
        ),
        (
            "return select('#', struct.unpack(string.rep('b', 7998), string.rep('a', 7998)))",
            &[],
        ),
        ("struct.pack = 1", &[]),
    ]);
}

#[test]
fn library_tables_are_read_only_like_redis() {
    hand_written(&[
        ("rawset(cjson, 'x', 1) return cjson.x", &[]),
        ("rawset(bit, 'band', 1) return bit.band(1, 3)", &[]),
        ("rawset(math, 'x', 1) return math.x", &[]),
        ("return {pcall(rawset, struct, 'x', 1)}", &[]),
        ("local t = {} rawset(t, 'x', 1) return t.x", &[]),
        ("cjson.encode = nil", &[]),
        ("cjson.foo = 1", &[]),
        ("cjson.null = 1", &[]),
        ("cmsgpack.pack = 1", &[]),
        ("struct.x = 1", &[]),
        ("bit.band = 1", &[]),
        ("cjson = nil", &[]),
        ("bit = {}", &[]),
        (
            "local ok, e = pcall(function() cjson.x = 1 end) return e",
            &[],
        ),
        ("return {pcall(function() bit.x = 1 end)}", &[]),
        (
            "return type(cjson), type(cmsgpack), type(bit), type(struct)",
            &[],
        ),
        (
            "return {type(cjson.encode), type(cmsgpack.unpack_limit), type(bit.tohex), type(struct.size)}",
            &[],
        ),
        ("return cjson.encode(KEYS)", &[]),
    ]);
}

// ---------------------------------------------------------------------------------
// Generated cases

/// A JSON text, sometimes with odd numbers, escapes and white space.
fn json_text() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        (-1000i32..1000).prop_map(|n| n.to_string()),
        (any::<i32>(), 0u32..100000).prop_map(|(a, b)| format!("{a}.{b}")),
        prop::sample::select(vec![
            "0",
            "-0",
            "1e5",
            "1E-5",
            "0.5e+3",
            "123456789012345678901",
            "1.7976931348623157e308",
            "5e-324",
            "0x1F",
            "-inf",
            "nan",
        ])
        .prop_map(String::from),
    ];
    let string = prop_oneof![
        "[a-z]{0,8}".prop_map(|s| format!("\"{s}\"")),
        prop::collection::vec(
            prop_oneof![
                Just("\\n".to_string()),
                Just("\\\"".to_string()),
                Just("\\\\".to_string()),
                Just("\\/".to_string()),
                Just("\\u00e9".to_string()),
                Just("\\ud83d\\ude00".to_string()),
                Just("\\u0000".to_string()),
                "[ -!#-\\[\\]-~]".prop_map(String::from),
                Just("\u{e9}".to_string()),
            ],
            0..6
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat())),
    ];
    let leaf = prop_oneof![
        number,
        string.clone(),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
    ];
    let ws = prop::sample::select(vec!["", "", " ", "\n", "\t ", "\r\n"]);
    leaf.prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..6), ws.clone())
                .prop_map(|(v, w)| { format!("[{w}{}{w}]", v.join(&format!(",{w}"))) }),
            (
                prop::collection::vec(("[a-d]{1,2}", inner), 0..6),
                ws.clone()
            )
                .prop_map(|(kv, w)| {
                    let items: Vec<String> = kv
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\"{w}:{w}{v}"))
                        .collect();
                    format!("{{{w}{}}}", items.join(","))
                }),
        ]
    })
}

/// JSON, or JSON damaged at one point (for the parser's error texts and positions).
fn json_or_broken() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => json_text().prop_map(String::into_bytes),
        1 => (json_text(), any::<prop::sample::Index>(), prop::sample::select(vec![
            "", "]", "}", ",", ":", "\"", "x", "\\", "[", "{", "-", "0", "\0", "\u{1}", "nul", "tr",
        ]))
            .prop_map(|(t, i, ins)| {
                let mut b = t.into_bytes();
                let at = i.index(b.len() + 1);
                b.truncate(at.max(1).min(b.len()));
                b.extend_from_slice(ins.as_bytes());
                b
            }),
    ]
}

#[test]
fn generated_json_round_trips_like_redis() {
    generated(json_or_broken(), |text| {
        (
            "local ok, v = pcall(cjson.decode, ARGV[1]) \
             if not ok then return 'error: ' .. v end \
             local ok2, e = pcall(cjson.encode, v) \
             return {ok2 and 'ok' or 'err', e, cmsgpack.pack(v)}"
                .to_string(),
            vec![text.clone()],
        )
    });
}

/// A Lua expression for a nested value: numbers of every kind, strings, booleans,
/// arrays, sparse arrays, maps with string and number keys.
fn lua_value() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<i64>().prop_map(|n| format!("{n}")),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        (-200i64..200).prop_map(|n| n.to_string()),
        (0u32..64, prop::bool::ANY)
            .prop_map(|(e, neg)| { format!("{}2^{e}", if neg { "-" } else { "" }) }),
        prop::sample::select(vec![
            "1/0", "-1/0", "0.5", "-0.0", "2^63", "2^64", "65535", "65536"
        ])
        .prop_map(String::from),
    ];
    let leaf = prop_oneof![
        number,
        "[a-z]{0,40}".prop_map(|s| format!("'{s}'")),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("cjson.null".to_string()),
    ];
    leaf.prop_recursive(5, 60, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(|v| format!("{{{}}}", v.join(","))),
            prop::collection::vec(("[a-e]{1,3}", inner.clone()), 0..8).prop_map(|kv| {
                let items: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("['{k}']={v}"))
                    .collect();
                format!("{{{}}}", items.join(","))
            }),
            prop::collection::vec((1i32..40, inner), 0..6).prop_map(|kv| {
                let items: Vec<String> =
                    kv.into_iter().map(|(k, v)| format!("[{k}]={v}")).collect();
                format!("{{{}}}", items.join(","))
            }),
        ]
    })
}

#[test]
fn generated_msgpack_round_trips_like_redis() {
    generated(prop::collection::vec(lua_value(), 1..4), |values| {
        let list = values.join(", ");
        (
            format!(
                "local p = cmsgpack.pack({list}) \
                 local ok, e = pcall(cjson.encode, {{{list}}}) \
                 return {{p, cmsgpack.pack(cmsgpack.unpack(p)), \
                          cmsgpack.pack(cmsgpack.unpack_limit(p, 2)), \
                          cmsgpack.pack(cmsgpack.unpack_one(p, 1)), e}}"
            ),
            vec![],
        )
    });
}

#[test]
fn generated_bytes_unpack_like_redis() {
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        prop::collection::vec(
            prop::sample::select(vec![
                0x00u8, 0x01, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x91, 0x9f, 0xa0, 0xa3, 0xbf, 0xc0,
                0xc1, 0xc2, 0xc3, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd9,
                0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff,
            ]),
            0..24
        ),
    ];
    // A map with a table for a key (bytes `0x81 0x80 …`: a map whose key is an empty
    // map) is packed again in the order `pairs` visits its keys, and Lua places a
    // table key by its address: Redis itself packs such a map differently from run to
    // run (found as a CI failure: keys 5, {} and 126 in two orders). Such a value is
    // answered with a marker on both sides instead of its repacking.
    generated(bytes, |b| (UNPACK_REPACK.to_string(), vec![b.clone()]));
}

/// Unpacks `ARGV[1]` and packs what came out again. A map with a table for a key is
/// packed in the order `pairs` visits its keys, and Lua places a table key in its
/// hash part by the table's address, which no two processes share: the model and Redis
/// pack such a map in different orders (found as a CI failure, the generator having
/// drawn one: keys 5, {} and 126). Such a value is answered with a marker on both sides
/// instead of its repacking; `a_map_keyed_by_a_table_is_answered_alike` keeps that case.
const UNPACK_REPACK: &str = "local function plain(v) \
       if type(v) ~= 'table' then return true end \
       for k, x in pairs(v) do \
         if type(k) == 'table' or not plain(x) then return false end \
       end \
       return true \
     end \
     local r = {pcall(cmsgpack.unpack, ARGV[1])} \
     if not r[1] then return r[2] end \
     table.remove(r, 1) \
     for i = 1, #r do if not plain(r[i]) then return {#r, 'a table as a key'} end end \
     return {#r, cmsgpack.pack(unpack(r))}";

#[test]
fn a_map_keyed_by_a_table_is_answered_alike() {
    let Some(s) = servers() else { return };
    let mut pair = Pair::open(s.real.addr(), s.model);
    // The generated case that once failed: {5: 1, {}: -13, 126: 17}.
    let bytes: &[u8] = &[0x83, 0x05, 0x01, 0x80, 0xf3, 0x7e, 0x11];
    pair.eval(UNPACK_REPACK, &[bytes]).expect("the same answer");
}

/// A number as a Lua source literal with every bit (`%.17g`).
fn number_literal() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<i32>().prop_map(f64::from),
        any::<u32>().prop_map(f64::from),
        any::<i64>().prop_map(|n| n as f64),
        (-(1i64 << 53)..(1i64 << 53)).prop_map(|n| n as f64),
        (-1e10f64..1e10),
        prop::sample::select(vec![
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            2147483647.0,
            2147483648.0,
            -2147483648.0,
            -2147483649.0,
            4294967295.0,
            4294967296.0,
            4503599627370496.0,
            6755399441055744.0,
        ]),
    ]
}

#[test]
fn generated_bit_operations_like_redis() {
    generated(
        (number_literal(), number_literal(), -10i32..10),
        |(a, b, n)| {
            (
                "local a, b, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) \
                 return {bit.tobit(a), bit.bnot(a), bit.band(a, b), bit.bor(a, b, 7), \
                         bit.bxor(a, b), bit.lshift(a, b), bit.rshift(a, b), bit.arshift(a, b), \
                         bit.rol(a, b), bit.ror(a, b), bit.bswap(a), bit.tohex(a), \
                         bit.tohex(b, n), bit.tobit(ARGV[1])}"
                    .to_string(),
                vec![
                    lua_g17(*a).into_bytes(),
                    lua_g17(*b).into_bytes(),
                    n.to_string().into_bytes(),
                ],
            )
        },
    );
}

fn lua_g17(v: f64) -> String {
    sim::redis::lua::fmt_g17(v)
}

/// A `struct` format item and a Lua expression for its argument (if it takes one).
fn struct_item() -> impl Strategy<Value = (String, Option<String>)> {
    let int_arg = number_literal().prop_map(lua_g17);
    prop_oneof![
        (
            prop::sample::select(vec![
                "b", "B", "h", "H", "l", "L", "T", "i", "I", "i1", "I2", "i3", "I5", "i8", "I8",
                "i12"
            ]),
            int_arg
        )
            .prop_map(|(f, a)| (f.to_string(), Some(a))),
        (prop::sample::select(vec!["f", "d"]), number_literal())
            .prop_map(|(f, a)| (f.to_string(), Some(lua_g17(a)))),
        (0usize..5, "[a-z]{0,6}").prop_map(|(n, s)| (format!("c{n}"), Some(format!("'{s}'")))),
        "[a-z]{0,6}".prop_map(|s| ("s".to_string(), Some(format!("'{s}'")))),
        prop::sample::select(vec!["x", "<", ">", "!", "!1", "!2", "!4", "!8", " "])
            .prop_map(|f| (f.to_string(), None)),
    ]
}

#[test]
fn generated_struct_formats_like_redis() {
    generated(prop::collection::vec(struct_item(), 0..8), |items| {
        let fmt: String = items.iter().map(|(f, _)| f.as_str()).collect();
        let args: Vec<String> = items.iter().filter_map(|(_, a)| a.clone()).collect();
        let args = if args.is_empty() {
            String::new()
        } else {
            format!(", {}", args.join(", "))
        };
        (
            format!(
                "local fmt = ARGV[1] \
                 local ok, s = pcall(struct.pack, fmt{args}) \
                 if not ok then return 'pack: ' .. s end \
                 local r = {{pcall(struct.unpack, fmt, s)}} \
                 local okz, z = pcall(struct.size, fmt) \
                 return {{s, cmsgpack.pack(unpack(r)), tostring(z)}}"
            ),
            vec![fmt.into_bytes()],
        )
    });
}

// ---------------------------------------------------------------------------------
// The harness itself

#[test]
fn the_comparator_detects_a_deliberately_different_reply() {
    assert!(compare("x", b"$3\r\n[1]\r\n", b"$3\r\n[1]\r\n").is_ok());
    assert!(compare("x", b"$3\r\n[1]\r\n", b"$3\r\n[2]\r\n").is_err());
    assert!(compare("x", b"$-1\r\n", b"*-1\r\n").is_err());
    // End to end: the real server's reply, tampered with, fails the comparison; and a
    // script that answers differently on the two servers (the model's library tables
    // are proxies, so `next` finds nothing in them) is reported.
    let Some(s) = servers() else { return };
    let mut c = Conn::open(s.real.addr());
    let real = c.reply(&["EVAL", "return cjson.encode({1,2,3})", "0"]);
    assert_eq!(real, b"$7\r\n[1,2,3]\r\n");
    let mut broken = real.clone();
    broken[6] = b'9';
    assert!(compare("tampered", &real, &broken).is_err());
    let mut pair = Pair::open(s.real.addr(), s.model);
    let e = pair
        .eval("return tostring(next(cjson) ~= nil)", &[])
        .expect_err("a known difference must be reported");
    assert!(e.contains("redis: \"$4\\r\\ntrue"), "{e}");
}

/// Two real servers agree on generated cases: the harness has no false positives.
#[test]
fn two_real_redis_servers_agree() {
    let Some(first) = RealRedis::start() else {
        return;
    };
    let Some(second) = RealRedis::start() else {
        return;
    };
    let pair = std::cell::RefCell::new(Pair::open(first.addr(), second.addr()));
    let mut runner = TestRunner::new(Config {
        cases: cases().min(100),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(lua_value(), 1..3), |values| {
            let script = format!(
                "return {{cmsgpack.pack({0}), pcall(cjson.encode, {{{0}}})}}",
                values.join(", ")
            );
            pair.borrow_mut()
                .eval(&script, &[])
                .map_err(TestCaseError::fail)
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------
// Without redis-server

/// Known answers from Redis 7.0.15, checked against the model alone.
#[test]
fn model_only_known_values() {
    let (_runtime, model) = runtime_and_model();
    let mut c = Conn::open(model);
    let known: &[(&str, &[u8])] = &[
        ("return cjson.encode({1,2,3})", b"$7\r\n[1,2,3]\r\n"),
        ("return cjson.encode({})", b"$2\r\n{}\r\n"),
        (
            "return cjson.encode({a=1,b=2,c={1,2},d='x'})",
            b"$31\r\n{\"a\":1,\"d\":\"x\",\"c\":[1,2],\"b\":2}\r\n",
        ),
        ("return cjson.encode(0.1)", b"$3\r\n0.1\r\n"),
        ("return cjson.encode(1/3)", b"$16\r\n0.33333333333333\r\n"),
        ("return cjson.encode('a/b')", b"$6\r\n\"a\\/b\"\r\n"),
        ("return cjson.decode('[1,2,{\"a\":7}]')[3].a", b":7\r\n"),
        (
            "return cjson.decode('[1,null,3]')",
            b"*3\r\n:1\r\n$-1\r\n:3\r\n",
        ),
        ("return bit.tohex(255)", b"$8\r\n000000ff\r\n"),
        ("return bit.tohex(-1, -4)", b"$4\r\nFFFF\r\n"),
        ("return bit.band(0xff, 0x0f)", b":15\r\n"),
        ("return bit.tobit(2^32 + 5)", b":5\r\n"),
        ("return bit.lshift(1, 31)", b":-2147483648\r\n"),
        (
            "return cmsgpack.pack({1, 2, 3})",
            b"$4\r\n\x93\x01\x02\x03\r\n",
        ),
        (
            "return cmsgpack.pack(0.5)",
            b"$5\r\n\xca\x3f\x00\x00\x00\r\n",
        ),
        (
            "return {cmsgpack.unpack(cmsgpack.pack(1, 'a'))}",
            b"*2\r\n:1\r\n$1\r\na\r\n",
        ),
        ("return struct.pack('>I2', 258)", b"$2\r\n\x01\x02\r\n"),
        (
            "return {struct.unpack('<h', '\\1\\1')}",
            b"*2\r\n:257\r\n:3\r\n",
        ),
        ("return struct.size('!4 b i')", b":8\r\n"),
    ];
    for (script, want) in known {
        let got = c.reply(&["EVAL", script, "0"]);
        assert_eq!(lossy(&got), lossy(want), "{script}");
    }
    let errors: &[(&str, &str)] = &[
        (
            "return cjson.encode()",
            "-ERR user_script:1: bad argument #1 to 'encode' (expected 1 argument) script: ",
        ),
        (
            "return cjson.decode('[1,2')",
            "-ERR user_script:1: Expected comma or array end but found T_END at character 5 script: ",
        ),
        (
            "cjson.encode = 1",
            "-ERR user_script:1: Attempt to modify a readonly table script: ",
        ),
        (
            "return bit.tobit()",
            "-ERR user_script:1: bad argument #1 to 'tobit' (number expected, got no value) script: ",
        ),
        (
            "return struct.pack('c5', 'ab')",
            "-ERR user_script:1: bad argument #3 to 'pack' (string too short) script: ",
        ),
        (
            "return cmsgpack.unpack(string.char(0xc1))",
            "-ERR user_script:1: Bad data format in input. script: ",
        ),
    ];
    for (script, prefix) in errors {
        let got = lossy(&c.reply(&["EVAL", script, "0"]));
        assert!(got.starts_with(prefix), "{script}: {got}");
    }
}
