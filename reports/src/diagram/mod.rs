//! Sequence diagrams of a run: one lane per client, per lock server, per failover
//! monitor that led a failover in the window, and for the storage; requests and
//! replies as arrows at their true times (a reply held by a delay or a pause slopes
//! down from when the server sent it to when the client got it); the server's lease of
//! each lock as a bar on its lane; its role changes, a session's end, a rollback and
//! the monitor's failover steps as notes on their lanes (each in its system's words);
//! faults as shaded boxes over the lane of the host they hit (a delay as a strip along
//! it); each client's belief that it holds the lock as a bar beside its lane; the
//! violation as a red line across every lane.
//!
//! By default only what matters to the first violation is drawn: the hosts its
//! evidence names, the servers and storage they talked to, and the window from the
//! start of the holds and faults involved to the violation's last event. `full` draws
//! every host over the whole run.
//!
//! Time runs down the page. The scale is true time, except that rows whose text would
//! touch other text or an arrowhead are pushed apart (the order is always the true
//! order; text is measured with the plots' font); the time of every row is printed in
//! the left margin. Labels too long for their room wrap, then are cut, with the whole
//! text in a tooltip.
//!
//! Two renderings of one [`Diagram`]: SVG (self-contained, no scripts or fonts to
//! fetch; `svg.rs`) and Mermaid `sequenceDiagram` text (for a pull request or a wiki,
//! where Mermaid draws it; `mermaid.rs`). `cut.rs` cuts the run down to what matters.

mod cut;
pub mod measure;
mod mermaid;
mod svg;

pub use mermaid::mermaid;
pub use svg::svg;

use scenarios::checkers::{self, Evidence, Verdict};
use sim::history::History;

use cut::Cut;

/// What an item looks like; also its SVG class, so a test (or CSS) can find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A request.
    Request,
    /// A reply saying ok.
    Ok,
    /// A reply saying fail.
    Fail,
    /// A reply whose outcome is unknown.
    Info,
    /// A server's record: a write.
    Write,
    /// A server's record: an expiry or removal.
    Remove,
    /// The storage's record.
    Storage,
    /// Something broke here (a lost update, a refused write).
    Bad,
    /// A server's lease of the lock.
    Lease,
    /// A client's belief that it holds the lock.
    Belief,
    /// A fault's interval.
    Fault,
    /// A delay's interval: the host still runs, what reaches it comes late (drawn as a
    /// strip along its lane, not over the lane's width).
    Delay,
    /// A connection dialled.
    Connect,
    /// A server's role changed (a promotion, a demotion, a leader elected), a session
    /// ended, a failover monitor decided: what a failover turns on.
    Role,
}

impl Style {
    fn class(self) -> &'static str {
        match self {
            Style::Request => "request",
            Style::Ok => "reply-ok",
            Style::Fail => "reply-fail",
            Style::Info => "reply-info",
            Style::Write => "server-write",
            Style::Remove => "server-remove",
            Style::Storage => "storage",
            Style::Bad => "bad",
            Style::Lease => "lease",
            Style::Belief => "belief",
            Style::Fault => "fault",
            Style::Delay => "delay",
            Style::Connect => "connect",
            Style::Role => "role",
        }
    }
}

/// One drawn thing.
#[derive(Debug, Clone)]
pub enum Item {
    /// An arrow between two lanes.
    Arrow {
        /// Lane index it leaves.
        from: usize,
        /// Lane index it reaches.
        to: usize,
        /// When it left.
        from_us: u64,
        /// When it arrived.
        to_us: u64,
        /// Its text.
        label: String,
        /// How it looks.
        style: Style,
    },
    /// A note on one lane.
    Note {
        /// Lane index.
        lane: usize,
        /// When.
        at_us: u64,
        /// Its text.
        text: String,
        /// How it looks.
        style: Style,
    },
    /// An interval on one lane (a lease, a belief, a fault).
    Bar {
        /// Lane index.
        lane: usize,
        /// Start.
        from_us: u64,
        /// End.
        to_us: u64,
        /// Its text.
        label: String,
        /// How it looks.
        style: Style,
    },
}

/// A run, cut to what matters, ready to render.
#[derive(Debug, Clone)]
pub struct Diagram {
    /// One line naming the run.
    pub title: String,
    /// Lane names, left to right: clients, servers, failover monitors, storage.
    pub lanes: Vec<String>,
    /// The drawn things, in time order of their start.
    pub items: Vec<Item>,
    /// First time shown.
    pub start_us: u64,
    /// Last time shown.
    pub end_us: u64,
    /// The violation drawn: when, the checker, its one sentence.
    pub violation: Option<(u64, String, String)>,
}

fn short_owner(owner: &str) -> String {
    // `client-4-9-2f22e870` → `client-4-9`: enough to tell owners apart on a lane.
    let parts: Vec<&str> = owner.split('-').collect();
    if parts.len() >= 4 {
        parts[..3].join("-")
    } else {
        owner.to_string()
    }
}

/// Builds the diagram of `history` judged by `verdicts`: around the first violation
/// unless `full` (or there is no violation, in which case the whole run is drawn).
pub fn build(history: &History, verdicts: &[(String, Verdict)], full: bool) -> Diagram {
    let first: Option<(&str, &Evidence)> = verdicts
        .iter()
        .filter_map(|(n, v)| v.evidence().map(|e| (n.as_str(), e)))
        .min_by_key(|(_, e)| e.at_us);
    let cut = Cut::new(history, first.map(|(_, e)| e), full);
    let mut items: Vec<Item> = Vec::new();
    cut.requests(&mut items);
    cut.beliefs(&mut items);
    cut.server_record(&mut items);
    cut.storage_and_dials(&mut items);
    cut.faults(&mut items);
    // Fault ends of faults that started before the window are covered by the bars;
    // nothing else to add. Sort by start time, stable.
    items.sort_by_key(|i| match i {
        Item::Arrow { from_us, .. } | Item::Bar { from_us, .. } => *from_us,
        Item::Note { at_us, .. } => *at_us,
    });
    Diagram {
        title: format!(
            "{} under {}, seed {}",
            history.design, history.scenario, history.seed
        ),
        lanes: cut.lanes,
        items,
        start_us: cut.start_us,
        end_us: cut.end_us,
        violation: first.map(|(n, e)| (e.at_us, n.to_string(), e.summary.clone())),
    }
}

/// The diagram of a fresh run's history, judged by every checker.
pub fn of_history(history: &History, full: bool) -> Diagram {
    let verdicts: Vec<(String, Verdict)> = checkers::check_all(history)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    build(history, &verdicts, full)
}

/// Whether `text` is a diagram this module wrote (so writing over it loses nothing).
pub fn is_ours(text: &str) -> bool {
    text.starts_with("sequenceDiagram\n")
        || (text.starts_with("<svg xmlns") && text.contains(r##"<g class="lane""##))
}
