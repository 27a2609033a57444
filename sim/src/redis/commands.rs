//! The command table and the data commands (keyspace, pub/sub publish, server info):
//! everything a script may also call. Session commands (`HELLO`, `CLIENT`, `SUBSCRIBE`,
//! `EVAL`, ...) live in `engine.rs`.

use std::collections::BTreeMap;

use super::keyspace::{DATABASES, Entry, Keyspace, Value};
use super::replication::Repl;
use super::reply::Reply;

/// The version this model claims to be (the Redis the project tests against).
pub const REDIS_VERSION: &str = "7.0.15";

/// `WRONGTYPE` error text.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "value is not an integer or out of range";
const OVERFLOW: &str = "increment or decrement would overflow";

/// A command as the table knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Redis's full name, lowercase (`client|setname`).
    pub name: &'static str,
    /// Redis's arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    /// `CMD_NOSCRIPT`: refused inside scripts.
    pub noscript: bool,
    /// `CMD_WRITE`: refused on a replica (`READONLY`) and without enough good replicas
    /// (`NOREPLICAS`).
    pub write: bool,
}

/// Result of looking a command up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Known command.
    Found(Spec),
    /// Not a command.
    Unknown,
    /// A container command (`CLIENT`, `SCRIPT`) with an unknown subcommand.
    UnknownSubcommand,
}

const fn spec(name: &'static str, arity: i32, noscript: bool) -> Spec {
    Spec {
        name,
        arity,
        noscript,
        write: false,
    }
}

/// A write command.
const fn wspec(name: &'static str, arity: i32) -> Spec {
    Spec {
        name,
        arity,
        noscript: false,
        write: true,
    }
}

const COMMANDS: &[Spec] = &[
    spec("ping", -1, false),
    spec("echo", 2, false),
    spec("hello", -1, true),
    spec("auth", -2, true),
    spec("select", 2, false),
    spec("quit", -1, true),
    spec("client", -2, true),
    spec("script", -2, true),
    spec("get", 2, false),
    wspec("set", -3),
    wspec("setnx", 3),
    wspec("getdel", 2),
    wspec("getset", 3),
    wspec("del", -2),
    wspec("unlink", -2),
    spec("exists", -2, false),
    wspec("expire", -3),
    wspec("pexpire", -3),
    wspec("expireat", -3),
    wspec("pexpireat", -3),
    spec("ttl", 2, false),
    spec("pttl", 2, false),
    wspec("persist", 2),
    wspec("incr", 2),
    wspec("incrby", 3),
    wspec("decr", 2),
    wspec("decrby", 3),
    wspec("hset", -4),
    spec("hget", 3, false),
    spec("hexists", 3, false),
    wspec("hincrby", 4),
    wspec("hdel", -3),
    spec("hgetall", 2, false),
    spec("hlen", 2, false),
    spec("hkeys", 2, false),
    spec("eval", -3, true),
    spec("evalsha", -3, true),
    spec("publish", 3, false),
    spec("subscribe", -2, true),
    spec("unsubscribe", -1, true),
    spec("time", 1, false),
    spec("dbsize", 1, false),
    wspec("flushall", -1),
    wspec("flushdb", -1),
    spec("info", -1, false),
    spec("type", 2, false),
    spec("reset", 1, true),
    spec("wait", 3, true),
    spec("role", 1, true),
    spec("replicaof", 3, true),
    spec("slaveof", 3, true),
    spec("replconf", -1, true),
    spec("psync", -3, true),
    spec("sync", 1, true),
    spec("multi", 1, true),
    spec("exec", 1, true),
    spec("discard", 1, true),
    spec("watch", -2, true),
    spec("unwatch", 1, true),
    spec("config", -2, true),
    spec("eval_ro", -3, true),
    spec("evalsha_ro", -3, true),
];

const SUBCOMMANDS: &[Spec] = &[
    spec("client|id", 2, true),
    spec("client|getname", 2, true),
    spec("client|setname", 3, true),
    spec("script|load", 3, true),
    spec("script|exists", -3, true),
    spec("script|flush", -2, true),
    spec("script|kill", 2, true),
    spec("client|kill", -3, true),
    spec("config|get", -3, true),
    spec("config|set", -4, true),
    spec("config|rewrite", 2, true),
];

