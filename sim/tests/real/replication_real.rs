//! Replication fidelity: the model's master and replica against a real `redis-server`
//! master and replica.
//!
//! 1. **The propagated stream.** A raw replica (this test's own `PSYNC ? -1`, as
//!    `redis-cli --replica` does) follows a real master and a model master. Generated
//!    command sequences run on both (lock scripts, every expiry form, keys that expire
//!    under a command, transactions, `WATCH`); the commands each master propagates must
//!    be the same: `SET … PXAT` rewrites, `PEXPIREAT`, `DEL` for expired keys, effects
//!    of scripts wrapped in `MULTI`/`EXEC`, `SELECT`. Absolute times are compared
//!    within 3 s (the two masters read the clock at slightly different moments);
//!    master `PING`s and `REPLCONF GETACK` are ignored (timer-driven). The replies must
//!    be equal too (times within a tolerance).
//! 2. **Replica semantics.** A real replica (`--replicaof`) and a model replica (its
//!    link over real TCP) must answer alike: `WAIT`, reads after `WAIT`, `READONLY`
//!    (also from a script), `NOREPLICAS`, `ROLE`, and the `INFO replication` fields
//!    clients read.
//!
//! Both masters run with active expiry off (`DEBUG SET-ACTIVE-EXPIRE 0`; the model is
//! started without its cycle), so a key that expires is found expired by the next
//! command that touches it, on both, and its `DEL` is propagated by that command.
//!
//! `LOCKSIM_REPL_CASES` sets the number of generated cases (default 500).

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common;

use common::Conn;
use lock_impl::testing::RealRedis;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use sim::redis::resp::{Parsed, encode_request, parse_request};

// ---------------------------------------------------------------------------------
// Raw connections

/// A raw replica: the handshake, the full sync (either payload form), then the
/// stream, parsed into commands.
struct Capture {
    side: &'static str,
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Capture {
    fn attach(side: &'static str, addr: SocketAddr) -> Capture {
        let mut c = Conn::open(addr);
        assert_eq!(c.text(&["PING"]), "+PONG\r\n");
        assert_eq!(c.text(&["REPLCONF", "listening-port", "1"]), "+OK\r\n");
        assert_eq!(
            c.text(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
            "+OK\r\n"
        );
        c.writer
            .write_all(&encode_request(&["PSYNC", "?", "-1"]))
            .unwrap();
        let mut line = String::new();
        c.reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("+FULLRESYNC "), "PSYNC answered {line:?}");
        let mut header = String::new();
        c.reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        let mut buf: Vec<u8> = c.reader.buffer().to_vec();
        let stream = c.writer;
        let mut chunk = [0u8; 4096];
        let mut stream_reader = stream.try_clone().unwrap();
        if let Some(mark) = header.strip_prefix("$EOF:") {
            // Diskless: the payload ends with the 40-byte mark.
            loop {
                if let Some(pos) = buf.windows(40).position(|w| w == mark.as_bytes()) {
                    buf.drain(..pos + 40);
                    break;
                }
                let n = stream_reader.read(&mut chunk).unwrap();
                assert!(n > 0, "master closed during sync");
                buf.extend_from_slice(&chunk[..n]);
            }
        } else {
            let len: usize = header[1..].parse().expect("payload length");
            while buf.len() < len {
                let n = stream_reader.read(&mut chunk).unwrap();
                assert!(n > 0, "master closed during sync");
                buf.extend_from_slice(&chunk[..n]);
            }
            buf.drain(..len);
        }
        let mut capture = Capture { side, stream, buf };
        capture.ack();
        capture
    }

    /// `REPLCONF ACK 0`: a diskless master streams only after the first ACK, and drops
    /// a replica silent for `repl-timeout`.
    fn ack(&mut self) {
        self.stream
            .write_all(&encode_request(&["REPLCONF", "ACK", "0"]))
            .unwrap();
    }

    /// Commands up to and including `SET __marker__ <n>`, PINGs and GETACKs dropped.
    fn until_marker(&mut self, n: u64) -> Vec<Vec<String>> {
        let marker = n.to_string();
        self.ack();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut chunk = [0u8; 4096];
        loop {
            let mut used = 0;
            loop {
                match parse_request(&self.buf[used..]) {
                    Parsed::Complete(argv, len) => {
                        used += len;
                        let argv: Vec<String> = argv
                            .iter()
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect();
                        let name = argv[0].to_ascii_uppercase();
                        if name == "PING" || (name == "REPLCONF" && argv.len() > 1) {
                            continue;
                        }
                        let done = name == "SET" && argv[1] == "__marker__" && argv[2] == marker;
                        out.push(argv);
                        if done {
                            self.buf.drain(..used);
                            return out;
                        }
                    }
                    Parsed::Incomplete => break,
                    Parsed::ProtocolError(e) => panic!("bad stream: {e}"),
                }
            }
            self.buf.drain(..used);
            assert!(Instant::now() < deadline, "no marker {n} in the stream");
            // A diskless master streams only once an ACK arrives after the transfer
            // ended (earlier ones are ignored): keep acknowledging while waiting.
            self.stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let got = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    self.ack();
                    continue;
                }
                Err(e) => panic!("{} master: {e}; so far {out:?}", self.side),
            };
            assert!(
                got > 0,
                "{} master closed the stream; so far {out:?}",
                self.side
            );
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }
}

