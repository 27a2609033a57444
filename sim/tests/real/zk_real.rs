//! Differential test: the ZooKeeper recipe's operations sent to a real ZooKeeper 3.8 (a
//! private server from Debian's `zookeeper` jars on a free loopback port,
//! `tickTime=2000` as Debian's `zoo.cfg`; `lock_impl::testing::real_zookeeper`) and to
//! the model on a real loopback port (same `tickTime`), with the replies, errors, Stats
//! and watch events compared after normalising what must differ: zxids become offsets
//! from the script's first zxid, session ids become names, times become their
//! relations. Skips without the package unless `LOCKSIM_REQUIRE_ZK` is set.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lock_impl::zk::proto::{
    self, ConnectRequest, ConnectResponse, CreateRequest, MultiOp, MultiResult, Request, Response,
    Stat, create_mode, op,
};
use lock_impl::zk::{TokioDialer, Watch, ZkClient, ZkEnsemble, ZkError};
use lock_impl::{OsEntropy, TokioClock};
use sim::zk::{ZkConfig, java::session_password, spawn_tokio_zk};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Turns replies into comparable lines.
struct Transcript {
    lines: Vec<String>,
    base_zxid: i64,
    sessions: Vec<(i64, &'static str)>,
    dir: String,
}

impl Transcript {
    fn zx(&self, z: i64) -> String {
        if z <= 0 {
            z.to_string()
        } else {
            format!("+{}", z - self.base_zxid)
        }
    }

    fn session(&self, id: i64) -> String {
        if id == 0 {
            return "0".into();
        }
        self.sessions
            .iter()
            .find(|(s, _)| *s == id)
            .map_or("unknown-session".into(), |(_, n)| n.to_string())
    }

    /// A `Stat` in comparable form. Times are compared by order only (`mtime>=ctime`):
    /// whether a node's `setData` lands in the same millisecond as its `create` is up
    /// to the real server's machine (on a loaded one it does not; CI met both), and
    /// the model's simulated clock has its own pace.
    fn stat(&self, s: &Stat) -> String {
        format!(
            "czxid={} mzxid={} pzxid={} mtime>=ctime:{} version={} cversion={} aversion={} owner={} dataLength={} numChildren={}",
            self.zx(s.czxid),
            self.zx(s.mzxid),
            self.zx(s.pzxid),
            s.mtime >= s.ctime,
            s.version,
            s.cversion,
            s.aversion,
            self.session(s.ephemeral_owner),
            s.data_length,
            s.num_children
        )
    }

    fn path(&self, p: &str) -> String {
        p.replace(&self.dir, "/T")
    }

