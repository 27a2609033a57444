//! `token-order`: the storage never lets a stale holder through.
//!
//! Judged on the storage's own record. Among the reads and writes the storage
//! accepted that carry a fencing token, tokens must never go down in storage order: an
//! accepted request whose token is lower than one accepted before it came from a
//! holder whose lock had already passed to someone else, and a fencing storage should
//! have refused it. And the lock's own promise: no token is granted to two different
//! acquisitions (reentrant re-grants of the same owner value share it), and tokens
//! strictly increase in the server's order of grants (the order of the server's writes
//! of the owner values), so a token fetched before the lock was won cannot pass a later
//! holder's. Refused requests (`accepted: false`) changed nothing and are the fence
//! working. Requests without a token are not judged, so a run without tokens is
//! `Valid`.

use sim::history::{EventKind, History, OpF, Phase, StorageEvent};

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
        // The lock's own promise first: no two grants to different acquisitions carry
        // the same token (a counter that failed over to a replica without its last
        // increments issues a token twice).
        let mut granted: std::collections::BTreeMap<u64, (usize, &str, &str, u64)> =
            std::collections::BTreeMap::new();
        for (i, e) in h.events.iter().enumerate() {
            let EventKind::Op(op) = &e.kind else { continue };
            let (OpF::Acquire, Phase::Ok, Some(token), Some(owner)) =
                (op.f, op.phase, op.token, op.owner.as_deref())
            else {
                continue;
            };
            match granted.get(&token) {
                Some((first, host, other, at)) if *other != owner => {
                    let mut hosts = vec![host.to_string(), e.host.clone()];
                    hosts.dedup();
                    return Verdict::Invalid(Evidence {
                        summary: format!(
                            "fencing token {token} was granted twice: to {host} (owner={other}) at {} and to {} (owner={owner}) at {}",
                            fmt_s(*at),
                            e.host,
                            fmt_s(e.at_us)
                        ),
                        at_us: e.at_us,
                        hosts,
                        owners: vec![other.to_string(), owner.to_string()],
                        first_event: *first,
                        events: vec![*first, i],
                    });
                }
                Some(_) => {}
                None => {
                    granted.insert(token, (i, e.host.as_str(), owner, e.at_us));
                }
            }
        }
        if let Some(v) = grants_out_of_order(h) {
            return v;
        }
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

/// Tokens must strictly increase in the order the server granted the lock: each `ok`
/// that carries a token is placed at the server's last write of its owner value (by its
/// host) before the `ok`. A grant whose token is lower than an earlier grant's (of
/// another owner value) is `Invalid`; equal tokens are the "granted twice" case above.
fn grants_out_of_order(h: &History) -> Option<Verdict> {
    let key = h.params.key.as_str();
    // (write event, token, host, owner, ok event, ok time)
    let mut grants: Vec<(usize, u64, &str, &str, usize, u64)> = Vec::new();
    // (writer, value) → the server's latest write of it so far.
    let mut written: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for (i, e) in h.events.iter().enumerate() {
        if let EventKind::Server(sim::history::ServerEvent::Written { by, key: k, value }) = &e.kind
            && k == key
        {
            written.insert((by.as_str(), value.as_str()), i);
            continue;
        }
        let EventKind::Op(op) = &e.kind else { continue };
        let (OpF::Acquire, Phase::Ok, Some(token), Some(owner)) =
            (op.f, op.phase, op.token, op.owner.as_deref())
        else {
            continue;
        };
        if op.key.as_deref().is_some_and(|k| k != key) {
            continue;
        }
        if let Some(&w) = written.get(&(e.host.as_str(), owner)) {
            grants.push((w, token, e.host.as_str(), owner, i, e.at_us));
        }
    }
    grants.sort_unstable();
    let mut max: Option<(usize, u64, &str, &str, usize, u64)> = None;
    for g in grants {
        match max {
            Some(m) if g.1 < m.1 && g.3 != m.3 => {
                let mut hosts = vec![g.2.to_string(), m.2.to_string()];
                hosts.dedup();
                let mut events = vec![m.0, g.0, m.4, g.4];
                events.sort_unstable();
                events.dedup();
                return Some(Verdict::Invalid(Evidence {
                    summary: format!(
                        "fencing tokens went down in the server's order of grants: {} was granted the lock (owner={}) with token {} at {} after {} had been granted it (owner={}) with token {}: a storage that fences by token would turn the newer holder away and let the older one through",
                        g.2,
                        g.3,
                        g.1,
                        fmt_s(h.events[g.0].at_us),
                        m.2,
                        m.3,
                        m.1
                    ),
                    at_us: h.events[g.0].at_us,
                    hosts,
                    owners: vec![g.3.to_string(), m.3.to_string()],
                    first_event: g.4,
                    events,
                }));
            }
            Some(m) if g.1 <= m.1 => {}
            _ => max = Some(g),
        }
    }
    None
}
