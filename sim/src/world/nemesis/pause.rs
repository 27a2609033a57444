//! Stop-the-world pauses: now (a client or any host of a system: its pause gate holds
//! every task, timer and read until the pause ends), or armed for a client's next
//! write (the client pauses itself at that moment and records it).

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Pauses every host `target` names for `duration_ms`.
pub(super) fn start(cx: &mut Cx, target: &Target, duration_ms: u64) {
    for host in cx.resolve(target) {
        // Every host of every system has one; a name that is no host was resolved to
        // nothing.
        let Some(gate) = cx.world.gate(&host) else {
            continue;
        };
        gate.pause_until(cx.after(duration_ms));
        cx.record(
            &host,
            FaultPhase::Start,
            format!("pause {host} for {duration_ms} ms"),
        );
        cx.end_after(duration_ms, move |cx| {
            cx.record(&host, FaultPhase::End, format!("pause of {host} ends"));
        });
    }
}

/// Arms a pause of `duration_ms` just before the next write of every client `target`
/// names.
pub(super) fn before_write(cx: &mut Cx, target: &Target, duration_ms: u64) {
    for host in cx.resolve(target) {
        let Some(ctl) = cx.world.clients.get(&host) else {
            continue;
        };
        *ctl.pause_before_write
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((cx.fault, duration_ms));
    }
}
