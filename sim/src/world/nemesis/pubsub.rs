//! Lost notifications: every system drops the release notifications it would
//! deliver to waiters (Redis's pub/sub messages).

use crate::history::FaultPhase;

use super::cx::Cx;

/// Every system drops its notifications for `duration_ms` (recorded on the host each
/// system names).
pub(super) fn start(cx: &mut Cx, duration_ms: u64) {
    let hosts: Vec<String> = cx
        .world
        .systems
        .0
        .iter()
        .filter_map(|s| s.drop_notifications(true))
        .collect();
    for host in &hosts {
        cx.record(
            host,
            FaultPhase::Start,
            format!("the servers drop pub/sub messages for {duration_ms} ms"),
        );
    }
    cx.end_after(duration_ms, |cx| {
        let hosts: Vec<String> = cx
            .world
            .systems
            .0
            .iter()
            .filter_map(|s| s.drop_notifications(false))
            .collect();
        for host in &hosts {
            cx.record(
                host,
                FaultPhase::End,
                "the servers deliver pub/sub messages again".into(),
            );
        }
    });
}
