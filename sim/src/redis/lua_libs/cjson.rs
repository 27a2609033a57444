//! `cjson`: Lua CJSON 2.1.0 (`deps/lua/src/lua_cjson.c` in Redis 7.0.15).

use std::sync::{Arc, Mutex};

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::super::lua_shared::fmt_g;
use super::helpers::{
    MAXCSTACK, add, argerror, bytes, check_bytes, check_cstr, check_integer, d2i32, hexval, lerror,
    num, number_of, one, strtod, type_name,
};

/// Nesting at which the model's recursive encoders and decoders stop (every open level
/// holds an mlua reference, and mlua's reference stack is bounded by the same Lua
/// limit, and their Rust recursion is bounded by a thread's stack). It is also the
/// default of both cjson limits; Redis, with a limit raised, goes on to its own Lua
/// stack limit (between about 2700 and 8000 levels).
pub const MODEL_MAX_NESTING: usize = 1000;

/// `json_config_t`'s settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonConfig {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    encode_keep_buffer: i32,
    encode_number_precision: i32,
}

impl Default for JsonConfig {
    fn default() -> Self {
        Self {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            encode_keep_buffer: 1,
            encode_number_precision: 14,
        }
    }
}

pub(super) type Shared = Arc<Mutex<JsonConfig>>;

pub(super) fn cfg_of(shared: &Shared) -> JsonConfig {
    *shared.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn cfg_update(shared: &Shared, f: impl FnOnce(&mut JsonConfig)) {
    f(&mut shared.lock().unwrap_or_else(|e| e.into_inner()));
}

/// A `cjson` module table whose functions share one configuration (`cjson.new()`
/// makes another).
pub(super) fn cjson_table(lua: &Lua, cfg: Shared) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let c = cfg.clone();
    add(lua, &t, "encode", move |lua, args| {
        if args.len() != 1 {
            return argerror(lua, 1, "expected 1 argument");
        }
        let cfg = cfg_of(&c);
        let mut out = Vec::new();
        json_append(lua, &cfg, &args[0], &mut out, 0, 1)?;
        one(bytes(lua, &out)?)
    })?;
    let c = cfg.clone();
    add(lua, &t, "decode", move |lua, args| {
        if args.len() != 1 {
            return argerror(lua, 1, "expected 1 argument");
        }
        let cfg = cfg_of(&c);
        let data = check_bytes(lua, &args, 1)?;
        one(json_decode(lua, &cfg, &data)?)
    })?;
    let c = cfg.clone();
    add(lua, &t, "encode_sparse_array", move |lua, args| {
        arg_init(lua, &args, 3)?;
        let mut cfg = cfg_of(&c);
        let a = enum_option(lua, &args, 1, &mut cfg.sparse_convert, &["off", "on"], 1)?;
        let b = integer_option(lua, &args, 2, &mut cfg.sparse_ratio, 0, i32::MAX)?;
        let d = integer_option(lua, &args, 3, &mut cfg.sparse_safe, 0, i32::MAX)?;
        cfg_update(&c, |x| *x = cfg);
        Ok(MultiValue::from_iter([a, b, d]))
    })?;
    type Field = fn(&mut JsonConfig) -> &mut i32;
    let ints: [(&str, Field, i32, i32); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, 1, i32::MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, 1, i32::MAX),
        (
            "encode_number_precision",
            |c| &mut c.encode_number_precision,
            1,
            14,
        ),
    ];
    for (name, field, min, max) in ints {
        let c = cfg.clone();
        add(lua, &t, name, move |lua, args| {
            arg_init(lua, &args, 1)?;
            let mut cfg = cfg_of(&c);
            let v = integer_option(lua, &args, 1, field(&mut cfg), min, max)?;
            cfg_update(&c, |x| *x = cfg);
            one(v)
        })?;
    }
    let enums: [(&str, Field, &'static [&'static str]); 3] = [
        (
            "encode_keep_buffer",
            |c| &mut c.encode_keep_buffer,
            &["off", "on"],
        ),
        (
            "encode_invalid_numbers",
            |c| &mut c.encode_invalid_numbers,
            &["off", "on", "null"],
        ),
        (
            "decode_invalid_numbers",
            |c| &mut c.decode_invalid_numbers,
            &["off", "on"],
        ),
    ];
    for (name, field, options) in enums {
        let c = cfg.clone();
        add(lua, &t, name, move |lua, args| {
            arg_init(lua, &args, 1)?;
            let mut cfg = cfg_of(&c);
            let v = enum_option(lua, &args, 1, field(&mut cfg), options, 1)?;
            cfg_update(&c, |x| *x = cfg);
            one(v)
        })?;
    }
    add(lua, &t, "new", |lua, _args| {
        one(Value::Table(cjson_table(
            lua,
            Arc::new(Mutex::new(JsonConfig::default())),
        )?))
    })?;
    t.raw_set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// `json_arg_init`: at most `n` arguments.
