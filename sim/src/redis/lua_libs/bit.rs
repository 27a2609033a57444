//! `bit`: LuaBitOp 1.0.2 (`deps/lua/src/lua_bit.c` in Redis 7.0.15).

use mlua::{Lua, MultiValue, Table, Value};

use super::helpers::{add, bytes, num, one, to_number, typeerror};

/// `barg`: the number's low 32 bits after adding 2^52 + 2^51 (rounding to nearest).
pub(super) fn barg(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<u32> {
    let n = to_number(lua, args.get(narg - 1));
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        return typeerror(lua, args, narg, "number");
    }
    Ok(b)
}

pub(super) fn bret(b: u32) -> mlua::Result<MultiValue> {
    one(num(f64::from(b as i32)))
}

pub(super) fn bit_table(lua: &Lua) -> mlua::Result<Table> {
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
