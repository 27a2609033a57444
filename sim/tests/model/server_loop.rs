//! The server layer (connection loop, push forwarding, protocol errors, QUIT, HELLO)
//! over a tiny fake engine, so it is tested independently of the real command engine.
//! Production code always runs `Engine`; the fake only stands in here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sim::redis::{CommandEngine, FixedClock, Reply, Session, SharedEngine, serve_tokio};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// PING, ECHO, SET, GET, QUIT, HELLO, SUBSCRIBE, PUBLISH, NOW (the clock reading).
#[derive(Default)]
struct FakeEngine {
    next_id: u64,
    keys: BTreeMap<Vec<u8>, Vec<u8>>,
    subscribers: BTreeMap<Vec<u8>, Vec<u64>>,
    pushes: Vec<(u64, Reply)>,
    disconnected: Vec<u64>,
    peers: Vec<String>,
}

impl CommandEngine for FakeEngine {
    fn connect(&mut self, peer: String) -> Session {
        self.next_id += 1;
        self.peers.push(peer.clone());
        Session::new(self.next_id, peer)
    }

    fn disconnect(&mut self, session: &Session) {
        self.disconnected.push(session.id);
        for ids in self.subscribers.values_mut() {
            ids.retain(|&id| id != session.id);
        }
    }

    fn execute(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
        match (name.as_str(), argv.len()) {
            ("PING", 1) => Reply::Simple("PONG".into()),
            ("ECHO", 2) => Reply::Bulk(argv[1].clone()),
            ("SET", 3) => {
                self.keys.insert(argv[1].clone(), argv[2].clone());
                Reply::ok()
            }
            ("GET", 2) => self.keys.get(&argv[1]).map_or(Reply::Nil, Reply::bulk),
            ("NOW", 1) => Reply::Integer(now_us as i64),
            ("QUIT", 1) => {
                session.close_after_reply = true;
                Reply::ok()
            }
            ("HELLO", 2) => {
                session.protocol = if argv[1] == b"3" { 3 } else { 2 };
                Reply::Map(vec![(Reply::bulk("proto"), Reply::Integer(3))])
            }
            ("SUBSCRIBE", 2) => {
                session.channels.push(argv[1].clone());
                self.subscribers
                    .entry(argv[1].clone())
                    .or_default()
                    .push(session.id);
                Reply::Push(vec![
                    Reply::bulk("subscribe"),
                    Reply::Bulk(argv[1].clone()),
                    Reply::Integer(1),
                ])
            }
            ("PUBLISH", 3) => {
                let ids = self.subscribers.get(&argv[1]).cloned().unwrap_or_default();
                for &id in &ids {
                    self.pushes.push((
                        id,
                        Reply::Push(vec![
                            Reply::bulk("message"),
                            Reply::Bulk(argv[1].clone()),
                            Reply::Bulk(argv[2].clone()),
                        ]),
                    ));
                }
                Reply::Integer(ids.len() as i64)
            }
            _ => Reply::err(format!("unknown command '{name}'")),
        }
    }

    fn active_expire(&mut self, _now_us: u64) -> usize {
        0
    }

    fn take_pushes(&mut self) -> Vec<(u64, Reply)> {
        std::mem::take(&mut self.pushes)
    }
}

async fn start() -> (SocketAddr, SharedEngine<FakeEngine>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = SharedEngine::new(FakeEngine::default(), Arc::new(FixedClock(42)));
    tokio::spawn(serve_tokio(listener, shared.clone()));
    (addr, shared)
}

/// Reads until `want` bytes arrived (or fails after a timeout).
async fn read_exactly(stream: &mut TcpStream, want: usize) -> Vec<u8> {
    let mut buf = vec![0u8; want];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
        .await
        .expect("reply within 5 s")
        .expect("read");
    buf
}

async fn request(stream: &mut TcpStream, bytes: &[u8], expect: &[u8]) {
    stream.write_all(bytes).await.unwrap();
    let got = read_exactly(stream, expect.len()).await;
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expect)
    );
}

async fn assert_closed(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
        .await
        .expect("close within 5 s");
    assert!(matches!(n, Ok(0)), "expected EOF, got {n:?} {rest:?}");
}

#[tokio::test]
async fn pipelined_multibulk_and_inline_requests_are_answered_in_order() {
    let (addr, _) = start().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    request(
        &mut c,
        b"PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n\r\nget k\nGET missing\r\nNOW\r\n",
        b"+PONG\r\n+OK\r\n$1\r\nv\r\n$-1\r\n:42\r\n",
    )
    .await;
}

