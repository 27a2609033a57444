//! Redis's conversion of a script's result to a reply ([`lua_to_reply`], the error
//! forms included), with its nesting limit.

use mlua::{Table, Value};

use crate::redis::commands;
use crate::redis::lua_shared::fmt_g;
use crate::redis::reply::Reply;

/// C's `printf("%.17g")`, which Redis uses to turn a Lua number argument into a string.
pub fn fmt_g17(v: f64) -> String {
    fmt_g(v, 17)
}

fn string_field(t: &Table, name: &str) -> Option<String> {
    match t.raw_get::<Value>(name).ok()? {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        _ => None,
    }
}

/// Nesting depth at which the conversion answers `reached lua stack limit` instead
/// of the table. Redis 7.0.15 reaches its Lua stack limit at 7995 nested arrays; the
/// model stops at 1000 because every open level holds an mlua reference and mlua's
/// reference stack is bounded by the same Lua limit (documented deviation).
const REPLY_DEPTH_LIMIT: usize = 1000;

enum Conv {
    Leaf(Reply),
    Array(Table),
    Map(Vec<Value>),
    Set(Vec<Value>),
}

/// One table's conversion: what it was, the Lua values still to convert, and the
/// replies converted so far.
struct Frame {
    kind: u8,
    /// An array's table, walked from index 1 to the first nil (one reference held).
    table: Option<Table>,
    /// A map's or set's values, collected up front.
    values: Vec<Value>,
    pos: usize,
    out: Vec<Reply>,
}

impl Frame {
    /// The next Lua value to convert, if any.
    fn next_value(&mut self) -> Option<Value> {
        if let Some(t) = &self.table {
            let v = match t.raw_get::<Value>(self.pos + 1) {
                Ok(Value::Nil) | Err(_) => return None,
                Ok(v) => v,
            };
            self.pos += 1;
            return Some(v);
        }
        let v = self.values.get(self.pos).cloned();
        self.pos += 1;
        v
    }
}

impl Frame {
    fn finish(self) -> Reply {
        match self.kind {
            b'm' => {
                let mut it = self.out.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Reply::Map(pairs)
            }
            _ => Reply::Array(self.out),
        }
    }
}

/// One value, without descending into arrays, maps or sets.
fn classify(value: &Value) -> Conv {
    match value {
        Value::String(s) => Conv::Leaf(Reply::Bulk(s.as_bytes().to_vec())),
        Value::Boolean(true) => Conv::Leaf(Reply::Integer(1)),
        Value::Integer(i) => Conv::Leaf(Reply::Integer(*i)),
        // C's (long long) cast on x86-64: out of range and NaN give LLONG_MIN.
        Value::Number(n)
            if n.is_nan()
                || *n >= 9_223_372_036_854_775_808.0
                || *n < -9_223_372_036_854_775_808.0 =>
        {
            Conv::Leaf(Reply::Integer(i64::MIN))
        }
        Value::Number(n) => Conv::Leaf(Reply::Integer(*n as i64)),
        Value::Table(t) => {
            if let Some(e) = string_field(t, "err") {
                return Conv::Leaf(Reply::Error(commands::no_newlines(&e)));
            }
            if let Some(s) = string_field(t, "ok") {
                return Conv::Leaf(Reply::Simple(commands::no_newlines(&s)));
            }
            match t.raw_get::<Value>("double") {
                Ok(Value::Number(d)) => return Conv::Leaf(Reply::Double(d)),
                Ok(Value::Integer(d)) => return Conv::Leaf(Reply::Double(d as f64)),
                _ => {}
            }
            // RESP3-only types: written as their RESP2 form (the Reply type has no
            // big number, verbatim string or set).
            if let Some(s) = string_field(t, "big_number") {
                return Conv::Leaf(Reply::Bulk(s.into_bytes()));
            }
            if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
                && let (Ok(Value::String(_)), Ok(Value::String(s))) =
                    (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
            {
                return Conv::Leaf(Reply::Bulk(s.as_bytes().to_vec()));
            }
            if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
                let mut values = Vec::new();
                for (k, v) in m.pairs::<Value, Value>().filter_map(Result::ok) {
                    values.push(k);
                    values.push(v);
                }
                return Conv::Map(values);
            }
            if let Ok(Value::Table(m)) = t.raw_get::<Value>("set") {
                return Conv::Set(
                    m.pairs::<Value, Value>()
                        .filter_map(Result::ok)
                        .map(|(k, _)| k)
                        .collect(),
                );
            }
            // An array: walked from 1 to the first nil (not Lua's # operator).
            Conv::Array(t.clone())
        }
        _ => Conv::Leaf(Reply::Nil),
    }
}

/// Lua → Redis (`luaReplyToRedisReply`), iterative so a deep or cyclic table cannot
/// overflow the Rust stack.
pub fn lua_to_reply(value: &Value) -> Reply {
    let mut stack: Vec<Frame> = Vec::new();
    let mut current = value.clone();
    loop {
        let mut done = match classify(&current) {
            Conv::Leaf(r) => Some(r),
            _ if stack.len() >= REPLY_DEPTH_LIMIT => Some(Reply::err("reached lua stack limit")),
            Conv::Array(table) => {
                stack.push(Frame {
                    kind: b'a',
                    table: Some(table),
                    values: Vec::new(),
                    pos: 0,
                    out: Vec::new(),
                });
                None
            }
            Conv::Map(values) => {
                stack.push(Frame {
                    kind: b'm',
                    table: None,
                    values,
                    pos: 0,
                    out: Vec::new(),
                });
                None
            }
            Conv::Set(values) => {
                stack.push(Frame {
                    kind: b's',
                    table: None,
                    values,
                    pos: 0,
                    out: Vec::new(),
                });
                None
            }
        };
        loop {
            if let Some(r) = done.take() {
                match stack.last_mut() {
                    None => return r,
                    Some(frame) => frame.out.push(r),
                }
            }
            let Some(frame) = stack.last_mut() else {
                return Reply::Nil;
            };
            if let Some(v) = frame.next_value() {
                current = v;
                break;
            }
            let frame = stack.pop().expect("a frame");
            done = Some(frame.finish());
        }
    }
}

/// A script's uncaught error (the table Redis's error handler built).
pub(super) fn error_to_reply(value: &Value, sha: &str) -> Reply {
    let Value::Table(t) = value else {
        return Reply::err("Error running script (unexpected error value)");
    };
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Ok(Value::Number(n)) => format!("{}", n),
        Ok(Value::Integer(n)) => n.to_string(),
        _ => String::new(),
    };
    let source = string_field(t, "source");
    let line = match t.raw_get::<Value>("line") {
        Ok(Value::Integer(n)) => Some(n.to_string()),
        Ok(Value::Number(n)) => Some((n as i64).to_string()),
        _ => None,
    };
    let text = match (source, line) {
        (Some(source), Some(line)) => format!("{msg} script: {sha}, on {source}:{line}."),
        _ => msg,
    };
    Reply::Error(commands::no_newlines(&text))
}
