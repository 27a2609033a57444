//! Real servers behind the verdicts (`locksim run --real`): the same lock code, the
//! same workload, the same fault plan and the same checkers, with real processes.
//!
//! - The parent starts the world's servers, each system's through its plugin
//!   ([`system`] is what the runner asks of a system, `systems/` holds one module per
//!   system and the one list of them), and one client process per client host
//!   ([`child`]: this binary in its client role); it keeps the protected storage.
//! - It plays the fault plan with real signals and a fault proxy in front of every
//!   server ([`net`]), waiting for a target's moment by the servers' own answers, and
//!   assembles one history on the machine's monotonic clock, which the simulator's
//!   checkers judge as they judge a simulated run.
//! - A real run cannot be replayed byte for byte; it keeps the plan it applied (the
//!   seed's), so `locksim run` without `--real` runs the same plan beside it.
//! - What is not made real yet is refused before anything starts, with one line
//!   naming why ([`refusals`]).
//! - A client may be any program that speaks the client protocol ([`foreign`],
//!   `docs/clients.md`) in place of this binary's client role.

pub mod child;
mod clock;
mod clock_faults;
mod faults;
pub mod foreign;
pub mod net;
mod record;
mod refuse;
mod servers;
mod system;
mod systems;
mod targets;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::clock::{ClockSpec, HostClock, monotonic_ns, real_since};
use sim::faults::{FaultKind, Target};
use sim::history::{
    Event, EventKind, FaultPhase, History, RunParams, RunStats, ServerEvent, StorageEvent,
};
use sim::recorder::Recorder;
use sim::world::RunConfig;

use net::Net;
pub use refuse::{needs_net, refusal, refusals};
use servers::Servers;
use system::{Login, Precut, StartCtx};

/// The moment a fault that waits for one came: the host its target names then, and
/// why (appended to its start record, as the simulator's).
#[derive(Default)]
struct Moment {
    host: Option<String>,
    detail: String,
}

/// One client process.
struct ClientProc {
    pid: u32,
    stdin: Arc<Mutex<ChildStdin>>,
    incarnation: u64,
    /// A pause armed for its next write: the fault's index and length.
    armed: Option<(usize, u64)>,
    child: std::process::Child,
    /// Whether it leads its own process group (a foreign client's command and every
    /// process it starts), which every signal then reaches.
    group: bool,
}

