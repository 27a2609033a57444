//! The segmented stock (Dewu's article; `segmented-stock`), judged segment by segment.
//!
//! A segmented stock (`Workload::segments`) is N independent resources: segment `i`
//! is a counter of its own, guarded by a lock key of its own (`<key>:<i>`). Every
//! property the checkers judge is a property of one lock over one resource, so a
//! segmented history is split into one view per segment ([`split`]) and every checker
//! judges each view as it would judge an unsegmented run; [`combine`] folds the
//! segments' verdicts into the run's. The whole stock is the sum of its segments: a
//! segment whose final stock is exact for its sales keeps the total exact too, and
//! `lost-update` adds the total to its evidence (how many units were sold of how many:
//! a lost update in a sold-out segment is an oversold stock).
//!
//! A view keeps, of the history: the operations on its lock key (a segmented run
//! records the key on reads and writes as well), the storage's record of its
//! counter, the servers' record of its key (and of every key that is not another
//! segment's lock), and every other event (faults, crashes, connections) whole. Its
//! params name its key and its segment's initial stock. Evidence found in a view
//! points back into the whole history's events.

use sim::history::{EventKind, History, ServerEvent, StorageEvent};

use super::{Evidence, Verdict};

/// One segment's view of a segmented history.
pub struct SegmentView {
    /// The segment.
    pub segment: u32,
    /// Its lock key.
    pub key: String,
    /// The history as an unsegmented run over this segment alone.
    pub history: History,
    /// For each event of `history`, its index in the whole history.
    pub origin: Vec<usize>,
}

/// The segments' views of a segmented history; `None` for an unsegmented one.
pub fn split(h: &History) -> Option<Vec<SegmentView>> {
    let n = h.params.segments?;
    let stocks = h.params.segment_stocks();
    let keys: Vec<String> = (0..n).map(|i| h.params.segment_key(Some(i))).collect();
    let views = (0..n)
        .map(|i| {
            let key = &keys[i as usize];
            let other_lock = |k: &str| k != key && keys.iter().any(|o| o == k);
            let mut events = Vec::new();
            let mut origin = Vec::new();
            for (at, e) in h.events.iter().enumerate() {
                let mut e = e.clone();
                let keep = match &mut e.kind {
                    EventKind::Op(op) => op.key.as_deref().is_none_or(|k| k == key),
                    EventKind::Renewed { key: k, .. } => k == key,
                    EventKind::Storage(
                        StorageEvent::Read { segment, .. }
                        | StorageEvent::Write { segment, .. }
                        | StorageEvent::Final { segment, .. },
                    ) => {
                        let mine = *segment == Some(i);
                        *segment = None;
                        mine
                    }
                    EventKind::Server(
                        ServerEvent::Written { key: k, .. }
                        | ServerEvent::ExpireSet { key: k, .. }
                        | ServerEvent::FieldRemoved { key: k, .. }
                        | ServerEvent::Removed { key: k, .. },
                    ) => !other_lock(k),
                    _ => true,
                };
                if keep {
                    events.push(e);
                    origin.push(at);
                }
            }
            let mut params = h.params.clone();
            params.key = key.clone();
            params.initial_stock = stocks[i as usize];
            params.segments = None;
            SegmentView {
                segment: i,
                key: key.clone(),
                history: History {
                    seed: h.seed,
                    design: h.design.clone(),
                    scenario: h.scenario.clone(),
                    params,
                    plan: h.plan.clone(),
                    events,
                    end_us: h.end_us,
                    stats: h.stats.clone(),
                },
                origin,
            }
        })
        .collect();
    Some(views)
}

/// The run's verdict from its segments' (in segment order): the earliest violation
/// (ties: the lowest segment), its evidence pointing into the whole history and its
/// summary naming the segment and any other segment that broke too; else `Valid` if
/// any segment was judged valid (a segment nobody bought from proves nothing, and
/// takes nothing from the others); else `Unknown`, with the first segment's reason.
pub fn combine(views: &[SegmentView], verdicts: Vec<Verdict>) -> Verdict {
    let invalid: Vec<(usize, &Evidence)> = verdicts
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.evidence().map(|e| (i, e)))
        .collect();
    if let Some(&(first, e)) = invalid.iter().min_by_key(|(i, e)| (e.at_us, *i)) {
        let view = &views[first];
        let back = |i: usize| view.origin.get(i).copied().unwrap_or(i);
        let others: Vec<String> = invalid
            .iter()
            .filter(|(i, _)| *i != first)
            .map(|(i, _)| views[*i].segment.to_string())
            .collect();
        let also = if others.is_empty() {
            String::new()
        } else {
            format!(" (segments {} broke too)", others.join(", "))
        };
        let mut events: Vec<usize> = e.events.iter().map(|&i| back(i)).collect();
        events.sort_unstable();
        events.dedup();
        return Verdict::Invalid(Evidence {
            summary: format!(
                "segment {} (lock {}): {}{also}",
                view.segment, view.key, e.summary
            ),
            at_us: e.at_us,
            hosts: e.hosts.clone(),
            owners: e.owners.clone(),
            first_event: back(e.first_event),
            events,
        });
    }
    if verdicts.iter().any(Verdict::is_valid) {
        return Verdict::Valid;
    }
    let reason = verdicts
        .iter()
        .zip(views)
        .find_map(|(v, view)| match v {
            Verdict::Unknown { reason } => Some(format!("segment {}: {reason}", view.segment)),
            _ => None,
        })
        .unwrap_or_else(|| "no segment to judge".into());
    Verdict::Unknown {
        reason: format!("no segment could be judged; {reason}"),
    }
}

/// The whole stock's arithmetic: (initial stock, accepted sales, final stock) summed
/// over the segments, by the storage's own record.
pub fn totals(h: &History) -> (i64, i64, i64) {
    let initial = h.params.segment_stocks().iter().sum();
    let mut sales = 0;
    let mut finals = 0;
    for e in &h.events {
        match &e.kind {
            EventKind::Storage(StorageEvent::Write { accepted: true, .. }) => sales += 1,
            EventKind::Storage(StorageEvent::Final { value, .. }) => finals += value,
            _ => {}
        }
    }
    (initial, sales, finals)
}
