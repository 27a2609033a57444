//! Views of a history shared by several checkers and probes.
//!
//! Everything here is derived from `history.events`, `params`, `plan` and `end_us`
//! only. Functions that rely on the invoke/complete pairing return `Err(reason)` for a
//! malformed history, which checkers turn into `Unknown`: a history we cannot read
//! must not be judged valid.

use std::collections::{BTreeMap, BTreeSet};

use sim::faults::FaultKind;
use sim::history::{Event, EventKind, FaultPhase, History, LockMode, Op, OpF, Phase, ServerEvent};

/// One client operation: its invocation and, if any, its completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpPair {
    /// The op id.
    pub op: u64,
    /// The client host.
    pub host: String,
    /// What it tried.
    pub f: OpF,
    /// The lock key: the completion's if it names one, else the invocation's, else
    /// the run's lock key.
    pub key: String,
    /// The owner value: the completion's if it names one (an acquire's `ok` carries
    /// the stored value), else the invocation's (a release names what it releases).
    pub owner: Option<String>,
    /// Index of the invocation event.
    pub invoke: usize,
    /// Time of the invocation.
    pub invoke_us: u64,
    /// Index of the completion event; `None` if the client never completed it (it
    /// crashed or the run ended), which counts as `info`.
    pub completion: Option<usize>,
    /// Time of the completion.
    pub completion_us: Option<u64>,
    /// `Ok`, `Fail` or `Info` (also for never-completed operations).
    pub outcome: Phase,
}

/// `Unknown` for a checker that judges by the lock servers' own record when `h` has
/// none (a real run: `RunParams::server_records`): an absent record is not an empty
/// server. `None`: the record is there, judge.
pub fn needs_server_records(h: &History) -> Option<super::Verdict> {
    (!h.params.server_records).then(|| super::Verdict::Unknown {
        reason: "this history has no lock server's own record (a run against real \
                 servers), which this checker judges by"
            .into(),
    })
}

/// Pairs every invocation with its completion.
///
/// Errors on a completion without an invocation, a second invocation or completion of
/// one op id, or a completion on another host or of another kind than its invocation.
pub fn op_pairs(h: &History) -> Result<Vec<OpPair>, String> {
    let mut pairs: Vec<OpPair> = Vec::new();
    let mut by_id: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Op(op) = &e.kind else { continue };
        if op.phase == Phase::Invoke {
            if by_id.contains_key(&op.op) {
                return Err(format!("op {} invoked twice (event {i})", op.op));
            }
            by_id.insert(op.op, pairs.len());
            pairs.push(OpPair {
                op: op.op,
                host: e.host.clone(),
                f: op.f,
                key: op.key.clone().unwrap_or_else(|| h.params.key.clone()),
                owner: op.owner.clone(),
                invoke: i,
                invoke_us: e.at_us,
                completion: None,
                completion_us: None,
                outcome: Phase::Info,
            });
            continue;
        }
        let Some(&p) = by_id.get(&op.op) else {
            return Err(format!(
                "op {} completed without an invocation (event {i})",
                op.op
            ));
        };
        let pair = &mut pairs[p];
        if pair.completion.is_some() {
            return Err(format!("op {} completed twice (event {i})", op.op));
        }
        if pair.host != e.host || pair.f != op.f {
            return Err(format!(
                "op {} invoked as {:?} on {} but completed as {:?} on {} (event {i})",
                op.op, pair.f, pair.host, op.f, e.host
            ));
        }
        if let Some(k) = &op.key {
            pair.key = k.clone();
        }
        if op.owner.is_some() {
            pair.owner = op.owner.clone();
        }
        pair.completion = Some(i);
        pair.completion_us = Some(e.at_us);
        pair.outcome = op.phase;
    }
    Ok(pairs)
}

/// Why a believed hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// The client invoked its release (it stops believing at the invocation, whether
    /// or not the release works).
    Release,
    /// The client's host crashed.
    Crash,
    /// The run ended with the client still believing.
    EndOfRun,
}

