//! The reply timers of a request/reply library writing to a
//! [`FaultyStream`](super::FaultyStream), as the simulation sees them from the bytes:
//! one wake hint per request still unanswered (see [`Awaiting`]).

use std::collections::VecDeque;
use std::time::Duration;

/// The reply timers a request/reply library (the `redis` crate) armed for the requests
/// it wrote to a [`FaultyStream`](super::FaultyStream), as the simulation sees them: one wake hint per
/// request still unanswered. The library arms its own tokio timer per request, which
/// the simulation cannot see (see `turmoil::time`); the stream can, from the bytes:
/// each RESP frame written is a request whose timer starts then, and each reply frame
/// handed back answers the oldest (RESP replies come in order; pushes and attributes
/// answer nothing). A hint held past its answer would wake the host for nothing
/// `timeout` later: one in five of all host runs, before the hints were counted.
///
/// If the bytes stop being RESP, the stream falls back to hinting every write until
/// the timeout has passed (never too few hints: a missed one would let a jump pass the
/// timer).
#[derive(Debug)]
pub(super) struct Awaiting {
    timeout: Duration,
    /// Bytes written and not yet scanned into whole requests.
    written: Vec<u8>,
    /// Bytes handed to the reader and not yet scanned into whole replies.
    read: Vec<u8>,
    /// One hint per unanswered request, oldest first.
    hints: VecDeque<turmoil::time::WakeHint>,
    /// The stream stopped being RESP: every write is hinted until it passes.
    lost: bool,
}

impl Awaiting {
    pub(super) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            written: Vec::new(),
            read: Vec::new(),
            hints: VecDeque::new(),
            lost: false,
        }
    }

    pub(super) fn wrote(&mut self, bytes: &[u8]) {
        let deadline = tokio::time::Instant::now() + self.timeout;
        if self.lost {
            turmoil::time::hint_wake(deadline);
            return;
        }
        self.written.extend_from_slice(bytes);
        let mut used = 0;
        loop {
            match crate::redis::resp::scan_frame(&self.written[used..]) {
                crate::redis::resp::Frame::Reply(n) | crate::redis::resp::Frame::Aside(n) => {
                    used += n;
                    self.hints.push_back(turmoil::time::WakeHint::new(deadline));
                }
                crate::redis::resp::Frame::Incomplete => break,
                crate::redis::resp::Frame::Invalid => {
                    self.lose();
                    turmoil::time::hint_wake(deadline);
                    return;
                }
            }
        }
        self.written.drain(..used);
    }

    pub(super) fn handed(&mut self, bytes: &[u8]) {
        if self.lost {
            return;
        }
        self.read.extend_from_slice(bytes);
        let mut used = 0;
        loop {
            match crate::redis::resp::scan_frame(&self.read[used..]) {
                crate::redis::resp::Frame::Reply(n) => {
                    used += n;
                    self.hints.pop_front();
                }
                crate::redis::resp::Frame::Aside(n) => used += n,
                crate::redis::resp::Frame::Incomplete => break,
                crate::redis::resp::Frame::Invalid => return self.lose(),
            }
        }
        self.read.drain(..used);
    }

    /// Turns every held hint into one that stays until it passes.
    fn lose(&mut self) {
        self.lost = true;
        self.written = Vec::new();
        self.read = Vec::new();
        for hint in self.hints.drain(..) {
            if let Some(at) = hint.deadline() {
                turmoil::time::hint_wake(at);
            }
        }
    }
}
