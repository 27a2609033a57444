//! `token-order`: the storage never lets a stale holder through.
//!
//! Judged on the storage's own record. Among the reads and writes the storage
//! accepted that carry a fencing token, tokens must never go down in storage order: an
//! accepted request whose token is lower than one accepted before it came from a
//! holder whose lock had already passed to someone else, and a fencing storage should
//! have refused it. Refused requests (`accepted: false`) changed nothing and are the
//! fence working. Requests without a token are not judged, so a run without tokens is
//! `Valid`.

use sim::history::{EventKind, History, StorageEvent};

use super::{Checker, Evidence, Verdict, fmt_s};

/// The token-order checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenOrder;

/// An accepted storage request carrying a token.
struct Request<'a> {
    event: usize,
    at_us: u64,
    host: &'a str,
    what: &'static str,
    token: u64,
}

/// Every accepted storage request that carries a token, in storage order.
fn accepted_with_tokens(h: &History) -> impl Iterator<Item = Request<'_>> {
    h.events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.kind {
            EventKind::Storage(StorageEvent::Read {
                reader,
                token: Some(token),
                accepted: true,
                ..
            }) => Some(Request {
                event: i,
                at_us: e.at_us,
                host: reader,
                what: "read",
                token: *token,
            }),
            EventKind::Storage(StorageEvent::Write {
                writer,
                token: Some(token),
                accepted: true,
                ..
            }) => Some(Request {
                event: i,
                at_us: e.at_us,
                host: writer,
                what: "write",
                token: *token,
            }),
            _ => None,
        })
}

impl Checker for TokenOrder {
    fn name(&self) -> &'static str {
        "token-order"
    }

    fn check(&self, h: &History) -> Verdict {
        // The accepted request with the highest token so far (the first to reach it).
        let mut max: Option<Request<'_>> = None;
        for r in accepted_with_tokens(h) {
            match &max {
                Some(m) if r.token < m.token => {
                    let mut hosts = vec![r.host.to_string(), m.host.to_string()];
                    hosts.dedup();
                    return Verdict::Invalid(Evidence {
                        summary: format!(
                            "the storage accepted {}'s {} with token {} at {} after accepting {}'s {} with token {} at {}: a stale holder got through",
                            r.host,
                            r.what,
                            r.token,
                            fmt_s(r.at_us),
                            m.host,
                            m.what,
                            m.token,
                            fmt_s(m.at_us)
                        ),
                        at_us: r.at_us,
                        hosts,
                        owners: Vec::new(),
                        first_event: r.event,
                        events: vec![m.event, r.event],
                    });
                }
                Some(m) if r.token <= m.token => {}
                _ => max = Some(r),
            }
        }
        Verdict::Valid
    }
}
