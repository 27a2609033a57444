//! The fault plan played against real processes: a pause is `SIGSTOP`/`SIGCONT`, a
//! crash `SIGKILL` and a restart in place (a machine crash also cuts the host off in the
//! fault proxy first), partitions, delays and resets are the proxy's; clock faults are
//! in `clock_faults.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use sim::faults::{FaultKind, Target};
use sim::history::FaultPhase;

use super::{Moment, Run, client_index, write_line};

impl Run {
    /// Applies fault `index` now, once its target's moment (if it waits for one) has
    /// come.
    pub(super) fn apply(self: &Arc<Self>, index: usize, kind: &FaultKind, rng: &mut ChaCha8Rng) {
        let Some(moment) = self.moment(kind) else {
            return;
        };
        let m = &moment;
        match kind {
            FaultKind::Pause {
                target,
                duration_ms,
            } => {
                for host in self.resolve(target, rng, m) {
                    let pid = self.pid(&host);
                    if let Some(pid) = pid {
                        self.pause(
                            &host,
                            pid,
                            index,
                            *duration_ms,
                            format!("pause {host} for {duration_ms} ms"),
                        );
                    }
                }
            }
            FaultKind::Crash {
                target,
                restart_after_ms,
            }
            | FaultKind::MachineCrash {
                target,
                restart_after_ms,
            } => {
                let machine = matches!(kind, FaultKind::MachineCrash { .. });
                for host in self.resolve(target, rng, m) {
                    self.crash(index, &host, *restart_after_ms, &m.detail, machine);
                }
            }
            FaultKind::PauseBeforeWrite {
                target,
                duration_ms,
            } => {
                for host in self.resolve(target, rng, m) {
                    let mut clients = self.clients.lock().expect("clients");
                    if let Some(c) = clients.get_mut(&host) {
                        c.armed = Some((index, *duration_ms));
                        write_line(&c.stdin, &format!("A {duration_ms}"));
                    }
                }
            }
            FaultKind::SlowWork { target, extra_ms } => {
                for host in self.resolve(target, rng, m) {
                    let clients = self.clients.lock().expect("clients");
                    if let Some(c) = clients.get(&host) {
                        write_line(&c.stdin, &format!("W {extra_ms}"));
                        self.fault(
                            &host,
                            index,
                            FaultPhase::Start,
                            format!("{host}'s next critical section runs {extra_ms} ms longer"),
                        );
                    }
                }
            }
            FaultKind::Partition {
                a,
                b,
                one_way,
                duration_ms,
            } => self.partition(index, a, b, *one_way, *duration_ms, rng, m),
            FaultKind::Delay {
                target,
                latency_ms,
                duration_ms,
            } => self.delay(index, target, *latency_ms, *duration_ms, rng, m),
            FaultKind::ResetConnections { target } => self.reset(index, target, rng, m),
            FaultKind::ClockJump { target, delta_ms } => {
                self.clock_jump(index, target, *delta_ms, rng, m);
            }
            FaultKind::ClockDrift {
                target,
                drift_ppm,
                duration_ms,
            } => {
                for host in self.resolve(target, rng, m) {
                    let how_long = duration_ms
                        .map(|ms| format!(" for {ms} ms"))
                        .unwrap_or_default();
                    let detail = format!("{host}'s clock runs at {drift_ppm} ppm{how_long}");
                    self.clock_rate(index, &host, |_| *drift_ppm, *duration_ms, detail, None);
                }
            }
            FaultKind::ClockSlew {
                target,
                delta_ms,
                rate_ppm,
            } => self.clock_slew(index, target, *delta_ms, *rate_ppm, rng, m),
            // Refused before the run started.
            _ => {}
        }
    }

    /// Delays the messages to each host `target` names by `latency_ms` for
    /// `duration_ms`, in the proxy.
    fn delay(
        self: &Arc<Self>,
        index: usize,
        target: &Target,
        latency_ms: u64,
        duration_ms: u64,
        rng: &mut ChaCha8Rng,
        m: &Moment,
    ) {
        let Some(net) = self.net.clone() else { return };
        for host in self.resolve(target, rng, m) {
            let id = net.delay(&host, Duration::from_millis(latency_ms));
            let source = if self.clients.lock().expect("clients").contains_key(&host) {
                self.servers
                    .lock()
                    .expect("servers")
                    .lock_servers
                    .join(", ")
            } else {
                "every host".to_string()
            };
            self.fault(
                &host,
                index,
                FaultPhase::Start,
                format!(
                    "delay messages from {source} to {host} by {latency_ms} ms for \
                     {duration_ms} ms{}",
                    m.detail
                ),
            );
            let (run, net, duration) = (self.clone(), net.clone(), duration_ms);
            std::thread::spawn(move || {
                let full = run.sleep_unless_over(duration);
                net.heal(id);
                if full {
                    run.fault(
                        &host,
                        index,
                        FaultPhase::End,
                        format!("messages to {host} on time again"),
                    );
                }
            });
        }
    }

    /// Resets the connections of each host `target` names (RST on both ends), in the
    /// proxy.
    fn reset(self: &Arc<Self>, index: usize, target: &Target, rng: &mut ChaCha8Rng, m: &Moment) {
        let Some(net) = self.net.clone() else { return };
        let servers = self.servers.lock().expect("servers").lock_servers.clone();
        for host in self.resolve(target, rng, m) {
            // The server sessions that hold the lock before the reset (a
            // `GET_LOCK`'s, a `FOR UPDATE` transaction's), by the servers'
            // answers: their end, if the reset ends them, is the servers' record.
            let key = &self.cfg.workload.key;
            let watches = self
                .servers
                .lock()
                .expect("servers")
                .sessions_holding(&host, key);
            let n = net.reset(&host, &servers);
            for watch in watches {
                self.watch_session_end(watch);
            }
            self.fault(
                &host,
                index,
                FaultPhase::Start,
                format!(
                    "{host}'s connections to {} reset ({n} connections, RST on both \
                     ends){}",
                    servers.join(", "),
                    m.detail
                ),
            );
        }
    }

