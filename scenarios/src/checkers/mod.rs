//! Checkers: judge a recorded [`History`] and nothing else.
//!
//! Jepsen's split: a checker answers [`Verdict::Valid`], [`Verdict::Invalid`] with
//! evidence, or [`Verdict::Unknown`] when the history cannot settle the question. A
//! checker that panics yields `Unknown`, never `Valid` ([`check_all`]), so a bug in a
//! checker cannot pass a broken lock.
//!
//! Checkers read only the history's events, params, plan and end time; they never read
//! `history.design` or `history.scenario`, so a verdict cannot depend on which design
//! the run was labelled with.
//!
//! # Belief and effect
//!
//! `mutual-exclusion` judges exclusion *in belief*: two clients whose believed holds
//! overlap (each thinks it holds the lock). That is the lock's promise broken, but not
//! necessarily harm: a fencing storage can refuse the stale holder. Harm is judged
//! where it happens, at the storage and the server: the *effect* checkers
//! `lost-update` (a sale lost at the storage), `token-order` (the storage accepted a
//! stale token), `ownership` (a client's command removed another's lock) and
//! `reentrancy` (a nested release freed the lock). [`safety`] folds a run's verdicts
//! into a [`Safety`] class: `unsafe` if an effect checker is invalid, `fenced` if
//! only belief overlapped, `unknown` if a safety checker could not judge, else `safe`.
//! `liveness` and `waiter-liveness` are liveness properties and never change the
//! class. `validity` and `overrun` (see [`validity`]) tell *why* believed holds
//! overlapped: the lock broke its promise (two clients within their believed
//! validity), or a client went on past its validity; they never change the class
//! either. Nor does `belief` (see [`belief`]): a client's acquisition that the server's
//! record never backed, or had already lost while the client still believed it valid.
//!
//! Layout: [`model`] derives views shared by several checkers (operation pairs,
//! believed-hold intervals, the server's record of who held the key); one module per
//! property; [`probes`] holds the Stateright-style `sometimes` properties that prove a
//! fault really happened, so a passing safety check is not vacuous.

pub mod belief;
pub mod clock_probes;
pub mod excuse;
mod liveness;
mod lost_update;
pub mod model;
mod mutual_exclusion;
mod ownership;
pub mod probes;
mod reentrancy;
pub mod rollback_probes;
pub mod rw_exclusion;
pub mod segments;
mod server_probes;
mod token_order;
pub mod validity;
mod waiter_liveness;

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::{Deserialize, Serialize};
use sim::history::History;

pub use belief::Belief;
pub use liveness::Liveness;
pub use lost_update::LostUpdate;
pub use mutual_exclusion::MutualExclusion;
pub use ownership::{Ownership, unattributed_removals};
pub use reentrancy::{Reentrancy, still_held_count};
pub use rw_exclusion::RwExclusion;
pub use server_probes::{
    acquire_ok_later_than_lease, delayed_reply_to_a_granted_acquire, failover_lost_the_lock,
    holder_partitioned_past_the_lease, lock_server_isolated_past_the_lease,
    renewal_due_while_the_lock_server_was_isolated, server_crashed_holding_the_lock,
    server_pause_outlasted_the_lease, server_restart_lost_the_lock, server_restart_struck_the_lock,
    split_brain,
};
pub use token_order::TokenOrder;
pub use validity::{Overrun, Validity};
pub use waiter_liveness::WaiterLiveness;

/// A checker's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// The history satisfies the property.
    Valid,
    /// The history violates it; the evidence says where.
    Invalid(Evidence),
    /// The history cannot settle it (or the checker failed).
    Unknown {
        /// Why not.
        reason: String,
    },
}

