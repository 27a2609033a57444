//! `sim::redis::resp`'s own tests (moved from the module): the request parser's
//! Redis quirks and errors, the RESP2/RESP3 encoder, and the frame scanner.

use sim::redis::Reply;
use sim::redis::resp::{
    Frame, PROTO_INLINE_MAX_SIZE, Parsed, encode, encode_request, format_double, parse_request,
    scan_frame, string2ll,
};

fn argv(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn complete(buf: &[u8]) -> (Vec<Vec<u8>>, usize) {
    match parse_request(buf) {
        Parsed::Complete(a, n) => (a, n),
        other => panic!("expected Complete for {buf:?}, got {other:?}"),
    }
}

fn error(buf: &[u8]) -> String {
    match parse_request(buf) {
        Parsed::ProtocolError(e) => e,
        other => panic!("expected ProtocolError for {buf:?}, got {other:?}"),
    }
}

#[test]
fn a_multibulk_request_parses_with_its_length() {
    let buf = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*1\r\n";
    assert_eq!(complete(buf), (argv(&["GET", "a"]), 20));
}

#[test]
fn every_strict_prefix_of_a_request_is_incomplete() {
    let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    for n in 0..buf.len() {
        assert_eq!(parse_request(&buf[..n]), Parsed::Incomplete, "prefix {n}");
    }
    assert_eq!(complete(buf), (argv(&["SET", "k", "hello"]), buf.len()));
}

#[test]
fn binary_bulks_and_empty_bulks_survive() {
    let buf = b"*2\r\n$3\r\na\r\n\r\n$0\r\n\r\n";
    assert_eq!(
        complete(buf),
        (vec![b"a\r\n".to_vec(), Vec::new()], buf.len())
    );
}

#[test]
fn zero_and_negative_counts_are_empty_requests() {
    assert_eq!(complete(b"*0\r\n"), (vec![], 4));
    assert_eq!(complete(b"*-1\r\nPING"), (vec![], 5));
}

#[test]
fn protocol_errors_use_redis_wording() {
    assert_eq!(
        error(b"*x\r\n"),
        "ERR Protocol error: invalid multibulk length"
    );
    assert_eq!(
        error(b"*3000000000\r\n"),
        "ERR Protocol error: invalid multibulk length"
    );
    assert_eq!(
        error(b"*+1\r\n"),
        "ERR Protocol error: invalid multibulk length"
    );
    assert_eq!(
        error(b"*1\r\n:1\r\n"),
        "ERR Protocol error: expected '$', got ':'"
    );
    assert_eq!(
        error(b"*1\r\n\r\n"),
        "ERR Protocol error: expected '$', got ' '"
    );
    assert_eq!(
        error(b"*1\r\n$-1\r\n"),
        "ERR Protocol error: invalid bulk length"
    );
    assert_eq!(
        error(b"*1\r\n$abc\r\n"),
        "ERR Protocol error: invalid bulk length"
    );
    assert_eq!(
        error(b"*1\r\n$600000000\r\n"),
        "ERR Protocol error: invalid bulk length"
    );
    assert_eq!(
        error(b"SET a \"b\r\n"),
        "ERR Protocol error: unbalanced quotes in request"
    );
    assert_eq!(
        error(b"SET a \"b\"c\r\n"),
        "ERR Protocol error: unbalanced quotes in request"
    );
    let big = vec![b'a'; PROTO_INLINE_MAX_SIZE + 1];
    assert_eq!(error(&big), "ERR Protocol error: too big inline request");
    let mut big = b"*".to_vec();
    big.extend(vec![b'1'; PROTO_INLINE_MAX_SIZE + 1]);
    assert_eq!(
        error(&big),
        "ERR Protocol error: too big mbulk count string"
    );
    let mut big = b"*1\r\n$".to_vec();
    big.extend(vec![b'1'; PROTO_INLINE_MAX_SIZE + 1]);
    assert_eq!(error(&big), "ERR Protocol error: too big bulk count string");
}

#[test]
fn the_bulk_terminator_is_skipped_unchecked_as_redis_does() {
    assert_eq!(complete(b"*1\r\n$4\r\nPINGxy"), (argv(&["PING"]), 14));
}

#[test]
fn inline_commands_split_on_whitespace_with_quotes() {
    assert_eq!(complete(b"PING\r\n"), (argv(&["PING"]), 6));
    assert_eq!(complete(b"PING\n"), (argv(&["PING"]), 5));
    assert_eq!(
        complete(b"  set  a\t'b c'  \r\n"),
        (argv(&["set", "a", "b c"]), 18)
    );
    assert_eq!(
        complete(b"echo \"a\\x41\\n\\\"\" 'it\\'s'\r\n").0,
        vec![b"echo".to_vec(), b"aA\n\"".to_vec(), b"it's".to_vec()]
    );
    assert_eq!(complete(b"\r\n"), (vec![], 2));
    assert_eq!(parse_request(b"PING"), Parsed::Incomplete);
    assert_eq!(complete(b"a\"b c\" d\r\n").0, argv(&["ab c", "d"]));
}

#[test]
fn a_nul_hides_the_line_end_as_in_c() {
    assert_eq!(parse_request(b"PI\0NG\r\n"), Parsed::Incomplete);
    assert_eq!(parse_request(b"*1\0\r\n"), Parsed::Incomplete);
}

#[test]
fn string2ll_follows_redis() {
    assert_eq!(string2ll(b"0"), Some(0));
    assert_eq!(string2ll(b"-5"), Some(-5));
    assert_eq!(string2ll(b"-0"), None);
    assert_eq!(string2ll(b"01"), None);
    assert_eq!(string2ll(b" 1"), None);
    assert_eq!(string2ll(b""), None);
    assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(string2ll(b"9223372036854775808"), None);
    assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
}

#[test]
fn resp2_encoding() {
    let r = Reply::Array(vec![
        Reply::ok(),
        Reply::err("bad"),
        Reply::Integer(-3),
        Reply::bulk("hi"),
        Reply::Nil,
        Reply::NilArray,
        Reply::Map(vec![(Reply::bulk("k"), Reply::Integer(1))]),
        Reply::Double(1.5),
        Reply::Push(vec![Reply::bulk("message")]),
    ]);
    assert_eq!(
        encode(&r, 2),
        b"*9\r\n+OK\r\n-ERR bad\r\n:-3\r\n$2\r\nhi\r\n$-1\r\n*-1\r\n*2\r\n$1\r\nk\r\n:1\r\n$3\r\n1.5\r\n*1\r\n$7\r\nmessage\r\n"
            .to_vec()
    );
}

#[test]
fn resp3_encoding() {
    let r = Reply::Array(vec![
        Reply::Nil,
        Reply::NilArray,
        Reply::Map(vec![(Reply::bulk("k"), Reply::Integer(1))]),
        Reply::Double(1.5),
        Reply::Push(vec![Reply::bulk("message")]),
    ]);
    assert_eq!(
        encode(&r, 3),
        b"*5\r\n_\r\n_\r\n%1\r\n$1\r\nk\r\n:1\r\n,1.5\r\n>1\r\n$7\r\nmessage\r\n".to_vec()
    );
}

#[test]
fn frames_are_written_back_to_back() {
    let r = Reply::Frames(vec![Reply::Integer(1), Reply::Push(vec![])]);
    assert_eq!(encode(&r, 2), b":1\r\n*0\r\n".to_vec());
    assert_eq!(encode(&r, 3), b":1\r\n>0\r\n".to_vec());
}

#[test]
fn doubles_format_like_percent_17g() {
    assert_eq!(format_double(1.5), "1.5");
    assert_eq!(format_double(0.1), "0.10000000000000001");
    assert_eq!(format_double(3.0), "3");
    assert_eq!(format_double(-0.0), "-0");
    assert_eq!(format_double(1e20), "1e+20");
    assert_eq!(format_double(1.25e-7), "1.2499999999999999e-07");
    assert_eq!(format_double(0.0001), "0.0001");
    assert_eq!(format_double(12345678901234567.0), "12345678901234568");
    assert_eq!(format_double(f64::INFINITY), "inf");
    assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
}

#[test]
fn encoded_requests_parse_back() {
    let a = argv(&["SET", "a", "b c", ""]);
    let bytes = encode_request(&a);
    assert_eq!(complete(&bytes), (a, bytes.len()));
}

#[test]
fn frames_are_measured_whole_and_pushes_set_aside() {
    assert_eq!(scan_frame(b"+OK\r\n:1\r\n"), Frame::Reply(5));
    assert_eq!(scan_frame(b"$3\r\nfoo\r\n"), Frame::Reply(9));
    assert_eq!(scan_frame(b"$-1\r\n"), Frame::Reply(5));
    assert_eq!(scan_frame(b"*2\r\n$1\r\na\r\n:2\r\n"), Frame::Reply(15));
    assert_eq!(scan_frame(b"%1\r\n+k\r\n+v\r\n"), Frame::Reply(12));
    assert_eq!(
        scan_frame(b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"),
        Frame::Aside(31)
    );
    assert_eq!(scan_frame(b"|1\r\n+k\r\n+v\r\n+OK\r\n"), Frame::Aside(12));
    assert_eq!(scan_frame(b"*2\r\n$1\r\na\r\n"), Frame::Incomplete);
    assert_eq!(scan_frame(b"$3\r\nfo"), Frame::Incomplete);
    assert_eq!(scan_frame(b"+OK"), Frame::Incomplete);
    assert_eq!(scan_frame(b""), Frame::Incomplete);
    assert_eq!(scan_frame(b"?x\r\n"), Frame::Invalid);
    assert_eq!(scan_frame(b"$x\r\n"), Frame::Invalid);
}
