//! What the four libraries share: the Lua C API's argument checks and errors as
//! `lauxlib.c` (Lua 5.1, in Redis 7.0.15's `deps/lua/src`) makes them, the x86-64
//! conversions the C code relies on, glibc's `strtod`, and the small builders the
//! library tables are made with.

use mlua::{Lua, MultiValue, Table, Value};

use super::super::lua_shared::PENDING;

/// Lua 5.1's `LUAI_MAXCSTACK`: the stack slots a C function may use.
pub(super) const MAXCSTACK: usize = 8000;

// ---------------------------------------------------------------------------------
// The Lua C API's argument checks and errors

/// Raises `msg` as `luaL_error` does from a C function: prefixed with the position of
/// the function that called it (`luaL_where(L, 1)`), none if that is a C function.
pub(super) fn lerror<T>(lua: &Lua, msg: impl AsRef<[u8]>) -> mlua::Result<T> {
    let mut text = where1(lua).into_bytes();
    text.extend_from_slice(msg.as_ref());
    raise_raw(lua, &text)
}

/// Raises `msg` as it is (`luaG_runerror` from inside a C function adds no position).
pub(super) fn raise_raw<T>(lua: &Lua, msg: &[u8]) -> mlua::Result<T> {
    lua.set_named_registry_value(PENDING, lua.create_string(msg)?)?;
    Err(mlua::Error::runtime(
        String::from_utf8_lossy(msg).into_owned(),
    ))
}

/// `luaL_where(L, 1)`.
pub(super) fn where1(lua: &Lua) -> String {
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
pub(super) fn argerror<T>(lua: &Lua, narg: i64, extramsg: impl AsRef<[u8]>) -> mlua::Result<T> {
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
pub(super) fn type_name(v: Option<&Value>) -> &'static str {
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
pub(super) fn typeerror<T>(lua: &Lua, args: &[Value], narg: usize, tname: &str) -> mlua::Result<T> {
    let msg = format!("{tname} expected, got {}", type_name(args.get(narg - 1)));
    argerror(lua, narg as i64, msg)
}

/// `lua_tonumber` (`None` where `lua_isnumber` is false).
pub(super) fn to_number(lua: &Lua, v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        s @ Value::String(_) => lua.coerce_number(s.clone()).ok().flatten(),
        _ => None,
    }
}

/// x86-64's `cvttsd2si` to 64 bits: NaN and out of range give `i64::MIN`.
// Public for sim's tests.
#[doc(hidden)]
pub fn d2i64(d: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// x86-64's `cvttsd2si` to 32 bits: NaN and out of range give `i32::MIN`.
// Public for sim's tests.
#[doc(hidden)]
pub fn d2i32(d: f64) -> i32 {
    if d.is_nan() || d >= 2_147_483_648.0 || d <= -2_147_483_649.0 {
        i32::MIN
    } else {
        d as i32
    }
}

/// What gcc emits on x86-64 for a `double` to `unsigned long` cast.
// Public for sim's tests.
#[doc(hidden)]
pub fn d2u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO63 {
        (d2i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        d2i64(d) as u64
    }
}

/// `luaL_checknumber`.
pub(super) fn check_number(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<f64> {
    match to_number(lua, args.get(narg - 1)) {
        Some(n) => Ok(n),
        None => typeerror(lua, args, narg, "number"),
    }
}

/// `luaL_checkinteger` (`lua_Integer` is `ptrdiff_t`).
pub(super) fn check_integer(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<i64> {
    check_number(lua, args, narg).map(d2i64)
}

/// `luaL_optinteger`.
pub(super) fn opt_integer(
    lua: &Lua,
    args: &[Value],
    narg: usize,
    default: i64,
) -> mlua::Result<i64> {
    match args.get(narg - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, narg),
    }
}

/// `luaL_checklstring` (numbers convert as Lua converts them, with `%.14g`).
pub(super) fn check_bytes(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<Vec<u8>> {
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
pub(super) fn check_cstr(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<Vec<u8>> {
    let mut s = check_bytes(lua, args, narg)?;
    if let Some(nul) = s.iter().position(|&b| b == 0) {
        s.truncate(nul);
    }
    Ok(s)
}

/// `luaL_checkstack`'s failure (`lua_checkstack` refuses past `LUAI_MAXCSTACK`).
pub(super) fn check_stack(lua: &Lua, used: usize, size: usize, msg: &str) -> mlua::Result<()> {
    if size > MAXCSTACK || used + size > MAXCSTACK {
        return lerror(lua, format!("stack overflow ({msg})"));
    }
    Ok(())
}

pub(super) fn num(n: f64) -> Value {
    Value::Number(n)
}

pub(super) fn bytes(lua: &Lua, b: &[u8]) -> mlua::Result<Value> {
    Ok(Value::String(lua.create_string(b)?))
}

/// A Lua number as the C code reads it (`lua_tonumber` of a `LUA_TNUMBER`).
pub(super) fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

pub(super) fn add(
    lua: &Lua,
    t: &Table,
    name: &str,
    f: impl Fn(&Lua, Vec<Value>) -> mlua::Result<MultiValue> + Send + 'static,
) -> mlua::Result<()> {
    let func =
        lua.create_function(move |lua, args: MultiValue| f(lua, args.into_iter().collect()))?;
    t.raw_set(name, func)
}

pub(super) fn one(v: Value) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_iter([v]))
}

/// A hex digit's value.
pub(super) fn hexval(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

/// glibc's `strtod` in the C locale on a string with no leading white space: the
/// value and how many bytes it used, or `None` if no number starts here.
// Public for sim's tests.
#[doc(hidden)]
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
pub(super) fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
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
pub(super) fn compose(mant: u64, sticky: bool, exp: i64) -> f64 {
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
pub(super) fn ldexp(mut x: f64, mut n: i64) -> f64 {
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
