//! RESP codec: an incremental request parser that follows Redis 7's `networking.c`
//! (`processMultibulkBuffer`, `processInlineBuffer` with `sdssplitargs`), and an
//! encoder from [`Reply`] to RESP2 or RESP3 bytes.
//!
//! The parser reproduces Redis's quirks on purpose, because clients (and the
//! differential test) see them: lines are found with C's `strchr`, so a NUL byte
//! before the terminator hides it; a bulk's trailing two bytes are skipped, not
//! checked; `*0` and `*-1` are empty requests; numbers follow `string2ll`.

use super::reply::Reply;

/// Redis's `PROTO_INLINE_MAX_SIZE`: an unterminated inline request, or a count line,
/// longer than this is a protocol error.
pub const PROTO_INLINE_MAX_SIZE: usize = 64 * 1024;

/// Redis's default `proto-max-bulk-len` (512 MB).
pub const PROTO_MAX_BULK_LEN: i64 = 512 * 1024 * 1024;

/// What [`parse_request`] found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// One request: its arguments (possibly empty: `*0\r\n`, `*-1\r\n` and blank
    /// inline lines are requests without arguments, which Redis skips silently) and
    /// how many bytes it used.
    Complete(Vec<Vec<u8>>, usize),
    /// More bytes are needed.
    Incomplete,
    /// The client broke the protocol: the full error line (`ERR Protocol error: ...`)
    /// to send before closing the connection.
    ProtocolError(String),
}

fn protocol_error(text: &str) -> Parsed {
    Parsed::ProtocolError(format!("ERR Protocol error: {text}"))
}

/// C's `strchr(buf, c)` over a NUL-terminated buffer: the first `c` before any NUL.
fn strchr(buf: &[u8], c: u8) -> Option<usize> {
    for (i, &b) in buf.iter().enumerate() {
        if b == c {
            return Some(i);
        }
        if b == 0 {
            return None;
        }
    }
    None
}

/// Redis's `string2ll`: optional `-`, no `+`, no leading zeros, no spaces, fits i64.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i128).wrapping_neg() as i64)
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses the request at the start of `buf`.
pub fn parse_request(buf: &[u8]) -> Parsed {
    match buf.first() {
        None => Parsed::Incomplete,
        Some(b'*') => parse_multibulk(buf),
        Some(_) => parse_inline(buf),
    }
}

fn parse_multibulk(buf: &[u8]) -> Parsed {
    let Some(cr) = strchr(buf, b'\r') else {
        if buf.len() > PROTO_INLINE_MAX_SIZE {
            return protocol_error("too big mbulk count string");
        }
        return Parsed::Incomplete;
    };
    // The buffer must also hold the byte after '\r' (Redis does not check it is '\n').
    if cr + 2 > buf.len() {
        return Parsed::Incomplete;
    }
    let count = match string2ll(&buf[1..cr]) {
        Some(n) if n <= i64::from(i32::MAX) => n,
        _ => return protocol_error("invalid multibulk length"),
    };
    let mut pos = cr + 2;
    if count <= 0 {
        return Parsed::Complete(Vec::new(), pos);
    }
    let mut argv = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let rest = &buf[pos..];
        let Some(cr) = strchr(rest, b'\r') else {
            if rest.len() > PROTO_INLINE_MAX_SIZE {
                return protocol_error("too big bulk count string");
            }
            return Parsed::Incomplete;
        };
        if cr + 2 > rest.len() {
            return Parsed::Incomplete;
        }
        if rest[0] != b'$' {
            // addReplyErrorFormat turns '\r' and '\n' into spaces.
            let got = match rest[0] {
                b'\r' | b'\n' => ' ',
                other => other as char,
            };
            let mut text = String::from("ERR Protocol error: expected '$', got '");
            if rest[0].is_ascii() {
                text.push(got);
            } else {
                // A C `%c` writes the raw byte; keep it lossless as Latin-1 would not be.
                text.push_str(&String::from_utf8_lossy(&[rest[0]]));
            }
            text.push('\'');
            return Parsed::ProtocolError(text);
        }
        let len = match string2ll(&rest[1..cr]) {
            Some(n) if (0..=PROTO_MAX_BULK_LEN).contains(&n) => n as usize,
            _ => return protocol_error("invalid bulk length"),
        };
        let start = pos + cr + 2;
        // Not enough data (+2 == trailing \r\n, skipped without a check).
        if buf.len() - start < len + 2 {
            return Parsed::Incomplete;
        }
        argv.push(buf[start..start + len].to_vec());
        pos = start + len + 2;
    }
    Parsed::Complete(argv, pos)
}

fn parse_inline(buf: &[u8]) -> Parsed {
    let Some(nl) = strchr(buf, b'\n') else {
        if buf.len() > PROTO_INLINE_MAX_SIZE {
            return protocol_error("too big inline request");
        }
        return Parsed::Incomplete;
    };
    let end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    match split_args(&buf[..end]) {
        Some(argv) => Parsed::Complete(argv, nl + 1),
        None => protocol_error("unbalanced quotes in request"),
    }
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs`: whitespace-separated arguments with `"..."` (C escapes,
/// `\xHH`) and `'...'` (only `\'`) quoting; a closing quote must be followed by
/// whitespace or the end. `None` for unbalanced quotes. The line is a C string: it
/// ends at the first NUL.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(n) => &line[..n],
        None => line,
    };
    // Reading past the end yields NUL, as in C.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    let mut argv = Vec::new();
    loop {
        while at(p) != 0 && is_c_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(argv);
        }
        let (mut inq, mut insq, mut done) = (false, false, false);
        let mut current = Vec::new();
        while !done {
            let c = at(p);
            if inq {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_value(at(p + 2)), hex_value(at(p + 3))) {
                        current.push(h * 16 + l);
                        p += 3;
                    } else {
                        p += 1;
                        current.push(b'x');
                    }
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    other => current.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        argv.push(current);
    }
}