impl Verdict {
    /// True for [`Verdict::Valid`].
    pub fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid)
    }

    /// True for [`Verdict::Invalid`].
    pub fn is_invalid(&self) -> bool {
        matches!(self, Verdict::Invalid(_))
    }

    /// True for [`Verdict::Unknown`].
    pub fn is_unknown(&self) -> bool {
        matches!(self, Verdict::Unknown { .. })
    }

    /// The evidence, if invalid.
    pub fn evidence(&self) -> Option<&Evidence> {
        match self {
            Verdict::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

/// Where and how a property was violated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// One sentence naming the hosts, owners and times involved.
    pub summary: String,
    /// True simulated time at which the violation starts, in microseconds.
    pub at_us: u64,
    /// The hosts involved, the one the summary names first first.
    pub hosts: Vec<String>,
    /// The owner values involved, in the same order as `hosts` where they pair up.
    pub owners: Vec<String>,
    /// Index into `history.events` of the event at which the violation becomes visible
    /// (the second overlapping acquire, the lost write, the foreign removal, the crash
    /// that left the lock stuck). Timelines centre on it and mark it `!!`.
    pub first_event: usize,
    /// Indices into `history.events` of every implicated event, ascending.
    pub events: Vec<usize>,
}

/// A property of a history.
pub trait Checker {
    /// A short kebab-case name (`mutual-exclusion`), used as a column in reports.
    fn name(&self) -> &'static str;
    /// Judge the history.
    fn check(&self, h: &History) -> Verdict;
    /// A segmented stock's verdict (`Workload::segments`): `check` judged each
    /// segment's view on its own ([`segments::split`]); by default the verdicts fold as
    /// [`segments::combine`] folds them. A checker with something to say about the
    /// whole stock says it here.
    fn combine_segments(
        &self,
        _h: &History,
        views: &[segments::SegmentView],
        verdicts: Vec<Verdict>,
    ) -> Verdict {
        segments::combine(views, verdicts)
    }
}

/// Every checker, in the fixed order reports list them.
pub fn all() -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(MutualExclusion),
        Box::new(LostUpdate),
        Box::new(Ownership),
        Box::new(Liveness),
        Box::new(Reentrancy),
        Box::new(WaiterLiveness),
        Box::new(TokenOrder),
        Box::new(Validity),
        Box::new(Overrun),
        Box::new(Belief),
    ]
}

/// The checkers that judge only some histories, run by [`check_all`] on the histories
/// they apply to, after [`all`]'s: `rw-exclusion`, on a read/write workload's history
/// (one that records acquisition modes). On any other history they are not
/// applicable and give no verdict at all, so the verdicts (and every report, gate
/// cell and class) of a history without modes are what they were before them.
pub fn conditional() -> Vec<Box<dyn Checker>> {
    vec![Box::new(RwExclusion)]
}

/// [`all`], then the [`conditional`] checkers that apply to `h`.
pub fn for_history(h: &History) -> Vec<Box<dyn Checker>> {
    let mut checkers = all();
    if rw_exclusion::applies(h) {
        checkers.extend(conditional());
    }
    checkers
}

/// Every checker name a caller may ask for: [`names`], then the [`conditional`] ones.
pub fn all_names() -> Vec<&'static str> {
    let mut names = names();
    names.extend(conditional().iter().map(|c| c.name()));
    names
}

/// The names of [`all`]'s checkers, in order.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|c| c.name()).collect()
}

/// Runs every checker of [`all`] on `h`, in order, then the [`conditional`] ones that
/// apply to it ([`for_history`]).
pub fn check_all(h: &History) -> Vec<(&'static str, Verdict)> {
    check_with(&for_history(h), h)
}

/// Runs the given checkers on `h`, in order. A checker that panics yields `Unknown`
/// with the panic message: a crashed checker must never count as a pass.
///
/// A segmented stock's history is judged segment by segment: each checker judges
/// every segment's view ([`segments::split`]) and folds the verdicts
/// ([`Checker::combine_segments`]).
pub fn check_with(checkers: &[Box<dyn Checker>], h: &History) -> Vec<(&'static str, Verdict)> {
    let views = segments::split(h);
    checkers
        .iter()
        .map(|c| {
            let judge = || match &views {
                None => c.check(h),
                Some(views) => {
                    let verdicts = views.iter().map(|v| c.check(&v.history)).collect();
                    c.combine_segments(h, views, verdicts)
                }
            };
            // AssertUnwindSafe: a checker only reads `h`; after a panic we discard
            // whatever it computed and never look at its state again.
            let verdict = catch_unwind(AssertUnwindSafe(judge)).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".to_string());
                Verdict::Unknown {
                    reason: format!("checker {} panicked: {msg}", c.name()),
                }
            });
            (c.name(), verdict)
        })
        .collect()
}

