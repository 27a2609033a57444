//! A Redis 7 model: RESP codec, command engine (keyspace, expiry, Lua, pub/sub), and a
//! server that runs on turmoil's network in the simulator or on tokio's for
//! `locksim serve-model`.

pub mod engine;
pub mod reply;

pub use engine::{Engine, Session, SessionKind};
pub use keyspace::{KeyCause, KeyEvent};
pub use reply::Reply;
pub mod resp;
pub mod server;

pub use resp::{Parsed, encode, parse_request};
pub use server::{
    CommandEngine, FixedClock, ServerClock, SharedEngine, SystemClock, active_expiry_loop,
    serve_connection, serve_model, serve_tokio, serve_turmoil,
};
pub mod commands;
pub mod keyspace;
pub mod link;
pub mod lua;
mod lua_libs;
// Public for sim's tests (strtod and the x86-64 casts); not an API.
#[doc(hidden)]
pub use lua_libs::helpers as lua_helpers;
mod lua_shared;
pub mod persistence;
pub mod replication;
mod shared;