/// Finds the command `argv` names (case-insensitively), as Redis's `lookupCommand`.
pub fn lookup(argv: &[Vec<u8>]) -> Lookup {
    let Some(first) = argv.first() else {
        return Lookup::Unknown;
    };
    // Every name is lowercase ASCII, so an ASCII-case-insensitive match of the bytes
    // is Redis's `strcasecmp`, without a lowercased copy of the name per command.
    let Some(base) = COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(first))
    else {
        return Lookup::Unknown;
    };
    if matches!(base.name, "client" | "script" | "config") && argv.len() >= 2 {
        let sub = format!(
            "{}|{}",
            base.name,
            String::from_utf8_lossy(&argv[1]).to_ascii_lowercase()
        );
        return match SUBCOMMANDS.iter().find(|s| s.name == sub) {
            Some(s) => Lookup::Found(*s),
            None => Lookup::UnknownSubcommand,
        };
    }
    Lookup::Found(*base)
}

/// Whether `argc` satisfies `arity`.
pub fn arity_ok(spec: &Spec, argc: usize) -> bool {
    let argc = argc as i64;
    let arity = i64::from(spec.arity);
    if arity > 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Bytes as C's `%.Ns` prints them: up to the first NUL, at most `max` bytes.
pub fn c_str(bytes: &[u8], max: usize) -> String {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(bytes.len())
        .min(max);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Redis's `rejectCommandFormat`: newlines become spaces.
pub fn no_newlines(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// `ERR unknown command ...` exactly as Redis's `processCommand` formats it.
pub fn unknown_command(argv: &[Vec<u8>]) -> Reply {
    let mut args = String::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push_str(&format!("'{}' ", c_str(a, room)));
    }
    Reply::err(no_newlines(&format!(
        "unknown command '{}', with args beginning with: {}",
        c_str(&argv[0], 128),
        args
    )))
}

/// `ERR unknown subcommand ...`.
pub fn unknown_subcommand(argv: &[Vec<u8>]) -> Reply {
    Reply::err(no_newlines(&format!(
        "unknown subcommand '{}'. Try {} HELP.",
        c_str(&argv[1], 128),
        c_str(&argv[0], usize::MAX).to_ascii_uppercase()
    )))
}

/// `ERR wrong number of arguments for '<name>' command`.
pub fn arity_error(spec: &Spec) -> Reply {
    Reply::err(format!(
        "wrong number of arguments for '{}' command",
        spec.name
    ))
}

/// Redis's `string2ll`: strict decimal, no spaces, no `+`, no leading zeros, no `-0`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    if bytes == b"0" {
        return Some(0);
    }
    let (neg, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(d - b'0');
    }
    if neg {
        v = -v;
    }
    i64::try_from(v).ok()
}

/// Where the command runs: who asked, which database, which instant.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The session's peer (recorded in key events).
    pub peer: String,
    /// Selected database.
    pub db: usize,
    /// Server time, unix microseconds (frozen for a whole script).
    pub now_us: u64,
    /// The command came from this replica's master (never refused, never expires).
    pub from_master: bool,
    /// Running inside `EVAL_RO`/`EVALSHA_RO`: write commands are refused.
    pub read_only: bool,
    /// The running script already wrote (later writes are no longer refused for the
    /// server's state: Redis cannot undo the first).
    pub wrote: bool,
}

impl Ctx {
    /// A client command's context.
    pub fn new(peer: impl Into<String>, db: usize, now_us: u64) -> Self {
        Self {
            peer: peer.into(),
            db,
            now_us,
            from_master: false,
            read_only: false,
            wrote: false,
        }
    }
}

impl Ctx {
    fn now_ms(&self) -> i64 {
        (self.now_us / 1000) as i64
    }
}

/// Server-wide state that data commands touch.
#[derive(Debug)]
pub struct Core {
    /// The keyspace.
    pub ks: Keyspace,
    /// Channel → subscribed session ids, in subscription order.
    pub channels: BTreeMap<Vec<u8>, Vec<u64>>,
    /// Pushes not yet taken.
    pub pushes: Vec<(u64, Reply)>,
    /// Seed the server's identity (run id, replid) derives from.
    pub seed: u64,
    /// `INFO server` `tcp_port`.
    pub tcp_port: u16,
    /// First clock reading seen: the server's start (for `uptime_in_seconds`).
    pub start_us: Option<u64>,
    /// Replication: role, stream, offsets, replicas.
    pub repl: Repl,
}