#[tokio::test]
async fn a_request_split_across_writes_is_reassembled() {
    let (addr, _) = start().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    for part in [&b"*2\r\n$4\r\nEC"[..], b"HO\r\n$5\r\nhel", b"lo\r"] {
        c.write_all(part).await.unwrap();
        c.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    request(&mut c, b"\n", b"$5\r\nhello\r\n").await;
}

#[tokio::test]
async fn a_protocol_error_answers_closes_and_spares_other_connections() {
    let (addr, shared) = start().await;
    let mut bad = TcpStream::connect(addr).await.unwrap();
    let mut good = TcpStream::connect(addr).await.unwrap();
    request(&mut good, b"PING\r\n", b"+PONG\r\n").await;
    request(
        &mut bad,
        b"PING\r\n*1\r\n:1\r\nPING\r\n",
        b"+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n",
    )
    .await;
    assert_closed(&mut bad).await;
    request(&mut good, b"PING\r\n", b"+PONG\r\n").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(shared.with_engine(|e| e.disconnected.clone()), vec![1]);
}

#[tokio::test]
async fn quit_replies_then_closes_and_disconnects_the_session() {
    let (addr, shared) = start().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    request(&mut c, b"QUIT\r\nPING\r\n", b"+OK\r\n").await;
    assert_closed(&mut c).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(shared.with_engine(|e| e.disconnected.clone()), vec![1]);
}

#[tokio::test]
async fn hello_3_switches_the_encoding_from_the_next_reply_on() {
    let (addr, _) = start().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    request(
        &mut c,
        b"GET nope\r\nHELLO 3\r\nGET nope\r\n",
        b"$-1\r\n%1\r\n$5\r\nproto\r\n:3\r\n_\r\n",
    )
    .await;
}

#[tokio::test]
async fn published_messages_reach_subscribers_on_other_connections() {
    let (addr, _) = start().await;
    let mut sub2 = TcpStream::connect(addr).await.unwrap();
    let mut sub3 = TcpStream::connect(addr).await.unwrap();
    let mut publisher = TcpStream::connect(addr).await.unwrap();
    request(
        &mut sub2,
        b"SUBSCRIBE ch\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    )
    .await;
    request(
        &mut sub3,
        b"HELLO 3\r\nSUBSCRIBE ch\r\n",
        b"%1\r\n$5\r\nproto\r\n:3\r\n>3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    )
    .await;
    request(&mut publisher, b"PUBLISH ch hi\r\n", b":2\r\n").await;
    let msg = b"3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
    let got2 = read_exactly(&mut sub2, msg.len() + 1).await;
    assert_eq!(got2, [&b"*"[..], msg].concat());
    let got3 = read_exactly(&mut sub3, msg.len() + 1).await;
    assert_eq!(got3, [&b">"[..], msg].concat());
}

#[tokio::test]
async fn a_subscriber_publishing_to_itself_gets_the_reply_then_the_message() {
    let (addr, _) = start().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    request(
        &mut c,
        b"SUBSCRIBE ch\r\nPUBLISH ch x\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n",
    )
    .await;
}

#[test]
fn the_server_runs_inside_a_turmoil_host() {
    let mut sim = turmoil::Builder::new().rng_seed(7).build();
    let shared = SharedEngine::new(FakeEngine::default(), Arc::new(FixedClock(1)));
    let server_side = shared.clone();
    sim.host("redis", move || {
        let shared = server_side.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
            sim::redis::serve_turmoil(listener, shared).await;
            Ok(())
        }
    });
    sim.client("alice", async move {
        let mut s = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
        s.write_all(b"SET k v\r\nGET k\r\n").await?;
        let want = b"+OK\r\n$1\r\nv\r\n";
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).await?;
        assert_eq!(got, want);
        Ok(())
    });
    sim.run().unwrap();
    assert!(
        shared.with_engine(|e| e.keys.contains_key(&b"k"[..])),
        "the write reached the shared engine"
    );
}

#[test]
fn the_session_peer_is_the_turmoil_host_name() {
    let mut sim = turmoil::Builder::new().rng_seed(8).build();
    let shared = SharedEngine::new(FakeEngine::default(), Arc::new(FixedClock(1)));
    let server_side = shared.clone();
    sim.host("redis", move || {
        let shared = server_side.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
            sim::redis::serve_turmoil(listener, shared).await;
            Ok(())
        }
    });
    sim.client("bob", async move {
        let mut s = turmoil::net::TcpStream::connect(("redis", 6379)).await?;
        s.write_all(b"PING\r\n").await?;
        let mut got = vec![0u8; 7];
        s.read_exact(&mut got).await?;
        Ok(())
    });
    sim.run().unwrap();
    assert_eq!(
        shared.with_engine(|e| e.peers.clone()),
        vec!["bob".to_string()]
    );
}
