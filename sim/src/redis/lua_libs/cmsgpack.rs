//! `cmsgpack`: lua-cmsgpack 0.4.0 (`deps/lua/src/lua_cmsgpack.c` in Redis 7.0.15).

use mlua::{Lua, MultiValue, Table, Value};

use super::helpers::{
    add, argerror, bytes, check_bytes, check_integer, check_stack, d2i32, d2i64, lerror, num,
    number_of, one, opt_integer, raise_raw,
};

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`.
pub(super) const MP_MAX_NESTING: i32 = 16;

pub(super) fn cmsgpack_table(lua: &Lua) -> mlua::Result<Table> {
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

pub(super) fn mp_int(buf: &mut Vec<u8>, n: i64) {
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

pub(super) fn mp_number(buf: &mut Vec<u8>, n: f64) {
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

pub(super) fn mp_len_header(buf: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
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
pub(super) fn mp_is_array(t: &Table) -> mlua::Result<bool> {
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

pub(super) fn mp_encode(v: &Value, buf: &mut Vec<u8>, level: i32) -> mlua::Result<()> {
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

pub(super) enum MpErr {
    Eof,
    BadFmt,
    Lua(mlua::Error),
}

impl From<mlua::Error> for MpErr {
    fn from(e: mlua::Error) -> Self {
        MpErr::Lua(e)
    }
}

pub(super) struct Cursor<'a> {
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
pub(super) fn mp_settable(lua: &Lua, t: &Table, k: Value, v: Value) -> Result<(), MpErr> {
    match &k {
        Value::Nil => raise_raw(lua, b"table index is nil")?,
        Value::Number(n) if n.is_nan() => raise_raw(lua, b"table index is NaN")?,
        _ => {}
    }
    t.raw_set(k, v)?;
    Ok(())
}

/// A table being filled by [`mp_decode`].
pub(super) enum MpFrame {
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
pub(super) enum MpItem {
    Value(Value),
    Open(MpFrame),
}

/// `mp_decode_to_lua_type` for one object (iterative, so deep input cannot overflow
/// the Rust stack); `slots` is the Lua stack in use (from the function's base) as the
/// C code would have it, which fails where the C code fails.
pub(super) fn mp_decode(lua: &Lua, c: &mut Cursor, mut slots: usize) -> Result<Value, MpErr> {
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
pub(super) fn mp_decode_one(lua: &Lua, c: &mut Cursor, slots: usize) -> Result<MpItem, MpErr> {
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
pub(super) fn mp_open(lua: &Lua, array: bool, len: usize, slots: usize) -> Result<MpItem, MpErr> {
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
pub(super) fn mp_unpack_full(
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
