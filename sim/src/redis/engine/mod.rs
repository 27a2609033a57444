//! The command engine: one keyspace, executed one command at a time.
//!
//! The engine has no clock and no network. The caller passes the server host's clock
//! reading (`now_us`, unix microseconds) with every command, so the same engine serves
//! the simulator (a skewed, drifting host clock), the in-process tests (a fixed clock)
//! and `locksim serve-model` (the real clock).
//!
//! The public API below is the contract between the engine and the server layer.
//!
//! The model claims to be Redis 7.0.15; where it knowingly differs is listed on
//! [`Engine`].
//!
//! Layout: this file admits and routes commands and holds the engine's state;
//! `connection.rs` has the connection commands (`HELLO`, `AUTH`, `CLIENT`, the
//! subscriptions), `scripts.rs` `EVAL` and `SCRIPT`, `transactions.rs`
//! `MULTI`/`EXEC`/`WATCH`, `replica.rs` replication (`WAIT`, `REPLICAOF`, `PSYNC`, the
//! link's API), `admin.rs` `CLIENT KILL` and `CONFIG`; the data commands are
//! `commands`'.

mod admin;
mod connection;
mod replica;
mod scripts;
mod transactions;

use std::collections::BTreeMap;

use super::commands::{self, Core, Ctx, Lookup};
use super::keyspace::{DATABASES, ExpiryMode};
pub use super::keyspace::{KeyCause, KeyEvent};
use super::lua::LuaVm;
use super::replication::Role;
use super::reply::Reply;

/// Per-connection state the engine reads and changes (`HELLO`, `SELECT`, `CLIENT
/// SETNAME`, subscriptions, `QUIT`).
#[derive(Debug, Clone)]
pub struct Session {
    /// Redis's client id (`CLIENT ID`), unique per engine.
    pub id: u64,
    /// Who is on the other end (a turmoil host name or a socket address); recorded in
    /// [`KeyEvent`]s so a history can say which client removed which lock.
    pub peer: String,
    /// Negotiated protocol: 2 or 3.
    pub protocol: u8,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Channels this connection is subscribed to, in subscription order.
    pub channels: Vec<Vec<u8>>,
    /// Set by `QUIT` (and by a protocol error): close after writing the reply.
    pub close_after_reply: bool,
    /// What the connection is: a client, this replica's master, or a replica of ours.
    pub kind: SessionKind,
    /// Commands queued since `MULTI` (`None`: not in a transaction).
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command was refused while queueing: `EXEC` aborts.
    pub multi_failed: bool,
    /// Blocked in `WAIT`: its reply comes later, through the push channel, and no
    /// further command is read until then.
    pub blocked: bool,
    /// `REPLCONF listening-port`, kept until the connection becomes a replica.
    pub listening_port: u16,
}

impl Session {
    /// A fresh connection `id` from `peer`: RESP2, no name, no subscriptions.
    pub fn new(id: u64, peer: impl Into<String>) -> Self {
        Self {
            id,
            peer: peer.into(),
            protocol: 2,
            name: None,
            channels: Vec::new(),
            close_after_reply: false,
            kind: SessionKind::Normal,
            multi: None,
            multi_failed: false,
            blocked: false,
            listening_port: 0,
        }
    }
}

/// What a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionKind {
    /// A client.
    #[default]
    Normal,
    /// This replica's link to its master: commands are applied, never refused.
    Master,
    /// A replica of ours, fed the replication stream.
    Replica,
}

