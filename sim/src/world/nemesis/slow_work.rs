//! Slow work: a client's next critical section runs longer than planned.

use std::sync::atomic::Ordering;

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Makes the next critical section of every client `target` names `extra_ms` longer.
pub(super) fn start(cx: &mut Cx, target: &Target, extra_ms: u64) {
    for host in cx.resolve(target) {
        let Some(ctl) = cx.world.clients.get(&host) else {
            continue;
        };
        ctl.slow_ms.store(extra_ms, Ordering::Relaxed);
        cx.record(
            &host,
            FaultPhase::Start,
            format!("{host}'s next critical section runs {extra_ms} ms longer"),
        );
    }
}
