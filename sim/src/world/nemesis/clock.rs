//! Clock faults: a host's wall clock steps (an NTP step, `date -s`), its clock runs at
//! another rate for a while, or NTP slews it. Each change is recorded with the clock's
//! new state.

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

/// NTP slews the clock of every host `target` names by `delta_ms` at `rate_ppm`: the
/// clock runs `rate_ppm` slow (a correction back) or fast on top of whatever rate it
/// has until the correction is made, then the slew's rate comes off again (so a slew
/// that overlaps another fault's rate change composes with it).
pub(super) fn slew(cx: &mut Cx, target: &Target, delta_ms: i64, rate_ppm: u64) {
    let Ok(rate) = i64::try_from(rate_ppm) else {
        return;
    };
    if rate == 0 || delta_ms == 0 {
        return;
    }
    let change = rate * delta_ms.signum();
    // |delta| at `rate` parts per million takes |delta| × 10⁶ ÷ rate of true time.
    let lasts_ms = (u128::from(delta_ms.unsigned_abs()) * 1_000_000).div_ceil(u128::from(rate_ppm));
    let lasts_ms = u64::try_from(lasts_ms).unwrap_or(u64::MAX);
    for host in cx.resolve(target) {
        let Some(clock) = cx.world.clocks.get(&host) else {
            continue;
        };
        // A slew back never stops the clock or runs it backwards, whatever else slows
        // it: the rate bottoms out just above -100 %, and what was applied comes off
        // at the end.
        let before = clock.drift_ppm();
        let applied = before.saturating_add(change).max(-999_999) - before;
        clock.set_drift(cx.now, before + applied);
        let direction = if delta_ms >= 0 { "forward" } else { "back" };
        cx.record(
            &host,
            FaultPhase::Start,
            format!(
                "NTP slews {host}'s clock {direction} by {} ms at {rate_ppm} ppm: it runs {}.{:02} % {} for {lasts_ms} ms, its monotonic clock with it{}",
                delta_ms.unsigned_abs(),
                rate_ppm / 10_000,
                (rate_ppm % 10_000) / 100,
                if delta_ms >= 0 { "fast" } else { "slow" },
                cx.moment
            ),
        );
        cx.record_clock(&host, clock, 0);
        cx.end_after(lasts_ms, move |cx| {
            if let Some(clock) = cx.world.clocks.get(&host) {
                clock.set_drift(cx.now, clock.drift_ppm().saturating_sub(applied));
                cx.record_clock(&host, clock, 0);
            }
            cx.record(
                &host,
                FaultPhase::End,
                format!(
                    "NTP's slew of {host}'s clock is done ({direction} by {} ms)",
                    delta_ms.unsigned_abs()
                ),
            );
        });
    }
}