pub(super) fn arg_init(lua: &Lua, args: &[Value], n: usize) -> mlua::Result<()> {
    if args.len() > n {
        return argerror(lua, n as i64 + 1, "found too many arguments");
    }
    Ok(())
}

/// `json_integer_option`.
pub(super) fn integer_option(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> mlua::Result<Value> {
    if !matches!(args.get(idx - 1), None | Some(Value::Nil)) {
        // `int value = luaL_checkinteger(...)`: the low 32 bits.
        let value = check_integer(lua, args, idx)? as i32;
        if !(min <= value && value <= max) {
            return argerror(lua, 1, format!("expected integer between {min} and {max}"));
        }
        *setting = value;
    }
    Ok(num(f64::from(*setting)))
}

/// `json_enum_option` (`luaL_checkoption` for strings).
pub(super) fn enum_option(
    lua: &Lua,
    args: &[Value],
    idx: usize,
    setting: &mut i32,
    options: &[&str],
    bool_true: i32,
) -> mlua::Result<Value> {
    match args.get(idx - 1) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) if bool_true != 0 => *setting = i32::from(*b) * bool_true,
        Some(_) => {
            let name = check_cstr(lua, args, idx)?;
            match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
                Some(i) => *setting = i as i32,
                None => {
                    let mut m = b"invalid option '".to_vec();
                    m.extend_from_slice(&name);
                    m.push(b'\'');
                    return argerror(lua, idx as i64, m);
                }
            }
        }
    }
    if bool_true != 0 && (*setting == 0 || *setting == bool_true) {
        Ok(Value::Boolean(*setting != 0))
    } else {
        bytes(lua, options[*setting as usize].as_bytes())
    }
}

pub(super) fn json_escape(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

pub(super) fn encode_exception<T>(lua: &Lua, type_name: &str, reason: &str) -> mlua::Result<T> {
    lerror(lua, format!("Cannot serialise {type_name}: {reason}"))
}

/// `json_append_number`.
pub(super) fn json_number(
    lua: &Lua,
    cfg: &JsonConfig,
    n: f64,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => return encode_exception(lua, "number", "must not be NaN or Inf"),
        0 => {}
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        1 => {}
        _ if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(fmt_g(n, cfg.encode_number_precision as usize).as_bytes());
    Ok(())
}

/// `lua_array_length`: the array's length, or `None` for an object.
pub(super) fn json_array_length(
    lua: &Lua,
    cfg: &JsonConfig,
    t: &Table,
) -> mlua::Result<Option<i32>> {
    let mut max: i32 = 0;
    let mut items: i32 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number_of(&k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > f64::from(max) {
                    max = d2i32(k);
                }
                items = items.wrapping_add(1);
            }
            _ => return Ok(None),
        }
    }
    if cfg.sparse_ratio > 0 && max > items.wrapping_mul(cfg.sparse_ratio) && max > cfg.sparse_safe {
        if cfg.sparse_convert == 0 {
            return encode_exception(lua, "table", "excessively sparse array");
        }
        return Ok(None);
    }
    Ok(Some(max))
}

