//! The command engine: one keyspace, executed one command at a time.
//!
//! The engine has no clock and no network. The caller passes the server host's clock
//! reading (`now_us`, unix microseconds) with every command, so the same engine serves
//! the simulator (a skewed, drifting host clock), the in-process tests (a fixed clock)
//! and `locksim serve-model` (the real clock).
//!
//! The public API below is the contract between the engine and the server layer.
//!
//! The model claims to be Redis 7.0.15 (the `redis-server` the project tests against)
//! and its replies and error texts were checked against it. Choices where Redis itself
//! is not deterministic, or where the model knowingly differs:
//! - `DBSIZE` counts keys not yet reclaimed (expired but not touched), as Redis does;
//!   `active_expire` reclaims all of them at once (Redis samples), in database then
//!   key order. Expiry follows Redis's `now > when`: a key set with `PX 100` at `t`
//!   is still visible at exactly `t + 100 ms` and gone one millisecond later.
//! - `UNSUBSCRIBE` with no argument walks the session's channels in subscription
//!   order (Redis walks a hash table, in an order that varies per process).
//! - An empty command (`*0`) produces no reply: `Reply::Frames(vec![])`.
//! - Only the commands in `commands.rs` exist; any other is answered as an unknown
//!   command (or unknown `CLIENT`/`SCRIPT` subcommand). No pattern subscriptions.
//!   `CLIENT SETINFO` is unknown, as in 7.0.15 (it arrived in 7.2).
//! - Lua: no `cjson`, `bit`, `struct`, `cmsgpack`, no `redis.setresp`; library
//!   tables are read-only through proxies. See `lua.rs` for the conversion limit.
//! - A long script: Redis lets it run and, past `lua-time-limit` (5 s), answers other
//!   clients `BUSY` until `SCRIPT KILL` (or, once it wrote, `UNKILLABLE` until
//!   `SHUTDOWN NOSAVE`). The model counts Lua instructions instead of time
//!   (`lua::SCRIPT_BUDGET_INSTRUCTIONS`, deterministic) and, at the budget, *stops* the
//!   script and holds its caller's reply: every other command gets the same `BUSY`
//!   (`AUTH` and `HELLO` still work), `SCRIPT KILL` releases the caller's
//!   `Script killed by user with SCRIPT KILL...` error, or answers `UNKILLABLE` if the
//!   script wrote. The difference: a script that would have finished on its own after
//!   the limit never does here, and the caller's own pipelined commands get `BUSY`
//!   instead of waiting. No run and no `serve-model` client can hang on a script.
//! - `INFO` has the `server`, `replication` and `keyspace` sections only; host
//!   fields are fixed and `run_id` / `master_replid` derive from the engine's seed.
//! - Error replies are `String`s: non-UTF-8 bytes echoed in an error are lossy.

use std::collections::BTreeMap;

use super::commands::{self, Core, Ctx, Lookup, REDIS_VERSION};
use super::keyspace::{DATABASES, ExpiryMode};
use super::lua::LuaVm;
use super::replication::{LinkState, ReplicaInfo, Role, Waiter, encode_snapshot};
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

/// A session's `WATCH`ed keys (`multi.c`).
#[derive(Debug, Clone, Default)]
struct Watches {
    /// (database, key, already expired when watched).
    keys: Vec<(usize, Vec<u8>, bool)>,
    /// A watched key changed: `EXEC` fails.
    dirty: bool,
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

/// Why a key left the keyspace, or was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyCause {
    /// `DEL`, `UNLINK`, `GETDEL`, or a hash losing its last field, from a command or a
    /// script.
    Command,
    /// Expired (lazily or by the active cycle).
    Expired,
    /// Replaced by a `SET` that overwrote it.
    Overwritten,
    /// `FLUSHALL` / `FLUSHDB`.
    Flushed,
    /// A replica's full sync replaced its dataset with its master's.
    Resync,
}

