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

/// One grant that carries a token, with the span of the history it happened in.
#[derive(Clone, Copy)]
struct Grant<'a> {
    /// The first event the grant can have happened at: the server's write of its owner
    /// value, or else its acquire's invoke.
    lo: usize,
    /// The last: the same write, or else its acquire's `ok`.
    hi: usize,
    token: u64,
    host: &'a str,
    owner: &'a str,
    /// The `ok` event.
    ok: usize,
}

/// Tokens must strictly increase in the order the server granted the lock. A grant
/// happened between its acquire's invoke and its `ok`; on a history with the servers'
/// own record it is placed at the server's write of its owner value (by its host)
/// within that span, which orders grants whose spans overlap (a token fetched before a
/// wait, a grant whose reply came late). Grant `a` came before grant `b` when `a`'s
/// span ends before `b`'s begins. A grant whose token is lower than an earlier grant's
/// (of another owner value) is `Invalid`; equal tokens are the "granted twice" case
/// above.
///
/// A write before the invoke is never the grant's own: an owner value a client uses for
/// every hold (Redisson's `{client id}:{thread}` hash field) was written by its earlier
/// holds too. And a real run's record of the servers is sampled (`server_records` is
/// false): a sample names a value some time after the server wrote it, and misses a
/// hold shorter than its period, so there the spans alone order grants.
fn grants_out_of_order(h: &History) -> Option<Verdict> {
    let key = h.params.key.as_str();
    let mut grants: Vec<Grant<'_>> = Vec::new();
    // (host, op) → the acquire's invoke event.
    let mut invoked: std::collections::BTreeMap<(&str, u64), usize> = Default::default();
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
        if op.f != OpF::Acquire || op.key.as_deref().is_some_and(|k| k != key) {
            continue;
        }
        if op.phase == Phase::Invoke {
            invoked.insert((e.host.as_str(), op.op), i);
            continue;
        }
        let (Phase::Ok, Some(token), Some(owner)) = (op.phase, op.token, op.owner.as_deref())
        else {
            continue;
        };
        // An `ok` without its invoke (cut off at the history's start) may have
        // happened at any time before it.
        let invoke = invoked.get(&(e.host.as_str(), op.op)).copied();
        let write = written
            .get(&(e.host.as_str(), owner))
            .copied()
            .filter(|&w| h.params.server_records && invoke.is_some_and(|inv| w > inv));
        let (lo, hi) = match write {
            Some(w) => (w, w),
            None => (invoke.unwrap_or(0), i),
        };
        grants.push(Grant {
            lo,
            hi,
            token,
            host: e.host.as_str(),
            owner,
            ok: i,
        });
    }
    // Sweep the grants in the order their spans begin; `done` holds, by where their
    // spans end, those that may have come before. Of the grants wholly before the
    // current one, keep the highest token and the highest of another owner value.
    let mut by_lo = grants.clone();
    by_lo.sort_by_key(|g| (g.lo, g.ok));
    let mut by_hi = grants;
    by_hi.sort_by_key(|g| (g.hi, g.ok));
    let mut before = by_hi.iter().peekable();
    let mut best: Option<Grant<'_>> = None;
    let mut other: Option<Grant<'_>> = None;
    for g in &by_lo {
        while let Some(a) = before.next_if(|a| a.hi < g.lo) {
            match best {
                Some(b) if a.token <= b.token => {
                    if a.owner != b.owner && other.is_none_or(|o| a.token > o.token) {
                        other = Some(*a);
                    }
                }
                Some(b) => {
                    if a.owner != b.owner {
                        other = Some(b);
                    }
                    best = Some(*a);
                }
                None => best = Some(*a),
            }
        }
        let m = match (best, other) {
            (Some(b), _) if b.owner != g.owner => b,
            (_, Some(o)) => o,
            _ => continue,
        };
        if g.token >= m.token {
            continue;
        }
        let mut hosts = vec![g.host.to_string(), m.host.to_string()];
        hosts.dedup();
        let mut events = vec![m.lo, m.hi, g.lo, g.hi, m.ok, g.ok];
        events.sort_unstable();
        events.dedup();
        let at = if g.lo == g.hi { g.lo } else { g.ok };
        return Some(Verdict::Invalid(Evidence {
            summary: format!(
                "fencing tokens went down in the server's order of grants: {} was granted the lock (owner={}) with token {} at {} after {} had been granted it (owner={}) with token {}: a storage that fences by token would turn the newer holder away and let the older one through",
                g.host,
                g.owner,
                g.token,
                fmt_s(h.events[at].at_us),
                m.host,
                m.owner,
                m.token
            ),
            at_us: h.events[at].at_us,
            hosts,
            owners: vec![g.owner.to_string(), m.owner.to_string()],
            first_event: g.ok,
            events,
        }));
    }
    None
}
