//! Crashes: a host's process (`kill -9`: its peers read what it had sent, then the end
//! of the stream) or its machine (a black hole until it is back, then its old
//! connections reset), optionally restarted later. A server's last record
//! is taken first; without persistence its memory is lost with it.

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Crashes every running host `target` names (its machine, with `machine`), and
/// restarts it `restart_after_ms` later, if given.
pub(super) fn start(cx: &mut Cx, target: &Target, restart_after_ms: Option<u64>, machine: bool) {
    for host in cx.resolve(target) {
        if !cx.sim.is_host_running(host.as_str()) {
            continue;
        }
        // The server's last record first: its memory is about to go.
        cx.world.observe(cx.now);
        cx.sim.crash(host.as_str());
        if machine {
            cx.world.net.black_hole(&host);
        } else {
            let outlived = cx.world.net.process_died(&host);
            debug_assert_eq!(outlived, 0, "{host}'s streams outlived its crash");
        }
        cx.world.recorder.forget_host(&host);
        let what = if machine { "machine crash" } else { "crash" };
        cx.record(
            &host,
            FaultPhase::Start,
            format!("{what} {host}{}", cx.moment),
        );
        // What the crash does to what each system keeps (its disk, its memory).
        let world = &mut *cx.world;
        world
            .systems
            .crashed(&host, machine, cx.now, &world.recorder);
        if let Some(ms) = restart_after_ms {
            cx.end_after(ms, move |cx| {
                if machine {
                    cx.world.net.machine_back(&host);
                }
                cx.sim.bounce(host.as_str());
                cx.record(&host, FaultPhase::End, format!("{host} restarts"));
            });
        }
    }
}
