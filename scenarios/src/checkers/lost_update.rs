//! `lost-update`: the protected counter never loses a sale.
//!
//! Judged on the storage's own record, which is the truth about what was written, so
//! client-side `info` outcomes do not matter here. Two checks: each accepted write
//! must be based on the value the storage actually held (`current == read`), and the
//! final stock, as the storage reports it when the run ends, must equal the initial
//! stock minus the accepted sales. A write rejected
//! by a fencing storage changed nothing and is not a lost update.
//!
//! A segmented stock is judged segment by segment (see [`super::segments`]); the
//! evidence then adds the whole stock's arithmetic: how many sales were accepted of how
//! many units, so a lost update in a sold-out segment reads as what it is, an
//! oversold stock.

use sim::history::{EventKind, History, OpF, Phase, StorageEvent};

use super::segments::{self, SegmentView};
use super::{Checker, Evidence, Verdict, fmt_s};

/// The lost-update checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct LostUpdate;

struct Write<'a> {
    event: usize,
    at_us: u64,
    writer: &'a str,
    read: i64,
    wrote: i64,
    current: i64,
}

impl Checker for LostUpdate {
    fn name(&self) -> &'static str {
        "lost-update"
    }

    fn combine_segments(
        &self,
        h: &History,
        views: &[SegmentView],
        verdicts: Vec<Verdict>,
    ) -> Verdict {
        let (initial, sales, finals) = segments::totals(h);
        let whole = if sales > initial {
            format!(
                "; in all {sales} sales were accepted of a stock of {initial} over {} segments: oversold by {}",
                views.len(),
                sales - initial
            )
        } else {
            format!(
                "; in all {sales} sales were accepted of a stock of {initial} over {} segments, {finals} left",
                views.len()
            )
        };
        match segments::combine(views, verdicts) {
            Verdict::Invalid(mut e) => {
                e.summary.push_str(&whole);
                Verdict::Invalid(e)
            }
            // Every segment exact makes the sum exact; checked all the same, since a
            // storage record that disagrees with itself must not pass.
            Verdict::Valid if finals != initial - sales => {
                let last = h
                    .events
                    .iter()
                    .rposition(|e| matches!(e.kind, EventKind::Storage(StorageEvent::Final { .. })))
                    .unwrap_or(0);
                Verdict::Invalid(Evidence {
                    summary: format!(
                        "the segments' final stocks sum to {finals} but {initial} - {sales} accepted sales = {}",
                        initial - sales
                    ),
                    at_us: h.events.get(last).map_or(0, |e| e.at_us),
                    hosts: vec!["storage".into()],
                    owners: Vec::new(),
                    first_event: last,
                    events: vec![last],
                })
            }
            other => other,
        }
    }

    fn check(&self, h: &History) -> Verdict {
        let writes: Vec<Write<'_>> = h
            .events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.kind {
                EventKind::Storage(StorageEvent::Write {
                    writer,
                    read,
                    wrote,
                    current,
                    accepted: true,
                    ..
                }) => Some(Write {
                    event: i,
                    at_us: e.at_us,
                    writer,
                    read: *read,
                    wrote: *wrote,
                    current: *current,
                }),
                _ => None,
            })
            .collect();
        let expected = h.params.initial_stock - writes.len() as i64;
        // The storage's own final value when the run recorded it; a history from
        // before that record falls back on the last accepted write.
        let final_value = h
            .events
            .iter()
            .rev()
            .find_map(|e| match e.kind {
                EventKind::Storage(StorageEvent::Final { value, .. }) => Some(value),
                _ => None,
            })
            .unwrap_or_else(|| writes.last().map_or(h.params.initial_stock, |w| w.wrote));
        let final_note = if final_value == expected {
            String::new()
        } else {
            format!(
                "; final stock {final_value} but {} - {} accepted sales = {expected}",
                h.params.initial_stock,
                writes.len()
            )
        };

        // First check: a write based on a stale read overwrote someone's sale.
        for (n, w) in writes.iter().enumerate() {
            if w.current == w.read {
                continue;
            }
            // The accepted write just before this one put `current` there.
            let prev = n.checked_sub(1).map(|p| &writes[p]);
            let (by, mut events, mut hosts) = match prev {
                Some(p) => (
                    format!(" ({} wrote it at {})", p.writer, fmt_s(p.at_us)),
                    vec![p.event, w.event],
                    vec![w.writer.to_string(), p.writer.to_string()],
                ),
                None => (String::new(), vec![w.event], vec![w.writer.to_string()]),
            };
            events.sort_unstable();
            hosts.dedup();
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "{} wrote {} at {} based on a read of {}, but the storage held {}{by}: an update was lost{final_note}",
                    w.writer,
                    w.wrote,
                    fmt_s(w.at_us),
                    w.read,
                    w.current
                ),
                at_us: w.at_us,
                hosts,
                owners: Vec::new(),
                first_event: w.event,
                events,
            });
        }

        // Each write must be a sale of one, or the stock arithmetic below means nothing.
        if let Some(w) = writes.iter().find(|w| w.wrote != w.read - 1) {
            return Verdict::Unknown {
                reason: format!(
                    "{} wrote {} after reading {} at {}: not a sale of one, so the final stock cannot be checked",
                    w.writer,
                    w.wrote,
                    w.read,
                    fmt_s(w.at_us)
                ),
            };
        }

        if writes.is_empty() {
            // Writes the clients saw succeed but the storage never recorded mean the
            // storage's record is incomplete: nothing to judge on.
            let acked = h
                .ops()
                .filter(|(_, op)| op.f == OpF::Write && op.phase == Phase::Ok)
                .count();
            if acked > 0 {
                return Verdict::Unknown {
                    reason: format!(
                        "{acked} write operations completed ok but the storage recorded no accepted write"
                    ),
                };
            }
            // Nothing written at all: no update could be lost, so nothing is proved.
            return Verdict::Unknown {
                reason: "the storage accepted no write: no update to lose".into(),
            };
        }

        if final_value != expected {
            let last = writes.last().expect("no writes returned Unknown above");
            return Verdict::Invalid(Evidence {
                summary: format!(
                    "final stock {final_value} but {} - {} accepted sales = {expected}",
                    h.params.initial_stock,
                    writes.len()
                ),
                at_us: last.at_us,
                hosts: vec![last.writer.to_string()],
                owners: Vec::new(),
                first_event: last.event,
                events: vec![last.event],
            });
        }
        Verdict::Valid
    }
}