/// The Redis model's state: keyspace with expiry, script cache, pub/sub registry.
///
/// The model claims to be Redis 7.0.15 (the `redis-server` the project tests against)
/// and its replies and error texts were checked against it. Choices where Redis itself
/// is not deterministic, or where the model knowingly differs:
/// - `DBSIZE` counts keys not yet reclaimed (expired but not touched), as Redis does;
///   `active_expire` reclaims all of them at once (Redis samples), in database then
///   key order. Expiry follows Redis's `now > when`: a key set with `PX 100` at `t`
///   is still visible at exactly `t + 100 ms` and gone one millisecond later.
/// - `UNSUBSCRIBE` with no argument walks the session's channels in subscription
///   order (Redis walks a hash table, in an order that varies per process).
/// - An empty command (`*0`) produces no reply: `Reply::Frames(vec![])`.
/// - Only the commands in `commands`' table exist; any other is answered as an unknown
///   command (or unknown `CLIENT`/`SCRIPT` subcommand). No pattern subscriptions.
///   `CLIENT SETINFO` is unknown, as in 7.0.15 (it arrived in 7.2).
/// - Lua: no `redis.setresp`. `cjson`, `cmsgpack`, `bit` and `struct` are there
///   (`lua_libs`, checked against 7.0.15 by `tests/lua_libs_real.rs`). Library
///   tables are read-only through proxies: assigning or `rawset` fails as in Redis,
///   but `pairs`/`next` see them empty (so `cjson.encode(math)` gives `{}`),
///   `getmetatable` gives `false` and `setmetatable` fails with Lua's own message.
///   `cjson` nests at most 1000 deep even with a raised `encode_max_depth` /
///   `decode_max_depth`, and a library call returning within a slot of Lua's
///   8000-slot C stack limit fails in the model (mlua needs a spare slot) where Redis
///   succeeds. See `lua::convert` for the conversion limit.
/// - A long script: Redis lets it run and, past `lua-time-limit` (5 s), answers other
///   clients `BUSY` until `SCRIPT KILL` (or, once it wrote, `UNKILLABLE` until
///   `SHUTDOWN NOSAVE`). The model counts Lua instructions instead of time
///   (`lua::SCRIPT_BUDGET_INSTRUCTIONS`, deterministic) and, at the budget, *stops* the
///   script and holds its caller's reply: every other command gets the same `BUSY`
///   (`AUTH` and `HELLO` still work), `SCRIPT KILL` releases the caller's
///   `Script killed by user with SCRIPT KILL...` error, or answers `UNKILLABLE` if the
///   script wrote. The difference: a script that would have finished on its own after
///   the limit never does here, and the caller's own pipelined commands get `BUSY`
///   instead of waiting. No run and no `serve-model` client can hang on a script.
/// - `INFO` has the `server`, `replication`, `cluster` and `keyspace` sections only; host
///   fields are fixed and `run_id` / `master_replid` derive from the engine's seed.
/// - Error replies are `String`s: non-UTF-8 bytes echoed in an error are lossy.
pub struct Engine {
    next_client_id: u64,
    core: Core,
    lua: LuaVm,
    /// Selected database per session id (absent = 0).
    session_db: BTreeMap<u64, usize>,
    /// Commands executed (Redis's `total_commands_processed`), for benchmarks.
    commands_processed: u64,
    /// Fault injection: drop pub/sub messages.
    drop_pushes: bool,
    /// Channels of the pub/sub messages dropped while `drop_pushes` was set, one entry
    /// per subscriber that never heard its message (see [`Engine::take_dropped`]).
    dropped: Vec<String>,
    /// The client commands executed since the last [`Engine::take_commands`] (peer and
    /// command line), when tracing is on (`locksim explore`); `None`: off.
    trace: Option<Vec<(String, String)>>,
    /// A script past its budget, still "running": the server is busy.
    busy: Option<BusyScript>,
    /// Per session: the replication offset after its last command (`c->woff`).
    woff: BTreeMap<u64, u64>,
    /// Per key, the replication offset just after the command that last wrote it: a
    /// replica whose acknowledged offset is below it has not confirmed the write.
    write_offsets: BTreeMap<String, u64>,
    /// Per session: watched keys, and whether one changed since.
    watches: BTreeMap<u64, transactions::Watches>,
    /// Every open session's kind and whether it subscribes (for `CLIENT KILL TYPE`).
    sessions: BTreeMap<u64, (SessionKind, bool)>,
    /// The session this replica applies its master's stream through.
    master_session: Option<Session>,
    /// Running the commands of an `EXEC`.
    in_exec: bool,
    /// The server's config file, if it was started with one (`CONFIG REWRITE`
    /// writes to it); `None`: started without, as a bare `redis-server --port N`.
    config_file: Option<ConfigFile>,
}

/// A server's config file, as far as a restart is concerned: the role and the
/// replication settings that `CONFIG REWRITE` writes and the next start reads. Real
/// Sentinel rewrites it with every role change it makes (`SLAVEOF NO ONE` or
/// `SLAVEOF host port`, then `CONFIG REWRITE`), so a promoted replica comes back from a
/// restart as a master, and a converted old master as a replica. Shared with whoever
/// restarts the server (the file outlives the process); empty until the first rewrite
/// (the start's own settings are the file's first contents).
#[derive(Debug, Clone, Default)]
pub struct ConfigFile(std::sync::Arc<std::sync::Mutex<Option<Rewritten>>>);