/// An interval during which a client believed it held the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The client host.
    pub host: String,
    /// The lock key.
    pub key: String,
    /// The owner value its acquire stored (`?` if the `ok` named none).
    pub owner: String,
    /// Index of the acquire's `ok` event.
    pub acquire_event: usize,
    /// Start: the acquire's `ok` time.
    pub start_us: u64,
    /// End: the release invocation, the crash, or the run's end.
    pub end_us: u64,
    /// Index of the ending event (`None` at the run's end).
    pub end_event: Option<usize>,
    /// Why it ended.
    pub end: HoldEnd,
    /// The acquisition's mode in a read/write workload (`Op::mode`); `None` for an
    /// exclusive lock's acquisition, which is what every hold was before modes.
    pub mode: Option<LockMode>,
}

impl Hold {
    /// Length of the hold in microseconds.
    pub fn len_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }

    /// Whether the hold was a read (shared) one.
    pub fn is_read(&self) -> bool {
        self.mode == Some(LockMode::Read)
    }

    /// Whether the hold was open at `t_us` (started at or before, ends after).
    pub fn open_at(&self, t_us: u64) -> bool {
        self.start_us <= t_us && t_us < self.end_us
    }
}

/// Whether fault `fault` of the plan is a crash (of a process or a machine).
pub fn is_crash(h: &History, fault: usize) -> bool {
    matches!(
        h.plan.faults.get(fault).map(|f| &f.kind),
        Some(FaultKind::Crash { .. } | FaultKind::MachineCrash { .. })
    )
}

/// Whether fault `fault` of the plan is a partition.
pub fn is_partition(h: &History, fault: usize) -> bool {
    matches!(
        h.plan.faults.get(fault).map(|f| &f.kind),
        Some(FaultKind::Partition { .. })
    )
}

/// Whether fault `fault` of the plan is a pause.
pub fn is_pause(h: &History, fault: usize) -> bool {
    matches!(
        h.plan.faults.get(fault).map(|f| &f.kind),
        Some(FaultKind::Pause { .. } | FaultKind::PauseBeforeWrite { .. })
    )
}

/// Each fault's first end time, by fault index (a fault that hit several hosts ends
/// on each; the first end counts).
pub fn first_fault_ends(h: &History) -> BTreeMap<usize, u64> {
    let mut ends: BTreeMap<usize, u64> = BTreeMap::new();
    for e in &h.events {
        if let EventKind::Fault {
            fault,
            phase: FaultPhase::End,
            ..
        } = e.kind
        {
            ends.entry(fault).or_insert(e.at_us);
        }
    }
    ends
}

/// Indices of crash start events. The event's `host` is the resolved target (a plan
/// may say `Holder`), so callers read the host from the event, not the plan.
pub fn crash_starts(h: &History) -> Vec<usize> {
    h.events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e.kind, EventKind::Fault { fault, phase: FaultPhase::Start, .. } if is_crash(h, fault))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The operation recorded at event `i`, if that event is one.
pub fn op_at(h: &History, i: usize) -> Option<&Op> {
    match &h.events.get(i)?.kind {
        EventKind::Op(op) => Some(op),
        _ => None,
    }
}

/// The hold count an acquire `ok` or a release invocation records in `value`: after
/// the acquire, before the release. Histories recorded before depths existed carry
/// none, which means 1 (a plain, non-nested acquisition or release).
pub fn depth(op: &Op) -> i64 {
    op.value.unwrap_or(1)
}