/// `json_append_data`. `slots` counts the Lua stack slots the C code holds.
pub(super) fn json_append(
    lua: &Lua,
    cfg: &JsonConfig,
    v: &Value,
    out: &mut Vec<u8>,
    depth: i32,
    slots: usize,
) -> mlua::Result<()> {
    match v {
        Value::String(s) => json_escape(&s.as_bytes(), out),
        Value::Integer(_) | Value::Number(_) => {
            json_number(lua, cfg, number_of(v).unwrap_or_default(), out)?
        }
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth
                || slots + 3 > MAXCSTACK
                || depth as usize > MODEL_MAX_NESTING
            {
                return lerror(
                    lua,
                    format!("Cannot serialise, excessive nesting ({depth})"),
                );
            }
            match json_array_length(lua, cfg, t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i)?;
                        json_append(lua, cfg, &item, out, depth, slots + 1)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut comma = false;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if comma {
                            out.push(b',');
                        }
                        comma = true;
                        match &k {
                            Value::String(s) => {
                                json_escape(&s.as_bytes(), out);
                                out.push(b':');
                            }
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                json_number(lua, cfg, number_of(&k).unwrap_or_default(), out)?;
                                out.extend_from_slice(b"\":");
                            }
                            other => {
                                return encode_exception(
                                    lua,
                                    type_name(Some(other)),
                                    "table key must be a number or string",
                                );
                            }
                        }
                        json_append(lua, cfg, &val, out, depth, slots + 2)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return encode_exception(lua, type_name(Some(other)), "type not supported"),
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

pub(super) struct JsonParser<'a> {
    /// The input up to its first NUL (the C parser stops there).
    data: &'a [u8],
    pos: usize,
    cfg: JsonConfig,
    depth: i32,
}