/// Checkers that judge effects at the storage or the server: one of them invalid
/// makes a run [`Safety::Unsafe`].
pub const EFFECT_CHECKERS: [&str; 3] = ["lost-update", "ownership", "reentrancy"];

/// Checkers that judge a promise the lock makes beyond exclusion (fencing tokens that
/// only grow): invalid without harm or overlap makes a run [`Safety::Promise`]. A
/// token issued twice harms only if a stale holder uses it, and then `lost-update`
/// or `mutual-exclusion` sees the harm.
pub const PROMISE_CHECKERS: [&str; 1] = ["token-order"];

/// The checker that judges exclusion in belief (overlapping believed holds): invalid
/// alone makes a run [`Safety::Fenced`].
pub const BELIEF_CHECKER: &str = "mutual-exclusion";

/// The read-write lock's exclusion in belief (`rw-exclusion`): invalid, it counts as
/// [`BELIEF_CHECKER`] does.
pub const RW_BELIEF_CHECKER: &str = rw_exclusion::NAME;

/// Liveness checkers: they never change a run's [`Safety`] class.
pub const LIVENESS_CHECKERS: [&str; 2] = ["liveness", "waiter-liveness"];

/// A run's safety class, from its verdicts (see [`safety`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    /// Every safety checker judged the run valid.
    Safe,
    /// Two clients believed they held the lock at once, but no effect checker found
    /// harm: the storage (or luck) fenced the stale holder off.
    Fenced,
    /// Two clients believed they held the lock at once, but the older holder wrote
    /// nothing to the storage after the newer one's grant (it was paused to the end,
    /// crashed, or released without writing): the lock's promise broke, no harm
    /// reached the storage, and no fence was put to the test.
    Overlap,
    /// An effect checker found harm at the storage or the server.
    Unsafe,
    /// A promise broken without harm or overlapping holders (a fencing token issued
    /// twice, to holds that never overlapped): the algorithm failed, the data did not.
    Promise,
    /// No harm found, but some safety checker could not judge the run.
    Unknown,
}

impl Safety {
    /// Every class, worst first: the order reports list them in. An overlap ranks
    /// above a fenced run: two holders with nothing refusing the stale one, the data
    /// kept only because the stale holder happened not to write, is worse than two
    /// holders whose stale write the storage refused (a protection that did its job).
    pub const WORST_FIRST: [Safety; 6] = [
        Safety::Unsafe,
        Safety::Overlap,
        Safety::Fenced,
        Safety::Promise,
        Safety::Unknown,
        Safety::Safe,
    ];

