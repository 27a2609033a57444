//! The Sentinels' log lines as a failover monitor's steps: which ones lead a
//! failover, which announce the new master, which a diagram draws, and the hosts
//! that are Sentinels.

use crate::history::fact::MonitorStep;

/// The log events that mean a Sentinel is leading a failover.
const LEADER_EVENTS: [&str; 3] = ["+elected-leader", "+selected-slave", "+promoted-slave"];

/// The log events drawn on a Sentinel's lane: the steps of the failover it decides.
const SHOWN_EVENTS: [&str; 6] = [
    "+odown",
    "+elected-leader",
    "+selected-slave",
    "+promoted-slave",
    "+switch-master",
    "+failover-end",
];

/// A Sentinel's log line, classified.
pub fn step<'a>(event: &'a str, detail: &'a str) -> MonitorStep<'a> {
    MonitorStep {
        event,
        detail,
        leads: LEADER_EVENTS.contains(&event),
        announces: event == "+switch-master",
        shown: SHOWN_EVENTS.contains(&event),
    }
}

/// Whether `host` is a Sentinel by the world's names.
pub fn is_sentinel_host(host: &str) -> bool {
    host.starts_with("sentinel-")
}

/// The Sentinels, as a witness names them.
pub const SENTINELS: &str = "the Sentinels";

/// A Sentinel's log line in the timeline's words.
pub fn line_words(event: &str, detail: &str) -> String {
    format!("sentinel {event} {detail}")
}
