//! Clock faults in a real run: a server's wall clock moves through locksim's clock
//! shim (`clock.rs`, for the servers whose system starts them under it), a client's
//! through its process's `Deps` clock and the parent's copy of it.

use std::sync::Arc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use sim::clock::{HostClock, real_since};
use sim::faults::Target;
use sim::history::{EventKind, FaultPhase};

use super::{Moment, Run, write_line};

impl Run {
    /// Steps each host `target` names by `delta_ms`, recording the step.
    pub(super) fn clock_jump(
        &self,
        index: usize,
        target: &Target,
        delta_ms: i64,
        rng: &mut ChaCha8Rng,
        m: &Moment,
    ) {
        for host in self.resolve(target, rng, m) {
            if !self.step_clock(&host, delta_ms) {
                continue;
            }
            let direction = if delta_ms >= 0 { "forward" } else { "back" };
            self.fault(
                &host,
                index,
                FaultPhase::Start,
                format!(
                    "{host}'s wall clock jumps {direction} by {} ms{}",
                    delta_ms.unsigned_abs(),
                    m.detail
                ),
            );
        }
    }

    /// NTP's slew of each host `target` names: its clock runs `rate_ppm` faster (or
    /// slower) until it has moved by `delta_ms`.
    pub(super) fn clock_slew(
        self: &Arc<Self>,
        index: usize,
        target: &Target,
        delta_ms: i64,
        rate_ppm: u64,
        rng: &mut ChaCha8Rng,
        m: &Moment,
    ) {
        let Ok(rate) = i64::try_from(rate_ppm) else {
            return;
        };
        if rate == 0 || delta_ms == 0 {
            return;
        }
        let change = rate * delta_ms.signum();
        let lasts_ms =
            (u128::from(delta_ms.unsigned_abs()) * 1_000_000).div_ceil(u128::from(rate_ppm));
        let lasts_ms = u64::try_from(lasts_ms).unwrap_or(u64::MAX);
        let direction = if delta_ms >= 0 { "forward" } else { "back" };
        for host in self.resolve(target, rng, m) {
            let detail = format!(
                "NTP slews {host}'s wall clock {direction} by {} ms at {rate_ppm} ppm for \
                 {lasts_ms} ms{}",
                delta_ms.unsigned_abs(),
                m.detail
            );
            let end = format!(
                "NTP's slew of {host}'s clock is done ({direction} by {} ms)",
                delta_ms.unsigned_abs()
            );
            self.clock_rate(
                index,
                &host,
                |before| before.saturating_add(change).max(-999_999),
                Some(lasts_ms),
                detail,
                Some(end),
            );
        }
    }

    /// Steps `host`'s wall clock by `delta_ms`: a server's through the clock
    /// shim, a client's in its process (its `Deps` clock) and in the parent's copy.
    /// False if `host` has no clock the run moves.
    pub(super) fn step_clock(&self, host: &str, delta_ms: i64) -> bool {
        // A server's lock value and expiry count just before the step, by its
        // answers: a key the step expires is then known by the server's own count.
        let key = self.cfg.workload.key.clone();
        let mut ask = self.servers.lock().expect("servers").ask(host);
        let before = ask.as_mut().map(|a| {
            let value = a.lock_value(&key);
            if let Some(v) = value.clone() {
                self.note_lock_value(host, v, "gone");
            }
            (value.flatten(), a.expired_keys())
        });
        let moved = if let Some(clock) = self.servers.lock().expect("servers").clock(host) {
            clock.step(delta_ms);
            Some((clock.wall_offset_us(), clock.drift_ppm()))
        } else {
            None
        };
        let moved = moved.or_else(|| {
            let clocks = self.client_clocks.lock().expect("client clocks");
            let clock = clocks.get(host)?;
            clock.step(delta_ms);
            if let Some(c) = self.clients.lock().expect("clients").get(host) {
                write_line(&c.stdin, &format!("C {delta_ms}"));
            }
            Some((
                clock.wall_offset_us(real_since(self.epoch_ns)),
                clock.drift_ppm(),
            ))
        });
        let Some((wall_offset_us, drift_ppm)) = moved else {
            return false;
        };
        self.record_clock(host, wall_offset_us, drift_ppm, delta_ms);
        // Asked again at once (a server that expires a key on access does so by its own
        // clock): gone,
        // with the server's `expired_keys` count up, is an expiry the step caused.
        if let (Some(a), Some((Some(_), Some(expired_before)))) = (ask.as_mut(), before)
            && a.lock_value(&key) == Some(None)
            && a.expired_keys().is_some_and(|n| n > expired_before)
        {
            self.note_lock_value(host, None, "expired");
        }
        true
    }

    /// Records `host`'s clock after a change (a step of `step_ms`, or 0 for a new
    /// rate), as the simulator's nemesis does: the probes read these.
    fn record_clock(&self, host: &str, wall_offset_us: i64, drift_ppm: i64, step_ms: i64) {
        self.recorder.record_at(
            self.now_us(),
            host,
            EventKind::Clock {
                wall_offset_us,
                drift_ppm,
                step_ms,
            },
        );
    }

    /// `host`'s clock's rate error now, if the run moves its clock.
    fn drift_of(&self, host: &str) -> Option<i64> {
        if let Some(clock) = self.servers.lock().expect("servers").clock(host) {
            return Some(clock.drift_ppm());
        }
        let clocks = self.client_clocks.lock().expect("client clocks");
        clocks.get(host).map(HostClock::drift_ppm)
    }

    /// From now on `host`'s clock runs at `ppm` (a client's from the true time the
    /// parent says, so a stopped process applies it from the right moment).
    fn set_drift(&self, host: &str, ppm: i64) {
        let server = self
            .servers
            .lock()
            .expect("servers")
            .clock(host)
            .map(|clock| {
                clock.set_drift(ppm);
                clock.wall_offset_us()
            });
        if let Some(wall_offset_us) = server {
            self.record_clock(host, wall_offset_us, ppm, 0);
            return;
        }
        let clocks = self.client_clocks.lock().expect("client clocks");
        let Some(clock) = clocks.get(host) else {
            return;
        };
        let at_us = self.now_us();
        let at = Duration::from_micros(at_us);
        clock.set_drift(at, ppm);
        if let Some(c) = self.clients.lock().expect("clients").get(host) {
            write_line(&c.stdin, &format!("R {ppm} {at_us}"));
        }
        self.record_clock(host, clock.wall_offset_us(at), ppm, 0);
    }

    /// Runs `host`'s clock (a server's or a client's) at `rate(its rate now)` ppm, for
    /// `duration_ms` (then at its former rate) or to the end; records the start
    /// (`detail`) and the end (`end`, or "runs at N ppm again").
    pub(super) fn clock_rate(
        self: &Arc<Self>,
        index: usize,
        host: &str,
        rate: impl FnOnce(i64) -> i64,
        duration_ms: Option<u64>,
        detail: String,
        end: Option<String>,
    ) {
        let Some(before) = self.drift_of(host) else {
            return;
        };
        self.set_drift(host, rate(before));
        self.fault(host, index, FaultPhase::Start, detail);
        if let Some(ms) = duration_ms {
            let (run, host) = (self.clone(), host.to_string());
            std::thread::spawn(move || {
                let full = run.sleep_unless_over(ms);
                run.set_drift(&host, before);
                if full {
                    let end =
                        end.unwrap_or_else(|| format!("{host}'s clock runs at {before} ppm again"));
                    run.fault(&host, index, FaultPhase::End, end);
                }
            });
        }
    }
}
