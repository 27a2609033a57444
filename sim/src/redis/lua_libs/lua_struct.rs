//! `struct`: Roberto Ierusalimschy's struct library (`deps/lua/src/lua_struct.c` in
//! Redis 7.0.15).

use mlua::{Lua, MultiValue, Table, Value};

use super::helpers::{
    add, argerror, bytes, check_bytes, check_cstr, check_number, check_stack, d2i64, d2u64, lerror,
    num, one, opt_integer, to_number,
};

/// `MAXINTSIZE`.
pub(super) const MAXINTSIZE: usize = 32;
/// `MAXALIGN` on x86-64 (a double's alignment).
pub(super) const MAXALIGN: i64 = 8;

pub(super) struct Fmt<'a> {
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

pub(super) struct Header {
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

pub(super) fn struct_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add(lua, &t, "pack", struct_pack)?;
    add(lua, &t, "unpack", struct_unpack)?;
    add(lua, &t, "size", struct_size)?;
    Ok(t)
}

pub(super) fn struct_pack(lua: &Lua, mut args: Vec<Value>) -> mlua::Result<MultiValue> {
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
pub(super) fn struct_getinteger(b: &[u8], little: bool, signed: bool, size: usize) -> f64 {
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

pub(super) fn struct_unpack(lua: &Lua, args: Vec<Value>) -> mlua::Result<MultiValue> {
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

pub(super) fn struct_size(lua: &Lua, args: Vec<Value>) -> mlua::Result<MultiValue> {
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
