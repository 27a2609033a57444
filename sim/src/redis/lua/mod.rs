//! Lua 5.1 scripting as Redis 7.0 does it: one VM per engine, the `redis` library,
//! globals protection, Redis's conversion rules both ways, Redis's error texts, and
//! Redis's `lrand48`-based `math.random`.

use std::collections::BTreeMap;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Value, ffi};

mod calls;
mod convert;

use calls::{ClearRunning, RawCalls, RunState, push_array, raw_call};
use convert::error_to_reply;
pub use convert::{fmt_g17, lua_to_reply};

use super::commands::{self, Core, Ctx};
use super::lua_shared::PENDING;
pub use super::lua_shared::fmt_g;
use super::reply::Reply;

/// Redis's `redisLrand48` / `redisSrand48` (rand.c): the 48-bit LCG of `lrand48`.
#[derive(Debug, Clone, Copy)]
struct Rand48(u64);

impl Rand48 {
    fn seeded(seed: i32) -> Self {
        Rand48((u64::from(seed as u32) << 16) | 0x330E)
    }

    fn next(&mut self) -> i32 {
        self.0 = (self.0.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1);
        (self.0 >> 17) as i32
    }
}

/// Lowercase hex SHA1, as `redis.sha1hex` and the script cache use.
pub fn sha1hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

const PRELUDE: &str = r#"
local rawsha1, rawrand, rawseed, take_pending, rawlog, libs = ...
local rawset, rawget = rawset, rawget
local G = _G
local getinfo, setfenv, loadstring = debug.getinfo, setfenv, loadstring
local error, type, tostring, tonumber, select, xpcall, setmetatable =
      error, type, tostring, tonumber, select, xpcall, setmetatable
local floor, ceil = math.floor, math.ceil

local current -- the scoped raw call of the running script

local function readonly()
  error('Attempt to modify a readonly table', 2)
end

local function push_error_buff(s)
  local code, msg
  if s:sub(1, 1) == '-' then
    local sp = s:find(' ', 1, true)
    if sp then code, msg = s:sub(2, sp - 1), s:sub(sp + 1) else code, msg = 'ERR', s:sub(2) end
  else
    code, msg = 'ERR', s
  end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end