// ---------------------------------------------------------------------------------
// Generated cases

#[derive(Clone, Debug)]
enum Step {
    /// A command; `loose` replies are compared as integers within 3000.
    Cmd { argv: Vec<String>, loose: bool },
    /// Let a key set with `PX 1` expire.
    Sleep,
}

fn cmd(v: &[&str]) -> Step {
    Step::Cmd {
        argv: v.iter().map(|s| s.to_string()).collect(),
        loose: false,
    }
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a", "b", "c"])
}

fn value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["o1", "o2", "1", "x"])
}

fn future_ms() -> impl Strategy<Value = String> {
    (4_102_444_800_000i64..4_102_444_900_000).prop_map(|n| n.to_string())
}

const RELEASE: &str = lock_impl::designs::COMPARE_AND_DELETE;
const LOCK: &str = lock_impl::designs::REDISSON_LOCK;
const UNLOCK: &str = lock_impl::designs::REDISSON_UNLOCK;
const RENEW: &str = lock_impl::designs::REDISSON_RENEW;
const FENCED: &str = lock_impl::designs::FENCED_ACQUIRE;
const TWO_WRITES: &str = "redis.reply('set', KEYS[1], ARGV[1]); redis.reply('pexpire', KEYS[1], 100000); return redis.reply('get', KEYS[1])";
const READ_ONLY: &str = "return redis.reply('get', KEYS[1])";

