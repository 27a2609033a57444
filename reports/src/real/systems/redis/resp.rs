//! The parent's own questions to a Redis server or Sentinel, in RESP over loopback
//! (not through the fault proxy), with short timeouts: a paused server is simply not
//! asked. A reply is read whole or not at all.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::real::system::ServerAsk;

/// A fresh connection to `port` with one RESP request sent (short timeouts: a paused
/// server is simply not asked).
fn resp_send(port: u16, argv: &[&str]) -> Option<TcpStream> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    s.write_all(request(argv).as_bytes()).ok()?;
    Some(s)
}

/// `argv` as a RESP request.
fn request(argv: &[&str]) -> String {
    let mut req = format!("*{}\r\n", argv.len());
    for a in argv {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    req
}

/// The parent's own connection to one Redis server (not through the fault proxy),
/// kept between questions so that sampling every 20 ms does not open a connection
/// each time; dropped on any error or timeout (a reply half read cannot be trusted)
/// and opened again at the next question. Short timeouts: a paused server is simply
/// not asked.
pub(super) struct RedisAsk {
    port: u16,
    stream: Option<TcpStream>,
}

impl RedisAsk {
    /// Asks the server on `port` (connects at the first question).
    pub(super) fn new(port: u16) -> Self {
        Self { port, stream: None }
    }

    /// Sends `argv` and reads until `done` says the reply is whole.
    fn ask<T>(&mut self, argv: &[&str], done: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        let answer = self.try_ask(argv, done);
        if answer.is_none() {
            self.stream = None;
        }
        answer
    }

    fn try_ask<T>(&mut self, argv: &[&str], done: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        if self.stream.is_none() {
            let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
            let s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
            s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
            self.stream = Some(s);
        }
        let s = self.stream.as_mut()?;
        s.write_all(request(argv).as_bytes()).ok()?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
            if let Some(answer) = done(&got) {
                return Some(answer);
            }
        }
    }

    /// What the server holds under `key`, by its own answer: a string's value or a
    /// hash's fields joined by `,` (`Some(None)`: no such key); `None` if it does not
    /// answer (stopped, dead, or an error).
    pub(super) fn lock_value_of(&mut self, key: &str) -> Option<Option<String>> {
        let mut items = self.ask(&["GET", key], parse_strings)?;
        if items.as_ref().is_err_and(|e| e.starts_with("WRONGTYPE")) {
            items = self.ask(&["HKEYS", key], parse_strings)?;
        }
        let items = items.ok()?;
        Some((!items.is_empty()).then(|| items.join(",")))
    }

    /// A bulk-string reply (`INFO`), whole.
    fn bulk(&mut self, argv: &[&str]) -> Option<String> {
        self.ask(argv, |got| {
            let text = std::str::from_utf8(got).ok()?;
            let (head, body) = text.split_once("\r\n")?;
            let len: usize = head.strip_prefix('$')?.parse().ok()?;
            (body.len() >= len + 2).then(|| body[..len].to_string())
        })
    }

    /// Its role by its own answer (`INFO replication`): `master`, or `replica of
    /// <ip:port>`; `None` if it does not answer.
    pub(super) fn role(&mut self) -> Option<String> {
        let info = self.bulk(&["INFO", "replication"])?;
        match info_field(&info, "role")? {
            "master" => Some("master".into()),
            _ => Some(format!(
                "replica of {}:{}",
                info_field(&info, "master_host")?,
                info_field(&info, "master_port")?
            )),
        }
    }

    /// Its count of expired keys (`INFO stats`'s `expired_keys`).
    fn expired_keys_of(&mut self) -> Option<u64> {
        let info = self.bulk(&["INFO", "stats"])?;
        info_field(&info, "expired_keys")?.parse().ok()
    }
}

/// [`RedisAsk::lock_value`] over a fresh connection.
pub(super) fn lock_value_at(port: u16, key: &str) -> Option<Option<String>> {
    RedisAsk::new(port).lock_value_of(key)
}

/// A whole reply in `bytes` that is a bulk string, a nil or an array of bulk strings:
/// the strings (none for a nil or an empty array), or the error's text; `None` if more
/// is to come.
fn parse_strings(bytes: &[u8]) -> Option<Result<Vec<String>, String>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (head, mut rest) = text.split_once("\r\n")?;
    let bulk = |rest: &mut &str| -> Option<Option<String>> {
        let (h, r) = rest.split_once("\r\n")?;
        let len: i64 = h.strip_prefix('$')?.parse().ok()?;
        if len < 0 {
            *rest = r;
            return Some(None);
        }
        let len = len as usize;
        (r.len() >= len + 2).then(|| {
            *rest = &r[len + 2..];
            Some(r[..len].to_string())
        })
    };
    match head.as_bytes().first()? {
        b'-' => Some(Err(head[1..].to_string())),
        b'$' => {
            let mut all = text;
            Some(Ok(bulk(&mut all)?.into_iter().collect()))
        }
        b'*' => {
            let count: i64 = head[1..].parse().ok()?;
            let mut out = Vec::new();
            for _ in 0..count.max(0) {
                out.extend(bulk(&mut rest)?);
            }
            Some(Ok(out))
        }
        _ => Some(Err(format!("unexpected reply {head}"))),
    }
}

/// [`RedisAsk::role`] over a fresh connection.
pub(super) fn role_at(port: u16) -> Option<String> {
    RedisAsk::new(port).role()
}

/// One RESP request over a fresh connection; the first reply line.
pub(super) fn resp(port: u16, argv: &[&str]) -> Option<String> {
    let mut s = resp_send(port, argv)?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// One RESP request to `port` whose reply is a bulk string (`INFO`): the whole string.
pub(super) fn resp_bulk(port: u16, argv: &[&str]) -> Option<String> {
    RedisAsk::new(port).bulk(argv)
}

/// Polls `ready` every 20 ms until it holds, for up to `limit`.
pub(super) fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(())
}

/// `field:value` of an `INFO` reply.
pub(super) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

impl ServerAsk for RedisAsk {
    fn lock_value(&mut self, key: &str) -> Option<Option<String>> {
        self.lock_value_of(key)
    }

    fn expired_keys(&mut self) -> Option<u64> {
        self.expired_keys_of()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock value is read whole or not at all: a reply cut short is "no answer yet",
    /// never "no key" (which would record a removal that did not happen).
    #[test]
    fn a_reply_cut_short_is_no_answer_never_an_absent_key() {
        let ok = |b: &str| parse_strings(b.as_bytes());
        assert_eq!(ok("$-1\r\n"), Some(Ok(vec![])));
        assert_eq!(ok("$3\r\nabc\r\n"), Some(Ok(vec!["abc".to_string()])));
        assert_eq!(ok("$3\r\n"), None);
        assert_eq!(ok("$3\r\nab"), None);
        assert_eq!(ok("*0\r\n"), Some(Ok(vec![])));
        assert_eq!(
            ok("*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
            Some(Ok(vec!["a".to_string(), "b".to_string()]))
        );
        assert_eq!(ok("*2\r\n$1\r\na\r\n"), None);
        assert_eq!(
            ok("-WRONGTYPE Operation against a key\r\n"),
            Some(Err("WRONGTYPE Operation against a key".to_string()))
        );
        // And the owner value names the client that wrote it.
        assert_eq!(
            crate::real::system::writer_of("client-12-0-ab"),
            Some("client-12".to_string())
        );
        assert_eq!(crate::real::system::writer_of("redisson-uuid:1"), None);
    }
}