    /// Cuts the hosts `a` names off from those `b` names (`Rest`: every host not on the
    /// other side) for `duration_ms`, in the proxy; a no-op if either side is empty.
    #[allow(clippy::too_many_arguments)]
    fn partition(
        self: &Arc<Self>,
        index: usize,
        a: &[Target],
        b: &[Target],
        one_way: bool,
        duration_ms: u64,
        rng: &mut ChaCha8Rng,
        m: &Moment,
    ) {
        let Some(net) = self.net.clone() else { return };
        let mut side_a = self.side(a, rng, m);
        let mut side_b = self.side(b, rng, m);
        // As the simulator's: a host is on one side only.
        sim::faults::disjoint_sides(a, &mut side_a, &mut side_b);
        if side_a.is_empty() || side_b.is_empty() {
            return;
        }
        let id = net.cut(
            side_a.iter().cloned().collect(),
            side_b.iter().cloned().collect(),
            one_way,
        );
        // What each cut-off server holds, by its answer right after the cut (the
        // parent's own connections are not cut): the record at the fault's start, which
        // a 20 ms sample can miss for a write just before a cut aimed at it.
        self.sample_lock_values(side_a.iter().chain(side_b.iter()));
        let arrow = if one_way { "->" } else { "<->" };
        let detail = format!("[{}] {arrow} [{}]", side_a.join(", "), side_b.join(", "));
        for host in &side_a {
            self.fault_peers(
                host,
                index,
                FaultPhase::Start,
                format!("partition {detail} for {duration_ms} ms{}", m.detail),
                side_b.clone(),
            );
        }
        let run = self.clone();
        std::thread::spawn(move || {
            let full = run.sleep_unless_over(duration_ms);
            net.heal(id);
            if full {
                for host in &side_a {
                    run.fault(
                        host,
                        index,
                        FaultPhase::End,
                        format!("partition heals: {detail}"),
                    );
                }
            }
        });
    }

    /// Kills `host`'s process (`SIGKILL`), and with `machine` its machine: first cut
    /// off from every host in the proxy, so nothing it had not delivered (nor its
    /// kernel's `FIN`s) gets through; when it is back, its old connections are reset.
    /// Restarted `restart_after_ms` later, if given.
    fn crash(
        self: &Arc<Self>,
        index: usize,
        host: &str,
        restart_after_ms: Option<u64>,
        moment: &str,
        machine: bool,
    ) {
        let black_hole = match (&self.net, machine) {
            (Some(net), true) => Some((net.clone(), net.black_hole(host))),
            _ => None,
        };
        let what = if machine { "machine crash" } else { "crash" };
        // The machine is back: its old connections are reset before it serves again.
        let back = {
            let host = host.to_string();
            move || {
                if let Some((net, id)) = &black_hole {
                    net.machine_back(&host, *id);
                }
            }
        };
        let client = self.clients.lock().expect("clients").remove(host);
        if let Some(mut c) = client {
            c.kill();
            self.recorder.forget_host(host);
            self.fault(
                host,
                index,
                FaultPhase::Start,
                format!("{what} {host}{moment}"),
            );
            if let Some(ms) = restart_after_ms {
                let (run, host) = (self.clone(), host.to_string());
                let next = c.incarnation + 1;
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    if run.over.load(Ordering::Relaxed) {
                        return;
                    }
                    back();
                    let client_index = client_index(&host);
                    match run.spawn_client(&host, client_index, next, None) {
                        Ok(()) => {
                            run.fault(&host, index, FaultPhase::End, format!("{host} restarts"))
                        }
                        // A foreign client that cannot restart broke the protocol.
                        Err(e) if matches!(run.exe, super::Clients::Foreign(_)) => run.break_run(e),
                        Err(_) => {}
                    }
                });
            }
            return;
        }
        // What the server held under the lock key, by its own answer, just before it
        // dies: if it comes back without it, the restart lost the lock.
        let key = self.cfg.workload.key.clone();
        let held = {
            let mut servers = self.servers.lock().expect("servers");
            let held = servers.ask(host).and_then(|mut a| a.lock_value(&key));
            servers.kill(host);
            held
        };
        if let Some(value) = held.clone() {
            self.note_lock_value(host, value, "gone");
        }
        self.down.lock().expect("down").insert(host.to_string());
        let held = held.flatten();
        self.fault(
            host,
            index,
            FaultPhase::Start,
            format!("{what} {host}{moment}"),
        );
        if let Some(ms) = restart_after_ms {
            let (run, host) = (self.clone(), host.to_string());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                if run.over.load(Ordering::Relaxed) {
                    return;
                }
                back();
                let mut servers = run.servers.lock().expect("servers");
                let restarted = servers.restart(&host);
                let back = servers.value_of(&host, &key);
                drop(servers);
                let detail = match restarted {
                    Ok(()) => format!("{host} restarts"),
                    Err(e) => format!("{host} did not restart: {e}"),
                };
                run.fault(&host, index, FaultPhase::End, detail);
                if held.is_some() && back.is_none() {
                    // The server's own answers: it held the value before the crash and
                    // holds nothing after the restart.
                    run.note_lock_value(&host, None, "lost");
                }
                run.down.lock().expect("down").remove(&host);
            });
        }
    }
}