    /// The class's lower-case name: `safe`, `fenced`, `overlap`, `promise`, `unsafe`,
    /// `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Safety::Safe => "safe",
            Safety::Fenced => "fenced",
            Safety::Overlap => "overlap",
            Safety::Unsafe => "unsafe",
            Safety::Promise => "promise",
            Safety::Unknown => "unknown",
        }
    }

    /// Severity: 0 for the worst class ([`Safety::Unsafe`]), 5 for [`Safety::Safe`].
    pub fn rank(self) -> usize {
        Self::WORST_FIRST
            .iter()
            .position(|c| *c == self)
            .expect("every class is listed")
    }

    /// The class named `name` (as [`Safety::name`] spells it).
    pub fn from_name(name: &str) -> Option<Safety> {
        Self::WORST_FIRST.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Safety {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the storage saw of a run, beyond the verdicts, that [`safety`] needs: whether
/// it refused anyone ([`storage_refused`]) and whether a holder whose hold another
/// host's grant overlapped wrote to it, accepted, after that grant
/// ([`stale_write_accepted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageFacts {
    /// The storage refused a read or write (a fence turned a stale token away).
    pub refused: bool,
    /// A stale holder's write was accepted while a newer holder held the lock.
    pub stale_write: bool,
}

impl StorageFacts {
    /// The facts of history `h`.
    pub fn of(h: &History) -> StorageFacts {
        StorageFacts {
            refused: storage_refused(h),
            stale_write: stale_write_accepted(h),
        }
    }
}

/// A caller that knows only whether the storage refused anyone: an overlap is taken to
/// have reached the storage (the conservative reading).
impl From<bool> for StorageFacts {
    fn from(refused: bool) -> Self {
        StorageFacts {
            refused,
            stale_write: true,
        }
    }
}

/// A run's safety class from its verdicts (names as [`names`] spells them; works on
/// `&[(&str, Verdict)]` from [`check_all`] and on `&[(String, Verdict)]` alike) and
/// what the storage saw ([`StorageFacts`]; a bare `bool` is whether it refused anyone,
/// with an overlap taken to have reached it):
///
/// - [`Safety::Unsafe`] if any effect checker ([`EFFECT_CHECKERS`]) is invalid;
/// - else [`Safety::Unsafe`] if `mutual-exclusion` (belief) is invalid, the storage
///   refused nobody and a stale holder's write was accepted after the newer holder's
///   grant: two clients held the lock at once, one acted on the data while the other
///   held it, and nothing stood between them, so that nothing was lost was luck. The
///   same if `rw-exclusion` is invalid and the storage refused nobody (a reader under a
///   writer acts by reading). A proven violation decides the class, whatever another
///   checker could not judge;
/// - else [`Safety::Overlap`] if `mutual-exclusion` is invalid, the storage refused
///   nobody and no stale holder wrote after the newer grant: the promise broke in
///   belief, nothing reached the storage (a run whose stale holder never wrote leaves
///   `lost-update` nothing to judge, so this is decided before the unknowns);
/// - else, if any verdict other than a liveness checker's ([`LIVENESS_CHECKERS`]) is
///   unknown (a checker that panicked is unknown too): [`Safety::Promise`] if a
///   promise checker ([`PROMISE_CHECKERS`]) is invalid (proven, whatever else could
///   not be judged), else [`Safety::Unknown`]: an unjudged run proves nothing, and
///   "fenced" needs every effect judged;
/// - else [`Safety::Fenced`] if `mutual-exclusion` is invalid (the storage refused a
///   stale holder: the fence did its work, and nothing was lost);
/// - else [`Safety::Promise`] if a promise checker is invalid (a promise broken
///   without harm or overlap: its own class, not `unsafe`);
/// - else [`Safety::Safe`].
///
/// Liveness verdicts never change the class; invalid verdicts of checkers this
/// function does not know are ignored.
pub fn safety<S: AsRef<str>>(verdicts: &[(S, Verdict)], facts: impl Into<StorageFacts>) -> Safety {
    let facts = facts.into();
    let invalid = |want: &dyn Fn(&str) -> bool| {
        verdicts
            .iter()
            .any(|(n, v)| want(n.as_ref()) && v.is_invalid())
    };
    let believed = invalid(&|n| n == BELIEF_CHECKER);
    let rw = invalid(&|n| n == RW_BELIEF_CHECKER);
    let acted = rw || (believed && facts.stale_write);
    if invalid(&|n| EFFECT_CHECKERS.contains(&n)) || (acted && !facts.refused) {
        Safety::Unsafe
    } else if believed && !facts.refused {
        Safety::Overlap
    } else if verdicts
        .iter()
        .any(|(n, v)| !LIVENESS_CHECKERS.contains(&n.as_ref()) && v.is_unknown())
    {
        if invalid(&|n| PROMISE_CHECKERS.contains(&n)) {
            Safety::Promise
        } else {
            Safety::Unknown
        }
    } else if believed || rw {
        Safety::Fenced
    } else if invalid(&|n| PROMISE_CHECKERS.contains(&n)) {
        Safety::Promise
    } else {
        Safety::Safe
    }
}

/// Whether the storage refused any read or write (a fencing storage turning a stale
/// token away): the evidence a `fenced` class needs.
pub fn storage_refused(h: &History) -> bool {
    h.events.iter().any(|e| {
        matches!(
            e.kind,
            sim::history::EventKind::Storage(
                sim::history::StorageEvent::Read {
                    accepted: false,
                    ..
                } | sim::history::StorageEvent::Write {
                    accepted: false,
                    ..
                }
            )
        )
    })
}

/// Whether a holder wrote to the storage, accepted, after another host's grant that
/// overlapped its hold: the older of two overlapping holders acting on the data while
/// the newer one held the lock, which is the harm an overlap in belief does. Its writes
/// count from the newer grant until its own next acquisition (a write still in flight
/// when it released counts too). A history that cannot be read as holds counts as yes;
/// one without overlapping holds, no.
pub fn stale_write_accepted(h: &History) -> bool {
    use sim::history::{EventKind, StorageEvent};
    let Ok(holds) = model::holds(h) else {
        return true;
    };
    holds.iter().enumerate().any(|(i, a)| {
        holds[i + 1..].iter().any(|b| {
            // `holds` is ordered by acquire event: `b`'s grant is the newer.
            if a.key != b.key
                || a.host == b.host
                || !(b.start_us < a.end_us && a.start_us < b.end_us)
                || (a.is_read() && b.is_read())
            {
                return false;
            }
            let next_us = holds
                .iter()
                .filter(|n| n.host == a.host && n.acquire_event > a.acquire_event)
                .map(|n| n.start_us)
                .min()
                .unwrap_or(u64::MAX);
            h.events.iter().any(|e| {
                (b.start_us..next_us).contains(&e.at_us)
                    && matches!(&e.kind, EventKind::Storage(StorageEvent::Write {
                        writer,
                        accepted: true,
                        ..
                    }) if *writer == a.host)
            })
        })
    })
}

/// Whether the run's first safety violation began before its scenario's first fault
/// did: the earliest evidence of a safety checker's invalid verdict (an effect, a
/// belief overlap, a promise) lies before the first fault's start, or the plan had
/// faults and none started at all. Such a run's class is the world's doing (a workload
/// that breaks the design with or without the fault), not the fault's: reports mark
/// it. A run whose plan has no faults (`no-faults`) is never "before the fault".
pub fn broke_before_fault<S: AsRef<str>>(h: &History, verdicts: &[(S, Verdict)]) -> bool {
    if h.plan.faults.is_empty() {
        return false;
    }
    let safety_checker = |n: &str| {
        EFFECT_CHECKERS.contains(&n)
            || PROMISE_CHECKERS.contains(&n)
            || n == BELIEF_CHECKER
            || n == RW_BELIEF_CHECKER
    };
    let Some(broke_us) = verdicts
        .iter()
        .filter(|(n, _)| safety_checker(n.as_ref()))
        .filter_map(|(_, v)| v.evidence().map(|e| e.at_us))
        .min()
    else {
        return false;
    };
    let first_fault_us = h.events.iter().find_map(|e| match &e.kind {
        sim::history::EventKind::Fault {
            phase: sim::history::FaultPhase::Start,
            ..
        } => Some(e.at_us),
        _ => None,
    });
    first_fault_us.is_none_or(|f| broke_us < f)
}

/// Formats true simulated microseconds as seconds with millisecond precision
/// (`1.203 s`), integer arithmetic only so the text is the same on every platform.
pub fn fmt_s(us: u64) -> String {
    format!("{}.{:03} s", us / 1_000_000, (us % 1_000_000) / 1_000)
}

/// Formats a duration in microseconds as milliseconds (`812 ms`, `0.250 ms`).
pub fn fmt_ms(us: u64) -> String {
    if us.is_multiple_of(1_000) {
        format!("{} ms", us / 1_000)
    } else {
        format!("{}.{:03} ms", us / 1_000, us % 1_000)
    }
}