fn write_step() -> impl Strategy<Value = Step> {
    let set = (
        key(),
        value(),
        prop::sample::select(vec!["", "NX", "XX"]),
        prop_oneof![
            Just(vec![]),
            Just(vec!["PX".to_string(), "100000".to_string()]),
            Just(vec!["EX".to_string(), "1000".to_string()]),
            future_ms().prop_map(|t| vec!["PXAT".to_string(), t]),
            future_ms().prop_map(|t| vec!["EXAT".to_string(), t[..t.len() - 3].to_string()]),
            Just(vec!["KEEPTTL".to_string()]),
        ],
        prop::bool::weighted(0.2),
    )
        .prop_map(|(k, v, cond, exp, get)| {
            let mut argv = vec!["SET".to_string(), k.to_string(), v.to_string()];
            if !cond.is_empty() {
                argv.push(cond.to_string());
            }
            argv.extend(exp);
            if get {
                argv.push("GET".into());
            }
            Step::Cmd { argv, loose: false }
        });
    let expire = (
        key(),
        prop::sample::select(vec!["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]),
        prop::sample::select(vec!["future", "past"]),
        prop::sample::select(vec!["", "NX", "XX", "GT", "LT"]),
    )
        .prop_map(|(k, name, when, opt)| {
            let t = match (name, when) {
                // Durations no other command uses: GT/LT against an expiry set a
                // millisecond earlier with the same duration would depend on timing.
                ("EXPIRE", "future") => "2000",
                ("PEXPIRE", "future") => "200000",
                ("EXPIREAT", "future") => "4102444800",
                ("PEXPIREAT", "future") => "4102444800000",
                ("EXPIRE" | "PEXPIRE", _) => "-1",
                _ => "1000",
            };
            let mut v = vec![name, k, t];
            if !opt.is_empty() {
                v.push(opt);
            }
            cmd(&v)
        });
    prop_oneof![
        4 => set,
        3 => expire,
        2 => (key(), value()).prop_map(|(k, v)| cmd(&["SETNX", k, v])),
        1 => key().prop_map(|k| cmd(&["GETDEL", k])),
        1 => (key(), key()).prop_map(|(a, b)| cmd(&["DEL", a, b])),
        1 => (key(), key()).prop_map(|(a, b)| cmd(&["UNLINK", a, b])),
        1 => key().prop_map(|k| cmd(&["PERSIST", k])),
        1 => key().prop_map(|k| cmd(&["INCR", k])),
        1 => key().prop_map(|k| cmd(&["INCRBY", k, "5"])),
        1 => (key(), value()).prop_map(|(k, v)| cmd(&["HSET", k, v, "1"])),
        1 => (key(), value()).prop_map(|(k, v)| cmd(&["HINCRBY", k, v, "-1"])),
        1 => (key(), value()).prop_map(|(k, v)| cmd(&["HDEL", k, v])),
        1 => (key(), value()).prop_map(|(k, v)| cmd(&["PUBLISH", k, v])),
        2 => key().prop_map(|k| cmd(&["GET", k])),
    ]
}

fn script_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| cmd(&["EVAL", RELEASE, "1", k, v])),
        (key(), value()).prop_map(|(k, o)| Step::Cmd {
            argv: ["EVAL", LOCK, "1", k, "100000", o]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            loose: true,
        }),
        (key(), value()).prop_map(|(k, o)| cmd(&["EVAL", UNLOCK, "2", k, "ch", "0", "100000", o])),
        (key(), value()).prop_map(|(k, o)| cmd(&["EVAL", RENEW, "1", k, "100000", o])),
        (key(), key(), value())
            .prop_map(|(k, t, o)| cmd(&["EVAL", FENCED, "2", k, t, o, "100000"])),
        (key(), value()).prop_map(|(k, v)| cmd(&["EVAL", TWO_WRITES, "1", k, v])),
        key().prop_map(|k| cmd(&["EVAL", READ_ONLY, "1", k])),
        key().prop_map(|k| cmd(&["EVAL_RO", READ_ONLY, "1", k])),
    ]
}

/// A key that expires under the next step: `SET k v PX 1`, a sleep, then a step that
/// touches it.
fn expiring() -> impl Strategy<Value = Vec<Step>> {
    (key(), value(), prop_oneof![write_step(), script_step()])
        .prop_map(|(k, v, next)| vec![cmd(&["SET", k, v, "PX", "1"]), Step::Sleep, next])
}

fn transaction() -> impl Strategy<Value = Vec<Step>> {
    (
        prop::bool::ANY,
        key(),
        prop::collection::vec(prop_oneof![write_step(), script_step()], 0..4),
        prop::sample::select(vec!["EXEC", "DISCARD"]),
        prop::option::of(write_step()),
    )
        .prop_map(|(watch, k, body, end, meanwhile)| {
            let mut steps = Vec::new();
            if watch {
                steps.push(cmd(&["WATCH", k]));
                // A write between WATCH and EXEC (on the same connection) fails it if
                // it touches the key.
                if let Some(m) = meanwhile {
                    steps.push(m);
                }
            }
            steps.push(cmd(&["MULTI"]));
            let loose = body
                .iter()
                .any(|s| matches!(s, Step::Cmd { loose: true, .. }));
            steps.extend(body);
            steps.push(Step::Cmd {
                argv: vec![end.to_string()],
                loose,
            });
            steps
        })
}

fn case() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            6 => write_step().prop_map(|s| vec![s]),
            3 => script_step().prop_map(|s| vec![s]),
            2 => expiring(),
            2 => transaction(),
        ],
        1..12,
    )
    .prop_map(|v| v.concat())
}

// ---------------------------------------------------------------------------------
// Comparison

/// Absolute times within this much are the same instant seen by two servers.
const TIME_TOLERANCE_MS: i64 = 3000;

fn same_command(real: &[String], model: &[String]) -> bool {
    if real.len() != model.len() {
        return false;
    }
    real.iter().zip(model).enumerate().all(|(i, (r, m))| {
        if r == m {
            return true;
        }
        // The time argument of `SET … PXAT t` and `PEXPIREAT k t`.
        let timed = (i == 4 && real[0].eq_ignore_ascii_case("set"))
            || (i == 2 && real[0].eq_ignore_ascii_case("pexpireat"));
        match (timed, r.parse::<i64>(), m.parse::<i64>()) {
            (true, Ok(a), Ok(b)) => (a - b).abs() <= TIME_TOLERANCE_MS,
            _ => false,
        }
    })
}

