//! Lost pub/sub messages: every server drops the messages it would deliver.

use crate::history::FaultPhase;

use super::cx::Cx;

/// Every server drops its pub/sub messages for `duration_ms` (recorded on the first).
pub(super) fn start(cx: &mut Cx, duration_ms: u64) {
    for server in &cx.world.servers {
        server.set_drop_pushes(true);
    }
    cx.record(
        &cx.world.servers[0].name,
        FaultPhase::Start,
        format!("the servers drop pub/sub messages for {duration_ms} ms"),
    );
    cx.end_after(duration_ms, |cx| {
        for server in &cx.world.servers {
            server.set_drop_pushes(false);
        }
        cx.record(
            &cx.world.servers[0].name,
            FaultPhase::End,
            "the servers deliver pub/sub messages again".into(),
        );
    });
}
