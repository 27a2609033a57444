//! `rw-exclusion`: a read-write lock's promise. No writer's hold overlaps any other
//! client's hold, reader or writer; readers may overlap each other.
//!
//! Judged on belief, as `mutual-exclusion` is, over the same holds ([`model::holds`]:
//! from the acquire's `ok` to the release's invocation, a crash or the run's end), with
//! the mode each acquisition recorded (`Op::mode`; a hold without one is exclusive).
//!
//! It applies to a read/write workload's history, one that records acquisition modes
//! ([`applies`]); [`super::check_all`] does not run it on any other, where every hold
//! is exclusive and `mutual-exclusion` judges them (no verdict at all, rather than a
//! vacuous one). On a read/write history without a single read hold (a design with no
//! read mode refuses every read) it is exactly `mutual-exclusion`'s judgement: every
//! pair of overlapping holds has a writer in it; `Unknown` when nobody held the lock.

use sim::history::{EventKind, History};

use super::model::{self, Hold};
use super::{Checker, Evidence, Verdict, fmt_s};

/// The rw-exclusion checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct RwExclusion;

/// Its name, as reports and [`super::safety`] spell it.
pub const NAME: &str = "rw-exclusion";

/// Whether `h` is a read/write workload's history: some operation records a mode.
pub fn applies(h: &History) -> bool {
    h.events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Op(op) if op.mode.is_some()))
}

fn mode_name(h: &Hold) -> &'static str {
    if h.is_read() { "read" } else { "write" }
}

impl Checker for RwExclusion {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check(&self, h: &History) -> Verdict {
        let holds = match model::holds(h) {
            Ok(x) => x,
            Err(reason) => return Verdict::Unknown { reason },
        };
        if holds.is_empty() {
            // No client ever held the lock: nothing was excluded, so nothing is proved.
            return Verdict::Unknown {
                reason: "no acquisition succeeded: no hold to judge".into(),
            };
        }
        // Every overlapping pair of different hosts on one key with a writer among
        // them; report the one whose overlap starts first, count the rest.
        let model::Overlaps {
            first,
            pairs,
            shared,
        } = model::overlaps(&holds);
        let Some((a, b)) = first else {
            return Verdict::Valid;
        };
        let until = model::overlap_until(h, a, b);
        let more = if pairs > 1 {
            format!(" ({pairs} overlapping pairs with a writer in all)")
        } else {
            String::new()
        };
        let readers = if shared > 0 {
            format!("; {shared} pairs of readers shared it, as they may")
        } else {
            String::new()
        };
        // Name the writer first.
        let (w, o) = if a.is_read() { (b, a) } else { (a, b) };
        let mut events = vec![a.acquire_event, b.acquire_event];
        events.extend(a.end_event);
        events.extend(b.end_event);
        events.sort_unstable();
        events.dedup();
        Verdict::Invalid(Evidence {
            summary: format!(
                "{} held lock {} in write mode while {} held it in {} mode, from {} to {} \
                 (owner={} and owner={}){more}{readers}",
                w.host,
                w.key,
                o.host,
                mode_name(o),
                fmt_s(b.start_us),
                until,
                w.owner,
                o.owner
            ),
            at_us: b.start_us,
            hosts: vec![w.host.clone(), o.host.clone()],
            owners: vec![w.owner.clone(), o.owner.clone()],
            first_event: b.acquire_event,
            events,
        })
    }
}
