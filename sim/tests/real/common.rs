//! Shared by the real-Redis test files: a raw RESP client that returns reply bytes
//! exactly as the server wrote them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use sim::redis::resp::encode_request;

/// Reads one complete reply (RESP2 or RESP3) and returns its raw bytes.
pub fn read_reply(r: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    read_into(r, &mut out)?;
    Ok(out)
}

pub fn read_into(r: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a reply",
        ));
    }
    out.extend_from_slice(&line);
    let body = String::from_utf8_lossy(&line[1..]).trim_end().to_string();
    let n: i64 = body.parse().unwrap_or(0);
    match line[0] {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut buf = vec![0u8; n as usize + 2];
            r.read_exact(&mut buf)?;
            out.extend_from_slice(&buf);
        }
        b'*' | b'>' | b'~' => {
            for _ in 0..n.max(0) {
                read_into(r, out)?;
            }
        }
        b'%' => {
            for _ in 0..2 * n.max(0) {
                read_into(r, out)?;
            }
        }
        b'|' => {
            for _ in 0..2 * n.max(0) {
                read_into(r, out)?;
            }
            read_into(r, out)?;
        }
        _ => {}
    }
    Ok(())
}

/// One connection; `writer` and `reader` are the same socket.
pub struct Conn {
    pub writer: TcpStream,
    pub reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)
    }

    pub fn call<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> std::io::Result<Vec<u8>> {
        self.send_raw(&encode_request(argv))?;
        read_reply(&mut self.reader)
    }

    /// The reply's bytes; panics if there is none.
    pub fn reply<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> Vec<u8> {
        self.call(argv).expect("a reply")
    }

    /// The reply as (lossy) text.
    pub fn text<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> String {
        String::from_utf8_lossy(&self.reply(argv)).into_owned()
    }

    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        let _ = self.reader.read_to_end(&mut rest);
        rest
    }
}

/// A real `redis-server` and the model on a loopback port, side by side.
pub struct Servers {
    pub real: lock_impl::testing::RealRedis,
    pub model: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

/// The model served on a loopback port by a one-worker tokio runtime (kept alive by
/// the caller).
pub fn runtime_and_model() -> (tokio::runtime::Runtime, SocketAddr) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (model, _) = runtime
        .block_on(sim::redis::server::spawn_tokio_model())
        .expect("start the model");
    (runtime, model)
}

/// Both servers, or `None` (after a `SKIPPED:` line, or a panic under
/// `LOCKSIM_REQUIRE_REDIS`) when `redis-server` is missing.
pub fn servers() -> Option<Servers> {
    let real = lock_impl::testing::RealRedis::start()?;
    let (runtime, model) = runtime_and_model();
    Some(Servers {
        real,
        model,
        _runtime: runtime,
    })
}

/// A generated-case count from the environment variable `var`, else `default`.
pub fn cases_from_env(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
