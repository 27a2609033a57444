//! `redis.call` and `redis.pcall` as C functions: how a call reaches the running
//! script's server state, reads its arguments off Lua's stack, runs the command with
//! Redis's script checks, and pushes the reply back.

use mlua::ffi;

use crate::redis::commands::{self, Core, Ctx, Lookup};
use crate::redis::reply::Reply;

use super::convert::fmt_g17;

/// What the raw `redis.call` and `redis.pcall` reach: the running script's state, and
/// a panic caught inside a call, resumed once the script is over (a panic must not
/// unwind through Lua's C frames).
pub(super) struct RawCalls {
    pub(super) running: std::sync::Arc<std::sync::atomic::AtomicPtr<()>>,
    pub(super) panic: std::cell::Cell<Option<Box<dyn std::any::Any + Send>>>,
}

/// What a script's `redis.call` runs against: the server's core and the command's
/// context (time frozen for the script).
pub(super) type RunState<'a> = std::cell::RefCell<(&'a mut Core, &'a mut Ctx)>;

/// Runs `f` on the running script's state (see [`LuaVm::run`]); `Err` if no script
/// runs (a `redis.call` kept past its script) or its state is already borrowed.
fn with_running<R>(
    running: &std::sync::atomic::AtomicPtr<()>,
    f: impl FnOnce(&mut Core, &mut Ctx) -> Result<R, String>,
) -> Result<R, String> {
    let p = running.load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() {
        return Err("redis.call outside a script".into());
    }
    // SAFETY: `LuaVm::run` stores a pointer to its own `RunState` for exactly as
    // long as the script it runs, and clears it before it returns (by a guard, so
    // also on unwind); the VM runs one script at a time, on the thread that owns
    // it. The state is only borrowed inside this call.
    let state = unsafe { &*(p as *const RunState<'_>) };
    let mut st = state.try_borrow_mut().map_err(|_| "busy".to_string())?;
    let (core, ctx) = &mut *st;
    f(core, ctx)
}

/// Clears [`LuaVm::running`] when the run is over.
pub(super) struct ClearRunning<'a>(pub(super) &'a std::sync::atomic::AtomicPtr<()>);

impl Drop for ClearRunning<'_> {
    fn drop(&mut self) {
        self.0
            .store(std::ptr::null_mut(), std::sync::atomic::Ordering::Release);
    }
}

/// The arguments of a `redis.call` / `redis.pcall`, as `luaRedisGenericCommand`
/// reads them from the stack: strings as they are, numbers as `%.17g`.
///
/// # Safety
///
/// `state` is a Lua state inside a C function's call.
unsafe fn call_args(state: *mut ffi::lua_State) -> Result<Vec<Vec<u8>>, String> {
    // SAFETY: indexes 1..=top are the call's arguments; a string's bytes are read
    // while it is on the stack.
    unsafe {
        let n = ffi::lua_gettop(state);
        if n == 0 {
            return Err("Please specify at least one argument for this redis lib call".into());
        }
        let mut argv = Vec::with_capacity(n as usize);
        for i in 1..=n {
            match ffi::lua_type(state, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let p = ffi::lua_tolstring(state, i, &mut len);
                    argv.push(std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec());
                }
                ffi::LUA_TNUMBER => argv.push(fmt_g17(ffi::lua_tonumber(state, i)).into_bytes()),
                _ => {
                    return Err(
                        "Lua redis lib command arguments must be strings or integers".into(),
                    );
                }
            }
        }
        Ok(argv)
    }
}

/// `redis.call` (upvalue 2 true: a failed call raises its error table) and the raw
/// call under `redis.pcall` (false: the error table is the result), as C functions;
/// upvalue 1 is the VM's [`RawCalls`].
pub(super) unsafe extern "C-unwind" fn raw_call(state: *mut ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: upvalue 1 is the `RawCalls` the VM boxed when it made this closure,
    // alive as long as the Lua state. Every Rust value made here is dropped before
    // `lua_error`, which longjmps out of this frame; a panic is caught and kept for
    // `LuaVm::run` to resume, not unwound through Lua's C frames.
    unsafe {
        let env = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const RawCalls);
        let raises = ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) != 0;
        let raise = {
            let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let argv = call_args(state)?;
                with_running(&env.running, |core, ctx| script_call(core, ctx, &argv))
            }));
            let reply = match reply {
                Ok(Err(msg)) => Reply::Error(format!("ERR {msg}")),
                Ok(Ok(reply)) => reply,
                Err(panic) => {
                    env.panic.set(Some(panic));
                    Reply::Error("ERR a panic in redis.call".into())
                }
            };
            push_reply(state, &reply);
            raises && matches!(reply, Reply::Error(_))
        };
        if raise {
            ffi::lua_error(state);
        }
        1
    }
}