/// What a `CONFIG REWRITE` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// `replicaof host port`; `None`: a master.
    pub replica_of: Option<(String, u16)>,
    /// `min-replicas-to-write`.
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`.
    pub min_replicas_max_lag_s: u64,
    /// `replica-priority`.
    pub priority: u64,
}

impl ConfigFile {
    /// What the last rewrite wrote, if any.
    pub fn read(&self) -> Option<Rewritten> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn write(&self, r: Rewritten) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }
}

/// A script that spent its instruction budget. In Redis it would still be running;
/// here it has been stopped, and its caller waits for the reply `SCRIPT KILL` releases.
#[derive(Debug, Clone)]
struct BusyScript {
    /// The caller's session.
    session: u64,
    /// What the caller is told once the script is killed.
    reply: Reply,
    /// Whether it wrote before it was stopped (then `SCRIPT KILL` refuses).
    wrote: bool,
}

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("next_client_id", &self.next_client_id)
            .field("core", &self.core)
            .field("lua", &self.lua)
            .finish()
    }
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

/// `CLIENT SETNAME`'s rule: no spaces, newlines or other special characters.
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

const BAD_CLIENT_NAME: &str = "Client names cannot contain spaces, newlines or special characters.";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

impl Engine {
    /// An empty server.
    pub fn new() -> Self {
        Self::with_seed(0)
    }

    /// An empty server whose identity (`run_id`, `master_replid`, `process_id`) derives
    /// from `seed`.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            next_client_id: 0,
            core: Core::new(seed),
            lua: LuaVm::new().expect("the Lua prelude is valid"),
            session_db: BTreeMap::new(),
            commands_processed: 0,
            drop_pushes: false,
            dropped: Vec::new(),
            trace: None,
            busy: None,
            woff: BTreeMap::new(),
            write_offsets: BTreeMap::new(),
            watches: BTreeMap::new(),
            sessions: BTreeMap::new(),
            master_session: None,
            in_exec: false,
            config_file: None,
        }
    }

    /// Starts this server with `file` as its config file: `CONFIG REWRITE` writes the
    /// role and replication settings to it (see [`ConfigFile`]).
    pub fn set_config_file(&mut self, file: ConfigFile) {
        self.config_file = Some(file);
    }

    /// `CONFIG REWRITE`.
    fn config_rewrite(&mut self) -> Reply {
        let Some(file) = &self.config_file else {
            return Reply::err("The server is running without a config file");
        };
        let repl = &self.core.repl;
        file.write(Rewritten {
            replica_of: match &repl.role {
                Role::Master => None,
                Role::Replica { host, port, .. } => Some((host.clone(), *port)),
            },
            min_replicas_to_write: repl.min_replicas_to_write,
            min_replicas_max_lag_s: repl.min_replicas_max_lag_s,
            priority: repl.priority,
        });
        Reply::ok()
    }

    /// Sets the port `INFO server` reports as `tcp_port` (default 6379).
    pub fn set_tcp_port(&mut self, port: u16) {
        self.core.tcp_port = port;
    }

    /// The database `session` has selected.
    pub fn selected_db(&self, session: &Session) -> usize {
        self.session_db.get(&session.id).copied().unwrap_or(0)
    }

    /// Channels with at least one subscriber, with their subscriber session ids.
    pub fn subscribers(&self) -> &BTreeMap<Vec<u8>, Vec<u64>> {
        &self.core.channels
    }

    /// A session for a new connection from `peer`, with a fresh client id.
    pub fn connect(&mut self, peer: impl Into<String>) -> Session {
        self.next_client_id += 1;
        self.sessions
            .insert(self.next_client_id, (SessionKind::Normal, false));
        Session::new(self.next_client_id, peer)
    }

    /// Forget a closed connection (drops its subscriptions).
    pub fn disconnect(&mut self, session: &Session) {
        self.session_db.remove(&session.id);
        self.woff.remove(&session.id);
        self.watches.remove(&session.id);
        self.sessions.remove(&session.id);
        self.core.repl.replicas.remove(&session.id);
        self.core.repl.waiters.retain(|w| w.session != session.id);
        self.core.channels.retain(|_, ids| {
            ids.retain(|&id| id != session.id);
            !ids.is_empty()
        });
    }

    /// Commands executed so far (from clients; not those run by scripts).
    pub fn commands_processed(&self) -> u64 {
        self.commands_processed
    }

    /// Executes one command (`argv[0]` is the name, any case) at server time `now_us`
    /// and returns its reply. What it changed is propagated to the replicas (their
    /// stream bytes leave through [`Engine::take_pushes`]).
    pub fn execute(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if argv.is_empty() {
            return Reply::Frames(Vec::new());
        }
        if let Some(trace) = &mut self.trace
            && session.kind == SessionKind::Normal
        {
            trace.push((session.peer.clone(), command_line(argv)));
        }
        let events_before = self.core.ks.pending_events();
        let reply = self.dispatch(session, argv, now_us);
        self.end_command(session.id, events_before);
        reply
    }

    /// After a top-level command: lazily expired keys and the command's effects go to
    /// the stream; the client's write offset moves; watchers of changed keys learn it.
    fn end_command(&mut self, session: u64, events_before: usize) {
        self.core.propagate_expired();
        self.core.repl.flush();
        self.woff.insert(session, self.core.repl.offset);
        let offset = self.core.repl.offset;
        for key in self.core.ks.written_since(events_before) {
            self.write_offsets.insert(key, offset);
        }
        self.touch_watched(events_before);
        self.ship_stream();
    }

    fn dispatch(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        self.commands_processed += 1;
        self.core.start_us.get_or_insert(now_us);
        let queueing = session.multi.is_some();
        let spec = match commands::lookup(argv) {
            Lookup::Found(spec) => spec,
            Lookup::Unknown => return self.refuse(session, commands::unknown_command(argv)),
            Lookup::UnknownSubcommand => {
                return self.refuse(session, commands::unknown_subcommand(argv));
            }
        };
        if !commands::arity_ok(&spec, argv.len()) {
            return self.refuse(session, commands::arity_error(&spec));
        }
        if self.busy.is_some() && !matches!(spec.name, "script|kill" | "auth" | "hello") {
            return Reply::Error(BUSY.into());
        }
        let subscribed = session.protocol == 2 && !session.channels.is_empty();
        if subscribed
            && !matches!(
                spec.name,
                "subscribe" | "unsubscribe" | "ping" | "quit" | "reset"
            )
        {
            return Reply::err(format!(
                "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.name
            ));
        }
        let mut ctx = Ctx::new(session.peer.clone(), self.selected_db(session), now_us);
        ctx.from_master = session.kind == SessionKind::Master;
        if spec.write
            && let Some(refusal) = self.core.write_refusal(&ctx)
        {
            return self.refuse(session, refusal);
        }
        if queueing
            && !matches!(
                spec.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            if let Some(queue) = session.multi.as_mut() {
                queue.push(argv.to_vec());
            }
            return Reply::Simple("QUEUED".into());
        }
        self.core.ks.mode = match (self.core.repl.is_replica(), ctx.from_master) {
            (false, _) => ExpiryMode::Delete,
            (true, false) => ExpiryMode::Hide,
            (true, true) => ExpiryMode::Keep,
        };
        let name = spec.name;
        if let Some(reply) = self.session_command(session, name, argv) {
            return reply;
        }
        if let Some(reply) = self.script_command(session, &mut ctx, name, argv) {
            return reply;
        }
        if let Some(reply) = self.transaction_command(session, name, argv, queueing, now_us) {
            return reply;
        }
        match name {
            "ping" if subscribed => Reply::Array(vec![
                Reply::bulk("pong"),
                Reply::Bulk(argv.get(1).cloned().unwrap_or_default()),
            ]),
            "wait" => self.wait(session, argv, now_us),
            "role" => self.core.repl.role_reply(),
            "replicaof" | "slaveof" => self.replicaof(argv, now_us),
            "replconf" => self.replconf(session, argv, now_us),
            "psync" | "sync" => self.sync(session, spec.name == "psync", now_us),
            "config|get" => self.config_get(&argv[2..]),
            "config|set" => self.config_set(&argv[2..], now_us),
            "config|rewrite" => self.config_rewrite(),
            name => {
                let reply = self.core.exec(&mut ctx, name, argv);
                if name == "select" && ctx.db < DATABASES {
                    self.session_db.insert(session.id, ctx.db);
                }
                reply
            }
        }
    }

    /// A command refused before it ran: inside `MULTI` the transaction is doomed
    /// (`flagTransaction`).
    fn refuse(&mut self, session: &mut Session, reply: Reply) -> Reply {
        if session.multi.is_some() {
            session.multi_failed = true;
        }
        reply
    }

    /// One active-expiry cycle at `now_us`: removes expired keys (each propagated as its
    /// own `DEL`); returns how many. A replica expires nothing: it waits for its
    /// master's `DEL`s.
    pub fn active_expire(&mut self, now_us: u64) -> usize {
        if self.core.repl.is_replica() {
            return 0;
        }
        let events_before = self.core.ks.pending_events();
        self.core.ks.mode = ExpiryMode::Delete;
        let removed = self.core.ks.expire_all(now_us);
        for (db, key) in &removed {
            self.core
                .repl
                .propagate(*db, vec![b"DEL".to_vec(), key.clone()]);
            self.core.repl.flush();
        }
        self.touch_watched(events_before);
        self.ship_stream();
        removed.len()
    }

    /// Messages published since the last call, as `(session id, push reply)`, in
    /// delivery order. The server layer writes each to its connection.
    pub fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        let pushes = std::mem::take(&mut self.core.pushes);
        if self.drop_pushes {
            // Only pub/sub messages are lost; a held script reply is not a message.
            let (lost, kept): (Vec<_>, Vec<_>) = pushes
                .into_iter()
                .partition(|(_, r)| matches!(r, Reply::Push(_)));
            self.dropped
                .extend(lost.iter().filter_map(|(_, r)| match r {
                    Reply::Push(items) => match items.get(1) {
                        Some(Reply::Bulk(channel)) => {
                            Some(String::from_utf8_lossy(channel).into_owned())
                        }
                        _ => None,
                    },
                    _ => None,
                }));
            kept
        } else {
            pushes
        }
    }

    /// The channels of messages dropped since the last call (one per subscriber that
    /// missed one), for the history.
    pub fn take_dropped(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dropped)
    }

    /// Turns the command trace on or off (see [`Engine::take_commands`]).
    pub fn set_tracing(&mut self, on: bool) {
        self.trace = on.then(Vec::new);
    }

    /// The client commands executed since the last call, as (peer, command line), when
    /// tracing is on.
    pub fn take_commands(&mut self) -> Vec<(String, String)> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// While set, every pub/sub message is dropped on the way out (a fault: the
    /// subscribers never hear it, while `PUBLISH` still counts them).
    pub fn set_drop_pushes(&mut self, drop: bool) {
        self.drop_pushes = drop;
    }

    /// Every stored key (expired or not, database then key order), for persistence.
    pub fn dump(&self) -> Vec<(usize, Vec<u8>, super::keyspace::Entry)> {
        self.core.ks.entries()
    }

    /// Loads keys saved by [`Engine::dump`] into an empty server, recording no events
    /// (a restart loading its AOF). Keys whose expiry has passed stay until first
    /// touched or the next expiry cycle, as after Redis loads an AOF.
    pub fn load(&mut self, entries: Vec<(usize, Vec<u8>, super::keyspace::Entry)>) {
        for (db, key, entry) in entries {
            if db < DATABASES {
                self.core.ks.restore(db, &key, entry);
            }
        }
    }

    /// The replication offset just after the last write of `key` (see
    /// `write_offsets`), if a command wrote it.
    pub fn write_offset(&self, key: &str) -> Option<u64> {
        self.write_offsets.get(key).copied()
    }

    /// Key events recorded since the last call, oldest first.
    pub fn take_key_events(&mut self) -> Vec<KeyEvent> {
        self.core.ks.take_events()
    }
}

fn one_or_frames(mut frames: Vec<Reply>) -> Reply {
    if frames.len() == 1 {
        frames.pop().unwrap_or(Reply::Frames(Vec::new()))
    } else {
        Reply::Frames(frames)
    }
}

fn compile_error(e: &str) -> Reply {
    Reply::err(commands::no_newlines(&format!(
        "Error compiling script (new function): {e}"
    )))
}

/// A command as a trace shows it: the name in capitals and the key (or, for a script,
/// the first 8 characters of its digest and its first key), no values.
fn command_line(argv: &[Vec<u8>]) -> String {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
    let arg = |i: usize| argv.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
    match name.as_str() {
        "EVALSHA" | "EVAL" => {
            let script = arg(1).unwrap_or_default();
            let short: String = if name == "EVALSHA" {
                script.chars().take(8).collect()
            } else {
                "script".into()
            };
            let key = if arg(2).as_deref().is_some_and(|n| n != "0") {
                arg(3).unwrap_or_default()
            } else {
                String::new()
            };
            format!("{name} {short} {key}").trim_end().to_string()
        }
        _ => match arg(1) {
            Some(a) => format!("{name} {a}"),
            None => name,
        },
    }
}
