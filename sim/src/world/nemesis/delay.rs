//! One-way delay of every message arriving at a host: a client's replies from the
//! servers, or everything a server receives.

use std::time::Duration;

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Delays what every host `target` names receives by `latency_ms`, for `duration_ms`.
pub(super) fn start(cx: &mut Cx, target: &Target, latency_ms: u64, duration_ms: u64) {
    for host in cx.resolve(target) {
        let from = if cx.world.clients.contains_key(&host) {
            cx.world.server_names()
        } else {
            Vec::new()
        };
        cx.world
            .net
            .delay(cx.fault, &host, &from, Duration::from_millis(latency_ms));
        let source = if from.is_empty() {
            "every host".to_string()
        } else {
            from.join(", ")
        };
        cx.record(
            &host,
            FaultPhase::Start,
            format!(
                "delay messages from {source} to {host} by {latency_ms} ms for {duration_ms} ms"
            ),
        );
        cx.end_after(duration_ms, move |cx| {
            cx.world.net.end_delay(cx.fault);
            cx.record(
                &host,
                FaultPhase::End,
                format!("messages to {host} on time again"),
            );
        });
    }
}
