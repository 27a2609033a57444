//! A readable text timeline of a history: who did what when, around a violation.
//!
//! One line per event, true simulated time first:
//!
//! ```text
//!    1.203000s client-4  acquire ok      owner=client-4-17-3fa2
//! !! 1.310000s client-1  release invoke  owner=client-1-3-9e01
//!    1.400000s client-2  >>> pause client-2 for 800 ms
//!    1.500000s redis     removed lock (owner=client-1-3-9e01 by client-2, command)
//! ```
//!
//! `!!` marks the event where a violation becomes visible (the evidence's
//! `first_event`), `! ` the other implicated events. Reports only read the history.

use std::fmt::Write as _;

use scenarios::checkers::Evidence;
use sim::faults::FaultKind;
use sim::history::{Event, EventKind, FaultPhase, History, Op, StorageEvent};

/// Formats microseconds as seconds with microsecond precision (`1.203000s`).
pub fn fmt_time(us: u64) -> String {
    format!("{}.{:06}s", us / 1_000_000, us % 1_000_000)
}

fn op_text(op: &Op) -> String {
    let (f, phase) = (op.f.name(), op.phase.name());
    let mut s = format!("{:<15}", format!("{f} {phase}"));
    if let Some(o) = &op.owner {
        let _ = write!(s, " owner={o}");
    }
    if let Some(v) = op.value {
        let _ = write!(s, " value={v}");
    }
    if let Some(t) = op.token {
        let _ = write!(s, " token={t}");
    }
    if let Some(v) = op.valid_until_us {
        let _ = write!(s, " valid-until={}", fmt_time(v));
    }
    if let Some(d) = &op.detail {
        let _ = write!(s, " ({d})");
    }
    s.trim_end().to_string()
}

fn fault_text(h: &History, e: &Event, fault: usize, phase: FaultPhase, detail: &str) -> String {
    let host = &e.host;
    // The plan says what kind; the event's host is the resolved target.
    let (what, start) = match h.plan.faults.get(fault).map(|f| &f.kind) {
        Some(FaultKind::Pause { duration_ms, .. }) => {
            ("pause", format!("pause {host} for {duration_ms} ms"))
        }
        Some(FaultKind::PauseBeforeWrite { duration_ms, .. }) => (
            "pause",
            format!("pause {host} for {duration_ms} ms, just before its write"),
        ),
        Some(FaultKind::Crash {
            restart_after_ms, ..
        }) => (
            "crash",
            match restart_after_ms {
                Some(ms) => format!("crash {host}, restart after {ms} ms"),
                None => format!("crash {host}"),
            },
        ),
        Some(FaultKind::MachineCrash {
            restart_after_ms, ..
        }) => (
            "crash",
            match restart_after_ms {
                Some(ms) => format!("machine crash {host}, restart after {ms} ms"),
                None => format!("machine crash {host}"),
            },
        ),
        Some(FaultKind::Delay {
            latency_ms,
            duration_ms,
            ..
        }) => (
            "delay",
            format!("delay messages to {host} by {latency_ms} ms for {duration_ms} ms"),
        ),
        Some(FaultKind::Partition { .. }) => {
            return match phase {
                FaultPhase::Start => format!(">>> {detail}"),
                FaultPhase::End => format!("<<< {detail}"),
            };
        }
        Some(FaultKind::SlowWork { extra_ms, .. }) => {
            ("slow work", format!("slow work on {host}: +{extra_ms} ms"))
        }
        Some(FaultKind::ResetConnections { .. }) => (
            "connection reset",
            format!("{host}'s connections to the lock servers reset"),
        ),
        Some(
            FaultKind::ClockJump { .. }
            | FaultKind::ClockDrift { .. }
            | FaultKind::ClockSlew { .. },
        ) => {
            return match phase {
                FaultPhase::Start => format!(">>> {detail}"),
                FaultPhase::End => format!("<<< {detail}"),
            };
        }
        Some(FaultKind::DropPushes { duration_ms }) => (
            "message loss",
            format!("{host} drops pub/sub messages for {duration_ms} ms"),
        ),
        None => ("fault", format!("fault {fault}: {detail}")),
    };
    match phase {
        FaultPhase::Start => format!(">>> {start}"),
        FaultPhase::End if what == "crash" => format!("<<< crash {host} ends (restart)"),
        FaultPhase::End => format!("<<< {what} {host} ends"),
    }
}