/// Equal line by line, integers (`:n`) within the time tolerance (a `PTTL` a script
/// returns, also inside an `EXEC`).
fn loosely_equal(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.split("\r\n").collect(), b.split("\r\n").collect());
    la.len() == lb.len()
        && la.iter().zip(&lb).all(|(x, y)| {
            x == y
                || matches!(
                    (x.strip_prefix(':').and_then(|v| v.parse::<i64>().ok()),
                     y.strip_prefix(':').and_then(|v| v.parse::<i64>().ok())),
                    (Some(p), Some(q)) if (p - q).abs() <= TIME_TOLERANCE_MS
                )
        })
}

struct Pair {
    real: RealRedis,
    model: SocketAddr,
    real_capture: Capture,
    model_capture: Capture,
    real_conn: Conn,
    model_conn: Conn,
    marker: u64,
    /// Transactions (`MULTI`) seen in the real master's stream.
    wrapped: usize,
}

fn run_case(p: &mut Pair, steps: &[Step]) -> Result<(), String> {
    for c in [&mut p.real_conn, &mut p.model_conn] {
        // A case may end inside a transaction or with a watch.
        c.reply(&["DISCARD"]);
        c.reply(&["UNWATCH"]);
        c.reply(&["FLUSHALL"]);
    }
    for step in steps {
        match step {
            Step::Sleep => std::thread::sleep(Duration::from_millis(5)),
            Step::Cmd { argv, loose } => {
                let r = p.real_conn.reply(argv);
                let m = p.model_conn.reply(argv);
                let same = r == m || (*loose && loosely_equal(&r, &m));
                if !same {
                    return Err(format!(
                        "replies differ for {argv:?}\n  redis: {:?}\n  model: {:?}",
                        String::from_utf8_lossy(&r),
                        String::from_utf8_lossy(&m)
                    ));
                }
            }
        }
    }
    p.marker += 1;
    let marker = p.marker.to_string();
    for c in [&mut p.real_conn, &mut p.model_conn] {
        c.reply(&["DISCARD"]);
        c.reply(&["SET", "__marker__", &marker]);
    }
    let real = p.real_capture.until_marker(p.marker);
    p.wrapped += real
        .iter()
        .filter(|c| c[0].eq_ignore_ascii_case("multi"))
        .count();
    let model = p.model_capture.until_marker(p.marker);
    let same =
        real.len() == model.len() && real.iter().zip(&model).all(|(a, b)| same_command(a, b));
    if same {
        Ok(())
    } else {
        Err(format!(
            "the propagated streams differ\n  redis: {real:?}\n  model: {model:?}"
        ))
    }
}

fn model_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn real_master() -> Option<RealRedis> {
    RealRedis::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "local",
    ])
}

#[test]
fn the_model_master_propagates_what_a_real_master_propagates() {
    let Some(real) = real_master() else { return };
    let runtime = model_runtime();
    let (model, _) = runtime
        .block_on(sim::redis::server::spawn_tokio_model_with(None, false))
        .expect("start the model");
    let mut real_conn = Conn::open(real.addr());
    assert_eq!(
        real_conn.text(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        "+OK\r\n"
    );
    let mut pair = Pair {
        real_capture: Capture::attach("redis", real.addr()),
        model_capture: Capture::attach("model", model),
        real,
        model,
        real_conn,
        model_conn: Conn::open(model),
        marker: 0,
        wrapped: 0,
    };
    // Wait until both streams flow (a FLUSHALL while a real master's diskless sync is
    // still running would kill the sync and drop the capture).
    for c in [&mut pair.real_conn, &mut pair.model_conn] {
        c.reply(&["SET", "__marker__", "0"]);
    }
    pair.real_capture.until_marker(0);
    pair.model_capture.until_marker(0);
    let cases = std::env::var("LOCKSIM_REPL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: std::env::var("LOCKSIM_REPL_SHRINK")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200),
        ..Config::default()
    });
    let pair = std::cell::RefCell::new(pair);
    let result = runner.run(&case(), |steps| {
        run_case(&mut pair.borrow_mut(), &steps).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            panic!(
                "the model propagates differently.\nminimal case:\n{case:#?}\nfirst difference: {reason}"
            )
        }
        Err(e) => panic!("{e}"),
    }
    // The comparison saw what it is about: transactions in the stream.
    let pair = pair.borrow();
    assert!(pair.wrapped > 0, "no case propagated a MULTI/EXEC");
    assert!(
        pair.marker >= 1,
        "no case ran (model at {}, redis at {})",
        pair.model,
        pair.real.addr()
    );
}

