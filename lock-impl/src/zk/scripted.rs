//! A scripted ZooKeeper server over in-memory streams, for the client's and Curator's
//! unit tests: each dial takes the next [`Step`] (after its gate opens, if it has one),
//! and the server on the other end answers the handshake as the step says, then
//! answers every request with `NONODE` (an `exists` on a missing node) and pings with
//! pings. Every `ConnectRequest` and the time of every dial are logged.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

use super::client::{StreamDial, StreamDialer, ZkStream};
use super::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, PING_XID, ReplyHeader, Request, Writer,
};
use crate::Task;

/// What the server does with one dial.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Refuse the connection.
    Refuse,
    /// Accept the dial and never answer.
    Hang,
    /// Establish the session (id 7, the asked timeout), then close the connection 30 ms
    /// later.
    Drop,
    /// Answer the handshake with timeout 0: the session expired.
    Expired,
    /// Establish the session and serve requests until the client goes.
    Serve,
}

/// One dial's log: when (tokio time since the script started) and the connect request.
#[derive(Debug, Clone)]
pub struct Dial {
    pub at: Duration,
    pub request: Option<ConnectRequest>,
}

/// A scripted ZooKeeper server: each dial takes the next step.
pub struct Scripted {
    steps: Mutex<VecDeque<(Option<oneshot::Receiver<()>>, Step)>>,
    /// Every dial so far.
    pub log: Arc<Mutex<Vec<Dial>>>,
    start: tokio::time::Instant,
}

impl Scripted {
    /// A server that answers the dials with `steps`, in order (each released by its
    /// receiver, if it has one).
    pub fn new(steps: Vec<(Option<oneshot::Receiver<()>>, Step)>) -> Arc<Self> {
        Arc::new(Self {
            steps: Mutex::new(steps.into()),
            log: Arc::default(),
            start: tokio::time::Instant::now(),
        })
    }

    /// The dials so far.
    pub fn dials(&self) -> Vec<Dial> {
        self.log.lock().unwrap().clone()
    }
}

impl StreamDialer for Scripted {
    fn dial(&self, _host: &str, _port: u16) -> StreamDial<'_> {
        Box::pin(async move {
            let next = self.steps.lock().unwrap().pop_front();
            let (gate, step) = next.unwrap_or((None, Step::Refuse));
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            let index = {
                let mut log = self.log.lock().unwrap();
                log.push(Dial {
                    at: self.start.elapsed(),
                    request: None,
                });
                log.len() - 1
            };
            if matches!(step, Step::Refuse) {
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "scripted"));
            }
            let (client, server) = tokio::io::duplex(64 * 1024);
            let log = self.log.clone();
            tokio::spawn(serve(server, step, log, index));
            Ok(Box::new(client) as ZkStream)
        })
    }

    fn spawn(&self, task: Task) {
        tokio::spawn(task);
    }
}

async fn read_frame(s: &mut tokio::io::DuplexStream) -> io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn serve(mut s: tokio::io::DuplexStream, step: Step, log: Arc<Mutex<Vec<Dial>>>, i: usize) {
    let Ok(payload) = read_frame(&mut s).await else {
        return;
    };
    let req = ConnectRequest::read(&payload).expect("a connect request");
    log.lock().unwrap()[i].request = Some(req.clone());
    if matches!(step, Step::Hang) {
        std::future::pending::<()>().await;
    }
    let expired = matches!(step, Step::Expired);
    let resp = ConnectResponse {
        protocol_version: 0,
        timeout_ms: if expired { 0 } else { req.timeout_ms },
        session_id: if expired { 0 } else { 7 },
        passwd: vec![1; 16],
        read_only: Some(false),
    };
    if s.write_all(&resp.to_frame()).await.is_err() || matches!(step, Step::Expired) {
        return;
    }
    if matches!(step, Step::Drop) {
        // Long enough for the test to see the session connected before it is lost.
        tokio::time::sleep(Duration::from_millis(30)).await;
        return;
    }
    while let Ok(payload) = read_frame(&mut s).await {
        let Ok((xid, req)) = Request::read(&payload) else {
            return;
        };
        let mut w = Writer::frame();
        let err = if matches!(req, Request::Ping) || xid == PING_XID {
            ErrorCode::OK
        } else {
            ErrorCode::NO_NODE
        };
        ReplyHeader { xid, zxid: 1, err }.write(&mut w);
        if s.write_all(&w.into_frame()).await.is_err() {
            return;
        }
    }
}
