//! Clock faults: a host's wall clock steps (an NTP step, `date -s`), or its clock runs
//! at another rate for a while. Each change is recorded with the clock's new state.

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Steps the wall clock of every host `target` names by `delta_ms`.
pub(super) fn jump(cx: &mut Cx, target: &Target, delta_ms: i64) {
    for host in cx.resolve(target) {
        let Some(clock) = cx.world.clocks.get(&host) else {
            continue;
        };
        clock.step(delta_ms);
        let direction = if delta_ms >= 0 { "forward" } else { "back" };
        cx.record(
            &host,
            FaultPhase::Start,
            format!(
                "{host}'s wall clock jumps {direction} by {} ms{}",
                delta_ms.unsigned_abs(),
                cx.moment
            ),
        );
        cx.record_clock(&host, clock, delta_ms);
    }
}

/// Runs the clock of every host `target` names at `drift_ppm` for `duration_ms` (then
/// at its former rate), or for the rest of the run.
pub(super) fn drift(cx: &mut Cx, target: &Target, drift_ppm: i64, duration_ms: Option<u64>) {
    for host in cx.resolve(target) {
        let Some(clock) = cx.world.clocks.get(&host) else {
            continue;
        };
        let before = clock.drift_ppm();
        clock.set_drift(cx.now, drift_ppm);
        let how_long = duration_ms
            .map(|ms| format!(" for {ms} ms"))
            .unwrap_or_default();
        cx.record(
            &host,
            FaultPhase::Start,
            format!("{host}'s clock runs at {drift_ppm} ppm{how_long}"),
        );
        cx.record_clock(&host, clock, 0);
        if let Some(ms) = duration_ms {
            cx.end_after(ms, move |cx| {
                if let Some(clock) = cx.world.clocks.get(&host) {
                    clock.set_drift(cx.now, before);
                    cx.record_clock(&host, clock, 0);
                }
                cx.record(
                    &host,
                    FaultPhase::End,
                    format!("{host}'s clock runs at {before} ppm again"),
                );
            });
        }
    }
}