// ---------------------------------------------------------------------------------
// Replica semantics

fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

fn wait_linked(replica: SocketAddr) {
    let mut c = Conn::open(replica);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.text(&["INFO", "replication"]);
        if info_field(&info, "master_link_status").as_deref() == Some("up") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica {replica} never linked: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A real master and replica, and a model master and replica (on `runtime`, which
/// must outlive them), both replicas linked; `None` without `redis-server`.
struct Replicated {
    real_master: RealRedis,
    real_replica: RealRedis,
    model_master: SocketAddr,
    model_replica: SocketAddr,
}

fn replicated(runtime: &tokio::runtime::Runtime) -> Option<Replicated> {
    let real_master = real_master()?;
    let port = real_master.addr().port().to_string();
    let real_replica = RealRedis::start_with(&["--replicaof", "127.0.0.1", &port])?;
    let (model_master, _) = runtime
        .block_on(sim::redis::server::spawn_tokio_model_with(None, true))
        .expect("start the model master");
    let (model_replica, _) = runtime
        .block_on(sim::redis::server::spawn_tokio_model_with(
            Some(model_master),
            true,
        ))
        .expect("start the model replica");
    wait_linked(real_replica.addr());
    wait_linked(model_replica);
    Some(Replicated {
        real_master,
        real_replica,
        model_master,
        model_replica,
    })
}

#[test]
fn a_model_replica_answers_like_a_real_replica() {
    let runtime = model_runtime();
    let Some(Replicated {
        real_master,
        real_replica,
        model_master,
        model_replica,
    }) = replicated(&runtime)
    else {
        return;
    };
    let (mut rm, mut rr) = (
        Conn::open(real_master.addr()),
        Conn::open(real_replica.addr()),
    );
    let (mut mm, mut mr) = (Conn::open(model_master), Conn::open(model_replica));
    // Same bytes from both, on the master (`m`) or the replica (`r`).
    let mut same = |on: &str, argv: &[&str]| -> String {
        let (real, model) = if on == "m" {
            (rm.text(argv), mm.text(argv))
        } else {
            (rr.text(argv), mr.text(argv))
        };
        assert_eq!(real, model, "{on}: {argv:?}");
        real
    };
    same("m", &["SET", "lock", "v", "PX", "100000"]);
    assert_eq!(same("m", &["WAIT", "1", "2000"]), ":1\r\n");
    assert_eq!(same("r", &["GET", "lock"]), "$1\r\nv\r\n");
    assert!(same("r", &["SET", "x", "1"]).starts_with("-READONLY"));
    same("r", &["EVAL", "return redis.reply('set','x','1')", "0"]);
    same(
        "r",
        &[
            "EVAL",
            lock_impl::designs::COMPARE_AND_DELETE,
            "1",
            "lock",
            "v",
        ],
    );
    same(
        "r",
        &["EVAL_RO", "return redis.reply('get',KEYS[1])", "1", "lock"],
    );
    same(
        "r",
        &["EVAL_RO", "return redis.reply('del',KEYS[1])", "1", "lock"],
    );
    same("r", &["WAIT", "0", "0"]);
    same("r", &["PTTL", "nothing"]);
    for replica in [real_replica.addr(), model_replica] {
        let hello = Conn::open(replica).text(&["HELLO", "2"]);
        assert!(hello.contains("$4\r\nrole\r\n$7\r\nreplica\r\n"), "{hello}");
    }
    // A key expired by the replica's clock is hidden before the master's DEL arrives.
    same("m", &["SET", "short", "v", "PX", "200"]);
    same("m", &["WAIT", "1", "2000"]);
    std::thread::sleep(Duration::from_millis(400));
    same("r", &["GET", "short"]);
    // Transactions.
    same("m", &["MULTI"]);
    same("m", &["SET", "t", "1"]);
    same("m", &["INCR", "t"]);
    same("m", &["EXEC"]);
    same("m", &["EXEC"]);
    same("m", &["DISCARD"]);
    same("m", &["MULTI"]);
    same("m", &["NOSUCH"]);
    same("m", &["EXEC"]);
    // min-replicas-to-write.
    same("m", &["CONFIG", "SET", "min-replicas-to-write", "2"]);
    assert!(same("m", &["SET", "y", "1"]).starts_with("-NOREPLICAS"));
    same("m", &["EVAL", "return redis.reply('set','y','1')", "0"]);
    same("m", &["GET", "y"]);
    same("m", &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    same("m", &["SET", "y", "1"]);
    // WAIT for more replicas than there are times out with the count.
    let started = Instant::now();
    assert_eq!(same("m", &["WAIT", "2", "150"]), ":1\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "both WAITs blocked"
    );
    // ROLE and INFO replication: the fields clients read.
    for (on_real, on_model) in [(&mut rr, &mut mr), (&mut rm, &mut mm)] {
        let (real, model) = (
            on_real.text(&["INFO", "replication"]),
            on_model.text(&["INFO", "replication"]),
        );
        for field in [
            "role",
            "connected_slaves",
            "master_link_status",
            "master_sync_in_progress",
            "slave_read_only",
            "slave_priority",
            "master_failover_state",
            "second_repl_offset",
            "repl_backlog_active",
        ] {
            assert_eq!(
                info_field(&real, field),
                info_field(&model, field),
                "INFO {field}\nredis: {real}\nmodel: {model}"
            );
        }
        let (real, model) = (on_real.reply(&["ROLE"]), on_model.reply(&["ROLE"]));
        let shape = |r: &[u8]| {
            let t = String::from_utf8_lossy(r).into_owned();
            let lines: Vec<&str> = t.split("\r\n").collect();
            // The role's name and the number of elements (replica: host, port, state,
            // offset; master: offset and one replica).
            (lines[0].to_string(), lines[2].to_string(), lines.len())
        };
        assert_eq!(
            shape(&real),
            shape(&model),
            "ROLE\nredis: {:?}\nmodel: {:?}",
            String::from_utf8_lossy(&real),
            String::from_utf8_lossy(&model)
        );
    }
    assert_eq!(
        rm.text(&["REPLICAOF", "NO", "ONE"]),
        mm.text(&["REPLICAOF", "NO", "ONE"])
    );
    drop(real_replica);
}

/// The `lag=` a master's `INFO replication` gives its first replica: seconds since
/// that replica's last `REPLCONF ACK`.
fn first_replica_lag(info: &str) -> Option<u64> {
    info_field(info, "slave0")?
        .split(',')
        .find_map(|kv| kv.strip_prefix("lag="))?
        .parse()
        .ok()
}

/// A replica acknowledges once a second however busy its stream is, as Redis's
/// `replicationCron` does: under a steady 100+ writes a second, a master with
/// `min-replicas-to-write 1` and a 2 s lag bound never refuses a write, and its replica's
/// `lag` stays at a second or less. (The model's replica acknowledged only after 100 ms
/// without stream bytes: under such traffic, never; issue 23, item 5.)
#[test]
fn a_busy_replica_still_acknowledges_every_second() {
    let runtime = model_runtime();
    let Some(Replicated {
        real_master,
        real_replica,
        model_master,
        ..
    }) = replicated(&runtime)
    else {
        return;
    };
    for (name, master) in [("redis", real_master.addr()), ("model", model_master)] {
        let mut c = Conn::open(master);
        assert_eq!(
            c.text(&["CONFIG", "SET", "min-replicas-max-lag", "2"]),
            "+OK\r\n"
        );
        assert_eq!(
            c.text(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
            "+OK\r\n"
        );
        let started = Instant::now();
        let (mut writes, mut refused, mut worst_lag) = (0u64, 0u64, 0u64);
        while started.elapsed() < Duration::from_millis(4_000) {
            let reply = c.text(&["SET", "busy", &writes.to_string()]);
            writes += 1;
            if reply.starts_with("-NOREPLICAS") {
                refused += 1;
            }
            if writes % 50 == 0 {
                let info = c.text(&["INFO", "replication"]);
                worst_lag = worst_lag.max(first_replica_lag(&info).expect(&info));
            }
            std::thread::sleep(Duration::from_millis(4));
        }
        let rate = writes as f64 / started.elapsed().as_secs_f64();
        assert!(rate >= 100.0, "{name}: only {rate:.0} writes a second");
        assert_eq!(refused, 0, "{name}: {refused} of {writes} writes refused");
        assert!(worst_lag <= 1, "{name}: replica lag reached {worst_lag} s");
    }
    drop(real_replica);
}

/// Redisson's synced write (`checkLockSyncedSlaves`): its lock script and `WAIT <n>
/// <timeout>` written together, pipelined, no `MULTI`. The model must answer the pair
/// as Redis 7.0 does: the script's reply at once, then `WAIT`'s count once the replica
/// acknowledged the script's write (or at the timeout, with the count so far); a
/// `WAIT` after a script that wrote nothing counts the connection's earlier writes;
/// and a master with no replica answers `WAIT 1 t` with 0 at the timeout.
#[test]
fn a_script_pipelined_with_wait_answers_like_redis() {
    use common::read_reply;
    let runtime = model_runtime();
    let Some(Replicated {
        real_master,
        real_replica,
        model_master,
        ..
    }) = replicated(&runtime)
    else {
        return;
    };
    let lock = lock_impl::designs::REDISSON_LOCK;
    let pair = |c: &mut Conn, script: &[&str], wait: &[&str]| -> (String, String, Duration) {
        let mut bytes = encode_request(script);
        bytes.extend(encode_request(wait));
        let started = Instant::now();
        c.send_raw(&bytes).unwrap();
        let first = read_reply(&mut c.reader).unwrap();
        let second = read_reply(&mut c.reader).unwrap();
        (
            String::from_utf8_lossy(&first).into_owned(),
            String::from_utf8_lossy(&second).into_owned(),
            started.elapsed(),
        )
    };
    let eval = |owner: &'static str| ["EVAL", lock, "1", "lock", "30000", owner];
    for (name, master) in [("redis", real_master.addr()), ("model", model_master)] {
        let mut c = Conn::open(master);
        // Granted (nil), then synced by the one replica.
        let (reply, acked, _) = pair(&mut c, &eval("a:1"), &["WAIT", "1", "2000"]);
        assert_eq!(
            (reply.as_str(), acked.as_str()),
            ("$-1\r\n", ":1\r\n"),
            "{name}"
        );
        // Held by another owner: the script answers the PTTL and writes nothing; WAIT
        // counts the connection's earlier write, acknowledged already.
        let mut other = Conn::open(master);
        let (reply, acked, _) = pair(&mut other, &eval("b:1"), &["WAIT", "1", "2000"]);
        assert!(reply.starts_with(':'), "{name}: the PTTL, {reply:?}");
        assert_eq!(acked, ":1\r\n", "{name}");
        // More replicas than there are: the count so far, at the timeout.
        let (reply, acked, took) = pair(&mut c, &eval("a:1"), &["WAIT", "2", "150"]);
        assert_eq!(
            (reply.as_str(), acked.as_str()),
            ("$-1\r\n", ":1\r\n"),
            "{name}"
        );
        assert!(
            took >= Duration::from_millis(140),
            "{name}: WAIT blocked, {took:?}"
        );
        assert_eq!(c.text(&["DEL", "lock"]), ":1\r\n", "{name}");
    }
    // Without replicas (the replica gone): 0 at the timeout, the script applied.
    drop(real_replica);
    let real_alone = real_master.addr();
    let (model_alone, _) = runtime
        .block_on(sim::redis::server::spawn_tokio_model_with(None, true))
        .expect("start a model master without replicas");
    for (name, master) in [("redis", real_alone), ("model", model_alone)] {
        let mut c = Conn::open(master);
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(&c.text(&["INFO", "replication"]), "connected_slaves").as_deref()
            != Some("0")
        {
            assert!(Instant::now() < deadline, "{name}: the replica never left");
            std::thread::sleep(Duration::from_millis(50));
        }
        let (reply, acked, took) = pair(&mut c, &eval("c:1"), &["WAIT", "1", "100"]);
        assert_eq!(
            (reply.as_str(), acked.as_str()),
            ("$-1\r\n", ":0\r\n"),
            "{name}"
        );
        assert!(
            took >= Duration::from_millis(90),
            "{name}: WAIT blocked, {took:?}"
        );
        assert!(c.text(&["HGET", "lock", "c:1"]).contains('1'), "{name}");
    }
}