/// Every believed-hold interval, ordered by the acquire's `ok`.
///
/// A hold starts at an acquire `ok` of depth 1 and ends at the same client's next
/// release invocation of depth 1 naming the same owner value (or, if the release
/// names none, the same key), at a crash of its host, or at the run's end. Nested
/// acquisitions and releases of a reentrant lock (depth 2 and more, see [`depth`])
/// neither start nor end a hold: the client holds the lock from its outer
/// acquisition to its outer release. Pauses do not end a hold: a paused client
/// still believes it holds the lock, which is exactly the danger.
pub fn holds(h: &History) -> Result<Vec<Hold>, String> {
    // Validate pairing first, so a malformed history is reported rather than judged.
    op_pairs(h)?;
    let mut done: Vec<Hold> = Vec::new();
    let mut open: Vec<Hold> = Vec::new();
    let mut invoke_key: BTreeMap<u64, Option<String>> = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        match &e.kind {
            EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Invoke => {
                invoke_key.insert(op.op, op.key.clone());
            }
            EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Ok => {
                if depth(op) >= 2 {
                    continue;
                }
                let key = op
                    .key
                    .clone()
                    .or_else(|| invoke_key.get(&op.op).cloned().flatten())
                    .unwrap_or_else(|| h.params.key.clone());
                open.push(Hold {
                    host: e.host.clone(),
                    key,
                    owner: op.owner.clone().unwrap_or_else(|| "?".to_string()),
                    acquire_event: i,
                    start_us: e.at_us,
                    end_us: h.end_us,
                    end_event: None,
                    end: HoldEnd::EndOfRun,
                    mode: op.mode,
                });
            }
            EventKind::Op(op) if op.f == OpF::Release && op.phase == Phase::Invoke => {
                if depth(op) >= 2 {
                    continue;
                }
                let key = op.key.clone().unwrap_or_else(|| h.params.key.clone());
                let ends = |o: &Hold| {
                    o.host == e.host
                        && match &op.owner {
                            Some(owner) => *owner == o.owner,
                            None => key == o.key,
                        }
                };
                close(&mut open, &mut done, ends, i, e.at_us, HoldEnd::Release);
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Start,
                ..
            } if is_crash(h, *fault) => {
                close(
                    &mut open,
                    &mut done,
                    |o| o.host == e.host,
                    i,
                    e.at_us,
                    HoldEnd::Crash,
                );
            }
            _ => {}
        }
    }
    done.extend(open);
    done.sort_by_key(|o| o.acquire_event);
    Ok(done)
}

fn close(
    open: &mut Vec<Hold>,
    done: &mut Vec<Hold>,
    ends: impl Fn(&Hold) -> bool,
    event: usize,
    at_us: u64,
    why: HoldEnd,
) {
    let (ended, still): (Vec<Hold>, Vec<Hold>) = open.drain(..).partition(|o| ends(o));
    *open = still;
    done.extend(ended.into_iter().map(|mut o| {
        o.end_us = at_us;
        o.end_event = Some(event);
        o.end = why;
        o
    }));
}

/// The end of the validity the holder of `hold` believed it had: its acquisition's
/// `valid_until_us`, extended by each renewal of its watchdog (`Renewed` events of its
/// host, key and owner during the hold) that came while the validity still ran. A
/// renewal after the validity had lapsed does not mend the lapse: the validity ends
/// there. `None`: a lock that never expires.
pub fn believed_validity(h: &History, hold: &Hold) -> Option<u64> {
    let mut until = op_at(h, hold.acquire_event)?.valid_until_us?;
    let end = hold.end_event.unwrap_or(h.events.len());
    for e in &h.events[hold.acquire_event + 1..end.min(h.events.len())] {
        if let EventKind::Renewed {
            key,
            owner,
            valid_until_us,
        } = &e.kind
            && e.host == hold.host
            && *key == hold.key
            && *owner == hold.owner
        {
            if e.at_us > until {
                break;
            }
            until = until.max(*valid_until_us);
        }
    }
    Some(until)
}