impl ClientProc {
    /// Kills it (its whole group, for a foreign client) and reaps it.
    fn kill(&mut self) {
        if self.group {
            signal_group(self.pid, libc::SIGCONT);
            signal_group(self.pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the client processes are.
pub(crate) enum Clients {
    /// This binary (`exe`) in its client role, running the design's own code.
    Locksim(PathBuf),
    /// Any program speaking the client protocol.
    Foreign(foreign::Foreign),
}

/// The state the parent's threads share during a run.
struct Run {
    cfg: RunConfig,
    exe: Clients,
    recorder: Recorder,
    storage: sim::storage::Shared,
    epoch_ns: u64,
    clients: Mutex<BTreeMap<String, ClientProc>>,
    servers: Mutex<Servers>,
    addrs: BTreeMap<String, std::net::SocketAddr>,
    /// The fault proxy, when the plan needs one.
    net: Option<Arc<Net>>,
    /// Acquires invoked and granted so far (a waiting fault's moment).
    acquires: AtomicU64,
    grants: AtomicU64,
    /// The servers' credentials for the clients, when a launcher made them.
    login: Option<Login>,
    horizon_ms: AtomicU64,
    /// Per host, when its last pause ends (µs of true time).
    pause_until: Mutex<BTreeMap<String, u64>>,
    /// Each client host's clock as the parent keeps it (the machine's, which outlives
    /// its process): every change is sent to the process, and a restarted process
    /// starts from it.
    client_clocks: Mutex<BTreeMap<String, HostClock>>,
    /// What each server held under the lock key when last asked (absent: no
    /// key): the servers' own record, sampled (see [`Run::note_lock_value`]).
    lock_values: Mutex<BTreeMap<String, String>>,
    /// Every owner value a client was granted the lock with → that client: how a
    /// server's value names its client when the value does not (a foreign client's
    /// library makes its own owner values).
    owners: Mutex<HashMap<String, String>>,
    /// Servers killed and not yet back: the poller leaves their record alone
    /// (their restart records what it lost).
    down: Mutex<std::collections::BTreeSet<String>>,
    over: AtomicBool,
    /// Why the run cannot go on (a client broke the protocol): it ends at once, and
    /// this is its error.
    broken: Mutex<Option<String>>,
    readers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: a plain kill(2) on a child this process started.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// `sig` to the process group `pid` leads (a foreign client's).
fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: a plain killpg(2) on a group a child of this process leads.
    unsafe { libc::killpg(pid as libc::pid_t, sig) };
}

fn write_line(stdin: &Mutex<ChildStdin>, line: &str) {
    let mut s = stdin.lock().unwrap_or_else(|e| e.into_inner());
    let _ = s.write_all(line.as_bytes());
    let _ = s.write_all(b"\n");
    let _ = s.flush();
}

impl Run {
    fn now_us(&self) -> u64 {
        real_since(self.epoch_ns).as_micros() as u64
    }

    fn fault(&self, host: &str, fault: usize, phase: FaultPhase, detail: String) {
        self.fault_peers(host, fault, phase, detail, Vec::new());
    }

    fn fault_peers(
        &self,
        host: &str,
        fault: usize,
        phase: FaultPhase,
        detail: String,
        peers: Vec<String>,
    ) {
        self.recorder.record_at(
            self.now_us(),
            host,
            EventKind::Fault {
                fault,
                phase,
                detail,
                peers,
            },
        );
    }

    /// Sleeps `ms`, in steps, unless the run ends first; true if it slept it all.
    fn sleep_unless_over(&self, ms: u64) -> bool {
        self.sleep_until_unless_over(self.now_us() + ms * 1000)
    }

    /// Sleeps until `until` µs of the run's time, in steps, unless the run ends first;
    /// true if it slept it all.
    fn sleep_until_unless_over(&self, until: u64) -> bool {
        loop {
            if self.over.load(Ordering::Relaxed) {
                return false;
            }
            let now = self.now_us();
            if now >= until {
                return true;
            }
            std::thread::sleep(Duration::from_micros((until - now).min(20_000)));
        }
    }

    /// Ends the run at once with `why` (the first reason given wins).
    fn break_run(&self, why: String) {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
        self.over.store(true, Ordering::Relaxed);
    }

    /// `sig` to process `pid`: to its whole group if it is a foreign client's.
    fn signal_pid(&self, pid: u32, sig: libc::c_int) {
        let group = self
            .clients
            .lock()
            .expect("clients")
            .values()
            .any(|c| c.pid == pid && c.group);
        if group {
            signal_group(pid, sig);
        } else {
            signal(pid, sig);
        }
    }

    /// Starts (or restarts) client `name`'s process (a foreign client's from
    /// `started`, if it was started before the servers).
    fn spawn_client(
        self: &Arc<Self>,
        name: &str,
        index: u64,
        incarnation: u64,
        started: Option<foreign::Started>,
    ) -> Result<(), String> {
        let exe = match &self.exe {
            Clients::Locksim(exe) => exe,
            Clients::Foreign(f) => return self.spawn_foreign(f, name, index, incarnation, started),
        };
        let config = child::ClientConfig {
            design: self.cfg.design.clone(),
            name: name.to_string(),
            index,
            incarnation,
            seed: self.cfg.seed,
            workload: self.cfg.workload.clone(),
            epoch_ns: self.epoch_ns,
            addrs: self
                .net
                .as_ref()
                .and_then(|n| n.client_addrs.get(name).cloned())
                .unwrap_or_else(|| self.addrs.clone()),
            net: self.net.as_ref().map(|n| n.client_net(name)),
            login: self.login.clone(),
            clock: self
                .client_clocks
                .lock()
                .expect("client clocks")
                .get(name)
                .map(|c| {
                    let now = real_since(self.epoch_ns);
                    child::StartClock {
                        wall_offset_us: c.wall_offset_us(now),
                        drift_ppm: c.drift_ppm(),
                    }
                }),
        };
        let mut cmd = Command::new(exe);
        cmd.arg("__client")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("LOCKSIM_REAL_DEBUG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        let mut child = lock_impl::testing::servers::spawn_kept(cmd)
            .map_err(|e| format!("cannot start client process {}: {e}", exe.display()))?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped")));
        let stdout = child.stdout.take().expect("piped");
        write_line(
            &stdin,
            &serde_json::to_string(&config).expect("serializable"),
        );
        let pid = child.id();
        self.clients.lock().expect("clients").insert(
            name.to_string(),
            ClientProc {
                pid,
                stdin: stdin.clone(),
                incarnation,
                armed: None,
                child,
                group: false,
            },
        );
        let run = self.clone();
        let host = name.to_string();
        let reader = std::thread::spawn(move || run.read_client(&host, stdout, &stdin));
        self.readers.lock().expect("readers").push(reader);
        Ok(())
    }

    /// Serves one client process's lines until it exits.
    fn read_client(
        self: &Arc<Self>,
        host: &str,
        stdout: std::process::ChildStdout,
        stdin: &Mutex<ChildStdin>,
    ) {
        let mut ids: HashMap<u64, u64> = HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let (tag, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            match tag {
                "E" => {
                    let Ok(event) = serde_json::from_str::<Event>(rest) else {
                        continue;
                    };
                    match event.kind {
                        EventKind::Op(op) => {
                            self.ingest_op(host, event.at_us, op, &mut ids);
                        }
                        kind => self.recorder.record_at(event.at_us, host, kind),
                    }
                }
                "S" => self.serve_storage(rest, stdin),
                "H" => self.note_horizon(rest.parse().unwrap_or(0)),
                "P" => self.pause_point(host, stdin),
                _ => {}
            }
        }
    }

    /// Records client `host`'s operation event (its own op ids in `ids`, mapped to
    /// the history's).
    fn ingest_op(
        &self,
        host: &str,
        at_us: u64,
        mut op: sim::history::Op,
        ids: &mut HashMap<u64, u64>,
    ) {
        if op.f == sim::history::OpF::Acquire {
            match op.phase {
                sim::history::Phase::Invoke => {
                    self.acquires.fetch_add(1, Ordering::Relaxed);
                }
                sim::history::Phase::Ok => {
                    self.grants.fetch_add(1, Ordering::Relaxed);
                    if let Some(owner) = &op.owner {
                        let mut owners = self.owners.lock().expect("owners");
                        owners.insert(owner.clone(), host.to_string());
                    }
                }
                _ => {}
            }
        }
        let local = op.op;
        if op.phase == sim::history::Phase::Invoke {
            let id = self.recorder.ingest_op(at_us, host, op);
            ids.insert(local, id);
        } else if let Some(id) = ids.remove(&local) {
            op.op = id;
            self.recorder.ingest_op(at_us, host, op);
        }
    }

    /// A client's storage request `request` (`S <request>`), answered on its stdin.
    fn serve_storage(&self, request: &str, stdin: &Mutex<ChildStdin>) {
        let reply = self.storage.handle(request, &self.recorder, self.now_us());
        write_line(stdin, &format!("S {}", reply.trim_end()));
    }

    /// A client's retry horizon (`H <ms>`).
    fn note_horizon(&self, ms: u64) {
        self.horizon_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Client `host` is just before its write (`P`): an armed pause strikes now; the
    /// client goes on at the `P` it is sent back.
    fn pause_point(self: &Arc<Self>, host: &str, stdin: &Mutex<ChildStdin>) {
        let armed = {
            let mut clients = self.clients.lock().expect("clients");
            clients
                .get_mut(host)
                .and_then(|c| c.armed.take().map(|a| (c.pid, a)))
        };
        if let Some((pid, (fault, ms))) = armed {
            self.pause(
                host,
                pid,
                fault,
                ms,
                format!("pause {host} for {ms} ms, just before its write"),
            );
        }
        write_line(stdin, "P");
    }

    /// Stops process `pid` (host `host`) for `ms`, recording the pause; overlapping
    /// pauses of one host end when the last ends.
    fn pause(self: &Arc<Self>, host: &str, pid: u32, fault: usize, ms: u64, detail: String) {
        self.signal_pid(pid, libc::SIGSTOP);
        let start = self.now_us();
        let until = start + ms * 1000;
        {
            let mut p = self.pause_until.lock().expect("pauses");
            let e = p.entry(host.to_string()).or_insert(0);
            *e = (*e).max(until);
        }
        self.fault(host, fault, FaultPhase::Start, detail);
        let run = self.clone();
        let host = host.to_string();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            let last = run
                .pause_until
                .lock()
                .expect("pauses")
                .get(&host)
                .is_none_or(|u| *u <= run.now_us());
            if last {
                run.signal_pid(pid, libc::SIGCONT);
            }
            run.fault(
                &host,
                fault,
                FaultPhase::End,
                format!("pause of {host} ends"),
            );
        });
    }

    fn pid(&self, host: &str) -> Option<u32> {
        if let Some(c) = self.clients.lock().expect("clients").get(host) {
            return Some(c.pid);
        }
        self.servers.lock().expect("servers").pid(host)
    }
}

/// Ends the partitions cut before the servers started (idempotent).
fn heal_precuts(run: &Run, ids: &[u64]) {
    if let Some(net) = &run.net {
        for id in ids {
            net.heal(*id);
        }
    }
}

/// `client-N` → N − 1.
fn client_index(host: &str) -> u64 {
    host.strip_prefix("client-")
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |n| n.saturating_sub(1))
}

/// Partitions between named hosts at 0 ms: in force from the start, cut before the
/// servers start, as the simulated world starts with them.
fn precuts(cfg: &RunConfig) -> Vec<Precut> {
    cfg.plan
        .faults
        .iter()
        .filter(|f| f.at_ms == 0)
        .filter_map(|f| match &f.kind {
            FaultKind::Partition { a, b, one_way, .. } => {
                let hosts = |side: &[Target]| -> Option<std::collections::BTreeSet<String>> {
                    side.iter()
                        .map(|t| match t {
                            Target::Host(h) => Some(h.clone()),
                            _ => None,
                        })
                        .collect()
                };
                Some((hosts(a)?, hosts(b)?, *one_way))
            }
            _ => None,
        })
        .collect()
}

/// Starts the world's servers, and the run's shared state over them (its epoch now).
fn start(cfg: &RunConfig, exe: Clients) -> Result<(Arc<Run>, Vec<u64>), String> {
    let w = &cfg.workload;
    let client_names: Vec<String> = (0..w.clients)
        .map(|i| format!("client-{}", i + 1))
        .collect();
    // Every server whose clock can move runs under the clock shim when the plan moves a
    // clock (which one a target names is known only when the fault comes).
    let systems = servers::in_world(w);
    let clocked: Vec<String> = if refuse::moves_clocks(&cfg.plan) {
        systems.iter().flat_map(|s| s.clocked_hosts(w)).collect()
    } else {
        Vec::new()
    };
    let precuts = precuts(cfg);
    let ctx = StartCtx {
        net: needs_net(&cfg.plan),
        clients: &client_names,
        precuts: &precuts,
        clocked: &clocked,
        seed: cfg.seed,
    };
    let mut servers = Servers::start(w, &ctx)?;
    let precut_ids = std::mem::take(&mut servers.precut_ids);
    let net = servers.net.take().map(Arc::new);
    let epoch_ns = monotonic_ns();
    let recorder = Recorder::new();
    // Each server's role at the start, as the simulator records it.
    for (host, role) in systems.iter().flat_map(|s| s.start_roles(w)) {
        recorder.record_at(0, &host, EventKind::Server(ServerEvent::Role { role }));
    }
    let run = Arc::new(Run {
        cfg: cfg.clone(),
        exe,
        storage: sim::storage::Shared::new(w.initial_stock, w.fencing),
        recorder,
        epoch_ns,
        addrs: servers.addrs.clone(),
        net,
        acquires: AtomicU64::new(0),
        grants: AtomicU64::new(0),
        login: servers.login(),
        clients: Mutex::new(BTreeMap::new()),
        servers: Mutex::new(servers),
        horizon_ms: AtomicU64::new(0),
        pause_until: Mutex::new(BTreeMap::new()),
        client_clocks: Mutex::new(
            (1..=w.clients)
                .map(|i| {
                    let spec = cfg
                        .client_clocks
                        .get(i as usize - 1)
                        .copied()
                        .unwrap_or_default();
                    (format!("client-{i}"), HostClock::new(spec))
                })
                .collect(),
        ),
        lock_values: Mutex::new(BTreeMap::new()),
        owners: Mutex::new(HashMap::new()),
        down: Mutex::new(Default::default()),
        over: AtomicBool::new(false),
        broken: Mutex::new(None),
        readers: Mutex::new(Vec::new()),
    });
    // An imperfect client clock is recorded at time zero, as the simulator does.
    for (i, spec) in cfg.client_clocks.iter().enumerate() {
        if *spec != ClockSpec::default() && (i as u64) < u64::from(w.clients) {
            run.recorder.record_at(
                0,
                &format!("client-{}", i + 1),
                EventKind::Clock {
                    wall_offset_us: spec.offset_ms * 1000,
                    drift_ppm: spec.drift_ppm,
                    step_ms: 0,
                },
            );
        }
    }
    Ok((run, precut_ids))
}

/// Whether `kind` waits for its target's moment.
fn waits(kind: &FaultKind) -> bool {
    kind.targets().into_iter().any(|t| {
        matches!(
            t,
            Target::UnreplicatedLockMaster { .. }
                | Target::FreshLockMaster { .. }
                | Target::LockServerOf { .. }
                | Target::LeaderAfterLockCreate { .. }
        )
    })
}

/// The nemesis: each fault at its time, in time order (ties: plan order), until the
/// run's end; the precuts healed once the plan's own faults at 0 ms hold.
fn play(run: &Arc<Run>, precut_ids: &[u64], end: Duration) {
    let cfg = &run.cfg;
    let mut order: Vec<usize> = (0..cfg.plan.faults.len()).collect();
    order.sort_by_key(|&i| (cfg.plan.faults[i].at_ms, i));
    let mut rng = ChaCha8Rng::seed_from_u64(sim::seed::sub_seed(
        cfg.seed,
        sim::seed::stream::REAL_NEMESIS,
    ));
    let mut precuts_healed = false;
    for i in order {
        let at = Duration::from_millis(cfg.plan.faults[i].at_ms);
        if at >= end {
            break;
        }
        if !precuts_healed && at > Duration::ZERO {
            // The plan's own partitions at 0 ms now hold what the precuts held.
            heal_precuts(run, precut_ids);
            precuts_healed = true;
        }
        if !run.sleep_until_unless_over(at.as_micros() as u64) {
            break;
        }
        let kind = cfg.plan.faults[i].kind.clone();
        if waits(&kind) {
            // It waits for its moment on its own thread; the plan goes on.
            let (run, mut rng) = (run.clone(), ChaCha8Rng::seed_from_u64(rng.random()));
            std::thread::spawn(move || run.apply(i, &kind, &mut rng));
        } else {
            run.apply(i, &kind, &mut rng);
        }
    }
    heal_precuts(run, precut_ids);
}

/// The run is over: every client process goes (resumed first, so nothing lingers
/// stopped), its last lines are read, the proxy stops, the storage's finals are
/// recorded and the servers' logs kept in `logs`.
fn wind_down(run: &Run, end_us: u64, logs: Option<&Path>) {
    let clients = std::mem::take(&mut *run.clients.lock().expect("clients"));
    for (_, mut c) in clients {
        signal(c.pid, libc::SIGCONT);
        c.kill();
    }
    let readers = std::mem::take(&mut *run.readers.lock().expect("readers"));
    for r in readers {
        let _ = r.join();
    }
    if let Some(net) = &run.net {
        net.shutdown();
    }
    for (segment, value) in run.storage.finals() {
        run.recorder.record_at(
            end_us,
            "storage",
            EventKind::Storage(StorageEvent::Final { value, segment }),
        );
    }
    if let Some(dir) = logs {
        let _ = std::fs::create_dir_all(dir);
        for (name, path) in run.servers.lock().expect("servers").logs() {
            let _ = std::fs::copy(&path, dir.join(format!("{name}.log")));
        }
    }
}

/// Runs `cfg` against real servers with client processes started from `exe` (this
/// binary, in its `__client` role), and returns its history; `Err` if something the
/// run needs could not be started (a missing package, a refused fault: the message
/// says which).
///
/// Each server's log is copied into `logs` (as `<server>.log`) when the run ends, if
/// given, so a run whose verdict needs them keeps them.
pub fn run_real(cfg: &RunConfig, exe: &Path, logs: Option<&Path>) -> Result<History, String> {
    run_real_with(cfg, Clients::Locksim(exe.to_path_buf()), logs)
}

/// [`run_real`] with the client processes `clients` says. A foreign client's
/// processes are started and say their hello before the servers start; one that
/// breaks the protocol ends the run: every process is ended and the error names it.
pub(crate) fn run_real_with(
    cfg: &RunConfig,
    clients: Clients,
    logs: Option<&Path>,
) -> Result<History, String> {
    let w = &cfg.workload;
    let mut why = refusals(&cfg.design, w, &cfg.plan);
    if let Clients::Foreign(_) = &clients {
        why.extend(foreign::refusals(w, &cfg.plan));
    }
    if !why.is_empty() {
        return Err(format!(
            "cannot run this cell against real servers: {}",
            why.join("; ")
        ));
    }
    let mut started = match &clients {
        Clients::Foreign(f) => foreign::start_all(f, w.clients)?,
        Clients::Locksim(_) => Vec::new(),
    }
    .into_iter();
    let (run, precut_ids) = start(cfg, clients)?;
    for i in 0..u64::from(w.clients) {
        if let Err(e) = run.spawn_client(&format!("client-{}", i + 1), i, 0, started.next()) {
            run.break_run(e);
            break;
        }
    }
    // The servers' own answers (lock values, roles, sessions), each system's watchers
    // on their own threads.
    let watchers = run
        .servers
        .lock()
        .expect("servers")
        .watchers(&cfg.workload.key);
    let watching = (!watchers.is_empty()).then(|| {
        let run = run.clone();
        std::thread::spawn(move || run.watch_servers(watchers))
    });
    let end = Duration::from_millis(w.duration_ms + w.drain_ms);
    if !run.over.load(Ordering::Relaxed) {
        play(&run, &precut_ids, end);
        run.sleep_until_unless_over(end.as_micros() as u64);
    }
    run.over.store(true, Ordering::Relaxed);
    if let Some(w) = watching {
        let _ = w.join();
    }
    let end_us = run.now_us();
    wind_down(&run, end_us, logs);
    if let Some(e) = run.broken.lock().expect("broken").take() {
        return Err(e);
    }
    let horizon = run.horizon_ms.load(Ordering::Relaxed);
    let masters: u32 = servers::in_world(w).iter().map(|s| s.masters(w)).sum();
    let params = RunParams {
        key: w.key.clone(),
        lease_ms: w.lease_ms,
        liveness_bound_ms: w.lease_ms + w.liveness_slack_ms.max(horizon),
        initial_stock: w.initial_stock,
        clients: w.clients,
        masters: masters.max(1),
        segments: w.segments,
        server_records: false,
    };
    let mut events = run.recorder.clone().into_events();
    run.servers.lock().expect("servers").finish(&mut events);
    // Events after the end (a reader's last lines) are not part of the run.
    events.retain(|e| e.at_us <= end_us);
    Ok(History {
        seed: cfg.seed,
        design: cfg.design.clone(),
        scenario: cfg.scenario.clone(),
        params,
        plan: cfg.plan.clone(),
        events,
        end_us,
        stats: RunStats::default(),
    })
}
