//! Crashes: a host's process (`kill -9`: its connections reset at once) or its machine
//! (a black hole until it is back), optionally restarted later. A server's last record
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
            cx.world.net.reset_host(&host);
        }
        cx.world.recorder.forget_host(&host);
        let what = if machine { "machine crash" } else { "crash" };
        cx.record(
            &host,
            FaultPhase::Start,
            format!("{what} {host}{}", cx.moment),
        );
        if let Some(sentinel) = cx.world.sentinel(&host) {
            sentinel.crash();
        }
        if let Some(zk) = &mut cx.world.zk {
            zk.crashed(&host);
        }
        if let Some(mysql) = &cx.world.mysql {
            // What its disk keeps, by innodb_flush_log_at_trx_commit; what it lost is
            // recorded when it recovers.
            mysql.crashed(&host, machine, cx.now);
        }
        if let Some(server) = cx.world.server(&host).cloned() {
            if let Some(engine) = server.engine() {
                cx.world.observer.commands_of_dead_engines +=
                    engine.with_engine(|e| e.engine.commands_processed());
            }
            server.crash(machine);
            if !server.persists() {
                // Without persistence the memory was all there was; with it, what came
                // back is compared with the record at restart.
                let world = &mut *cx.world;
                world.observer.lose_all(&host, &world.recorder, cx.now);
            }
        }
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