/// Encodes a request as a RESP2 array of bulk strings (what clients send).
pub fn encode_request<A: AsRef<[u8]>>(argv: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// C's `printf("%.17g", d)`, which Redis 7.0 uses for doubles.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    const P: i32 = 17;
    // Rounded to P significant digits, in scientific form, to learn the exponent.
    let sci = format!("{:.*e}", (P - 1) as usize, d);
    let (mantissa, exp) = sci.split_once('e').expect("scientific format has an e");
    let x: i32 = exp.parse().expect("exponent is an integer");
    fn strip(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    if (-4..P).contains(&x) {
        let fixed = format!("{:.*}", (P - 1 - x) as usize, d);
        strip(&fixed).to_string()
    } else {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mantissa), sign, x.abs())
    }
}

/// Appends `reply` encoded for `protocol` (2 or 3) to `out`.
pub fn encode_into(reply: &Reply, protocol: u8, out: &mut Vec<u8>) {
    let resp3 = protocol >= 3;
    let line = |out: &mut Vec<u8>, prefix: u8, body: &[u8]| {
        out.push(prefix);
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    };
    match reply {
        Reply::Simple(s) => line(out, b'+', s.as_bytes()),
        Reply::Error(s) => line(out, b'-', s.as_bytes()),
        Reply::Integer(n) => line(out, b':', n.to_string().as_bytes()),
        Reply::Bulk(b) => {
            line(out, b'$', b.len().to_string().as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
        Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
        Reply::Array(items) | Reply::Push(items) => {
            let prefix = match reply {
                Reply::Push(_) if resp3 => b'>',
                _ => b'*',
            };
            line(out, prefix, items.len().to_string().as_bytes());
            for item in items {
                encode_into(item, protocol, out);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                line(out, b'%', pairs.len().to_string().as_bytes());
            } else {
                line(out, b'*', (pairs.len() * 2).to_string().as_bytes());
            }
            for (k, v) in pairs {
                encode_into(k, protocol, out);
                encode_into(v, protocol, out);
            }
        }
        Reply::Double(d) => {
            let text = format_double(*d);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                encode_into(&Reply::Bulk(text.into_bytes()), protocol, out);
            }
        }
        Reply::Frames(frames) => {
            for frame in frames {
                encode_into(frame, protocol, out);
            }
        }
        Reply::Raw(bytes) => out.extend_from_slice(bytes),
        Reply::Close => {}
    }
}

/// `reply` encoded for `protocol` (2 or 3).
pub fn encode(reply: &Reply, protocol: u8) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(reply, protocol, &mut out);
    out
}

/// What [`scan_frame`] found at the start of a buffer of RESP2/RESP3 frames (a
/// client's view of a server's stream, or a server's of a client's requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// A whole frame of `len` bytes that answers a request (any type but a push or
    /// an attribute).
    Reply(usize),
    /// A whole frame of `len` bytes that answers nothing: a RESP3 push (`>`), or an
    /// attribute (`|`), which decorates the reply after it.
    Aside(usize),
    /// More bytes are needed.
    Incomplete,
    /// Not RESP: the reader cannot tell frames apart from here on.
    Invalid,
}

/// The length and kind of the frame at the start of `buf`, without decoding it.
pub fn scan_frame(buf: &[u8]) -> Frame {
    let (kind, len) = match scan_at(buf, 0, 0) {
        Scan::Done(end) => (buf[0], end),
        Scan::Incomplete => return Frame::Incomplete,
        Scan::Invalid => return Frame::Invalid,
    };
    match kind {
        b'>' | b'|' => Frame::Aside(len),
        _ => Frame::Reply(len),
    }
}

enum Scan {
    Done(usize),
    Incomplete,
    Invalid,
}

/// The end of the frame that starts at `buf[at]`.
fn scan_at(buf: &[u8], at: usize, depth: u32) -> Scan {
    // Deeper than any reply a client decodes (the `redis` crate stops far earlier).
    if depth > 1000 {
        return Scan::Invalid;
    }
    let Some(&kind) = buf.get(at) else {
        return Scan::Incomplete;
    };
    let Some(lf) = buf[at..].iter().position(|&b| b == b'\n') else {
        return Scan::Incomplete;
    };
    let line_end = at + lf + 1;
    if lf < 2 || buf[at + lf - 1] != b'\r' {
        return Scan::Invalid;
    }
    let line = &buf[at + 1..at + lf - 1];
    let number = || std::str::from_utf8(line).ok()?.parse::<i64>().ok();
    match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Scan::Done(line_end),
        b'$' | b'!' | b'=' => match number() {
            Some(n) if n < 0 => Scan::Done(line_end),
            Some(n) => {
                let end = line_end + n as usize + 2;
                if buf.len() < end {
                    Scan::Incomplete
                } else {
                    Scan::Done(end)
                }
            }
            None => Scan::Invalid,
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let Some(n) = number() else {
                return Scan::Invalid;
            };
            let items = if matches!(kind, b'%' | b'|') {
                n.saturating_mul(2)
            } else {
                n
            };
            let mut end = line_end;
            for _ in 0..items.max(0) {
                match scan_at(buf, end, depth + 1) {
                    Scan::Done(next) => end = next,
                    other => return other,
                }
            }
            Scan::Done(end)
        }
        _ => Scan::Invalid,
    }
}
