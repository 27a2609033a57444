//! The command table and the data commands (keyspace, pub/sub publish, server info):
//! everything a script may also call. [`Core::exec`] runs a data command through its
//! family's module (`server`, `strings`, `keys`, `hashes`); session commands (`HELLO`,
//! `CLIENT`, `SUBSCRIBE`, `EVAL`, ...) live in `engine`.

mod hashes;
mod keys;
mod server;
mod strings;

use std::collections::BTreeMap;

use super::keyspace::Keyspace;
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

    /// Executes a data command (already looked up and arity-checked): the first
    /// command family that knows `name` runs it.
    pub fn exec(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Reply {
        FAMILIES
            .iter()
            .find_map(|family| family(self, ctx, name, argv))
            .unwrap_or_else(|| Reply::err(format!("command '{name}' is not available here")))
    }
}

/// A command family: runs the command `name` if it is one of the family's.
type Family = fn(&mut Core, &mut Ctx, &str, &[Vec<u8>]) -> Option<Reply>;

/// The data command families [`Core::exec`] asks in turn (their names are disjoint).
const FAMILIES: &[Family] = &[Core::server, Core::strings, Core::keys, Core::hashes];