/// A crash of a host that, per the Redis server's own record, held the lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashWhileHolding {
    /// Index of the crash start event.
    pub crash_event: usize,
    /// When.
    pub at_us: u64,
    /// The crashed host.
    pub host: String,
    /// The owner value the key held.
    pub owner: String,
    /// Index of the server's `Written` event that stored that value.
    pub written_event: usize,
}

/// The Redis servers of a history (the hosts of its servers' own records). A `Written`
/// whose `by` is a server is a replica's copy of its master's write (or a restarted
/// server restoring its keys), not a client taking the lock.
pub fn server_hosts(h: &History) -> BTreeSet<&str> {
    h.events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Server(_)))
        .map(|e| e.host.as_str())
        .collect()
}

/// Every crash start on a host whose value the lock key (`params.key`) held, at that
/// moment, on some server's own record. Server events are the truth here, not the
/// client's belief: a client that believes it holds an expired lock blocks nobody.
///
/// Each server's record is judged on its own, and a replica's copy is attributed to
/// the client that wrote the value on the master (the replica records the master as
/// the writer): mixing the records let a copy replace the real holder.
pub fn crashes_while_holding(h: &History) -> Vec<CrashWhileHolding> {
    let servers = server_hosts(h);
    // Per server: (writer, value, written event) of the key's current value.
    let mut holders: BTreeMap<&str, (String, String, usize)> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in h.events.iter().enumerate() {
        match &e.kind {
            EventKind::Server(ServerEvent::Written { by, key, value }) if *key == h.params.key => {
                // A copy: the writer on the server it came from, if that server holds
                // the same value; else the server itself (a restore).
                let writer = if servers.contains(by.as_str()) {
                    holders
                        .get(by.as_str())
                        .filter(|(_, v, _)| v == value)
                        .map(|(w, _, ev)| (w.clone(), *ev))
                } else {
                    None
                };
                let (writer, event) = writer.unwrap_or_else(|| (by.clone(), i));
                holders.insert(e.host.as_str(), (writer, value.clone(), event));
            }
            EventKind::Server(ServerEvent::Removed { key, .. }) if *key == h.params.key => {
                holders.remove(e.host.as_str());
            }
            EventKind::Fault {
                fault,
                phase: FaultPhase::Start,
                ..
            } if is_crash(h, *fault) => {
                if let Some((_, value, w)) = holders.values().find(|(by, _, _)| *by == e.host) {
                    out.push(CrashWhileHolding {
                        crash_event: i,
                        at_us: e.at_us,
                        host: e.host.clone(),
                        owner: value.clone(),
                        written_event: *w,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// One fault's active window, from its start event to its end event (or the run's
/// end if it never ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    /// Index into the plan.
    pub fault: usize,
    /// The host the start event names (the resolved target, or `redis`).
    pub host: String,
    /// Index of the start event.
    pub start_event: usize,
    /// Start time.
    pub start_us: u64,
    /// End time (the run's end if the fault never ended).
    pub end_us: u64,
    /// For a partition: the hosts on the other side from `host`.
    pub peers: Vec<String>,
}

impl FaultWindow {
    /// Whether the window and `[from_us, to_us]` share an instant.
    pub fn overlaps(&self, from_us: u64, to_us: u64) -> bool {
        self.start_us <= to_us && from_us <= self.end_us
    }

    /// Whether the window holds instant `t`.
    pub fn active_at(&self, t: u64) -> bool {
        self.overlaps(t, t)
    }
}

/// Every fault start with its window, one per host it hit, in event order. A crash's
/// window runs to the host's restart (its end event) or the run's end. A fault that hit
/// several hosts (a partition's side, every client) ends on each host by that host's
/// own end event.
pub fn fault_windows(h: &History) -> Vec<FaultWindow> {
    let mut out: Vec<FaultWindow> = Vec::new();
    let mut open: BTreeMap<(usize, &str), usize> = BTreeMap::new();
    for (i, e) in h.events.iter().enumerate() {
        let EventKind::Fault {
            fault,
            phase,
            peers,
            ..
        } = &e.kind
        else {
            continue;
        };
        match phase {
            FaultPhase::Start => {
                open.insert((*fault, e.host.as_str()), out.len());
                out.push(FaultWindow {
                    fault: *fault,
                    host: e.host.clone(),
                    start_event: i,
                    start_us: e.at_us,
                    end_us: h.end_us,
                    peers: peers.clone(),
                });
            }
            FaultPhase::End => {
                if let Some(w) = open.remove(&(*fault, e.host.as_str())) {
                    out[w].end_us = e.at_us;
                }
            }
        }
    }
    out
}

/// Whether fault `fault` of the plan drops pub/sub messages.
pub fn is_drop_pushes(h: &History, fault: usize) -> bool {
    matches!(
        h.plan.faults.get(fault).map(|f| &f.kind),
        Some(FaultKind::DropPushes { .. })
    )
}

/// Each host's incarnation as a walk over the history reaches it: the restarts after a
/// crash recorded on it so far. A restarted client has the same name but is a new
/// life, and owns nothing its previous life wrote.
///
/// A life begins at the restart, not at the crash: between the two the host runs
/// nothing, so a command of its that reaches a server then was sent by the life that
/// died (a dead process's kernel still delivers what its sockets held, as a release
/// sent just before a `kill -9` does), and is that life's.
#[derive(Debug, Default)]
pub struct Lives(BTreeMap<String, usize>);

impl Lives {
    /// Counts `e` if it is the restart that ends a crash.
    pub fn observe(&mut self, h: &History, e: &Event) {
        if let EventKind::Fault {
            fault,
            phase: FaultPhase::End,
            ..
        } = e.kind
            && is_crash(h, fault)
        {
            *self.0.entry(e.host.clone()).or_default() += 1;
        }
    }

    /// `host`'s incarnation so far (0 before its first restart).
    pub fn of(&self, host: &str) -> usize {
        self.0.get(host).copied().unwrap_or(0)
    }
}

/// The overlapping holds of different hosts on one key that exclusion forbids: every
/// pair but two readers of a read-write lock. `first` is the pair whose overlap starts
/// first (ties: the lowest acquire event), `pairs` how many there are, `shared` how many
/// pairs of readers overlapped, as they may.
pub struct Overlaps<'a> {
    /// The first forbidden pair, the earlier acquisition first.
    pub first: Option<(&'a Hold, &'a Hold)>,
    /// Forbidden pairs in all.
    pub pairs: usize,
    /// Overlapping pairs of readers.
    pub shared: usize,
}

/// [`Overlaps`] of `holds` (as [`holds`] orders them: by acquire event).
pub fn overlaps(holds: &[Hold]) -> Overlaps<'_> {
    let mut o = Overlaps {
        first: None,
        pairs: 0,
        shared: 0,
    };
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            // `holds` is ordered by acquire event, so `b` started no earlier.
            if a.key != b.key || a.host == b.host {
                continue;
            }
            if !(b.start_us < a.end_us && a.start_us < b.end_us) {
                continue;
            }
            if a.is_read() && b.is_read() {
                o.shared += 1;
                continue;
            }
            o.pairs += 1;
            let better = o.first.is_none_or(|(_, fb)| {
                (b.start_us, b.acquire_event) < (fb.start_us, fb.acquire_event)
            });
            if better {
                o.first = Some((a, b));
            }
        }
    }
    o
}

/// Where the overlap of `a` and `b` ends, as evidence says it: a time, or "the end of
/// the run" when both still held the lock then.
pub fn overlap_until(h: &History, a: &Hold, b: &Hold) -> String {
    let overlap_end = a.end_us.min(b.end_us);
    if overlap_end == h.end_us && a.end == HoldEnd::EndOfRun && b.end == HoldEnd::EndOfRun {
        "the end of the run".to_string()
    } else {
        super::fmt_s(overlap_end)
    }
}
