//! Lua 5.1 scripting as Redis 7.0 does it: one VM per engine, the `redis` library,
//! globals protection, Redis's conversion rules both ways, Redis's error texts, and
//! Redis's `lrand48`-based `math.random`.

use std::collections::BTreeMap;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::commands::{self, Core, Ctx, Lookup};
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

/// C's `printf("%.17g")`, which Redis uses to turn a Lua number argument into a string.
pub fn fmt_g17(v: f64) -> String {
    const PREC: i32 = 17;
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
    let sci = format!("{:.*e}", (PREC - 1) as usize, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= PREC {
        format!(
            "{}e{}{:02}",
            strip(mant),
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    } else {
        strip(&format!("{:.*}", (PREC - 1 - exp) as usize, v))
    }
}

/// Lowercase hex SHA1, as `redis.sha1hex` and the script cache use.
pub fn sha1hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

const PRELUDE: &str = r#"
local rawsha1, rawrand, rawseed = ...
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
redis.call = function(...)
  local ok, v = current(true, ...)
  if not ok then error(v) end
  return v
end
redis.pcall = function(...)
  local _, v = current(false, ...)
  return v
end
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then error('wrong number of arguments', 0) end
  local s = ...
  if type(s) == 'number' then s = tostring(s) elseif type(s) ~= 'string' then s = '' end
  return rawsha1(s)
end
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
redis.log = function(...)
  local n = select('#', ...)
  if n < 2 then error(push_error_buff('redis.log() requires two arguments or more.')) end
  local level = ...
  if type(level) ~= 'number' and tonumber(level) == nil then
    error(push_error_buff('First argument must be a number'))
  end
  level = tonumber(level)
  if level < 0 or level > 3 then error(push_error_buff('Invalid debug level.')) end
end
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = '7.0.15', 0x00070f

local function checkint(v, n)
  local x = tonumber(v)
  if x == nil then
    error("bad argument #" .. n .. " to 'random' (number expected, got " ..
          (v == nil and 'no value' or type(v)) .. ")", 0)
  end
  if x >= 0 then return floor(x) else return ceil(x) end
end
math.random = function(...)
  local n = select('#', ...)
  local r = rawrand()
  if n == 0 then return r end
  local a, b = ...
  if n == 1 then
    local u = checkint(a, 1)
    if not (1 <= u) then error("bad argument #1 to 'random' (interval is empty)", 0) end
    return floor(r * u) + 1
  elseif n == 2 then
    local l, u = checkint(a, 1), checkint(b, 2)
    if not (l <= u) then error("bad argument #2 to 'random' (interval is empty)", 0) end
    return floor(r * (u - l + 1)) + l
  end
  error('wrong number of arguments', 0)
end
math.randomseed = function(s)
  rawseed(checkint(s, 1))
end

local function handler(err)
  local src, line
  local lvl = 2
  while true do
    local i = getinfo(lvl, 'Sl')
    if not i then break end
    if i.source == '@user_script' then src, line = i.source, i.currentline break end
    lvl = lvl + 1
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if src then err.source = src err.line = line end
  return err
end

for _, name in ipairs({'os', 'io', 'loadfile', 'dofile', 'print', 'debug', 'setfenv', 'getfenv',
                       'require', 'module', 'package', 'newproxy'}) do
  G[name] = nil
end
local function protect(t)
  return setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
end
G.redis = protect(redis)
for _, name in ipairs({'math', 'string', 'table', 'coroutine'}) do
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

local function run(f, rc, keys, argv)
  rawset(G, 'KEYS', keys)
  rawset(G, 'ARGV', argv)
  current = rc
  local ok, res = xpcall(f, handler)
  current = nil
  return ok, res
end

return compile, run
"#;

/// The engine's Lua VM and script cache.
pub struct LuaVm {
    lua: Lua,
    compile: Function,
    run: Function,
    scripts: BTreeMap<String, Function>,
}

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
        lua.set_app_data(Rand48::seeded(0));
        let rawsha1 = lua.create_function(|_, s: mlua::LuaString| Ok(sha1hex(&s.as_bytes())))?;
        let rawrand = lua.create_function(|lua, ()| {
            let mut st = lua.app_data_mut::<Rand48>().expect("rand48 state");
            let v = st.next();
            Ok(f64::from(v % i32::MAX) / f64::from(i32::MAX))
        })?;
        let rawseed = lua.create_function(|lua, seed: f64| {
            if let Some(mut st) = lua.app_data_mut::<Rand48>() {
                *st = Rand48::seeded(seed as i32);
            }
            Ok(())
        })?;
        let (compile, run): (Function, Function) = lua
            .load(PRELUDE)
            .set_name("=prelude")
            .call((rawsha1, rawrand, rawseed))?;
        Ok(Self {
            lua,
            compile,
            run,
            scripts: BTreeMap::new(),
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

    /// Forgets every cached script.
    pub fn flush(&mut self) {
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
        let result = self.lua.scope(|scope| {
            let rc = scope.create_function_mut(|lua, (raise, args): (bool, MultiValue)| {
                let reply = script_call(core, ctx, args);
                match reply {
                    Err(msg) => Ok((!raise, error_table(lua, &format!("ERR {msg}"))?)),
                    Ok(Reply::Error(e)) => Ok((!raise, error_table(lua, &e)?)),
                    Ok(r) => Ok((true, reply_to_lua(lua, &r)?)),
                }
            })?;
            let keys = self.lua.create_sequence_from(
                keys.iter()
                    .map(|k| self.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            let argv = self.lua.create_sequence_from(
                args.iter()
                    .map(|k| self.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            let (ok, value): (bool, Value) = self.run.call((f.clone(), rc, keys, argv))?;
            Ok(if ok {
                lua_to_reply(&value)
            } else {
                error_to_reply(&value, sha)
            })
        });
        result.unwrap_or_else(|e| {
            Reply::err(commands::no_newlines(&format!(
                "Error running script {sha}, {e}"
            )))
        })
    }
}

/// `{err = text}` with Redis's `luaPushErrorBuff` trimming.
fn error_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", text.trim_matches(['\r', '\n']))?;
    Ok(Value::Table(t))
}

/// The checks of Redis's `luaRedisGenericCommand` / `scriptCall`, then the command.
/// `Err` is an error message without its `ERR ` code.
fn script_call(core: &mut Core, ctx: &mut Ctx, args: MultiValue) -> Result<Reply, String> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call".into());
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args.iter() {
        match a {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Integer(i) => argv.push(fmt_g17(*i as f64).into_bytes()),
            Value::Number(n) => argv.push(fmt_g17(*n).into_bytes()),
            _ => return Err("Lua redis lib command arguments must be strings or integers".into()),
        }
    }
    let spec = match commands::lookup(&argv) {
        Lookup::Found(spec) => spec,
        _ => return Err("Unknown Redis command called from script".into()),
    };
    if !commands::arity_ok(&spec, argv.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if spec.noscript {
        return Err("This Redis command is not allowed from script".into());
    }
    Ok(core.exec(ctx, spec.name, &argv))
}

/// Redis → Lua (RESP2 rules, as scripts see them).
fn reply_to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_str())?;
            Value::Table(t)
        }
        Reply::Error(e) => error_table(lua, e)?,
        Reply::Integer(i) => Value::Number(*i as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Double(d) => Value::String(lua.create_string(fmt_g17(*d))?),
        Reply::Array(items) | Reply::Push(items) | Reply::Frames(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table()?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, reply_to_lua(lua, k)?)?;
                t.raw_set(2 * i + 2, reply_to_lua(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

fn string_field(t: &Table, name: &str) -> Option<String> {
    match t.raw_get::<Value>(name).ok()? {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        _ => None,
    }
}

/// Lua → Redis (`luaReplyToRedisReply`).
pub fn lua_to_reply(value: &Value) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(true) => Reply::Integer(1),
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(*n as i64),
        Value::Table(t) => {
            if let Some(e) = string_field(t, "err") {
                return Reply::Error(commands::no_newlines(&e));
            }
            if let Some(s) = string_field(t, "ok") {
                return Reply::Simple(commands::no_newlines(&s));
            }
            if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
                return Reply::Double(d);
            }
            let mut items = Vec::new();
            let mut i = 1;
            loop {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(lua_to_reply(&v)),
                }
                i += 1;
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// A script's uncaught error (the table Redis's error handler built).
fn error_to_reply(value: &Value, sha: &str) -> Reply {
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