/// Pushes `items` as a Lua array of strings.
///
/// # Safety
///
/// `state` has two free stack slots.
pub(super) unsafe fn push_array(state: *mut ffi::lua_State, items: &[Vec<u8>]) {
    // SAFETY: a table, then one string at a time stored into it.
    unsafe {
        ffi::lua_createtable(state, items.len() as std::ffi::c_int, 0);
        for (i, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
        }
    }
}

/// Pushes `reply` as a script sees it: Redis → Lua, RESP2 rules (`redisProtocolToLuaType`).
///
/// # Safety
///
/// `state` is a Lua state inside a C function's call.
unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply) {
    // SAFETY: each level checks for the three slots it uses (a table, a key or
    // value, and the nested level's own).
    unsafe {
        ffi::lua_checkstack(state, 3);
        let table_with = |state: *mut ffi::lua_State, field: &std::ffi::CStr, text: &[u8]| {
            ffi::lua_createtable(state, 0, 1);
            ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
            ffi::lua_setfield(state, -2, field.as_ptr());
        };
        match reply {
            Reply::Simple(s) => table_with(state, c"ok", s.as_bytes()),
            Reply::Error(e) => table_with(state, c"err", e.trim_matches(['\r', '\n']).as_bytes()),
            Reply::Integer(i) => ffi::lua_pushnumber(state, *i as f64),
            Reply::Bulk(b) => {
                ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
            }
            Reply::Nil | Reply::NilArray | Reply::Raw(_) | Reply::Close => {
                ffi::lua_pushboolean(state, 0)
            }
            Reply::Double(d) => {
                let s = fmt_g17(*d);
                ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
            }
            Reply::Array(items) | Reply::Push(items) | Reply::Frames(items) => {
                ffi::lua_createtable(state, items.len() as std::ffi::c_int, 0);
                for (i, item) in items.iter().enumerate() {
                    push_reply(state, item);
                    ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                }
            }
            Reply::Map(pairs) => {
                ffi::lua_createtable(state, (2 * pairs.len()) as std::ffi::c_int, 0);
                for (i, (k, v)) in pairs.iter().enumerate() {
                    push_reply(state, k);
                    ffi::lua_rawseti(state, -2, (2 * i + 1) as ffi::lua_Integer);
                    push_reply(state, v);
                    ffi::lua_rawseti(state, -2, (2 * i + 2) as ffi::lua_Integer);
                }
            }
        }
    }
}

/// The checks of Redis's `luaRedisGenericCommand` / `scriptCall` on a call's
/// arguments ([`call_args`]), then the command. `Err` is an error message without
/// its `ERR ` code.
fn script_call(core: &mut Core, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Result<Reply, String> {
    let spec = match commands::lookup(argv) {
        Lookup::Found(spec) => spec,
        _ => return Err("Unknown Redis command called from script".into()),
    };
    if !commands::arity_ok(&spec, argv.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if spec.noscript {
        return Err("This Redis command is not allowed from script".into());
    }
    // `scriptVerifyWriteCommandAllow`: read-only scripts refuse writes (and PUBLISH);
    // the server's state refuses a script's first write, never a later one.
    if ctx.read_only && (spec.write || spec.name == "publish") {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    if spec.write
        && !ctx.wrote
        && let Some(refusal) = core.write_refusal(ctx)
    {
        return Ok(refusal);
    }
    let events_before = core.ks.pending_events();
    let reply = core.exec(ctx, spec.name, argv);
    if core.ks.pending_events() > events_before {
        ctx.wrote = true;
    }
    Ok(reply)
}