    fn body(&self, r: &Response) -> String {
        match r {
            Response::Empty => "-".into(),
            Response::Create(p) => format!("path={}", self.path(p)),
            Response::Create2(p, s) => format!("path={} {}", self.path(p), self.stat(s)),
            Response::Stat(s) => self.stat(s),
            Response::GetData(d, s) => format!("data={d:?} {}", self.stat(s)),
            Response::GetChildren2(c, s) => format!("children={c:?} {}", self.stat(s)),
            Response::Sync(p) => format!("path={}", self.path(p)),
            Response::Multi(rs) => {
                let parts: Vec<String> = rs
                    .iter()
                    .map(|r| match r {
                        MultiResult::Create(p) => format!("create {}", self.path(p)),
                        MultiResult::Create2(p, s) => {
                            format!("create2 {} {}", self.path(p), self.stat(s))
                        }
                        MultiResult::Delete => "delete".into(),
                        MultiResult::SetData(s) => format!("setData {}", self.stat(s)),
                        MultiResult::Check => "check".into(),
                        MultiResult::Error(e) => format!("error {}", e.name()),
                    })
                    .collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }

    fn record(
        &mut self,
        who: &str,
        what: &str,
        r: &Result<(proto::ReplyHeader, Response), ZkError>,
    ) {
        let line = match r {
            Ok((h, body)) => {
                if self.base_zxid == 0 {
                    self.base_zxid = h.zxid;
                }
                format!(
                    "{who} {what} -> err={} zxid={} {}",
                    h.err.name(),
                    self.zx(h.zxid),
                    self.body(body)
                )
            }
            Err(e) => format!("{who} {what} -> client error {e}"),
        };
        self.lines.push(line);
    }

    async fn event(&mut self, who: &str, w: Option<Watch>) {
        let line = match w {
            None => format!("{who} event: no watch"),
            Some(w) => match tokio::time::timeout(Duration::from_secs(15), w).await {
                Ok(Ok(e)) => format!(
                    "{who} event: type={:?} state={} path={}",
                    e.kind,
                    e.state,
                    self.path(&e.path)
                ),
                Ok(Err(_)) => format!("{who} event: watch dropped"),
                Err(_) => format!("{who} event: none within 15 s"),
            },
        };
        self.lines.push(line);
    }
}

fn create(path: &str, data: Option<&[u8]>, flags: i32, code: i32) -> Request {
    Request::Create {
        op: code,
        req: CreateRequest {
            path: path.into(),
            data: data.map(<[u8]>::to_vec),
            acl: proto::Acl::open_unsafe(),
            flags,
        },
    }
}

async fn client(addr: SocketAddr, timeout_ms: u32) -> ZkClient {
    let e = ZkEnsemble {
        servers: vec![(addr.ip().to_string(), addr.port())],
        dialer: Arc::new(TokioDialer),
        session_timeout_ms: timeout_ms,
        scale: lock_impl::TimeScale::REAL,
    };
    ZkClient::connect(
        &e,
        Arc::new(TokioClock::new()),
        Arc::new(OsEntropy),
        Duration::from_secs(5),
    )
    .await
    .expect("a session")
}

/// A raw connection: the handshake done by hand, so the test can stop pinging (let
/// the session lapse) or resume a session from another connection.
async fn raw_connect(
    addr: SocketAddr,
    session_id: i64,
    passwd: Vec<u8>,
    timeout_ms: i32,
) -> (tokio::net::TcpStream, ConnectResponse) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms,
        session_id,
        passwd,
        read_only: Some(false),
    };
    s.write_all(&req.to_frame()).await.unwrap();
    let frame = read_frame(&mut s).await.expect("a connect response");
    (s, ConnectResponse::read(&frame).unwrap())
}

async fn read_frame(s: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(15), s.read_exact(&mut len))
        .await
        .ok()?
        .ok()?;
    let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

async fn raw_call(
    s: &mut tokio::net::TcpStream,
    xid: i32,
    req: Request,
) -> Result<(proto::ReplyHeader, Response), ZkError> {
    let code = req.code();
    s.write_all(&req.to_frame(xid)).await.unwrap();
    let frame = read_frame(s).await.ok_or(ZkError::ConnectionLoss {
        sent: true,
        why: "closed".into(),
    })?;
    let mut r = proto::Reader::new(&frame);
    let h = proto::ReplyHeader::read(&mut r).unwrap();
    let body = if h.err == proto::ErrorCode::OK {
        Response::read(code, &mut r).unwrap()
    } else {
        Response::Empty
    };
    Ok((h, body))
}

/// The script: every line it records is compared between the servers.
async fn script(addr: SocketAddr, dir: &str) -> Vec<String> {
    let a = client(addr, 4_000).await;
    let b = client(addr, 30_000).await;
    let mut t = Transcript {
        lines: Vec::new(),
        base_zxid: 0,
        sessions: vec![(a.session_id(), "A"), (b.session_id(), "B")],
        dir: dir.to_string(),
    };
    t.lines.push(
        format!("negotiated: A={:?} B={:?}", a.state(), b.state())
            .replace(&format!("{}", a.session_id()), "A")
            .replace(&format!("{}", b.session_id()), "B")
            .replace(&addr.to_string(), "server"),
    );
    let d = |p: &str| format!("{dir}{p}");

    let r = a
        .raw(create(
            dir,
            Some(b"x"),
            create_mode::PERSISTENT,
            op::CREATE2,
        ))
        .await;
    t.record("A", "create2 /T", &r);
    let r = a
        .raw(create(dir, None, create_mode::PERSISTENT, op::CREATE))
        .await;
    t.record("A", "create /T again", &r);
    let r = a
        .raw(create(
            &d("/missing/child"),
            None,
            create_mode::PERSISTENT,
            op::CREATE,
        ))
        .await;
    t.record("A", "create under a missing parent", &r);
    let r = a
        .raw(create(&d("/"), None, create_mode::PERSISTENT, op::CREATE))
        .await;
    t.record("A", "create with a trailing slash", &r);
    let r = a
        .raw(Request::Create {
            op: op::CREATE,
            req: CreateRequest {
                path: d("/noacl"),
                data: None,
                acl: vec![],
                flags: 0,
            },
        })
        .await;
    t.record("A", "create with an empty ACL", &r);
    let r = a
        .raw(create(
            &d("/_c_aaaa-lock-"),
            Some(b""),
            create_mode::EPHEMERAL_SEQUENTIAL,
            op::CREATE,
        ))
        .await;
    t.record("A", "create ephemeral sequential", &r);
    let a_node = match &r {
        Ok((_, Response::Create(p))) => p.clone(),
        other => panic!("create failed: {other:?}"),
    };
    let r = b
        .raw(create(
            &d("/_c_bbbb-lock-"),
            None,
            create_mode::EPHEMERAL_SEQUENTIAL,
            op::CREATE2,
        ))
        .await;
    t.record("B", "create2 ephemeral sequential", &r);
    for i in 0..12 {
        let r = a
            .raw(create(
                &d("/p-"),
                Some(&[i]),
                create_mode::PERSISTENT_SEQUENTIAL,
                op::CREATE,
            ))
            .await;
        t.record("A", "create persistent sequential", &r);
    }
    let r = a
        .raw(Request::GetChildren2 {
            path: dir.into(),
            watch: false,
        })
        .await;
    t.record("A", "getChildren2 /T", &r);
    let (r, b_exists) = b
        .raw_watch(Request::Exists {
            path: a_node.clone(),
            watch: true,
        })
        .await;
    t.record("B", "exists A's node, watch", &r);
    let (r, b_data) = b
        .raw_watch(Request::GetData {
            path: a_node.clone(),
            watch: true,
        })
        .await;
    t.record("B", "getData A's node, watch", &r);
    let r = a
        .raw(create(&format!("{a_node}/child"), None, 0, op::CREATE))
        .await;
    t.record("A", "create under an ephemeral", &r);
    let r = a
        .raw(Request::Delete {
            path: a_node.clone(),
            version: 5,
        })
        .await;
    t.record("A", "delete with a wrong version", &r);
    let r = a
        .raw(Request::Delete {
            path: dir.into(),
            version: -1,
        })
        .await;
    t.record("A", "delete a parent", &r);
    let r = a
        .raw(Request::Delete {
            path: d("/nope"),
            version: -1,
        })
        .await;
    t.record("A", "delete a missing node", &r);
    let r = a
        .raw(Request::SetData {
            path: d("/p-0000000004"),
            data: Some(b"new".to_vec()),
            version: 0,
        })
        .await;
    t.record("A", "setData version 0", &r);
    let r = a
        .raw(Request::SetData {
            path: d("/p-0000000004"),
            data: None,
            version: 0,
        })
        .await;
    t.record("A", "setData version 0 again", &r);
    let r = a
        .raw(Request::GetData {
            path: d("/p-0000000004"),
            watch: false,
        })
        .await;
    t.record("A", "getData", &r);
    let r = a
        .raw(Request::GetData {
            path: d("/nope"),
            watch: true,
        })
        .await;
    t.record("A", "getData a missing node, watch", &r);
    let (r, a_exists) = a
        .raw_watch(Request::Exists {
            path: d("/later"),
            watch: true,
        })
        .await;
    t.record("A", "exists a missing node, watch", &r);
    let r = b.raw(create(&d("/later"), None, 0, op::CREATE)).await;
    t.record("B", "create /T/later", &r);
    t.event("A", a_exists).await;
    let r = a
        .raw(Request::Delete {
            path: a_node.clone(),
            version: 0,
        })
        .await;
    t.record("A", "delete own node, version 0", &r);
    t.event("B", b_exists).await;
    t.event("B", b_data).await;
    let (r, b_children) = b
        .raw_watch(Request::GetChildren2 {
            path: dir.into(),
            watch: true,
        })
        .await;
    t.record("B", "getChildren2 /T, watch", &r);
    let r = a.raw(create(&d("/x"), None, 0, op::CREATE)).await;
    t.record("A", "create /T/x", &r);
    t.event("B", b_children).await;
    let r = a
        .raw(Request::Multi(vec![
            MultiOp::Check {
                path: d("/x"),
                version: 0,
            },
            MultiOp::Delete {
                path: d("/x"),
                version: -1,
            },
            MultiOp::Create {
                op: op::CREATE,
                req: CreateRequest {
                    path: d("/y"),
                    data: None,
                    acl: proto::Acl::open_unsafe(),
                    flags: 0,
                },
            },
            MultiOp::SetData {
                path: d("/y"),
                data: Some(b"d".to_vec()),
                version: 0,
            },
        ]))
        .await;
    t.record("A", "multi check, delete, create, setData", &r);
    let r = a
        .raw(Request::Multi(vec![
            MultiOp::Create {
                op: op::CREATE,
                req: CreateRequest {
                    path: d("/z"),
                    data: None,
                    acl: proto::Acl::open_unsafe(),
                    flags: 0,
                },
            },
            MultiOp::Delete {
                path: d("/nope"),
                version: -1,
            },
            MultiOp::Delete {
                path: d("/y"),
                version: -1,
            },
        ]))
        .await;
    t.record("A", "multi failing in the middle", &r);
    let r = a
        .raw(Request::Exists {
            path: d("/z"),
            watch: false,
        })
        .await;
    t.record("A", "exists /T/z after the failed multi", &r);
    let r = a.raw(Request::Sync { path: dir.into() }).await;
    t.record("A", "sync", &r);

    // Session expiry: C creates an ephemeral node, then stops pinging.
    let (mut c, resp) = raw_connect(addr, 0, vec![0; 16], 1_000).await;
    t.sessions.push((resp.session_id, "C"));
    t.lines.push(format!(
        "C connect asking 1000 ms -> timeout={} passwd is Java's: {}",
        resp.timeout_ms,
        resp.passwd == session_password(resp.session_id)
    ));
    let r = raw_call(
        &mut c,
        1,
        create(&d("/c-eph"), None, create_mode::EPHEMERAL, op::CREATE),
    )
    .await;
    t.record("C", "create ephemeral", &r);
    let (r, b_c) = b
        .raw_watch(Request::Exists {
            path: d("/c-eph"),
            watch: true,
        })
        .await;
    t.record("B", "exists C's node, watch", &r);
    t.event("B", b_c).await;
    let closed = read_frame(&mut c).await.is_none();
    t.lines
        .push(format!("C's connection closed by the server: {closed}"));
    let (_c2, resp2) = raw_connect(addr, resp.session_id, resp.passwd.clone(), 4_000).await;
    t.lines.push(format!(
        "C reconnects after expiry -> timeout={} session={} passwd zero: {}",
        resp2.timeout_ms,
        t.session(resp2.session_id),
        resp2.passwd.iter().all(|b| *b == 0)
    ));

    // Closing a session from another connection: D's node goes at once.
    let (mut d1, resp) = raw_connect(addr, 0, vec![0; 16], 10_000).await;
    t.sessions.push((resp.session_id, "D"));
    let r = raw_call(
        &mut d1,
        1,
        create(&d("/d-eph"), None, create_mode::EPHEMERAL, op::CREATE),
    )
    .await;
    t.record("D", "create ephemeral", &r);
    // A wrong password closes the session's other connection first (CLIENT_RECONNECT
    // comes before the password check), then gets timeout 0.
    let (_bad, resp3) = raw_connect(addr, resp.session_id, vec![7; 16], 10_000).await;
    t.lines.push(format!(
        "D with a wrong password -> timeout={}",
        resp3.timeout_ms
    ));
    let first_closed = read_frame(&mut d1).await.is_none();
    t.lines
        .push(format!("D's first connection closed: {first_closed}"));
    let (mut d2, resp2) = raw_connect(addr, resp.session_id, resp.passwd.clone(), 10_000).await;
    t.lines.push(format!(
        "D resumes on a second connection -> timeout={} session={}",
        resp2.timeout_ms,
        t.session(resp2.session_id)
    ));
    let (r, b_d) = b
        .raw_watch(Request::Exists {
            path: d("/d-eph"),
            watch: true,
        })
        .await;
    t.record("B", "exists D's node, watch", &r);
    let r = raw_call(&mut d2, 2, Request::CloseSession).await;
    t.record("D", "closeSession", &r);
    t.event("B", b_d).await;
    let r = b
        .raw(Request::Exists {
            path: d("/d-eph"),
            watch: false,
        })
        .await;
    t.record("B", "exists D's node after close", &r);

    // Clean up (persistent nodes), then close both sessions.
    let r = a
        .raw(Request::GetChildren2 {
            path: dir.into(),
            watch: false,
        })
        .await;
    t.record("A", "getChildren2 /T at the end", &r);
    if let Ok((_, Response::GetChildren2(children, _))) = r {
        for c in children {
            let _ = a.delete(&format!("{dir}/{c}"), -1).await;
        }
    }
    let _ = a.delete(dir, -1).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    t.lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_operations_answer_as_real_zookeeper_does() {
    let Some(real) = lock_impl::testing::real_zookeeper() else {
        return;
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = format!("/locksim-diff-{}-{stamp}", std::process::id());
    let (model, _shared) = spawn_tokio_zk(ZkConfig::default()).await.unwrap();
    let (real_lines, model_lines) = tokio::join!(script(real, &dir), script(model, &dir));
    let mut diffs = Vec::new();
    for (i, (r, m)) in real_lines.iter().zip(&model_lines).enumerate() {
        if r != m {
            diffs.push(format!("line {i}:\n  real:  {r}\n  model: {m}"));
        }
    }
    if real_lines.len() != model_lines.len() {
        diffs.push(format!(
            "lengths differ: real {} model {}",
            real_lines.len(),
            model_lines.len()
        ));
    }
    for l in &real_lines {
        println!("{l}");
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