/// One event's text, without the marker and time columns.
pub fn describe(h: &History, e: &Event) -> String {
    match &e.kind {
        EventKind::Op(op) => op_text(op),
        EventKind::Fault {
            fault,
            phase,
            detail,
            ..
        } => fault_text(h, e, *fault, *phase, detail),
        EventKind::Connect { server, ok, detail } => match (ok, detail) {
            (true, _) => format!("connected to {server}"),
            (false, Some(why)) => format!("cannot connect to {server}: {why}"),
            (false, None) => format!("cannot connect to {server}"),
        },
        EventKind::Server(s) => s.wording(),
        EventKind::Renewed {
            key,
            owner,
            valid_until_us,
        } => format!(
            "watchdog renewed {key} (owner={owner}): valid until {}",
            scenarios::checkers::fmt_s(*valid_until_us)
        ),
        EventKind::Clock {
            wall_offset_us,
            drift_ppm,
            step_ms,
        } => {
            let step = if *step_ms != 0 {
                format!("stepped {step_ms:+} ms; ")
            } else {
                String::new()
            };
            let sign = if *wall_offset_us < 0 { '-' } else { '+' };
            let abs = wall_offset_us.unsigned_abs();
            format!(
                "clock: {step}wall clock {sign}{}.{:03} s from true time, rate {drift_ppm:+} ppm",
                abs / 1_000_000,
                (abs % 1_000_000) / 1_000
            )
        }
        EventKind::Storage(StorageEvent::Read {
            reader,
            value,
            token,
            accepted,
            segment,
        }) => {
            let token = token.map(|t| format!(", token {t}")).unwrap_or_default();
            let of = segment_of(*segment);
            if *accepted {
                format!("read{of} by {reader}: {value}{token}")
            } else {
                format!("read{of} by {reader} refused{token}")
            }
        }
        EventKind::Storage(StorageEvent::Write {
            writer,
            read,
            wrote,
            current,
            token,
            accepted,
            segment,
        }) => {
            let token = token.map(|t| format!(", token {t}")).unwrap_or_default();
            let of = segment_of(*segment);
            let verdict = if *accepted { "accepted" } else { "rejected" };
            let lost = if *accepted && current != read {
                " LOST UPDATE"
            } else {
                ""
            };
            format!(
                "write{of} by {writer}: read {read}, wrote {wrote}, found {current}{token}, {verdict}{lost}"
            )
        }
        EventKind::Storage(StorageEvent::Final { value, segment }) => {
            format!("final stock{} {value}", segment_of(*segment))
        }
        // A failover monitor's log line.
        other => other.monitor_words().unwrap_or_default(),
    }
}

/// ` of segment N` for a segmented stock's counter; nothing for the one counter.
fn segment_of(segment: Option<u32>) -> String {
    segment.map_or(String::new(), |s| format!(" of segment {s}"))
}

/// One line: marker, time, host, description.
pub fn line(h: &History, i: usize, marker: &str) -> String {
    let e = &h.events[i];
    // Pad times to the run's longest, so columns line up in a 2 s run and a 200 s one.
    let width = fmt_time(h.end_us.max(e.at_us)).len();
    format!(
        "{marker:<2} {:>width$} {:<9} {}",
        fmt_time(e.at_us),
        e.host,
        describe(h, e)
    )
    .trim_end()
    .to_string()
}

/// The events from `center - before` to `center + after` (clamped), one line each,
/// with `!!` on `center` and `! ` on the other `marked` events; elided events are
/// counted on a line of their own so a reader knows the window is partial.
pub fn render_window(
    h: &History,
    center: usize,
    before: usize,
    after: usize,
    marked: &[usize],
) -> String {
    let mut out = String::new();
    if h.events.is_empty() {
        return "(no events)\n".to_string();
    }
    let center = center.min(h.events.len() - 1);
    let from = center.saturating_sub(before);
    let to = (center + after).min(h.events.len() - 1);
    if from > 0 {
        let _ = writeln!(out, "   ... {from} earlier events");
    }
    for i in from..=to {
        let marker = if i == center {
            "!!"
        } else if marked.contains(&i) {
            "!"
        } else {
            ""
        };
        let _ = writeln!(out, "{}", line(h, i, marker));
    }
    let later = h.events.len() - 1 - to;
    if later > 0 {
        let _ = writeln!(out, "   ... {later} later events");
    }
    out
}

/// The timeline around a violation: `context` events either side of its first
/// violating event, with every implicated event in the window marked.
pub fn render_evidence(h: &History, ev: &Evidence, context: usize) -> String {
    render_window(h, ev.first_event, context, context, &ev.events)
}

/// The whole history, one line per event.
pub fn render_all(h: &History) -> String {
    (0..h.events.len()).fold(String::new(), |mut out, i| {
        let _ = writeln!(out, "{}", line(h, i, ""));
        out
    })
}
