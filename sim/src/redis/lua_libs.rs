//! The four libraries Redis 7.0 gives every script besides Lua's own: `cjson` (Lua
//! CJSON 2.1.0), `cmsgpack` (lua-cmsgpack 0.4.0), `bit` (LuaBitOp 1.0.2) and `struct`
//! (Roberto Ierusalimschy's struct library), written in Rust after their C sources in
//! Redis 7.0.15's `deps/lua/src`, to answer exactly as they do: same values, same
//! number formatting, same error texts and positions (what `luaL_error` and
//! `luaL_argerror` produce, including the function name Lua's debug info gives).
//!
//! Where the C code relies on x86-64 behaviour (out-of-range `double` to integer
//! casts, shift counts of 64 and more), the model does what that machine code does.
//! The C libraries push values on the Lua stack and fail when it reaches
//! `LUAI_MAXCSTACK` (8000 slots); the model counts the slots the C code would use and
//! fails at the same point with the same message.
//!
//! Deviations (documented in `engine/mod.rs`): the library tables are read-only
//! proxies, as `math` and `string` are, so `pairs(cjson)` sees an empty table;
//! `cjson.decode` and `cjson.encode` nested deeper than [`MODEL_MAX_NESTING`] (only
//! reachable after raising `decode_max_depth` / `encode_max_depth`) stop there.

use std::sync::{Arc, Mutex};

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::lua::{PENDING, fmt_g};

/// Lua 5.1's `LUAI_MAXCSTACK`: the stack slots a C function may use.
const MAXCSTACK: usize = 8000;

/// Nesting at which the model's recursive encoders and decoders stop (every open level
/// holds an mlua reference, and mlua's reference stack is bounded by the same Lua
/// limit, and their Rust recursion is bounded by a thread's stack). It is also the
/// default of both cjson limits; Redis, with a limit raised, goes on to its own Lua
/// stack limit (between about 2700 and 8000 levels).
pub const MODEL_MAX_NESTING: usize = 1000;

// ---------------------------------------------------------------------------------
// The Lua C API's argument checks and errors

/// Raises `msg` as `luaL_error` does from a C function: prefixed with the position of
/// the function that called it (`luaL_where(L, 1)`), none if that is a C function.
fn lerror<T>(lua: &Lua, msg: impl AsRef<[u8]>) -> mlua::Result<T> {
    let mut text = where1(lua).into_bytes();
    text.extend_from_slice(msg.as_ref());
    raise_raw(lua, &text)
}

/// Raises `msg` as it is (`luaG_runerror` from inside a C function adds no position).
fn raise_raw<T>(lua: &Lua, msg: &[u8]) -> mlua::Result<T> {
    lua.set_named_registry_value(PENDING, lua.create_string(msg)?)?;
    Err(mlua::Error::runtime(
        String::from_utf8_lossy(msg).into_owned(),
    ))
}

/// `luaL_where(L, 1)`.
fn where1(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| match d.current_line() {
        Some(line) if line > 0 => {
            let src = d
                .source()
                .short_src
                .map(|s| s.into_owned())
                .unwrap_or_default();
            format!("{src}:{line}: ")
        }
        _ => String::new(),
    })
    .unwrap_or_default()
}

/// `luaL_argerror`: names the running function as Lua's debug info does.
fn argerror<T>(lua: &Lua, narg: i64, extramsg: impl AsRef<[u8]>) -> mlua::Result<T> {
    let (name, method) = lua
        .inspect_stack(0, |d| {
            let n = d.names();
            (
                n.name.map(|s| s.into_owned()),
                n.name_what == Some("method"),
            )
        })
        .unwrap_or((None, false));
    let extramsg = extramsg.as_ref();
    let mut narg = narg;
    let name = name.unwrap_or_else(|| "?".into());
    if method {
        narg -= 1;
        if narg == 0 {
            let mut m = format!("calling '{name}' on bad self (").into_bytes();
            m.extend_from_slice(extramsg);
            m.push(b')');
            return lerror(lua, m);
        }
    }
    let mut m = format!("bad argument #{narg} to '{name}' (").into_bytes();
    m.extend_from_slice(extramsg);
    m.push(b')');
    lerror(lua, m)
}

/// `lua_typename(lua_type(v))`; `None` is an absent argument.
fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_)) | Some(Value::UserData(_)) => "userdata",
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `luaL_typerror`.
fn typeerror<T>(lua: &Lua, args: &[Value], narg: usize, tname: &str) -> mlua::Result<T> {
    let msg = format!("{tname} expected, got {}", type_name(args.get(narg - 1)));
    argerror(lua, narg as i64, msg)
}