/// The server's own record of what happened to keys: the ground truth a checker uses
/// to tell whose lock a release really removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyEvent {
    /// A string key was written (by `SET`, `SETNX`, ...), or a hash field (by `HSET`,
    /// `HINCRBY`; `value` is then the field's name).
    Written {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// The value written (lossy UTF-8).
        value: String,
    },
    /// A command set a key's expiry (`EXPIRE`, `PEXPIRE`, `PEXPIREAT`; from a client or
    /// a script): how a lease is armed or a watchdog renews it.
    ExpireSet {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer.
        by: String,
        /// The key.
        key: String,
        /// Time to live from now, in milliseconds.
        ttl_ms: i64,
    },
    /// A key was removed.
    Removed {
        /// Server clock, unix microseconds.
        at_us: u64,
        /// The session's peer, or `"expiry"` for expiry.
        by: String,
        /// The key.
        key: String,
        /// For a string: its value; for a hash: its field names joined with `,`.
        value: String,
        /// Why.
        cause: KeyCause,
    },
}

/// The Redis model's state: keyspace with expiry, script cache, pub/sub registry.
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
    /// A script past its budget, still "running": the server is busy.
    busy: Option<BusyScript>,
    /// Per session: the replication offset after its last command (`c->woff`).
    woff: BTreeMap<u64, u64>,
    /// Per session: watched keys, and whether one changed since.
    watches: BTreeMap<u64, Watches>,
    /// Every open session's kind and whether it subscribes (for `CLIENT KILL TYPE`).
    sessions: BTreeMap<u64, (SessionKind, bool)>,
    /// The session this replica applies its master's stream through.
    master_session: Option<Session>,
    /// Running the commands of an `EXEC`.
    in_exec: bool,
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
            busy: None,
            woff: BTreeMap::new(),
            watches: BTreeMap::new(),
            sessions: BTreeMap::new(),
            master_session: None,
            in_exec: false,
        }
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
        self.touch_watched(events_before);
        self.ship_stream();
    }

    /// Writes the stream bytes fed since the last call to every replica.
    fn ship_stream(&mut self) {
        if self.core.repl.get_ack && !self.core.repl.replicas.is_empty() {
            self.core.repl.get_ack = false;
            self.core
                .repl
                .feed_raw(&[b"REPLCONF".as_slice(), b"GETACK", b"*"]);
        }
        let bytes = self.core.repl.take_stream();
        if bytes.is_empty() {
            return;
        }
        for &id in self.core.repl.replicas.keys() {
            self.core.pushes.push((id, Reply::Raw(bytes.clone())));
        }
    }

    /// Marks the transactions watching a key that changed since `events_before`.
    fn touch_watched(&mut self, events_before: usize) {
        if self.watches.is_empty() {
            return;
        }
        let changed = self.core.ks.events_since(events_before);
        if changed.is_empty() {
            return;
        }
        let ks = &self.core.ks;
        for w in self.watches.values_mut() {
            for (db, key, expired) in &mut w.keys {
                if !changed.iter().any(|(d, k)| d == db && k == key) {
                    continue;
                }
                // `touchWatchedKey`: deleting a key that had already expired when it
                // was watched is no change.
                if *expired && ks.peek(*db, key).is_none() {
                    *expired = false;
                } else {
                    w.dirty = true;
                }
            }
        }
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
        match spec.name {
            "ping" if subscribed => Reply::Array(vec![
                Reply::bulk("pong"),
                Reply::Bulk(argv.get(1).cloned().unwrap_or_default()),
            ]),
            "quit" => {
                session.close_after_reply = true;
                Reply::ok()
            }
            "hello" => self.hello(session, argv),
            "reset" => {
                self.disconnect(session);
                self.sessions
                    .insert(session.id, (SessionKind::Normal, false));
                session.channels.clear();
                session.protocol = 2;
                session.name = None;
                session.multi = None;
                session.multi_failed = false;
                Reply::Simple("RESET".into())
            }
            "auth" => match argv.len() {
                2 => Reply::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ),
                3 if argv[1] == b"default" => Reply::ok(),
                3 => Reply::Error(WRONGPASS.into()),
                _ => Reply::err("syntax error"),
            },
            "client|id" => Reply::Integer(session.id as i64),
            "client|getname" => session.name.clone().map_or(Reply::Nil, Reply::Bulk),
            "client|setname" => {
                if !valid_client_name(&argv[2]) {
                    return Reply::err(BAD_CLIENT_NAME);
                }
                session.name = if argv[2].is_empty() {
                    None
                } else {
                    Some(argv[2].clone())
                };
                Reply::ok()
            }
            "client|kill" => self.client_kill(session, argv),
            "subscribe" => {
                let reply = self.subscribe(session, &argv[1..]);
                self.sessions.insert(session.id, (session.kind, true));
                reply
            }
            "unsubscribe" => {
                let reply = self.unsubscribe(session, &argv[1..]);
                let subscribing = !session.channels.is_empty();
                self.sessions
                    .insert(session.id, (session.kind, subscribing));
                reply
            }
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => {
                ctx.read_only = spec.name.ends_with("_ro");
                let writes_before = self.core.ks.pending_events();
                let reply = self.eval(&mut ctx, spec.name.starts_with("evalsha"), argv);
                if !self.lua.budget_spent() {
                    return reply;
                }
                // The script ran past its budget: the server is busy until SCRIPT KILL;
                // the caller hears nothing until then (its reply is held).
                self.busy = Some(BusyScript {
                    session: session.id,
                    reply,
                    wrote: self.core.ks.pending_events() > writes_before,
                });
                Reply::Frames(Vec::new())
            }
            "script|kill" => match self.busy.take() {
                None => Reply::Error(NOTBUSY.into()),
                Some(busy) if busy.wrote => {
                    self.busy = Some(busy);
                    Reply::Error(UNKILLABLE.into())
                }
                Some(busy) => {
                    self.core.pushes.push((busy.session, busy.reply));
                    Reply::ok()
                }
            },
            "script|load" => match self.lua.load(&argv[2]) {
                Ok(sha) => Reply::bulk(sha),
                Err(e) => compile_error(&e),
            },
            "script|exists" => Reply::Array(
                argv[2..]
                    .iter()
                    .map(|sha| {
                        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                        Reply::Integer(i64::from(self.lua.exists(&sha)))
                    })
                    .collect(),
            ),
            "script|flush" => {
                if argv.len() > 3
                    || (argv.len() == 3
                        && !argv[2].eq_ignore_ascii_case(b"sync")
                        && !argv[2].eq_ignore_ascii_case(b"async"))
                {
                    return Reply::err("SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                self.lua.flush();
                Reply::ok()
            }
            "multi" => {
                if queueing {
                    return Reply::err("MULTI calls can not be nested");
                }
                session.multi = Some(Vec::new());
                session.multi_failed = false;
                Reply::ok()
            }
            "discard" => {
                if !queueing {
                    return Reply::err("DISCARD without MULTI");
                }
                session.multi = None;
                self.watches.remove(&session.id);
                Reply::ok()
            }
            "exec" => self.exec(session, now_us),
            "watch" => {
                if queueing {
                    return Reply::err("WATCH inside MULTI is not allowed");
                }
                let db = self.selected_db(session);
                let now_ms = (now_us / 1000) as i64;
                let entry = self.watches.entry(session.id).or_default();
                for key in &argv[1..] {
                    if !entry.keys.iter().any(|(d, k, _)| *d == db && k == key) {
                        let expired = self
                            .core
                            .ks
                            .peek(db, key)
                            .is_some_and(|e| super::keyspace::is_expired(e, now_ms));
                        entry.keys.push((db, key.clone(), expired));
                    }
                }
                Reply::ok()
            }
            "unwatch" => {
                self.watches.remove(&session.id);
                Reply::ok()
            }
            "wait" => self.wait(session, argv, now_us),
            "role" => self.core.repl.role_reply(),
            "replicaof" | "slaveof" => self.replicaof(argv, now_us),
            "replconf" => self.replconf(session, argv, now_us),
            "psync" | "sync" => self.sync(session, spec.name == "psync", now_us),
            "config|get" => self.config_get(&argv[2..]),
            "config|set" => self.config_set(&argv[2..], now_us),
            "config|rewrite" => Reply::err("The server is running without a config file"),
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

    fn exec(&mut self, session: &mut Session, now_us: u64) -> Reply {
        let Some(queue) = session.multi.take() else {
            return Reply::err("EXEC without MULTI");
        };
        let watched = self.watches.remove(&session.id);
        if std::mem::take(&mut session.multi_failed) {
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        let now_ms = (now_us / 1000) as i64;
        if let Some(w) = watched {
            // `isWatchedKeyExpired`: a watched key, alive when watched, that has
            // expired since also fails the transaction.
            let expired = w.keys.iter().any(|(db, k, was_expired)| {
                !*was_expired
                    && self
                        .core
                        .ks
                        .peek(*db, k)
                        .is_some_and(|e| super::keyspace::is_expired(e, now_ms))
            });
            if w.dirty || expired {
                return Reply::NilArray;
            }
        }
        self.in_exec = true;
        let mut replies = Vec::with_capacity(queue.len());
        for argv in &queue {
            replies.push(self.dispatch(session, argv, now_us));
        }
        self.in_exec = false;
        Reply::Array(replies)
    }

    fn wait(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if self.core.repl.is_replica() {
            return Reply::err(
                "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
            );
        }
        let Some(numreplicas) = commands::parse_i64(&argv[1]) else {
            return Reply::err("value is not an integer or out of range");
        };
        let Some(timeout) = commands::parse_i64(&argv[2]) else {
            return Reply::err("timeout is not an integer or out of range");
        };
        if timeout < 0 {
            return Reply::err("timeout is negative");
        }
        let offset = self.woff.get(&session.id).copied().unwrap_or(0);
        let acks = self.core.repl.acks_for(offset);
        if acks as i64 >= numreplicas || self.in_exec {
            return Reply::Integer(acks as i64);
        }
        self.core.repl.waiters.push(Waiter {
            session: session.id,
            offset,
            numreplicas: numreplicas as u64,
            deadline_us: (timeout > 0).then(|| now_us.saturating_add(timeout as u64 * 1000)),
        });
        self.core.repl.get_ack = true;
        session.blocked = true;
        Reply::Frames(Vec::new())
    }

    /// Answers the `WAIT`s that are satisfied, or whose timeout passed by `now_us`.
    pub fn serve_waiters(&mut self, now_us: u64) {
        let repl = &mut self.core.repl;
        let mut still = Vec::new();
        for w in std::mem::take(&mut repl.waiters) {
            let acks = repl.acks_for(w.offset);
            if acks >= w.numreplicas || w.deadline_us.is_some_and(|d| now_us >= d) {
                self.core
                    .pushes
                    .push((w.session, Reply::Integer(acks as i64)));
            } else {
                still.push(w);
            }
        }
        self.core.repl.waiters = still;
    }

    /// When the next `WAIT` times out (server clock, us), if any waits with a timeout.
    pub fn next_wait_deadline(&self) -> Option<u64> {
        self.core
            .repl
            .waiters
            .iter()
            .filter_map(|w| w.deadline_us)
            .min()
    }

    fn replicaof(&mut self, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one") {
            if self.core.repl.is_replica() {
                self.promote(now_us);
            }
            return Reply::ok();
        }
        let Some(port) = commands::parse_i64(&argv[2]) else {
            return Reply::err("value is not an integer or out of range");
        };
        let Ok(port) = u16::try_from(port) else {
            return Reply::err("Invalid master port");
        };
        let host = String::from_utf8_lossy(&argv[1]).into_owned();
        if let Role::Replica {
            host: h, port: p, ..
        } = &self.core.repl.role
            && h.eq_ignore_ascii_case(&host)
            && *p == port
        {
            return Reply::Simple("OK Already connected to specified master".into());
        }
        self.follow(host, port, now_us);
        Reply::ok()
    }

    /// Becomes a replica of `host:port` (`replicationSetMaster`): replicas of ours are
    /// dropped, clients blocked in `WAIT` are released with an error, and the link
    /// connects at the next cron.
    pub fn follow(&mut self, host: String, port: u16, now_us: u64) {
        let repl = &mut self.core.repl;
        let was_master = !repl.is_replica();
        repl.role = Role::Replica {
            host,
            port,
            link: LinkState::Connect,
        };
        repl.generation += 1;
        repl.link_down_since_us = Some(now_us);
        for id in std::mem::take(&mut repl.replicas).into_keys() {
            self.core.pushes.push((id, Reply::Close));
        }
        for w in std::mem::take(&mut self.core.repl.waiters) {
            self.core.pushes.push((
                w.session,
                Reply::Error(
                    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
                        .into(),
                ),
            ));
        }
        if was_master {
            // The old replication history continues as the secondary id.
            let repl = &mut self.core.repl;
            repl.replid2 = repl.replid.clone();
            repl.second_offset = repl.offset as i64 + 1;
        }
        self.master_session = None;
    }

    /// `REPLICAOF NO ONE` (`replicationUnsetMaster`): a new replication id, the old one
    /// kept as the secondary; the data stays.
    pub fn promote(&mut self, now_us: u64) {
        let generation = self.core.repl.generation + 1;
        let repl = &mut self.core.repl;
        repl.replid2 = repl.replid.clone();
        repl.second_offset = repl.offset as i64 + 1;
        repl.replid = commands::hex_id(self.core.seed ^ generation.rotate_left(17), "promoted");
        repl.role = Role::Master;
        repl.generation = generation;
        repl.link_down_since_us = None;
        repl.reset_seldb();
        repl.backlog_start.get_or_insert(repl.offset + 1);
        repl.last_io_us = now_us;
        self.master_session = None;
    }

    fn replconf(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if argv.len().is_multiple_of(2) {
            return Reply::err("syntax error");
        }
        for pair in argv[1..].chunks(2) {
            let opt = pair[0].to_ascii_lowercase();
            match opt.as_slice() {
                b"listening-port" => match commands::parse_i64(&pair[1]) {
                    Some(p) => session.listening_port = p.clamp(0, 65535) as u16,
                    None => return Reply::err("value is not an integer or out of range"),
                },
                b"ack" => {
                    // Never answered.
                    let Some(offset) = commands::parse_i64(&pair[1]) else {
                        return Reply::Frames(Vec::new());
                    };
                    if let Some(r) = self.core.repl.replicas.get_mut(&session.id) {
                        r.ack_offset = r.ack_offset.max(offset.max(0) as u64);
                        r.ack_ms = now_us / 1000;
                    }
                    self.serve_waiters(now_us);
                    return Reply::Frames(Vec::new());
                }
                b"getack" => return Reply::Frames(Vec::new()),
                b"capa" | b"ip-address" | b"rdb-only" => {}
                _ => {
                    return Reply::err(format!(
                        "Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            }
        }
        Reply::ok()
    }

    /// `PSYNC`/`SYNC` from a replica: always a full resynchronisation, the dataset
    /// sent at once, then the stream.
    fn sync(&mut self, session: &mut Session, psync: bool, now_us: u64) -> Reply {
        if self.core.repl.is_replica() {
            // Chained replication is not modelled.
            return Reply::Error(
                "NOMASTERLINK Can't SYNC while not connected with my master".into(),
            );
        }
        let repl = &mut self.core.repl;
        repl.backlog_start.get_or_insert(repl.offset + 1);
        repl.reset_seldb();
        let ip = match session.peer.rsplit_once(':') {
            Some((ip, port)) if port.parse::<u16>().is_ok() => ip.to_string(),
            _ => session.peer.clone(),
        };
        repl.replicas.insert(
            session.id,
            ReplicaInfo {
                ip,
                port: session.listening_port,
                ack_offset: 0,
                ack_ms: now_us / 1000,
            },
        );
        session.kind = SessionKind::Replica;
        self.sessions
            .insert(session.id, (SessionKind::Replica, false));
        let snapshot = encode_snapshot(&self.core.ks.entries());
        let mut payload = format!("${}\r\n", snapshot.len()).into_bytes();
        payload.extend_from_slice(&snapshot);
        let mut frames = Vec::new();
        if psync {
            frames.push(Reply::Simple(format!(
                "FULLRESYNC {} {}",
                self.core.repl.replid, self.core.repl.offset
            )));
        }
        frames.push(Reply::Raw(payload));
        Reply::Frames(frames)
    }

    fn client_kill(&mut self, session: &Session, argv: &[Vec<u8>]) -> Reply {
        if argv.len() == 3 {
            // The old form, `CLIENT KILL addr:port`: the model does not name clients by
            // address.
            return Reply::err("No such client");
        }
        let mut kind: Option<&[u8]> = None;
        let mut skipme = true;
        for pair in argv[2..].chunks(2) {
            if pair.len() < 2 {
                return Reply::err("syntax error");
            }
            match pair[0].to_ascii_lowercase().as_slice() {
                b"type" => kind = Some(&pair[1]),
                b"skipme" => match pair[1].to_ascii_lowercase().as_slice() {
                    b"yes" => skipme = true,
                    b"no" => skipme = false,
                    _ => return Reply::err("syntax error"),
                },
                _ => return Reply::err("syntax error"),
            }
        }
        let wanted = match kind.map(|k| k.to_ascii_lowercase()) {
            None => None,
            Some(k) => match k.as_slice() {
                b"normal" => Some("normal"),
                b"master" => Some("master"),
                b"replica" | b"slave" => Some("replica"),
                b"pubsub" => Some("pubsub"),
                _ => {
                    return Reply::err(format!(
                        "Unknown client type '{}'",
                        String::from_utf8_lossy(kind.unwrap_or_default())
                    ));
                }
            },
        };
        let victims: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(id, _)| !(skipme && **id == session.id))
            .filter(|(_, (k, subscribed))| {
                let t = match (k, subscribed) {
                    (SessionKind::Replica, _) => "replica",
                    (SessionKind::Master, _) => "master",
                    (SessionKind::Normal, true) => "pubsub",
                    (SessionKind::Normal, false) => "normal",
                };
                wanted.is_none_or(|w| w == t)
            })
            .map(|(id, _)| *id)
            .collect();
        for &id in &victims {
            self.core.pushes.push((id, Reply::Close));
        }
        Reply::Integer(victims.len() as i64)
    }

    fn config_get(&mut self, patterns: &[Vec<u8>]) -> Reply {
        let repl = &self.core.repl;
        let params: [(&str, String); 4] = [
            (
                "min-replicas-to-write",
                repl.min_replicas_to_write.to_string(),
            ),
            (
                "min-replicas-max-lag",
                repl.min_replicas_max_lag_s.to_string(),
            ),
            ("replica-priority", repl.priority.to_string()),
            ("replica-read-only", "yes".into()),
        ];
        let mut out = Vec::new();
        for (name, value) in &params {
            if patterns
                .iter()
                .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()))
            {
                out.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        Reply::Map(out)
    }

    fn config_set(&mut self, args: &[Vec<u8>], now_us: u64) -> Reply {
        if !args.len().is_multiple_of(2) {
            return Reply::err("wrong number of arguments for 'config|set' command");
        }
        for pair in args.chunks(2) {
            let name = pair[0].to_ascii_lowercase();
            let value = commands::parse_i64(&pair[1]);
            let repl = &mut self.core.repl;
            let slot = match name.as_slice() {
                b"min-replicas-to-write" | b"min-slaves-to-write" => {
                    &mut repl.min_replicas_to_write
                }
                b"min-replicas-max-lag" | b"min-slaves-max-lag" => &mut repl.min_replicas_max_lag_s,
                b"replica-priority" | b"slave-priority" => &mut repl.priority,
                _ => {
                    return Reply::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{}'",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            };
            match value {
                Some(v) if v >= 0 && v <= i64::from(i32::MAX) => *slot = v as u64,
                _ => {
                    return Reply::err(format!(
                        "CONFIG SET failed (possibly related to argument '{}') - argument couldn't be parsed into an integer",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            }
        }
        self.core.repl.refresh_good_replicas(now_us / 1000);
        Reply::ok()
    }

    /// The replication cron (`replicationCron`, once a second at server time
    /// `now_us`, `tick` counting seconds): a master counts its good replicas and PINGs
    /// them every `repl-ping-replica-period`; `WAIT`s whose time is up are answered.
    pub fn replication_cron(&mut self, now_us: u64, tick: u64) {
        let repl = &mut self.core.repl;
        if !repl.is_replica() {
            repl.refresh_good_replicas(now_us / 1000);
            if tick.is_multiple_of(super::replication::REPL_PING_PERIOD_S)
                && !repl.replicas.is_empty()
            {
                repl.feed_raw(&[b"PING".as_slice()]);
            }
        }
        self.serve_waiters(now_us);
        self.ship_stream();
    }

    /// Whom this replica should follow, and the generation of that order.
    pub fn link_target(&self) -> Option<(String, u16, u64)> {
        match &self.core.repl.role {
            Role::Replica { host, port, .. } => {
                Some((host.clone(), *port, self.core.repl.generation))
            }
            Role::Master => None,
        }
    }

    /// The replica's link of `generation` moved to `state`; false if that link is
    /// stale (a `REPLICAOF` since).
    pub fn set_link(&mut self, generation: u64, state: LinkState, now_us: u64) -> bool {
        let repl = &mut self.core.repl;
        if repl.generation != generation {
            return false;
        }
        if let Role::Replica { link, .. } = &mut repl.role {
            if *link == LinkState::Connected && state != LinkState::Connected {
                repl.link_down_since_us = Some(now_us);
            }
            *link = state;
        }
        if state != LinkState::Connected {
            self.master_session = None;
        }
        true
    }

    /// A full sync arrived on the link of `generation` from `master`: the dataset is
    /// replaced by the master's, and the stream continues from `offset`.
    pub fn full_sync(
        &mut self,
        generation: u64,
        replid: &str,
        offset: u64,
        snapshot: &[u8],
        master: &str,
        now_us: u64,
    ) -> Result<(), String> {
        if self.core.repl.generation != generation {
            return Err("stale link".into());
        }
        let entries = super::replication::decode_snapshot(snapshot)
            .ok_or_else(|| "the master's payload is not a model snapshot".to_string())?;
        self.core.ks.replace_all(entries, now_us, master);
        let repl = &mut self.core.repl;
        repl.offset = offset;
        // A synced replica keeps a backlog too (for its own replicas, and a promotion).
        repl.backlog_start = Some(offset + 1);
        repl.replid = replid.to_string();
        repl.master_replid = Some(replid.to_string());
        // A new history: the secondary id is cleared (`clearReplicationId2`).
        repl.replid2 = "0".repeat(40);
        repl.second_offset = -1;
        repl.last_io_us = now_us;
        repl.link_down_since_us = None;
        if let Role::Replica { link, .. } = &mut repl.role {
            *link = LinkState::Connected;
        }
        let mut session = self.connect(master);
        session.kind = SessionKind::Master;
        self.sessions
            .insert(session.id, (SessionKind::Master, false));
        self.master_session = Some(session);
        Ok(())
    }

    /// Applies one command of the master's stream (`nbytes` long) on the link of
    /// `generation`. Returns `Some(offset)` when the master asked for an ACK
    /// (`REPLCONF GETACK`), `None` otherwise; `Err` if the link is stale.
    pub fn apply_from_master(
        &mut self,
        generation: u64,
        argv: &[Vec<u8>],
        nbytes: u64,
        now_us: u64,
    ) -> Result<Option<u64>, String> {
        if self.core.repl.generation != generation {
            return Err("stale link".into());
        }
        let Some(mut session) = self.master_session.take() else {
            return Err("no master session".into());
        };
        let getack = argv.len() >= 2
            && argv[0].eq_ignore_ascii_case(b"replconf")
            && argv[1].eq_ignore_ascii_case(b"getack");
        let events_before = self.core.ks.pending_events();
        if !argv.is_empty() {
            let _ = self.dispatch(&mut session, argv, now_us);
        }
        self.touch_watched(events_before);
        self.master_session = Some(session);
        let repl = &mut self.core.repl;
        let ack = getack.then_some(repl.offset);
        repl.offset += nbytes;
        repl.last_io_us = now_us;
        Ok(ack)
    }

    /// The replica's processed offset (what its `REPLCONF ACK` reports).
    pub fn replica_offset(&self) -> u64 {
        self.core.repl.offset
    }

    /// The replication state, for observers and tests.
    pub fn replication(&self) -> &super::replication::Repl {
        &self.core.repl
    }

    /// Mutable replication settings (`min-replicas-to-write`, priority), for the
    /// server's configuration at start.
    pub fn replication_mut(&mut self) -> &mut super::replication::Repl {
        &mut self.core.repl
    }

    fn hello(&mut self, session: &mut Session, argv: &[Vec<u8>]) -> Reply {
        let mut ver = None;
        if argv.len() >= 2 {
            match commands::parse_i64(&argv[1]) {
                None => return Reply::err("Protocol version is not an integer or out of range"),
                Some(v) if !(2..=3).contains(&v) => {
                    return Reply::Error("NOPROTO unsupported protocol version".into());
                }
                Some(v) => ver = Some(v as u8),
            }
        }
        let mut auth: Option<(&[u8], &[u8])> = None;
        let mut name: Option<&[u8]> = None;
        let mut j = 2;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if argv[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                auth = Some((&argv[j + 1], &argv[j + 2]));
                j += 2;
            } else if argv[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                name = Some(&argv[j + 1]);
                j += 1;
            } else {
                return Reply::err(format!(
                    "Syntax error in HELLO option '{}'",
                    commands::c_str(&argv[j], usize::MAX)
                ));
            }
            j += 1;
        }
        if let Some((user, _)) = auth
            && user != b"default"
        {
            return Reply::Error(WRONGPASS.into());
        }
        if let Some(name) = name {
            if !valid_client_name(name) {
                return Reply::err(BAD_CLIENT_NAME);
            }
            session.name = if name.is_empty() {
                None
            } else {
                Some(name.to_vec())
            };
        }
        if let Some(v) = ver {
            session.protocol = v;
        }
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
            (
                Reply::bulk("proto"),
                Reply::Integer(i64::from(session.protocol)),
            ),
            (Reply::bulk("id"), Reply::Integer(session.id as i64)),
            (Reply::bulk("mode"), Reply::bulk("standalone")),
            (
                Reply::bulk("role"),
                Reply::bulk(if self.core.repl.is_replica() {
                    "replica"
                } else {
                    "master"
                }),
            ),
            (Reply::bulk("modules"), Reply::Array(Vec::new())),
        ])
    }

    fn subscribe(&mut self, session: &mut Session, channels: &[Vec<u8>]) -> Reply {
        let mut frames = Vec::new();
        for ch in channels {
            if !session.channels.contains(ch) {
                session.channels.push(ch.clone());
                self.core
                    .channels
                    .entry(ch.clone())
                    .or_default()
                    .push(session.id);
            }
            frames.push(Reply::Push(vec![
                Reply::bulk("subscribe"),
                Reply::Bulk(ch.clone()),
                Reply::Integer(session.channels.len() as i64),
            ]));
        }
        one_or_frames(frames)
    }

    fn unsubscribe(&mut self, session: &mut Session, channels: &[Vec<u8>]) -> Reply {
        let targets: Vec<Vec<u8>> = if channels.is_empty() {
            session.channels.clone()
        } else {
            channels.to_vec()
        };
        if targets.is_empty() {
            return Reply::Push(vec![
                Reply::bulk("unsubscribe"),
                Reply::Nil,
                Reply::Integer(0),
            ]);
        }
        let mut frames = Vec::new();
        for ch in targets {
            if let Some(pos) = session.channels.iter().position(|c| *c == ch) {
                session.channels.remove(pos);
                if let Some(ids) = self.core.channels.get_mut(&ch) {
                    ids.retain(|&id| id != session.id);
                    if ids.is_empty() {
                        self.core.channels.remove(&ch);
                    }
                }
            }
            frames.push(Reply::Push(vec![
                Reply::bulk("unsubscribe"),
                Reply::Bulk(ch),
                Reply::Integer(session.channels.len() as i64),
            ]));
        }
        one_or_frames(frames)
    }

    fn eval(&mut self, ctx: &mut Ctx, by_sha: bool, argv: &[Vec<u8>]) -> Reply {
        let Some(numkeys) = commands::parse_i64(&argv[2]) else {
            return Reply::err("value is not an integer or out of range");
        };
        if numkeys > (argv.len() - 3) as i64 {
            return Reply::err("Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return Reply::err("Number of keys can't be negative");
        }
        let sha = if by_sha {
            let sha = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
            if sha.len() != 40 || !self.lua.exists(&sha) {
                return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
            }
            sha
        } else {
            match self.lua.load(&argv[1]) {
                Ok(sha) => sha,
                Err(e) => return compile_error(&e),
            }
        };
        let split = 3 + numkeys as usize;
        self.lua
            .run(&mut self.core, ctx, &sha, &argv[3..split], &argv[split..])
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
            pushes
                .into_iter()
                .filter(|(_, r)| !matches!(r, Reply::Push(_)))
                .collect()
        } else {
            pushes
        }
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

    /// Key events recorded since the last call, oldest first.
    pub fn take_key_events(&mut self) -> Vec<KeyEvent> {
        self.core.ks.take_events()
    }
}

/// Redis's `stringmatchlen` for the patterns `CONFIG GET` sees: `*`, `?`, literals.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob_match(rest, &text[i..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
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
