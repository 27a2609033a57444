//! What Redis's scripting (`lua/`) and the libraries it gives scripts (`lua_libs/`)
//! both use: C's `%g` number formatting, and the Lua registry slot through which a
//! pending error reaches the script's error handler.

/// Registry slot for the error (an error table, or a library's message) a Rust function
/// made with mlua raises: mlua raises it as userdata, and the prelude's handler takes
/// the pending value instead. (`redis.call` is a C function that raises its error
/// table itself.)
pub(super) const PENDING: &str = "locksim.redis.pending_error";

/// C's `printf("%.<prec>g")` (glibc's output for NaN and infinities); `prec` >= 1.
pub fn fmt_g(v: f64, prec: usize) -> String {
    let prec = prec.max(1) as i32;
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    fn strip(s: &str) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    }
    let sci = format!("{:.*e}", (prec - 1) as usize, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..prec).contains(&exp) {
        format!(
            "{}e{}{:02}",
            strip(mant),
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    } else {
        strip(&format!("{:.*}", (prec - 1 - exp) as usize, v))
    }
}