/// `lua_tonumber` (`None` where `lua_isnumber` is false).
fn to_number(lua: &Lua, v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        s @ Value::String(_) => lua.coerce_number(s.clone()).ok().flatten(),
        _ => None,
    }
}

/// x86-64's `cvttsd2si` to 64 bits: NaN and out of range give `i64::MIN`.
fn d2i64(d: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// x86-64's `cvttsd2si` to 32 bits: NaN and out of range give `i32::MIN`.
fn d2i32(d: f64) -> i32 {
    if d.is_nan() || d >= 2_147_483_648.0 || d <= -2_147_483_649.0 {
        i32::MIN
    } else {
        d as i32
    }
}

/// What gcc emits on x86-64 for a `double` to `unsigned long` cast.
fn d2u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO63 {
        (d2i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        d2i64(d) as u64
    }
}

/// `luaL_checknumber`.
fn check_number(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<f64> {
    match to_number(lua, args.get(narg - 1)) {
        Some(n) => Ok(n),
        None => typeerror(lua, args, narg, "number"),
    }
}

/// `luaL_checkinteger` (`lua_Integer` is `ptrdiff_t`).
fn check_integer(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<i64> {
    check_number(lua, args, narg).map(d2i64)
}

/// `luaL_optinteger`.
fn opt_integer(lua: &Lua, args: &[Value], narg: usize, default: i64) -> mlua::Result<i64> {
    match args.get(narg - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, narg),
    }
}

/// `luaL_checklstring` (numbers convert as Lua converts them, with `%.14g`).
fn check_bytes(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<Vec<u8>> {
    match args.get(narg - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v.clone()) {
            Ok(Some(s)) => Ok(s.as_bytes().to_vec()),
            _ => typeerror(lua, args, narg, "string"),
        },
        _ => typeerror(lua, args, narg, "string"),
    }
}

/// `luaL_checkstring` as C code reads it: up to the first NUL.
fn check_cstr(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<Vec<u8>> {
    let mut s = check_bytes(lua, args, narg)?;
    if let Some(nul) = s.iter().position(|&b| b == 0) {
        s.truncate(nul);
    }
    Ok(s)
}

/// `luaL_checkstack`'s failure (`lua_checkstack` refuses past `LUAI_MAXCSTACK`).
fn check_stack(lua: &Lua, used: usize, size: usize, msg: &str) -> mlua::Result<()> {
    if size > MAXCSTACK || used + size > MAXCSTACK {
        return lerror(lua, format!("stack overflow ({msg})"));
    }
    Ok(())
}

fn num(n: f64) -> Value {
    Value::Number(n)
}

fn bytes(lua: &Lua, b: &[u8]) -> mlua::Result<Value> {
    Ok(Value::String(lua.create_string(b)?))
}

/// A Lua number as the C code reads it (`lua_tonumber` of a `LUA_TNUMBER`).
fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// Every library, as a table of tables, and the handle on `cjson`'s settings (which
/// `SCRIPT FLUSH` resets, as Redis's fresh Lua state does).
pub struct Libs {
    pub tables: Table,
    pub json: Arc<Mutex<JsonConfig>>,
}

/// Builds `cjson`, `cmsgpack`, `bit` and `struct`.
pub fn create(lua: &Lua) -> mlua::Result<Libs> {
    let tables = lua.create_table()?;
    let json = Arc::new(Mutex::new(JsonConfig::default()));
    tables.raw_set("cjson", cjson_table(lua, json.clone())?)?;
    tables.raw_set("cmsgpack", cmsgpack_table(lua)?)?;
    tables.raw_set("bit", bit_table(lua)?)?;
    tables.raw_set("struct", struct_table(lua)?)?;
    Ok(Libs { tables, json })
}

fn add(
    lua: &Lua,
    t: &Table,
    name: &str,
    f: impl Fn(&Lua, Vec<Value>) -> mlua::Result<MultiValue> + Send + 'static,
) -> mlua::Result<()> {
    let func =
        lua.create_function(move |lua, args: MultiValue| f(lua, args.into_iter().collect()))?;
    t.raw_set(name, func)
}

fn one(v: Value) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_iter([v]))
}

// ---------------------------------------------------------------------------------
// cjson

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

type Shared = Arc<Mutex<JsonConfig>>;

fn cfg_of(shared: &Shared) -> JsonConfig {
    *shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn cfg_update(shared: &Shared, f: impl FnOnce(&mut JsonConfig)) {
    f(&mut shared.lock().unwrap_or_else(|e| e.into_inner()));
}

/// A `cjson` module table whose functions share one configuration (`cjson.new()`
/// makes another).
fn cjson_table(lua: &Lua, cfg: Shared) -> mlua::Result<Table> {
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
fn arg_init(lua: &Lua, args: &[Value], n: usize) -> mlua::Result<()> {
    if args.len() > n {
        return argerror(lua, n as i64 + 1, "found too many arguments");
    }
    Ok(())
}

/// `json_integer_option`.
fn integer_option(
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
fn enum_option(
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

fn json_escape(s: &[u8], out: &mut Vec<u8>) {
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

fn encode_exception<T>(lua: &Lua, type_name: &str, reason: &str) -> mlua::Result<T> {
    lerror(lua, format!("Cannot serialise {type_name}: {reason}"))
}

/// `json_append_number`.
fn json_number(lua: &Lua, cfg: &JsonConfig, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
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
fn json_array_length(lua: &Lua, cfg: &JsonConfig, t: &Table) -> mlua::Result<Option<i32>> {
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
fn json_append(
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
enum Tok {
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

struct JsonParser<'a> {
    /// The input up to its first NUL (the C parser stops there).
    data: &'a [u8],
    pos: usize,
    cfg: JsonConfig,
    depth: i32,
}

fn hexval(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
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
fn json_decode(lua: &Lua, cfg: &JsonConfig, data: &[u8]) -> mlua::Result<Value> {
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

/// glibc's `strtod` in the C locale on a string with no leading white space: the
/// value and how many bytes it used, or `None` if no number starts here.
pub fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let neg = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let word =
        |i: usize, w: &[u8]| s.len() >= i + w.len() && s[i..i + w.len()].eq_ignore_ascii_case(w);
    if word(i, b"inf") {
        let used = if word(i, b"infinity") { i + 8 } else { i + 3 };
        return Some((sign(f64::INFINITY), used));
    }
    if word(i, b"nan") {
        let mut used = i + 3;
        if at(used) == b'(' {
            let mut j = used + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                used = j + 1;
            }
        }
        return Some((sign(f64::NAN), used));
    }
    if at(i) == b'0' && at(i + 1) | 0x20 == b'x' {
        if let Some((v, used)) = hex_float(&s[i + 2..]) {
            return Some((sign(v), i + 2 + used));
        }
        // "0x" with no hex digit after it: the number is the "0".
        return Some((sign(0.0), i + 1));
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    let mut end = i;
    if at(i) | 0x20 == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            end = j;
        }
    }
    let text = std::str::from_utf8(&s[start..end]).ok()?;
    let mut t = text.to_string();
    if t.starts_with('.') {
        t.insert(0, '0');
    }
    let v: f64 = t.replace(".e", ".0e").replace(".E", ".0E").parse().ok()?;
    Some((sign(v), end))
}

/// The digits of a hexadecimal float after `0x`: value and bytes used, `None` if
/// there is no hex digit.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut seen_point = false;
    loop {
        let c = at(i);
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = hexval(c) else { break };
        digits += 1;
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(d);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    let mut end = i;
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let neg = match at(j) {
            b'-' => {
                j += 1;
                true
            }
            b'+' => {
                j += 1;
                false
            }
            _ => false,
        };
        if at(j).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(1 << 40);
                j += 1;
            }
            exp += if neg { -e } else { e };
            end = j;
        }
    }
    Some((compose(mant, sticky, exp), end))
}

/// `(mant + sticky) * 2^exp`, rounded to nearest even as strtod does.
fn compose(mant: u64, sticky: bool, exp: i64) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    // Normalise: the top bit at 63; value = m * 2^(e - 63).
    let lz = mant.leading_zeros();
    let m = mant << lz;
    let e = exp - i64::from(lz) + 63; // the value's binary exponent (of its top bit)
    if e > 1023 {
        return f64::INFINITY;
    }
    // Bits of precision available: 53 for normals, fewer for subnormals.
    let prec: i64 = if e >= -1022 { 53 } else { 53 - (-1022 - e) };
    if prec <= 0 {
        // Below half the smallest subnormal, or exactly/above half of it.
        if prec == 0 && (m > 1 << 63 || (m == 1 << 63 && sticky)) {
            return f64::from_bits(1);
        }
        return 0.0;
    }
    let drop = 64 - prec as u32;
    let mut kept = m >> drop;
    let rest = m & ((1u64 << drop) - 1);
    let half = 1u64 << (drop - 1);
    if rest > half || (rest == half && (sticky || kept & 1 == 1)) {
        kept += 1;
    }
    ldexp(kept as f64, e - prec + 1)
}

/// `x * 2^n`, exact while the result is representable.
fn ldexp(mut x: f64, mut n: i64) -> f64 {
    let pow2 = |k: i64| f64::from_bits(((k + 1023) as u64) << 52);
    while n > 1023 {
        x *= pow2(1023);
        n -= 1023;
    }
    while n < -1022 {
        x *= pow2(-1022);
        n += 1022;
    }
    x * pow2(n)
}

// ---------------------------------------------------------------------------------
// cmsgpack

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`.
const MP_MAX_NESTING: i32 = 16;

fn cmsgpack_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add(lua, &t, "pack", |lua, args| {
        if args.is_empty() {
            return argerror(lua, 0, "MessagePack pack needs input.");
        }
        let mut buf = Vec::new();
        for a in &args {
            mp_encode(a, &mut buf, 0)?;
        }
        one(bytes(lua, &buf)?)
    })?;
    add(lua, &t, "unpack", |lua, args| {
        let n = args.len();
        mp_unpack_full(lua, &args, 0, 0, n)
    })?;
    add(lua, &t, "unpack_one", |lua, args| {
        let offset = opt_integer(lua, &args, 2, 0)?;
        mp_unpack_full(lua, &args, 1, offset, 1)
    })?;
    add(lua, &t, "unpack_limit", |lua, args| {
        let limit = check_integer(lua, &args, 2)?;
        let offset = opt_integer(lua, &args, 3, 0)?;
        mp_unpack_full(lua, &args, limit, offset, 1)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn mp_int(buf: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            buf.push(n as u8);
        } else if n <= 0xff {
            buf.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            buf.push(0xcd);
            buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            buf.push(0xce);
            buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            buf.push(0xcf);
            buf.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        buf.push(n as i8 as u8);
    } else if n >= -128 {
        buf.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        buf.push(0xd1);
        buf.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        buf.push(0xd2);
        buf.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_number(buf: &mut Vec<u8>, n: f64) {
    // IS_INT64_EQUIVALENT: !isinf(x) && (int64_t)x == x.
    if !n.is_infinite() && d2i64(n) as f64 == n {
        mp_int(buf, d2i64(n));
        return;
    }
    let f = n as f32;
    if f64::from(f) == n {
        buf.push(0xca);
        buf.extend_from_slice(&f.to_be_bytes());
    } else {
        buf.push(0xcb);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_len_header(buf: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        buf.push(fix | n as u8);
    } else if n <= 0xffff {
        buf.push(b16);
        buf.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        buf.push(b32);
        buf.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `table_is_an_array`: keys exactly 1..n.
fn mp_is_array(t: &Table) -> mlua::Result<bool> {
    let mut count: i32 = 0;
    let mut max: i32 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number_of(&k) {
            // IS_INT_EQUIVALENT: !isinf(x) && (int)x == x.
            Some(n) if n > 0.0 && !n.is_infinite() && f64::from(d2i32(n)) == n => {
                max = max.max(d2i32(n));
                count = count.wrapping_add(1);
            }
            _ => return Ok(false),
        }
    }
    Ok(max == count)
}

fn mp_encode(v: &Value, buf: &mut Vec<u8>, level: i32) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let s = s.as_bytes();
            let n = s.len();
            if n < 32 {
                buf.push(0xa0 | n as u8);
            } else if n <= 0xff {
                buf.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                buf.push(0xda);
                buf.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                buf.push(0xdb);
                buf.extend_from_slice(&(n as u32).to_be_bytes());
            }
            buf.extend_from_slice(&s);
        }
        Value::Boolean(b) => buf.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => mp_number(buf, number_of(v).unwrap_or_default()),
        Value::Table(t) if level < MP_MAX_NESTING => {
            if mp_is_array(t)? {
                let len = t.raw_len();
                mp_len_header(buf, len, 0x90, 0xdc, 0xdd);
                for j in 1..=len {
                    let item: Value = t.get(j)?;
                    mp_encode(&item, buf, level + 1)?;
                }
            } else {
                // Counted first, then walked again (as the C code does): holding every
                // key and value at once would need an mlua reference each.
                let mut n = 0;
                for pair in t.pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                mp_len_header(buf, n, 0x80, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    mp_encode(&k, buf, level + 1)?;
                    mp_encode(&val, buf, level + 1)?;
                }
            }
        }
        _ => buf.push(0xc0),
    }
    Ok(())
}

enum MpErr {
    Eof,
    BadFmt,
    Lua(mlua::Error),
}

impl From<mlua::Error> for MpErr {
    fn from(e: mlua::Error) -> Self {
        MpErr::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<(), MpErr> {
        if self.left() < n {
            Err(MpErr::Eof)
        } else {
            Ok(())
        }
    }

    /// Bytes `from..from+n` after the cursor (the caller checked `need`).
    fn be(&self, from: usize, n: usize) -> u64 {
        self.data[self.pos + from..self.pos + from + n]
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b))
    }
}

/// `lua_settable` on a fresh table (no metatable): `nil` and NaN keys are errors.
fn mp_settable(lua: &Lua, t: &Table, k: Value, v: Value) -> Result<(), MpErr> {
    match &k {
        Value::Nil => raise_raw(lua, b"table index is nil")?,
        Value::Number(n) if n.is_nan() => raise_raw(lua, b"table index is NaN")?,
        _ => {}
    }
    t.raw_set(k, v)?;
    Ok(())
}

/// A table being filled by [`mp_decode`].
enum MpFrame {
    Array {
        t: Table,
        len: usize,
        done: usize,
    },
    Map {
        t: Table,
        len: usize,
        done: usize,
        key: Option<Value>,
    },
}

/// What one MessagePack header gives: a value, or a table still to fill.
enum MpItem {
    Value(Value),
    Open(MpFrame),
}

/// `mp_decode_to_lua_type` for one object (iterative, so deep input cannot overflow
/// the Rust stack); `slots` is the Lua stack in use (from the function's base) as the
/// C code would have it, which fails where the C code fails.
fn mp_decode(lua: &Lua, c: &mut Cursor, mut slots: usize) -> Result<Value, MpErr> {
    let mut stack: Vec<MpFrame> = Vec::new();
    loop {
        let mut v = match mp_decode_one(lua, c, slots)? {
            MpItem::Value(v) => v,
            MpItem::Open(frame) => {
                // Array: the table and the index pushed; map: the table.
                slots += if matches!(frame, MpFrame::Array { .. }) {
                    2
                } else {
                    1
                };
                stack.push(frame);
                continue;
            }
        };
        // Hand the value to the tables it completes.
        loop {
            match stack.last_mut() {
                None => return Ok(v),
                Some(MpFrame::Array { t, len, done }) => {
                    *done += 1;
                    mp_settable(lua, t, num(*done as f64), v)?;
                    if *done < *len {
                        break;
                    }
                    slots -= 2;
                }
                Some(MpFrame::Map { t, len, done, key }) => match key.take() {
                    None => {
                        *key = Some(v);
                        slots += 1;
                        break;
                    }
                    Some(k) => {
                        mp_settable(lua, t, k, v)?;
                        slots -= 1;
                        *done += 1;
                        if *done < *len {
                            break;
                        }
                        slots -= 1;
                    }
                },
            }
            v = match stack.pop() {
                Some(MpFrame::Array { t, .. } | MpFrame::Map { t, .. }) => Value::Table(t),
                None => unreachable!("a frame was on the stack"),
            };
        }
    }
}

/// One MessagePack header at the cursor.
fn mp_decode_one(lua: &Lua, c: &mut Cursor, slots: usize) -> Result<MpItem, MpErr> {
    c.need(1)?;
    check_stack(
        lua,
        slots,
        1,
        "too many return values at once; use unpack_one or unpack_limit instead.",
    )?;
    let b0 = c.data[c.pos];
    let v = match b0 {
        // uint 8/16/32 (0xcc..=0xce) and int 8/16/32 (0xd0..=0xd2): 1 << (b0 & 3) bytes.
        0xcc..=0xce | 0xd0..=0xd2 => {
            let n = 1usize << (b0 & 3);
            c.need(1 + n)?;
            let raw = c.be(1, n);
            c.pos += 1 + n;
            if b0 >= 0xd0 {
                // Sign-extend the n-byte value.
                let shift = 64 - 8 * n as u32;
                num((((raw << shift) as i64) >> shift) as f64)
            } else {
                num(raw as f64)
            }
        }
        // lua_pushunsigned is lua_pushinteger on 64 bits: above i64::MAX wraps.
        0xcf | 0xd3 => {
            c.need(9)?;
            let v = c.be(1, 8) as i64;
            c.pos += 9;
            num(v as f64)
        }
        0xc0 => {
            c.pos += 1;
            Value::Nil
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Value::Boolean(b0 == 0xc3)
        }
        0xca => {
            c.need(5)?;
            let v = f32::from_bits(c.be(1, 4) as u32);
            c.pos += 5;
            num(f64::from(v))
        }
        0xcb => {
            c.need(9)?;
            let v = f64::from_bits(c.be(1, 8));
            c.pos += 9;
            num(v)
        }
        0xd9 | 0xda => {
            let h = if b0 == 0xd9 { 1 } else { 2 };
            c.need(1 + h)?;
            let l = c.be(1, h) as usize;
            c.need(1 + h + l)?;
            let s = &c.data[c.pos + 1 + h..c.pos + 1 + h + l];
            c.pos += 1 + h + l;
            bytes(lua, s)?
        }
        0xdb => {
            c.need(5)?;
            let l = c.be(1, 4) as usize;
            c.pos += 5;
            c.need(l)?;
            let s = &c.data[c.pos..c.pos + l];
            c.pos += l;
            bytes(lua, s)?
        }
        0xdc..=0xdf => {
            let h = if b0 == 0xdc || b0 == 0xde { 2 } else { 4 };
            c.need(1 + h)?;
            let l = c.be(1, h) as usize;
            c.pos += 1 + h;
            return mp_open(lua, b0 <= 0xdd, l, slots);
        }
        _ if b0 & 0x80 == 0 => {
            c.pos += 1;
            num(f64::from(b0))
        }
        _ if b0 & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(f64::from(b0 as i8))
        }
        _ if b0 & 0xe0 == 0xa0 => {
            let l = usize::from(b0 & 0x1f);
            c.need(1 + l)?;
            let s = &c.data[c.pos + 1..c.pos + 1 + l];
            c.pos += 1 + l;
            bytes(lua, s)?
        }
        _ if b0 & 0xf0 == 0x90 || b0 & 0xf0 == 0x80 => {
            c.pos += 1;
            return mp_open(lua, b0 & 0xf0 == 0x90, usize::from(b0 & 0xf), slots);
        }
        _ => return Err(MpErr::BadFmt),
    };
    Ok(MpItem::Value(v))
}

/// A new table for an array or map of `len` items (complete at once if empty).
fn mp_open(lua: &Lua, array: bool, len: usize, slots: usize) -> Result<MpItem, MpErr> {
    let t = lua.create_table()?;
    if array {
        check_stack(lua, slots + 1, 1, "in function mp_decode_to_lua_array")?;
    }
    if len == 0 {
        return Ok(MpItem::Value(Value::Table(t)));
    }
    Ok(MpItem::Open(if array {
        MpFrame::Array { t, len, done: 0 }
    } else {
        MpFrame::Map {
            t,
            len,
            done: 0,
            key: None,
        }
    }))
}

/// `mp_unpack_full`; `base` is the number of arguments left on the C stack.
fn mp_unpack_full(
    lua: &Lua,
    args: &[Value],
    limit: i64,
    offset: i64,
    base: usize,
) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    let s = check_bytes(lua, args, 1)?;
    let len = s.len();
    if offset < 0 || limit < 0 {
        return lerror(
            lua,
            format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as i32, len as i32
            ),
        );
    }
    if offset as u64 > len as u64 {
        return lerror(
            lua,
            format!(
                "Start offset {} greater than input length {}.",
                offset as i32, len as i32
            ),
        );
    }
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut c = Cursor {
        data: &s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    while c.left() > 0 && (out.len() as i64) < limit {
        match mp_decode(lua, &mut c, base + out.len()) {
            Ok(v) => out.push(v),
            Err(MpErr::Eof) => return lerror(lua, "Missing bytes in input."),
            Err(MpErr::BadFmt) => return lerror(lua, "Bad data format in input."),
            Err(MpErr::Lua(e)) => return Err(e),
        }
    }
    if !decode_all {
        check_stack(lua, base + out.len(), 1, "in function mp_unpack_full")?;
        let next = if c.left() == 0 { -1.0 } else { c.pos as f64 };
        out.insert(0, num(next));
    }
    Ok(MultiValue::from_iter(out))
}

// ---------------------------------------------------------------------------------
// bit (LuaBitOp)

/// `barg`: the number's low 32 bits after adding 2^52 + 2^51 (rounding to nearest).
fn barg(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<u32> {
    let n = to_number(lua, args.get(narg - 1));
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        return typeerror(lua, args, narg, "number");
    }
    Ok(b)
}

fn bret(b: u32) -> mlua::Result<MultiValue> {
    one(num(f64::from(b as i32)))
}

fn bit_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add(lua, &t, "tobit", |lua, a| bret(barg(lua, &a, 1)?))?;
    add(lua, &t, "bnot", |lua, a| bret(!barg(lua, &a, 1)?))?;
    type Op = fn(u32, u32) -> u32;
    let ops: [(&str, Op); 3] = [
        ("band", |x, y| x & y),
        ("bor", |x, y| x | y),
        ("bxor", |x, y| x ^ y),
    ];
    for (name, op) in ops {
        add(lua, &t, name, move |lua, a| {
            let mut b = barg(lua, &a, 1)?;
            for i in (2..=a.len()).rev() {
                b = op(b, barg(lua, &a, i)?);
            }
            bret(b)
        })?;
    }
    let shifts: [(&str, Op); 5] = [
        ("lshift", |b, n| b << n),
        ("rshift", |b, n| b >> n),
        ("arshift", |b, n| ((b as i32) >> n) as u32),
        ("rol", |b, n| b.rotate_left(n)),
        ("ror", |b, n| b.rotate_right(n)),
    ];
    for (name, op) in shifts {
        add(lua, &t, name, move |lua, a| {
            let b = barg(lua, &a, 1)?;
            let n = barg(lua, &a, 2)? & 31;
            bret(op(b, n))
        })?;
    }
    add(lua, &t, "bswap", |lua, a| {
        bret(barg(lua, &a, 1)?.swap_bytes())
    })?;
    add(lua, &t, "tohex", |lua, a| {
        let mut b = barg(lua, &a, 1)?;
        let mut n = if a.len() < 2 {
            8
        } else {
            barg(lua, &a, 2)? as i32
        };
        let mut digits = b"0123456789abcdef";
        if n < 0 {
            n = n.wrapping_neg();
            digits = b"0123456789ABCDEF";
        }
        let n = n.clamp(0, 8) as usize;
        let mut buf = vec![0u8; n];
        for slot in buf.iter_mut().rev() {
            *slot = digits[(b & 15) as usize];
            b >>= 4;
        }
        one(bytes(lua, &buf)?)
    })?;
    Ok(t)
}

// ---------------------------------------------------------------------------------
// struct

/// `MAXINTSIZE`.
const MAXINTSIZE: usize = 32;
/// `MAXALIGN` on x86-64 (a double's alignment).
const MAXALIGN: i64 = 8;

struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }

    /// `getnum`.
    fn getnum(&mut self, lua: &Lua, df: i64) -> mlua::Result<i64> {
        if !self.peek().is_ascii_digit() {
            return Ok(df);
        }
        let mut a: i64 = 0;
        while self.peek().is_ascii_digit() {
            let d = i64::from(self.peek() - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return lerror(lua, "integral size overflow");
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }

    /// `optsize`.
    fn optsize(&mut self, lua: &Lua, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.getnum(lua, 1)? as usize,
            b'i' | b'I' => {
                let sz = self.getnum(lua, 4)?;
                if sz > MAXINTSIZE as i64 {
                    return lerror(
                        lua,
                        format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                    );
                }
                sz as usize
            }
            _ => 0,
        })
    }
}

struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            little: true,
            align: 1,
        }
    }

    /// `gettoalign`.
    fn toalign(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
    }

    /// `controloptions`.
    fn control(&mut self, lua: &Lua, opt: u8, fmt: &mut Fmt) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' => self.little = true,
            b'!' => {
                let a = fmt.getnum(lua, MAXALIGN)?;
                if !(a > 0 && a & (a - 1) == 0) {
                    return lerror(lua, format!("alignment {a} is not a power of 2"));
                }
                self.align = a as usize;
            }
            _ => {
                let mut m = b"invalid format option '".to_vec();
                m.push(opt);
                m.push(b'\'');
                return argerror(lua, 1, m);
            }
        }
        Ok(())
    }
}

fn struct_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add(lua, &t, "pack", struct_pack)?;
    add(lua, &t, "unpack", struct_unpack)?;
    add(lua, &t, "size", struct_size)?;
    Ok(t)
}

fn struct_pack(lua: &Lua, mut args: Vec<Value>) -> mlua::Result<MultiValue> {
    let fmt_s = check_cstr(lua, &args, 1)?;
    // `b_pack` pushes a nil after its arguments (to separate them from its buffer): an
    // argument missing there is "nil", not "no value".
    args.push(Value::Nil);
    let mut fmt = Fmt { s: &fmt_s, i: 0 };
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut total: usize = 0;
    while fmt.i < fmt.s.len() {
        let opt = fmt.s[fmt.i];
        fmt.i += 1;
        let mut size = fmt.optsize(lua, opt)?;
        let toalign = h.toalign(total, opt, size);
        total = total.wrapping_add(toalign);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg)?;
                arg += 1;
                let mut value = if n < 0.0 { d2i64(n) as u64 } else { d2u64(n) };
                let mut buf = vec![0u8; size];
                for b in buf.iter_mut() {
                    *b = value as u8;
                    value >>= 8;
                }
                if !h.little {
                    buf.reverse();
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                });
            }
            b'd' => {
                let d = check_number(lua, &args, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, &args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return argerror(lua, arg as i64, "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => h.control(lua, opt, &mut fmt)?,
        }
        total = total.wrapping_add(size);
    }
    one(bytes(lua, &out)?)
}

/// `getinteger`.
fn struct_getinteger(b: &[u8], little: bool, signed: bool, size: usize) -> f64 {
    let mut l: u64 = 0;
    let mut push = |x: u8| l = (l << 8) | u64::from(x);
    if little {
        b[..size].iter().rev().for_each(|&x| push(x));
    } else {
        b[..size].iter().for_each(|&x| push(x));
    }
    if !signed {
        return l as f64;
    }
    // x86-64 masks the shift count to 6 bits.
    let mask = u64::MAX << ((size * 8).wrapping_sub(1) & 63);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn struct_unpack(lua: &Lua, args: Vec<Value>) -> mlua::Result<MultiValue> {
    let fmt_s = check_cstr(lua, &args, 1)?;
    let data = check_bytes(lua, &args, 2)?;
    let ld = data.len();
    let mut pos = opt_integer(lua, &args, 3, 1)? as u64 as usize;
    if pos == 0 {
        return argerror(lua, 3, "offset must be 1 or greater");
    }
    pos = pos.wrapping_sub(1);
    let mut fmt = Fmt { s: &fmt_s, i: 0 };
    let mut h = Header::new();
    let mut out: Vec<Value> = Vec::new();
    let too_short = |size: usize, pos: usize| !(size <= ld && pos <= ld - size);
    while fmt.i < fmt.s.len() {
        let opt = fmt.s[fmt.i];
        fmt.i += 1;
        let mut size = fmt.optsize(lua, opt)?;
        pos = pos.wrapping_add(h.toalign(pos, opt, size));
        if too_short(size, pos) {
            return argerror(lua, 2, "data string too short");
        }
        check_stack(lua, args.len() + out.len(), 2, "too many results")?;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(num(struct_getinteger(&data[pos..], h.little, signed, size)));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(num(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                out.push(num(if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                }));
            }
            b'c' => {
                if size == 0 {
                    let prev = out.last().and_then(|v| to_number(lua, Some(v)));
                    let Some(prev) = prev else {
                        return lerror(lua, "format 'c0' needs a previous size");
                    };
                    size = d2u64(prev) as usize;
                    out.pop();
                    if too_short(size, pos) {
                        return argerror(lua, 2, "data string too short");
                    }
                }
                out.push(bytes(lua, &data[pos..pos + size])?);
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&b| b == 0) else {
                    return lerror(lua, "unfinished string in data");
                };
                size = e + 1;
                out.push(bytes(lua, &data[pos..pos + e])?);
            }
            _ => h.control(lua, opt, &mut fmt)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(num(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(out))
}

fn struct_size(lua: &Lua, args: Vec<Value>) -> mlua::Result<MultiValue> {
    let fmt_s = check_cstr(lua, &args, 1)?;
    let mut fmt = Fmt { s: &fmt_s, i: 0 };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while fmt.i < fmt.s.len() {
        let opt = fmt.s[fmt.i];
        fmt.i += 1;
        let size = fmt.optsize(lua, opt)?;
        pos = pos.wrapping_add(h.toalign(pos, opt, size));
        if opt == b's' {
            return argerror(lua, 1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return argerror(lua, 1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            h.control(lua, opt, &mut fmt)?;
        }
        pos = pos.wrapping_add(size);
    }
    one(num(pos as i64 as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