impl JsonParser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        let mut v = 0;
        for k in 0..4 {
            v = (v << 4) | hexval(self.at(i + k))?;
        }
        Some(v)
    }

    /// `json_append_unicode_escape` at `\u`: appends UTF-8, advances past the escape.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let mut cp = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return None;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            out.push(cp as u8);
        } else if cp <= 0x7FF {
            out.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]);
        } else if cp <= 0xFFFF {
            out.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        } else {
            out.extend_from_slice(&[
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        }
        self.pos += len;
        Some(())
    }

    fn string_token(&mut self) -> (Tok, usize) {
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            let mut ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return (Tok::Error("unexpected end of string"), self.pos);
            }
            if ch == b'\\' {
                let esc = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => b'\x08',
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => b'\x0c',
                    b'r' => b'\r',
                    b'u' => b'u',
                    _ => 0,
                };
                if esc == b'u' {
                    if self.unicode_escape(&mut s).is_some() {
                        continue;
                    }
                    return (Tok::Error("invalid unicode escape code"), self.pos);
                }
                if esc == 0 {
                    return (Tok::Error("invalid escape code"), self.pos);
                }
                self.pos += 1;
                ch = esc;
            }
            s.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        (Tok::Str(s), 0)
    }

    /// `json_is_invalid_number`.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        // C compares a (signed) char: bytes >= 0x80 are "ordinary numbers" too.
        if c <= b'9' || c >= 0x80 {
            return false;
        }
        let rest = &self.data[p.min(self.data.len())..];
        let starts = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        starts(b"inf") || starts(b"nan")
    }

    fn number_token(&mut self) -> (Tok, usize) {
        match strtod(&self.data[self.pos..]) {
            Some((v, used)) => {
                self.pos += used;
                (Tok::Num(v), 0)
            }
            None => (Tok::Error("invalid number"), self.pos),
        }
    }

    /// `json_next_token`: the token and its index (0-based, for error messages).
    fn next(&mut self) -> (Tok, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            0 => return (Tok::End, index),
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9' => None,
            _ => return (Tok::Error("invalid token"), index),
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, index);
        }
        let rest = &self.data[self.pos..];
        let (tok, err_index) = if ch == b'"' {
            self.string_token()
        } else if ch == b'-' || ch.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                (Tok::Error("invalid number"), self.pos)
            } else {
                self.number_token()
            }
        } else if rest.starts_with(b"true") {
            self.pos += 4;
            (Tok::Bool(true), 0)
        } else if rest.starts_with(b"false") {
            self.pos += 5;
            (Tok::Bool(false), 0)
        } else if rest.starts_with(b"null") {
            self.pos += 4;
            (Tok::Null, 0)
        } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
            self.number_token()
        } else {
            (Tok::Error("invalid token"), self.pos)
        };
        match tok {
            Tok::Error(_) => (tok, err_index),
            _ => (tok, index),
        }
    }

    fn throw<T>(&self, lua: &Lua, expected: &str, tok: &Tok, index: usize) -> mlua::Result<T> {
        lerror(
            lua,
            format!(
                "Expected {expected} but found {} at character {}",
                tok.name(),
                index + 1
            ),
        )
    }

    /// `json_decode_descend`.
    fn descend(&mut self, lua: &Lua, slots: usize, need: usize) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth
            && slots + need <= MAXCSTACK
            && self.depth as usize <= MODEL_MAX_NESTING
        {
            return Ok(());
        }
        lerror(
            lua,
            format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            ),
        )
    }

    /// `json_process_value`; `slots` is the Lua stack in use below the value.
    fn value(&mut self, lua: &Lua, tok: Tok, index: usize, slots: usize) -> mlua::Result<Value> {
        Ok(match tok {
            Tok::Str(s) => bytes(lua, &s)?,
            Tok::Num(n) => num(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Tok::ObjBegin => {
                self.descend(lua, slots, 3)?;
                let t = lua.create_table()?;
                let (mut tok, mut index) = self.next();
                if tok == Tok::ObjEnd {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    let Tok::Str(key) = tok else {
                        return self.throw(lua, "object key string", &tok, index);
                    };
                    let key = lua.create_string(&key)?;
                    let (colon, ci) = self.next();
                    if colon != Tok::Colon {
                        return self.throw(lua, "colon", &colon, ci);
                    }
                    let (vt, vi) = self.next();
                    let v = self.value(lua, vt, vi, slots + 2)?;
                    t.raw_set(key, v)?;
                    let (sep, si) = self.next();
                    if sep == Tok::ObjEnd {
                        self.depth -= 1;
                        return Ok(Value::Table(t));
                    }
                    if sep != Tok::Comma {
                        return self.throw(lua, "comma or object end", &sep, si);
                    }
                    (tok, index) = self.next();
                }
            }
            Tok::ArrBegin => {
                self.descend(lua, slots, 2)?;
                let t = lua.create_table()?;
                let (mut tok, mut index) = self.next();
                if tok == Tok::ArrEnd {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                let mut i: i64 = 1;
                loop {
                    let v = self.value(lua, tok, index, slots + 1)?;
                    t.raw_set(i, v)?;
                    i += 1;
                    let (sep, si) = self.next();
                    if sep == Tok::ArrEnd {
                        self.depth -= 1;
                        return Ok(Value::Table(t));
                    }
                    if sep != Tok::Comma {
                        return self.throw(lua, "comma or array end", &sep, si);
                    }
                    (tok, index) = self.next();
                }
            }
            other => return self.throw(lua, "value", &other, index),
        })
    }
}

/// `json_decode`.
pub(super) fn json_decode(lua: &Lua, cfg: &JsonConfig, data: &[u8]) -> mlua::Result<Value> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return lerror(lua, "JSON parser does not support UTF-16 or UTF-32");
    }
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let mut p = JsonParser {
        data: &data[..end],
        pos: 0,
        cfg: *cfg,
        depth: 0,
    };
    let (tok, index) = p.next();
    let v = p.value(lua, tok, index, 1)?;
    let (tok, index) = p.next();
    if tok != Tok::End {
        return p.throw(lua, "the end", &tok, index);
    }
    Ok(v)
}
