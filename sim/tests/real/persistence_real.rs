//! Persistence against a real `redis-server`: with `appendonly yes` and each
//! `appendfsync` policy, write lock keys, `SIGKILL` the server (a process crash),
//! restart it on the same directory, and compare which keys, values and TTLs came back
//! with what the model's durable store brings back after a process crash.
//!
//! Without `redis-server` on `PATH` this prints one `SKIPPED:` line (and fails under
//! `LOCKSIM_REQUIRE_REDIS`).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sim::redis::persistence::{DurableStore, Fsync, Persistence};
use sim::redis::{Engine, encode};

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

fn start(dir: &Path, port: u16, fsync: &str) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "yes", "--appendfsync", fsync])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Killed by the kernel if this test process dies before it can.
    let mut child = lock_impl::testing::servers::spawn_kept(cmd).expect("redis-server starts");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    for _ in 0..300 {
        if let Ok(mut c) = TcpStream::connect(addr) {
            // Listening is not loaded: PING answers -LOADING until the AOF is in.
            let _ = c.write_all(b"*1\r\n$4\r\nPING\r\n");
            let mut r = BufReader::new(c);
            let mut line = String::new();
            if r.read_line(&mut line).is_ok() && line.starts_with("+PONG") {
                // Ours, not another test's server on the same port.
                let ours = TcpStream::connect(addr)
                    .is_ok_and(|c| lock_impl::testing::served_by(c, child.id()));
                assert!(ours, "port {port} is taken by another redis-server");
                return child;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not come up on port {port}");
}

fn resp(argv: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Reads one whole reply's bytes.
fn read_reply(r: &mut impl BufRead, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("reply line");
    out.extend_from_slice(&line);
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    match line[0] {
        b'$' if n >= 0 => {
            let mut body = vec![0; n as usize + 2];
            r.read_exact(&mut body).expect("bulk body");
            out.extend_from_slice(&body);
        }
        b'*' if n > 0 => {
            for _ in 0..n {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

struct Real {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Real {
    fn open(port: u16) -> Self {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let r = BufReader::new(w.try_clone().expect("clone"));
        Self { w, r }
    }

    fn call(&mut self, argv: &[&str]) -> Vec<u8> {
        self.w.write_all(&resp(argv)).expect("send");
        let mut out = Vec::new();
        read_reply(&mut self.r, &mut out);
        out
    }
}

const LOCK_SCRIPT: &str = "redis.call('hincrby', KEYS[1], ARGV[2], 1); \
                           redis.call('pexpire', KEYS[1], ARGV[1]); return nil";

fn writes() -> Vec<Vec<&'static str>> {
    vec![
        vec!["SET", "lock:a", "owner-a", "NX", "PX", "60000"],
        vec!["SET", "lock:b", "owner-b", "NX", "PX", "150"],
        vec!["EVAL", LOCK_SCRIPT, "1", "lock:h", "30000", "owner-h"],
        vec!["SET", "lock:p", "owner-p", "PX", "50000"],
        vec!["PERSIST", "lock:p"],
        vec!["SET", "lock:d", "owner-d"],
        vec!["DEL", "lock:d"],
        vec!["SET", "counter", "1"],
        vec!["INCR", "counter"],
    ]
}

const KEYS: [&str; 6] = ["lock:a", "lock:b", "lock:h", "lock:p", "lock:d", "counter"];

fn ttl_ms(reply: &[u8]) -> i64 {
    std::str::from_utf8(&reply[1..reply.len() - 2])
        .expect("integer reply")
        .parse()
        .expect("integer")
}

fn check_policy(policy: &str, fsync: Fsync) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let dir = std::env::temp_dir().join(format!("locksim-aof-{policy}-{port}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");

    let mut real_server = start(&dir, port, policy);
    let mut real = Real::open(port);
    let mut model = Engine::new();
    let mut session = model.connect("test");
    let mut store = DurableStore::new(Persistence::Aof { fsync });
    for argv in writes() {
        let at = now_us();
        let real_reply = real.call(&argv);
        let args: Vec<Vec<u8>> = argv.iter().map(|a| a.as_bytes().to_vec()).collect();
        let model_reply = encode(&model.execute(&mut session, &args, at), 2);
        store.after_iteration(|| model.dump(), at);
        assert_eq!(
            String::from_utf8_lossy(&real_reply),
            String::from_utf8_lossy(&model_reply),
            "{policy}: {argv:?}"
        );
    }

    // kill -9: a process crash. The page cache keeps what was written.
    real_server.kill().expect("SIGKILL");
    real_server.wait().expect("reaped");
    store.crash_process();
    // Long enough for lock:b (PX 150) to have expired by the time both restart.
    std::thread::sleep(Duration::from_millis(300));

    let mut real_server = start(&dir, port, policy);
    let mut real = Real::open(port);
    let mut restarted = Engine::new();
    restarted.load(store.surviving());
    let mut session = restarted.connect("test");
    for key in KEYS {
        let at = now_us();
        let mut ask = |argv: &[&str]| {
            let args: Vec<Vec<u8>> = argv.iter().map(|a| a.as_bytes().to_vec()).collect();
            (
                real.call(argv),
                encode(&restarted.execute(&mut session, &args, at), 2),
            )
        };
        let (real_type, model_type) = ask(&["TYPE", key]);
        assert_eq!(real_type, model_type, "{policy}: TYPE {key}");
        let read: &[&str] = if real_type.starts_with(b"+hash") {
            &["HGETALL", key]
        } else {
            &["GET", key]
        };
        let read: Vec<&str> = read.to_vec();
        let (real_value, model_value) = ask(&read);
        assert_eq!(
            String::from_utf8_lossy(&real_value),
            String::from_utf8_lossy(&model_value),
            "{policy}: {read:?} after the restart"
        );
        let (real_ttl, model_ttl) = ask(&["PTTL", key]);
        let (real_ttl, model_ttl) = (ttl_ms(&real_ttl), ttl_ms(&model_ttl));
        if real_ttl < 0 || model_ttl < 0 {
            assert_eq!(real_ttl, model_ttl, "{policy}: PTTL {key}");
        } else {
            // Both count down from the same absolute deadline; the tolerance covers
            // the time between the two commands.
            assert!(
                (real_ttl - model_ttl).abs() <= 500,
                "{policy}: PTTL {key}: real {real_ttl} ms, model {model_ttl} ms"
            );
        }
    }
    // Not vacuous: the real server did bring the long-lived locks back.
    assert_eq!(real.call(&["GET", "lock:a"]), b"$7\r\nowner-a\r\n".to_vec());
    assert_eq!(real.call(&["EXISTS", "lock:h"]), b":1\r\n".to_vec());
    let _ = real_server.kill();
    let _ = real_server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_server_with_appendfsync_always_brings_back_what_the_model_brings_back() {
    if lock_impl::testing::redis_server_available() {
        check_policy("always", Fsync::Always);
    }
}

#[test]
fn a_killed_server_with_appendfsync_everysec_brings_back_what_the_model_brings_back() {
    if lock_impl::testing::redis_server_available() {
        check_policy("everysec", Fsync::Everysec);
    }
}

#[test]
fn a_killed_server_with_appendfsync_no_brings_back_what_the_model_brings_back() {
    if lock_impl::testing::redis_server_available() {
        check_policy("no", Fsync::No);
    }
}
