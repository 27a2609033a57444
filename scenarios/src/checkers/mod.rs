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
pub mod mongo_probes;
mod mutual_exclusion;
mod ownership;
pub mod probes;
mod reentrancy;
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
    holder_partitioned_past_the_lease, server_crashed_holding_the_lock,
    server_pause_outlasted_the_lease, server_restart_lost_the_lock, split_brain,
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
    /// An effect checker found harm at the storage or the server.
    Unsafe,
    /// A promise broken without harm or overlapping holders (a fencing token issued
    /// twice, to holds that never overlapped): the algorithm failed, the data did not.
    Promise,
    /// No harm found, but some safety checker could not judge the run.
    Unknown,
}

impl Safety {
    /// Every class, worst first: the order reports list them in.
    pub const WORST_FIRST: [Safety; 5] = [
        Safety::Unsafe,
        Safety::Fenced,
        Safety::Promise,
        Safety::Unknown,
        Safety::Safe,
    ];

    /// The class's lower-case name: `safe`, `fenced`, `promise`, `unsafe`, `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Safety::Safe => "safe",
            Safety::Fenced => "fenced",
            Safety::Unsafe => "unsafe",
            Safety::Promise => "promise",
            Safety::Unknown => "unknown",
        }
    }

    /// Severity: 0 for the worst class ([`Safety::Unsafe`]), 4 for [`Safety::Safe`].
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

/// A run's safety class from its verdicts (names as [`names`] spells them; works on
/// `&[(&str, Verdict)]` from [`check_all`] and on `&[(String, Verdict)]` alike) and
/// whether the storage refused anyone ([`storage_refused`]):
///
/// - [`Safety::Unsafe`] if any effect checker ([`EFFECT_CHECKERS`]) is invalid;
/// - else [`Safety::Unsafe`] if `mutual-exclusion` or `rw-exclusion` (belief) is invalid and the storage
///   refused nobody: two clients held the lock at once and nothing stood between them
///   and the data, so that nothing was lost was luck. A proven violation decides the
///   class, whatever another checker could not judge (a run whose overlapping holders
///   never got to write leaves `lost-update` nothing to judge);
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
pub fn safety<S: AsRef<str>>(verdicts: &[(S, Verdict)], storage_refused: bool) -> Safety {
    let invalid = |want: &dyn Fn(&str) -> bool| {
        verdicts
            .iter()
            .any(|(n, v)| want(n.as_ref()) && v.is_invalid())
    };
    let overlapped = invalid(&|n| n == BELIEF_CHECKER || n == RW_BELIEF_CHECKER);
    if invalid(&|n| EFFECT_CHECKERS.contains(&n)) || (overlapped && !storage_refused) {
        Safety::Unsafe
    } else if verdicts
        .iter()
        .any(|(n, v)| !LIVENESS_CHECKERS.contains(&n.as_ref()) && v.is_unknown())
    {
        if invalid(&|n| PROMISE_CHECKERS.contains(&n)) {
            Safety::Promise
        } else {
            Safety::Unknown
        }
    } else if overlapped {
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