/// `READONLY` error text.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// `NOREPLICAS` error text.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Deterministic 40-hex-digit identifier from the seed and a label.
pub fn hex_id(seed: u64, label: &str) -> String {
    sha1_smol::Sha1::from(format!("locksim-{label}-{seed}"))
        .digest()
        .to_string()
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.to_string())
}

impl Core {
    /// A fresh server with identity derived from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            ks: Keyspace::default(),
            channels: BTreeMap::new(),
            pushes: Vec::new(),
            seed,
            tcp_port: 6379,
            start_us: None,
            repl: Repl::new(hex_id(seed, "replid")),
        }
    }

    /// Why a write command may not run now, if it may not: `READONLY` on a replica
    /// (unless the master sent it), `NOREPLICAS` on a master without enough good
    /// replicas (`processCommand` and `scriptVerifyWriteCommandAllow`).
    pub fn write_refusal(&self, ctx: &Ctx) -> Option<Reply> {
        if ctx.from_master {
            return None;
        }
        if self.repl.is_replica() {
            return Some(Reply::Error(READONLY.into()));
        }
        if self.repl.too_few_good_replicas() {
            return Some(Reply::Error(NOREPLICAS.into()));
        }
        None
    }

    /// Queues `argv` for the replication stream, after the `DEL`s of keys the command
    /// found expired on its way.
    pub fn propagate(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        self.propagate_expired();
        self.repl.propagate(db, argv);
    }

    /// Queues a `DEL` for every key lazily expired since the last call.
    pub fn propagate_expired(&mut self) {
        for (db, key) in self.ks.take_lazily_expired() {
            self.repl.propagate(db, vec![b"DEL".to_vec(), key]);
        }
    }

    /// Executes a data command (already looked up and arity-checked).
    pub fn exec(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Reply {
        match name {
            "ping" => match argv.len() {
                1 => Reply::Simple("PONG".into()),
                2 => Reply::Bulk(argv[1].clone()),
                _ => Reply::err("wrong number of arguments for 'ping' command"),
            },
            "echo" => Reply::Bulk(argv[1].clone()),
            "select" => match parse_i64(&argv[1]).map(i32::try_from) {
                None => Reply::err(NOT_INTEGER),
                Some(Err(_)) => Reply::err(
                    "value is out of range, value must between -2147483648 and 2147483647",
                ),
                Some(Ok(id)) => self.select(ctx, id),
            },
            "type" => Reply::Simple(
                match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                    None => "none",
                    Some(Entry {
                        value: Value::Str(_),
                        ..
                    }) => "string",
                    Some(_) => "hash",
                }
                .into(),
            ),
            "get" => self.get_reply(ctx, &argv[1]),
            "set" => self.set(ctx, argv),
            "setnx" => {
                if self.ks.get(ctx.db, &argv[1], ctx.now_us).is_some() {
                    Reply::Integer(0)
                } else {
                    self.ks.set_string(
                        ctx.db,
                        &argv[1],
                        argv[2].clone(),
                        None,
                        ctx.now_us,
                        &ctx.peer,
                    );
                    self.propagate(ctx.db, argv.to_vec());
                    Reply::Integer(1)
                }
            }
            // t_string.c getsetCommand: the old value (WRONGTYPE before any change),
            // then a plain SET that drops any TTL, propagated as `SET key value`.
            "getset" => {
                let old = self.get_reply(ctx, &argv[1]);
                if matches!(old, Reply::Error(_)) {
                    return old;
                }
                self.ks.set_string(
                    ctx.db,
                    &argv[1],
                    argv[2].clone(),
                    None,
                    ctx.now_us,
                    &ctx.peer,
                );
                self.propagate(
                    ctx.db,
                    vec![b"SET".to_vec(), argv[1].clone(), argv[2].clone()],
                );
                old
            }
            "getdel" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Nil,
                Some(Entry {
                    value: Value::Str(s),
                    ..
                }) => {
                    let s = s.clone();
                    self.ks.delete(ctx.db, &argv[1], ctx.now_us, &ctx.peer);
                    self.propagate(ctx.db, vec![b"DEL".to_vec(), argv[1].clone()]);
                    Reply::Bulk(s)
                }
                Some(_) => wrongtype(),
            },
            "del" | "unlink" => {
                let mut n = 0;
                for key in &argv[1..] {
                    if self.ks.delete(ctx.db, key, ctx.now_us, &ctx.peer) {
                        n += 1;
                    }
                }
                if n > 0 {
                    self.propagate(ctx.db, argv.to_vec());
                }
                Reply::Integer(n)
            }
            "exists" => {
                let mut n = 0;
                for key in &argv[1..] {
                    if self.ks.get(ctx.db, key, ctx.now_us).is_some() {
                        n += 1;
                    }
                }
                Reply::Integer(n)
            }
            "expire" => self.expire(ctx, argv, ctx.now_ms(), true, "expire"),
            "pexpire" => self.expire(ctx, argv, ctx.now_ms(), false, "pexpire"),
            "expireat" => self.expire(ctx, argv, 0, true, "expireat"),
            "pexpireat" => self.expire(ctx, argv, 0, false, "pexpireat"),
            "ttl" | "pttl" => {
                let now_ms = ctx.now_ms();
                match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                    None => Reply::Integer(-2),
                    Some(Entry {
                        expire_at_ms: None, ..
                    }) => Reply::Integer(-1),
                    Some(Entry {
                        expire_at_ms: Some(when),
                        ..
                    }) => {
                        let ttl = when.saturating_sub(now_ms).max(0);
                        Reply::Integer(if name == "pttl" {
                            ttl
                        } else {
                            (ttl + 500) / 1000
                        })
                    }
                }
            }
            "persist" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                Some(e) if e.expire_at_ms.is_some() => {
                    self.ks
                        .set_expiry(ctx.db, &argv[1], None, ctx.now_us, &ctx.peer);
                    self.propagate(ctx.db, argv.to_vec());
                    Reply::Integer(1)
                }
                _ => Reply::Integer(0),
            },
            "incr" => self.incr(ctx, argv, 1),
            "decr" => self.incr(ctx, argv, -1),
            "incrby" | "decrby" => match parse_i64(&argv[2]) {
                None => Reply::err(NOT_INTEGER),
                Some(by) if name == "decrby" => match by.checked_neg() {
                    // Redis: "decrement would overflow" for DECRBY LLONG_MIN.
                    None => Reply::err("decrement would overflow"),
                    Some(by) => self.incr(ctx, argv, by),
                },
                Some(by) => self.incr(ctx, argv, by),
            },
            "hset" => self.hset(ctx, argv),
            "hget" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Nil,
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => h
                    .get(&argv[2])
                    .map_or(Reply::Nil, |v| Reply::Bulk(v.clone())),
                Some(_) => wrongtype(),
            },
            "hexists" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Integer(0),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Integer(i64::from(h.contains_key(&argv[2]))),
                Some(_) => wrongtype(),
            },
            "hlen" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Integer(0),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Integer(h.len() as i64),
                Some(_) => wrongtype(),
            },
            "hgetall" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Map(Vec::new()),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Map(
                    h.iter()
                        .map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone())))
                        .collect(),
                ),
                Some(_) => wrongtype(),
            },
            // `hkeysCommand` (`genericHgetallCommand` with `OBJ_HASH_KEY`): the fields in
            // the hash's order (a listpack's insertion order, which the model keeps for
            // every hash), an empty array for a missing key.
            "hkeys" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Array(Vec::new()),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Array(h.keys().map(|f| Reply::Bulk(f.clone())).collect()),
                Some(_) => wrongtype(),
            },
            "hincrby" => self.hincrby(ctx, argv),
            "hdel" => self.hdel(ctx, argv),
            "publish" => {
                let n = self.publish(&argv[1], &argv[2]);
                // Always propagated to replicas (`forceCommandPropagation`).
                self.propagate(ctx.db, argv.to_vec());
                Reply::Integer(n as i64)
            }
            "time" => Reply::Array(vec![
                Reply::bulk((ctx.now_us / 1_000_000).to_string()),
                Reply::bulk((ctx.now_us % 1_000_000).to_string()),
            ]),
            "dbsize" => Reply::Integer(self.ks.len(ctx.db) as i64),
            "flushall" | "flushdb" => {
                if argv.len() > 2
                    || (argv.len() == 2
                        && !argv[1].eq_ignore_ascii_case(b"sync")
                        && !argv[1].eq_ignore_ascii_case(b"async"))
                {
                    return Reply::err("syntax error");
                }
                let db = if name == "flushdb" {
                    Some(ctx.db)
                } else {
                    None
                };
                self.ks.flush(db, ctx.now_us, &ctx.peer);
                self.propagate(ctx.db, argv.to_vec());
                Reply::ok()
            }
            "info" => Reply::Bulk(self.info(&argv[1..], ctx.now_us).into_bytes()),
            _ => Reply::err(format!("command '{name}' is not available here")),
        }
    }

    /// `GET key`'s reply: the string, nil, or `WRONGTYPE`.
    fn get_reply(&mut self, ctx: &Ctx, key: &[u8]) -> Reply {
        match self.ks.get(ctx.db, key, ctx.now_us) {
            None => Reply::Nil,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Reply::Bulk(s.clone()),
            Some(_) => wrongtype(),
        }
    }

    fn select(&mut self, ctx: &mut Ctx, id: i32) -> Reply {
        if id < 0 || id as usize >= DATABASES {
            return Reply::err("DB index is out of range");
        }
        ctx.db = id as usize;
        Reply::ok()
    }

    /// Delivers `message` on `channel`; returns the number of receivers.
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let Some(ids) = self.channels.get(channel) else {
            return 0;
        };
        for &id in ids {
            self.pushes.push((
                id,
                Reply::Push(vec![
                    Reply::bulk("message"),
                    Reply::bulk(channel),
                    Reply::bulk(message),
                ]),
            ));
        }
        ids.len()
    }

    fn set(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        #[derive(PartialEq, Clone, Copy)]
        enum Unit {
            Ex,
            Px,
            ExAt,
            PxAt,
        }
        let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
        let mut expire: Option<(Unit, &[u8])> = None;
        let mut j = 3;
        while j < argv.len() {
            let opt = argv[j].to_ascii_lowercase();
            let next = argv.get(j + 1).map(Vec::as_slice);
            let current = expire.map(|(u, _)| u);
            // Redis's parseExtendedStringArgumentsOrReply: an expiry option is refused
            // after KEEPTTL or after a *different* expiry option.
            let exp_ok = |me: Unit| !keepttl && current.is_none_or(|u| u == me) && next.is_some();
            let unit = match opt.as_slice() {
                b"ex" => Some(Unit::Ex),
                b"px" => Some(Unit::Px),
                b"exat" => Some(Unit::ExAt),
                b"pxat" => Some(Unit::PxAt),
                _ => None,
            };
            match (opt.as_slice(), unit) {
                (b"nx", _) if !xx => nx = true,
                (b"xx", _) if !nx => xx = true,
                (b"get", _) => get = true,
                (b"keepttl", _) if current.is_none() => keepttl = true,
                (_, Some(u)) if exp_ok(u) => {
                    expire = Some((u, next.unwrap_or_default()));
                    j += 1;
                }
                _ => return Reply::err("syntax error"),
            }
            j += 1;
        }
        let mut expire_at: Option<i64> = None;
        if let Some((unit, raw)) = expire {
            let Some(mut ms) = parse_i64(raw) else {
                return Reply::err(NOT_INTEGER);
            };
            let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
            if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
                return Reply::err("invalid expire time in 'set' command");
            }
            if seconds {
                ms *= 1000;
            }
            if matches!(unit, Unit::Ex | Unit::Px) {
                ms = ms.wrapping_add(ctx.now_ms());
            }
            if ms <= 0 {
                return Reply::err("invalid expire time in 'set' command");
            }
            expire_at = Some(ms);
        }
        let old = self.ks.get(ctx.db, &argv[1], ctx.now_us).cloned();
        let get_reply = if get {
            match &old {
                None => Some(Reply::Nil),
                Some(Entry {
                    value: Value::Str(s),
                    ..
                }) => Some(Reply::Bulk(s.clone())),
                Some(_) => return wrongtype(),
            }
        } else {
            None
        };
        let found = old.is_some();
        if (nx && found) || (xx && !found) {
            return get_reply.unwrap_or(Reply::Nil);
        }
        let explicit = expire_at;
        if keepttl {
            expire_at = old.and_then(|e| e.expire_at_ms);
        }
        self.ks.set_string(
            ctx.db,
            &argv[1],
            argv[2].clone(),
            expire_at,
            ctx.now_us,
            &ctx.peer,
        );
        let propagated = match explicit {
            // `SET key value PXAT ms`, whatever the options were.
            Some(ms) => vec![
                b"SET".to_vec(),
                argv[1].clone(),
                argv[2].clone(),
                b"PXAT".to_vec(),
                ms.to_string().into_bytes(),
            ],
            // Without an expiry, as sent minus any `GET`.
            None => argv
                .iter()
                .enumerate()
                .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                .map(|(_, a)| a.clone())
                .collect(),
        };
        self.propagate(ctx.db, propagated);
        get_reply.unwrap_or_else(Reply::ok)
    }

    fn expire(
        &mut self,
        ctx: &mut Ctx,
        argv: &[Vec<u8>],
        base_ms: i64,
        seconds: bool,
        name: &str,
    ) -> Reply {
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in &argv[3..] {
            match opt.to_ascii_lowercase().as_slice() {
                b"nx" => nx = true,
                b"xx" => xx = true,
                b"gt" => gt = true,
                b"lt" => lt = true,
                _ => return Reply::err(format!("Unsupported option {}", c_str(opt, usize::MAX))),
            }
        }
        if nx && (xx || gt || lt) {
            return Reply::err("NX and XX, GT or LT options at the same time are not compatible");
        }
        if gt && lt {
            return Reply::err("GT and LT options at the same time are not compatible");
        }
        let Some(mut when) = parse_i64(&argv[2]) else {
            return Reply::err(NOT_INTEGER);
        };
        let invalid = || Reply::err(format!("invalid expire time in '{name}' command"));
        if seconds {
            if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
                return invalid();
            }
            when *= 1000;
        }
        if when > i64::MAX - base_ms {
            return invalid();
        }
        when += base_ms;
        let now_ms = ctx.now_ms();
        let Some(entry) = self.ks.get(ctx.db, &argv[1], ctx.now_us) else {
            return Reply::Integer(0);
        };
        let current = entry.expire_at_ms;
        if (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| when <= c))
            || (lt && current.is_some_and(|c| when >= c))
        {
            return Reply::Integer(0);
        }
        // `checkAlreadyExpired`: a replica keeps a key with a past expiry and waits for
        // its master's DEL.
        if when <= now_ms && !self.repl.is_replica() {
            self.ks.delete(ctx.db, &argv[1], ctx.now_us, &ctx.peer);
            self.propagate(ctx.db, vec![b"DEL".to_vec(), argv[1].clone()]);
        } else {
            self.ks
                .set_expiry(ctx.db, &argv[1], Some(when), ctx.now_us, &ctx.peer);
            let mut propagated = argv.to_vec();
            propagated[0] = b"PEXPIREAT".to_vec();
            propagated[2] = when.to_string().into_bytes();
            self.propagate(ctx.db, propagated);
        }
        Reply::Integer(1)
    }

    fn incr(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>], by: i64) -> Reply {
        let key = &argv[1];
        let current = match self.ks.get(ctx.db, key, ctx.now_us) {
            None => 0,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => match parse_i64(s) {
                Some(v) => v,
                None => return Reply::err(NOT_INTEGER),
            },
            Some(_) => return wrongtype(),
        };
        let Some(new) = current.checked_add(by) else {
            return Reply::err(OVERFLOW);
        };
        self.ks.update_string(
            ctx.db,
            key,
            new.to_string().into_bytes(),
            ctx.now_us,
            &ctx.peer,
        );
        self.propagate(ctx.db, argv.to_vec());
        Reply::Integer(new)
    }

    fn hset(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        if argv.len() % 2 == 1 {
            return Reply::err("wrong number of arguments for 'hset' command");
        }
        if let Some(e) = self.ks.get(ctx.db, &argv[1], ctx.now_us)
            && !matches!(e.value, Value::Hash(_))
        {
            return wrongtype();
        }
        let mut created = 0;
        for pair in argv[2..].chunks(2) {
            match self.ks.hash_write(
                ctx.db,
                &argv[1],
                &pair[0],
                pair[1].clone(),
                ctx.now_us,
                &ctx.peer,
            ) {
                Ok(true) => created += 1,
                Ok(false) => {}
                Err(_) => return wrongtype(),
            }
        }
        self.propagate(ctx.db, argv.to_vec());
        Reply::Integer(created)
    }

    fn hincrby(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        let Some(by) = parse_i64(&argv[3]) else {
            return Reply::err(NOT_INTEGER);
        };
        let current = match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
            None => 0,
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => match h.get(&argv[2]) {
                None => 0,
                Some(v) => match parse_i64(v) {
                    Some(v) => v,
                    None => return Reply::err("hash value is not an integer"),
                },
            },
            Some(_) => return wrongtype(),
        };
        let Some(new) = current.checked_add(by) else {
            return Reply::err(OVERFLOW);
        };
        match self.ks.hash_write(
            ctx.db,
            &argv[1],
            &argv[2],
            new.to_string().into_bytes(),
            ctx.now_us,
            &ctx.peer,
        ) {
            Ok(_) => {
                self.propagate(ctx.db, argv.to_vec());
                Reply::Integer(new)
            }
            Err(_) => wrongtype(),
        }
    }

    fn hdel(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        match self
            .ks
            .hash_delete(ctx.db, &argv[1], &argv[2..], ctx.now_us, &ctx.peer)
        {
            Ok(n) => {
                if n > 0 {
                    self.propagate(ctx.db, argv.to_vec());
                }
                Reply::Integer(n)
            }
            Err(_) => wrongtype(),
        }
    }

    /// The `INFO` text for the requested sections (none / `default` / `all` /
    /// `everything`: server, replication, cluster, keyspace).
    pub fn info(&mut self, sections: &[Vec<u8>], now_us: u64) -> String {
        let wanted: Vec<String> = sections
            .iter()
            .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
            .collect();
        let all = wanted.is_empty()
            || wanted
                .iter()
                .any(|s| s == "default" || s == "all" || s == "everything");
        let want = |name: &str| all || wanted.iter().any(|s| s == name);
        let start = *self.start_us.get_or_insert(now_us);
        let uptime = now_us.saturating_sub(start) / 1_000_000;
        let mut out = String::new();
        let section = |out: &mut String, title: &str, body: String| {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            out.push_str(&format!("# {title}\r\n{body}"));
        };
        if want("server") {
            let lines = [
                format!("redis_version:{REDIS_VERSION}"),
                "redis_git_sha1:00000000".into(),
                "redis_git_dirty:0".into(),
                "redis_build_id:0000000000000000".into(),
                "redis_mode:standalone".into(),
                "os:locksim".into(),
                "arch_bits:64".into(),
                "monotonic_clock:POSIX clock_gettime".into(),
                "multiplexing_api:epoll".into(),
                "atomicvar_api:c11-builtin".into(),
                "gcc_version:0.0.0".into(),
                format!("process_id:{}", 1000 + self.seed % 30000),
                "process_supervised:no".into(),
                format!("run_id:{}", hex_id(self.seed, "run_id")),
                format!("tcp_port:{}", self.tcp_port),
                format!("server_time_usec:{now_us}"),
                format!("uptime_in_seconds:{uptime}"),
                format!("uptime_in_days:{}", uptime / 86400),
                "hz:10".into(),
                "configured_hz:10".into(),
                format!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1)),
                "executable:/usr/bin/redis-server".into(),
                "config_file:".into(),
                "io_threads_active:0".into(),
            ];
            section(
                &mut out,
                "Server",
                lines.iter().map(|l| format!("{l}\r\n")).collect(),
            );
        }
        if want("replication") {
            let lines = self.repl.info_lines(now_us);
            section(
                &mut out,
                "Replication",
                lines.iter().map(|l| format!("{l}\r\n")).collect(),
            );
        }
        if want("cluster") {
            section(&mut out, "Cluster", "cluster_enabled:0\r\n".into());
        }
        if want("keyspace") {
            let mut body = String::new();
            for db in 0..DATABASES {
                let n = self.ks.len(db);
                if n > 0 {
                    let x = self.ks.expires(db);
                    body.push_str(&format!("db{db}:keys={n},expires={x},avg_ttl=0\r\n"));
                }
            }
            section(&mut out, "Keyspace", body);
        }
        out
    }
}
