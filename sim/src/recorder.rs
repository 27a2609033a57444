//! The shared, append-only event log of a run, plus the little state the nemesis needs
//! to aim a fault (who holds the lock, who is acquiring).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::clock::true_now;
use crate::history::{Event, EventKind, Op, OpF, Phase};

#[derive(Debug, Default)]
struct Inner {
    events: Vec<Event>,
    next_op: u64,
    /// host → (owner value, holds), for acquires completed ok whose release has not
    /// completed (a client in the middle of its release still holds the lock: its `GET`
    /// or `DEL` may be in flight, which is exactly where a pause does harm). A reentrant
    /// holder's nested acquisitions count up and its releases count down: it holds the
    /// lock until its outermost release completes.
    holders: BTreeMap<String, (String, u32)>,
    /// hosts with an acquire in flight.
    acquiring: BTreeSet<String>,
}

/// Cheap to clone; every host appends to the same log.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
}

impl Recorder {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("recorder poisoned")
    }

    /// Appends an event at the current true time.
    pub fn record(&self, host: &str, kind: EventKind) {
        self.record_at(true_now().as_micros() as u64, host, kind);
    }

    /// Appends an event at a given true time.
    pub fn record_at(&self, at_us: u64, host: &str, kind: EventKind) {
        self.lock().events.push(Event {
            at_us,
            host: host.to_string(),
            kind,
        });
    }

    /// Records an invocation and returns its op id.
    pub fn invoke(&self, host: &str, f: OpF, fill: impl FnOnce(&mut Op)) -> u64 {
        self.invoke_at(true_now().as_micros() as u64, host, f, fill)
    }

    /// Takes in an operation event another process recorded at `at_us` (a real run's
    /// client process): an invocation gets this log's next op id, which is returned; a
    /// completion must carry the id its invocation got here. Holders and acquirers
    /// follow as for [`Recorder::invoke`] and [`Recorder::complete`].
    pub fn ingest_op(&self, at_us: u64, host: &str, op: Op) -> u64 {
        if op.phase == Phase::Invoke {
            self.invoke_at(at_us, host, op.f, |o| *o = Op { op: o.op, ..op })
        } else {
            let id = op.op;
            self.complete_at(at_us, host, id, op.f, op.phase, |o| *o = op);
            id
        }
    }

    fn invoke_at(&self, at_us: u64, host: &str, f: OpF, fill: impl FnOnce(&mut Op)) -> u64 {
        let mut inner = self.lock();
        let id = inner.next_op;
        inner.next_op += 1;
        let mut op = blank(id, f, Phase::Invoke);
        fill(&mut op);
        if f == OpF::Acquire {
            inner.acquiring.insert(host.to_string());
        }
        inner.events.push(Event {
            at_us,
            host: host.to_string(),
            kind: EventKind::Op(op),
        });
        id
    }

    /// Records the completion of op `id`.
    pub fn complete(&self, host: &str, id: u64, f: OpF, phase: Phase, fill: impl FnOnce(&mut Op)) {
        let at_us = true_now().as_micros() as u64;
        self.complete_at(at_us, host, id, f, phase, fill);
    }

    fn complete_at(
        &self,
        at_us: u64,
        host: &str,
        id: u64,
        f: OpF,
        phase: Phase,
        fill: impl FnOnce(&mut Op),
    ) {
        let mut inner = self.lock();
        let mut op = blank(id, f, phase);
        fill(&mut op);
        match f {
            OpF::Acquire => {
                inner.acquiring.remove(host);
                if phase == Phase::Ok {
                    let owner = op.owner.clone().unwrap_or_default();
                    let hold = inner
                        .holders
                        .entry(host.to_string())
                        .or_insert((owner.clone(), 0));
                    *hold = (owner, hold.1 + 1);
                }
            }
            OpF::Release => {
                if let Some(hold) = inner.holders.get_mut(host) {
                    hold.1 = hold.1.saturating_sub(1);
                    if hold.1 == 0 {
                        inner.holders.remove(host);
                    }
                }
            }
            _ => {}
        }
        inner.events.push(Event {
            at_us,
            host: host.to_string(),
            kind: EventKind::Op(op),
        });
    }

    /// A host died: it holds nothing and acquires nothing any more (in belief).
    pub fn forget_host(&self, host: &str) {
        let mut inner = self.lock();
        inner.holders.remove(host);
        inner.acquiring.remove(host);
    }

    /// Hosts that believe they hold the lock, in name order.
    pub fn holders(&self) -> Vec<String> {
        self.lock().holders.keys().cloned().collect()
    }

    /// The owner value `host` holds the lock with, if the history shows it holding.
    pub fn holder_owner(&self, host: &str) -> Option<String> {
        self.lock()
            .holders
            .get(host)
            .map(|(owner, _)| owner.clone())
    }

    /// Hosts with an acquire in flight, in name order.
    pub fn acquirers(&self) -> Vec<String> {
        self.lock().acquiring.iter().cloned().collect()
    }

    /// Takes the events recorded so far, ordered by time (ties keep recording order).
    pub fn into_events(self) -> Vec<Event> {
        let mut events = std::mem::take(&mut self.lock().events);
        events.sort_by_key(|e| e.at_us);
        events
    }
}

fn blank(op: u64, f: OpF, phase: Phase) -> Op {
    Op {
        op,
        f,
        phase,
        key: None,
        owner: None,
        value: None,
        token: None,
        valid_until_us: None,
        detail: None,
        mode: None,
    }
}