local redis = {}
-- redis.call is the scoped Rust function of the running script (a C function, so a
-- `return redis.call(...)` tail call keeps the script's frame, as in Redis).
redis.call = function() error('redis.call outside a script', 0) end
redis.pcall = function(...)
  local v = current(...)
  return v
end
redis.sha1hex = rawsha1
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return push_error_buff('wrong number or type of arguments')
  end
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  return push_error_buff(s)
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return push_error_buff('wrong number or type of arguments')
  end
  return {ok = s}
end
redis.log = rawlog
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = '7.0.15', 0x00070f

math.random, math.randomseed = rawrand, rawseed

local function handler(err)
  local src, line
  local lvl = 2
  while true do
    local i = getinfo(lvl, 'Sl')
    if not i then break end
    if i.source == '@user_script' then src, line = i.source, i.currentline break end
    lvl = lvl + 1
  end
  if type(err) == 'userdata' then
    local p = take_pending()
    if p and p.where_msg then
      -- luaL_error from a C function: positioned at its caller.
      err = src and (src:sub(2) .. ':' .. line .. ': ' .. p.where_msg) or p.where_msg
    elseif p then
      err = p
    end
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if src then err.source = src err.line = line end
  return err
end

for _, name in ipairs({'os', 'io', 'loadfile', 'dofile', 'print', 'debug', 'setfenv', 'getfenv',
                       'require', 'module', 'package', 'newproxy'}) do
  G[name] = nil
end
local proxies = {}
local function protect(t)
  local p = setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
  proxies[p] = true
  return p
end
-- pcall sees redis.call's error table, or an mlua function's userdata (table pending).
local rawpcall = pcall
-- Redis 7.0's pcall: an error table raised by redis.call (or error{err=...}) comes
-- back as its `err` string.
local function fix(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' then
    local p = take_pending()
    if p then e = p.where_msg or p end
  end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' or type(m) == 'number' then e = m end
  end
  return false, e
end
G.rawset = function(t, k, v)
  if t == G or proxies[t] then error('Attempt to modify a readonly table', 0) end
  return rawset(t, k, v)
end
G.pcall = function(f, ...) return fix(rawpcall(f, ...)) end
G.redis = protect(redis)
-- Redis's extra libraries (lua_libs.rs), read-only like the others.
for _, name in ipairs({'cjson', 'struct', 'cmsgpack', 'bit'}) do
  G[name] = libs[name]
end
for _, name in ipairs({'math', 'string', 'table', 'coroutine', 'cjson', 'struct', 'cmsgpack', 'bit'}) do
  G[name] = protect(G[name])
end
setmetatable(G, {
  __index = function(_, n)
    error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = false,
})
local env = setmetatable({}, {__index = G, __newindex = readonly, __metatable = false})

local function compile(body)
  local f, err = loadstring(body, '@user_script')
  if not f then return nil, err end
  setfenv(f, env)
  return f
end

local stub = redis.call
local call_raw, pcall_raw -- the raw redis.call and redis.pcall, installed once
local function install(call, pcall_)
  call_raw, pcall_raw = call, pcall_
end
local function run(f, keys, argv)
  rawset(G, 'KEYS', keys)
  rawset(G, 'ARGV', argv)
  redis.call, current = call_raw, pcall_raw
  local ok, res = xpcall(f, handler)
  redis.call, current = stub, nil
  return ok, res
end

return compile, run, install
"#;

/// The engine's Lua VM and script cache.
pub struct LuaVm {
    lua: Lua,
    compile: Function,
    run: Function,
    scripts: BTreeMap<String, Function>,
    /// `cjson`'s settings, which scripts can change and `SCRIPT FLUSH` resets.
    json_config: std::sync::Arc<std::sync::Mutex<super::lua_libs::JsonConfig>>,
    /// Set when the running script spent its instruction budget.
    budget_spent: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Instructions the running script has run, as the budget hook counts them
    /// (reset at each run's start).
    counted: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The running script's `RunState`, while [`LuaVm::run`] runs it; null between
    /// runs. (Scoped functions made per run cost a third of an `EVAL` that does
    /// little, in a five-master Redlock world.)
    running: std::sync::Arc<std::sync::atomic::AtomicPtr<()>>,
    /// What the raw `redis.call` and `redis.pcall` (C functions the prelude installs
    /// once) reach through their upvalue: boxed, so its address outlives every call.
    raw: Box<RawCalls>,
}

/// Lua instructions a script may run before the server counts as busy: the model's
/// stand-in for `lua-time-limit` (5000 ms), counted, not timed, so a run replays the
/// same. No lock script comes within a thousandth of it.
pub const SCRIPT_BUDGET_INSTRUCTIONS: u64 = 10_000_000;

/// How often the budget hook runs, in instructions.
const BUDGET_CHECK_EVERY: u32 = 10_000;

/// What Redis raises in a script stopped by `SCRIPT KILL`.
pub const SCRIPT_KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

impl std::fmt::Debug for LuaVm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaVm")
            .field("scripts", &self.scripts.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a script could not be loaded.
pub type CompileError = String;

impl LuaVm {
    /// A VM with Redis's script environment.
    pub fn new() -> mlua::Result<Self> {
        // SAFETY: the debug library is loaded only so the prelude can keep a private
        // reference to `debug.getinfo` (for Redis's error positions); the prelude
        // removes `debug` from the globals before any user script runs.
        let lua =
            unsafe { Lua::unsafe_new_with(StdLib::ALL_SAFE | StdLib::DEBUG, LuaOptions::new()) };
        // Redis 7 never reseeds per script: the state starts at lrand48's initial X.
        lua.set_app_data(Rand48(0x1234_ABCD_330E));
        let rawsha1 = lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise(lua, "ERR wrong number of arguments");
            }
            let bytes = match lua.coerce_string(args[0].clone()) {
                Ok(Some(s)) if !matches!(args[0], Value::Boolean(_)) => s.as_bytes().to_vec(),
                _ => Vec::new(),
            };
            Ok(sha1hex(&bytes))
        })?;
        let rawrand = lua.create_function(|lua, args: MultiValue| {
            let r = {
                let mut st = lua.app_data_mut::<Rand48>().expect("rand48 state");
                let v = st.next();
                f64::from(v % i32::MAX) / f64::from(i32::MAX)
            };
            match args.len() {
                0 => Ok(r),
                1 => {
                    let u = f64::from(check_int(lua, &args[0], 1, "random")?);
                    if u < 1.0 {
                        return raise_where(lua, "bad argument #1 to 'random' (interval is empty)");
                    }
                    Ok((r * u).floor() + 1.0)
                }
                2 => {
                    let l = f64::from(check_int(lua, &args[0], 1, "random")?);
                    let u = f64::from(check_int(lua, &args[1], 2, "random")?);
                    if l > u {
                        return raise_where(lua, "bad argument #2 to 'random' (interval is empty)");
                    }
                    Ok((r * (u - l + 1.0)).floor() + l)
                }
                _ => raise_where(lua, "wrong number of arguments"),
            }
        })?;
        let rawseed = lua.create_function(|lua, args: MultiValue| {
            let Some(arg) = args.front() else {
                return raise_where(
                    lua,
                    "bad argument #1 to 'randomseed' (number expected, got no value)",
                );
            };
            let seed = check_int(lua, arg, 1, "randomseed")?;
            if let Some(mut st) = lua.app_data_mut::<Rand48>() {
                *st = Rand48::seeded(seed);
            }
            Ok(())
        })?;
        let take_pending = lua.create_function(|lua, ()| {
            let v: Value = lua.named_registry_value(PENDING)?;
            lua.set_named_registry_value(PENDING, Value::Nil)?;
            Ok(v)
        })?;
        let rawlog = lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return raise(lua, "ERR redis.log() requires two arguments or more.");
            }
            let level = match &args[0] {
                Value::Integer(i) => Some(*i as f64),
                Value::Number(f) => Some(*f),
                v @ Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
                _ => None,
            };
            let Some(level) = level else {
                return raise(lua, "ERR First argument must be a number (log level).");
            };
            if !(0..=3).contains(&(level as i32)) {
                return raise(lua, "ERR Invalid debug level.");
            }
            Ok(())
        })?;
        let libs = super::lua_libs::create(&lua)?;
        let (compile, run, install): (Function, Function, Function) = lua
            .load(PRELUDE)
            .set_name("=prelude")
            .call((rawsha1, rawrand, rawseed, take_pending, rawlog, libs.tables))?;
        let running: std::sync::Arc<std::sync::atomic::AtomicPtr<()>> = Default::default();
        let raw = Box::new(RawCalls {
            running: running.clone(),
            panic: std::cell::Cell::new(None),
        });
        // `redis.call` and `redis.pcall` as C functions (`raw_call`), their upvalues
        // the boxed `RawCalls` and whether a failed call raises: mlua's callbacks
        // (each argument and result a registry reference) were most of an `EVAL` that
        // does little, in a five-master Redlock world.
        let raw_fn = |raises: bool| -> mlua::Result<Function> {
            let env = &*raw as *const RawCalls as *mut std::ffi::c_void;
            // SAFETY: pushes a light userdata, a boolean and a C closure over them
            // (two stack slots, which `exec_raw` guarantees); `env` is boxed in the
            // VM, which owns the Lua state, so it outlives every call of the closure.
            unsafe {
                lua.exec_raw((), |state| {
                    ffi::lua_pushlightuserdata(state, env);
                    ffi::lua_pushboolean(state, std::ffi::c_int::from(raises));
                    ffi::lua_pushcclosure(state, raw_call, 2);
                })
            }
        };
        install.call::<()>((raw_fn(true)?, raw_fn(false)?))?;
        // The budget hook, installed once for the VM's life: installing it for each
        // run (mlua's `set_hook`: a boxed callback and a registry entry) cost a sixth
        // of an `EVAL` that does little, in a five-master Redlock world. Each run
        // resets the count; Lua's own countdown to the next check runs on across runs,
        // so a script is stopped within one check (10,000 instructions) of the budget,
        // where a hook installed per run stopped it at the budget itself.
        let budget_spent: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let counted: std::sync::Arc<std::sync::atomic::AtomicU64> = Default::default();
        {
            let (spent, counted, running) =
                (budget_spent.clone(), counted.clone(), running.clone());
            lua.set_hook(
                mlua::HookTriggers::new().every_nth_instruction(BUDGET_CHECK_EVERY),
                move |lua, _| {
                    use std::sync::atomic::Ordering::Relaxed;
                    // Only a script's run is budgeted (not a `SCRIPT LOAD`'s compile).
                    if running.load(std::sync::atomic::Ordering::Acquire).is_null() {
                        return Ok(mlua::VmState::Continue);
                    }
                    let n = counted.fetch_add(u64::from(BUDGET_CHECK_EVERY), Relaxed);
                    if n + u64::from(BUDGET_CHECK_EVERY) > SCRIPT_BUDGET_INSTRUCTIONS {
                        // Past the budget the script is stopped as SCRIPT KILL stops it,
                        // on every check, so a `pcall` in the script cannot swallow it
                        // for long.
                        spent.store(true, Relaxed);
                        return raise(lua, SCRIPT_KILLED);
                    }
                    Ok(mlua::VmState::Continue)
                },
            )?;
        }
        Ok(Self {
            lua,
            compile,
            run,
            scripts: BTreeMap::new(),
            json_config: libs.json,
            budget_spent,
            counted,
            running,
            raw,
        })
    }

    /// Compiles and caches `body`; returns its sha.
    pub fn load(&mut self, body: &[u8]) -> Result<String, CompileError> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let src = self.lua.create_string(body).map_err(|e| e.to_string())?;
        let (f, err): (Option<Function>, Option<String>) =
            self.compile.call(src).map_err(|e| e.to_string())?;
        match f {
            Some(f) => {
                self.scripts.insert(sha.clone(), f);
                Ok(sha)
            }
            None => Err(err.unwrap_or_default()),
        }
    }

    /// Whether a script with this (lowercase) sha is cached.
    pub fn exists(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Forgets every cached script and, as Redis's new Lua state does, resets `cjson`'s
    /// settings.
    pub fn flush(&mut self) {
        let _ = self.lua.set_named_registry_value(PENDING, Value::Nil);
        *self.json_config.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
        self.scripts.clear();
    }

    /// Runs the cached script `sha` with `keys` and `args`; every `redis.call` runs
    /// in `ctx` (time frozen at `ctx.now_us`).
    pub fn run(
        &self,
        core: &mut Core,
        ctx: &mut Ctx,
        sha: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
    ) -> Reply {
        let Some(f) = self.scripts.get(sha) else {
            return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        self.budget_spent
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.counted.store(0, std::sync::atomic::Ordering::Relaxed);
        let state: RunState<'_> = std::cell::RefCell::new((core, ctx));
        self.running.store(
            &state as *const RunState<'_> as *mut (),
            std::sync::atomic::Ordering::Release,
        );
        let clear = ClearRunning(&self.running);
        let result = (|| -> mlua::Result<Reply> {
            // The prelude's `run(f, KEYS, ARGV)`, the two tables built on the stack:
            // made as registry references (mlua's strings and sequences), they cost
            // a quarter of an `EVAL` that does little.
            // SAFETY: the stack holds `run` and `f` (pushed by `exec_raw`); this pushes
            // two tables, at most two slots at a time beyond them, and calls `run`
            // with the three, which leaves its two results. Lua errors (only running
            // out of memory here) unwind to `exec_raw`'s protected call.
            let (ok, value): (bool, Value) = unsafe {
                self.lua.exec_raw((&self.run, f), |state| {
                    push_array(state, keys);
                    push_array(state, args);
                    ffi::lua_call(state, 3, 2);
                })
            }?;
            Ok(if ok {
                lua_to_reply(&value)
            } else {
                error_to_reply(&value, sha)
            })
        })();
        drop(clear);
        if let Some(panic) = self.raw.panic.take() {
            std::panic::resume_unwind(panic);
        }
        result.unwrap_or_else(|e| {
            Reply::err(commands::no_newlines(&format!(
                "Error running script {sha}, {e}"
            )))
        })
    }

    /// Whether the last script run spent its instruction budget (and was stopped).
    pub fn budget_spent(&self) -> bool {
        self.budget_spent.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Raises `{err = text}` from a Rust function: the table waits in the registry and
/// the prelude's error handler (or `pcall`) picks it up.
fn raise<T>(lua: &Lua, text: &str) -> mlua::Result<T> {
    lua.set_named_registry_value(PENDING, error_table(lua, text)?)?;
    Err(mlua::Error::runtime(text.to_string()))
}

/// Raises what `luaL_error` raises from a C function: `msg` positioned at the caller
/// (the error handler adds the position).
fn raise_where<T>(lua: &Lua, msg: &str) -> mlua::Result<T> {
    let t = lua.create_table()?;
    t.raw_set("where_msg", msg)?;
    lua.set_named_registry_value(PENDING, t)?;
    Err(mlua::Error::runtime(msg.to_string()))
}

/// Lua's `luaL_checkint` (numbers and numeric strings, truncated to `int`).
fn check_int(lua: &Lua, v: &Value, n: usize, fname: &str) -> mlua::Result<i32> {
    let num = match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(f) => Some(*f),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    };
    match num {
        Some(f) => Ok(f as i32),
        None => raise_where(
            lua,
            &format!(
                "bad argument #{n} to '{fname}' (number expected, got {})",
                v.type_name()
            ),
        ),
    }
}

/// `{err = text}` with Redis's `luaPushErrorBuff` trimming.
fn error_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", text.trim_matches(['\r', '\n']))?;
    Ok(Value::Table(t))
}
