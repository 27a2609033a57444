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
//! `cjson.decode` and `cjson.encode` nested deeper than [`cjson::MODEL_MAX_NESTING`] (only
//! reachable after raising `decode_max_depth` / `encode_max_depth`) stop there.
//!
//! One file per library (`cjson.rs`, `cmsgpack.rs`, `bit.rs`, `lua_struct.rs`, named
//! after their C sources), over what they share (`helpers.rs`).

use std::sync::{Arc, Mutex};

use mlua::{Lua, Table};

mod bit;
mod cjson;
mod cmsgpack;
// Public (its `pub` items only) for sim's tests, as `sim::redis::lua_helpers`.
#[doc(hidden)]
pub mod helpers;
mod lua_struct;

pub use cjson::JsonConfig;

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
    tables.raw_set("cjson", cjson::cjson_table(lua, json.clone())?)?;
    tables.raw_set("cmsgpack", cmsgpack::cmsgpack_table(lua)?)?;
    tables.raw_set("bit", bit::bit_table(lua)?)?;
    tables.raw_set("struct", lua_struct::struct_table(lua)?)?;
    Ok(Libs { tables, json })
}
