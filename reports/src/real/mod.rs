//! Real servers behind the verdicts (`locksim run --real`): the same lock code, the
//! same workload, the same fault plan and the same checkers, with real processes.
//!
//! The parent starts the servers the world names ([`servers`]) and one client process
//! per client host ([`child`]: this binary in its client role), keeps the protected
//! storage, plays the fault plan with real signals (`SIGSTOP`/`SIGCONT` for a pause,
//! `SIGKILL` and a restart in place for a crash) and a fault proxy in front of every
//! server ([`net`]: partitions, delays, connection resets), waits for a target's
//! moment by the servers' own answers (an unreplicated or fresh lock write, a client's
//! lock on a server, a ZooKeeper leader's commit), and assembles one history on the
//! machine's monotonic clock, which the simulator's checkers judge as they judge a
//! simulated run. A real run cannot be replayed byte for byte; it keeps the plan it
//! applied (the seed's), so `locksim run` without `--real` runs the same plan in the
//! simulator beside it.
//!
//! What is not made real yet is refused before anything starts, with one line naming
//! why ([`refusals`]): clock faults on Sentinels, ZooKeeper servers or MariaDB (a Redis
//! server's wall clock moves through locksim's clock shim, `clock.rs`; a client's
//! through its process's `Deps` clock, `child.rs`), dropped pub/sub messages,
//! partitions between ZooKeeper servers or a machine crash of one (the ensemble's own
//! links are not behind the proxy), and targets that need a server's internal record
//! (a follower's sessions, an acquisition granted in flight, a `GET_LOCK`'s or a
//! ZooKeeper node's owner).

pub mod child;
mod clock;
pub mod net;
mod record;
mod servers;

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
use sim::faults::{FaultKind, FaultPlan, Target};
use sim::history::{
    Event, EventKind, FaultPhase, History, RunParams, RunStats, ServerEvent, StorageEvent,
};
use sim::recorder::Recorder;
use sim::world::{RunConfig, Workload};

use net::Net;
use record::writer_of;
use servers::Servers;

/// The moment a fault that waits for one came: the host its target names then, and
/// why (appended to its start record, as the simulator's).
#[derive(Default)]
struct Moment {
    host: Option<String>,
    detail: String,
}

/// Why the real runner cannot make `kind` real on this machine, if it cannot.
pub fn refusal(kind: &FaultKind) -> Option<String> {
    let target_ok = |t: &Target| match t {
        Target::Host(_)
        | Target::Holder
        | Target::Acquirer
        | Target::AllClients
        | Target::AllServers
        | Target::Rest
        | Target::LockServer
        | Target::LockOwner
        | Target::Leader
        | Target::UnreplicatedLockMaster { .. }
        | Target::FreshLockMaster { .. }
        | Target::LockServerOf { .. }
        | Target::LeaderAfterLockCreate { .. } => None,
        other => Some(format!(
            "target {other:?} needs a server's internal record (which session a follower \
             serves, which acquisition a server granted in flight), which a real server does \
             not show the runner"
        )),
    };
    let all_ok = |ts: Vec<&Target>| ts.into_iter().find_map(target_ok);
    match kind {
        FaultKind::Pause { .. }
        | FaultKind::Crash { .. }
        | FaultKind::PauseBeforeWrite { .. }
        | FaultKind::SlowWork { .. }
        | FaultKind::Partition { .. }
        | FaultKind::Delay { .. }
        | FaultKind::ResetConnections { .. }
        | FaultKind::MachineCrash { .. } => all_ok(kind.targets()),
        FaultKind::DropPushes { .. } => Some(
            "dropping pub/sub messages needs a proxy that parses RESP pushes, not made real \
             yet"
            .into(),
        ),
        // A Redis server's clock moves through the clock shim (`clock.rs`), a client's
        // through its process's `Deps` clock (`child.rs`); which hosts a target can
        // reach in the world is checked in `refusals`.
        FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::ClockSlew { target, .. } => target_ok(target),
    }
}

/// Why a clock fault on a Sentinel, a ZooKeeper server or MariaDB is refused.
const SERVER_CLOCKS: &str = "clock faults on Sentinels, ZooKeeper servers or MariaDB: a real \
    run moves a Redis server's wall clock (locksim's clock shim, preloaded) and a client's \
    (its process's Deps clock); these servers' clocks are not moved yet";

/// Whether a clock fault on `target` can reach a host the real run cannot move the
/// clock of, in a world whose servers are all Redis (`redis_only`) or not; `server`
/// says whether a host name is a Redis server.
fn clock_target_refused(target: &Target, redis_only: bool, server: &dyn Fn(&str) -> bool) -> bool {
    match target {
        Target::Host(h) => !(server(h) || h.starts_with("client-")),
        Target::Holder
        | Target::Acquirer
        | Target::LockOwner
        | Target::MidAcquire { .. }
        | Target::AllClients => false,
        Target::LockServer
        | Target::LockServerOf { .. }
        | Target::UnreplicatedLockMaster { .. }
        | Target::FreshLockMaster { .. } => !redis_only,
        // Sentinels, ZooKeeper servers, or every host: some clock not moved.
        _ => true,
    }
}

/// Whether `plan` moves a clock.
fn moves_clocks(plan: &FaultPlan) -> bool {
    plan.faults.iter().any(|f| {
        matches!(
            f.kind,
            FaultKind::ClockJump { .. }
                | FaultKind::ClockDrift { .. }
                | FaultKind::ClockSlew { .. }
        )
    })
}

/// Whether a run of `plan` needs the fault proxy (partitions, delays, resets, machine
/// crashes).
pub fn needs_net(plan: &FaultPlan) -> bool {
    plan.faults.iter().any(|f| {
        matches!(
            f.kind,
            FaultKind::Partition { .. }
                | FaultKind::Delay { .. }
                | FaultKind::ResetConnections { .. }
                | FaultKind::MachineCrash { .. }
        )
    })
}

/// Every reason a run of `design` in `w` under `plan` cannot be made real (empty: it
/// can).
pub fn refusals(design: &str, w: &Workload, plan: &FaultPlan) -> Vec<String> {
    let mut why = Vec::new();
    // The systems the runner starts real servers for (`servers.rs`), by name: any other
    // is refused, naming it, so a new system stays model-only until the runner learns
    // to start it, with no line here.
    const REAL: &[&str] = &["Redis", "ZooKeeper", "MySQL"];
    for system in w
        .systems()
        .into_iter()
        .filter(|s| !REAL.contains(&s.name()))
    {
        why.push(match system.name() {
            "MongoDB" => {
                "MongoDB has no Debian package: the mongo-* designs stay model-only".into()
            }
            other => format!("the real runner starts no {other} servers yet"),
        });
    }
    if w.systems
        .mysql
        .as_ref()
        .is_some_and(|m| m.replica.is_some())
    {
        why.push("a MariaDB replica is not started by the real runner yet".into());
    }
    if w.read_share.is_some() || w.segments.is_some() || w.reentrant_depth > 1 {
        why.push(
            "read/write mixes, segmented stocks and reentrant rounds are not in the real \
             client's workload yet"
                .into(),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    let lock_owner = |t: &Target| matches!(t, Target::LockOwner);
    let owner_faults = plan
        .faults
        .iter()
        .any(|f| f.kind.targets().into_iter().any(lock_owner));
    if owner_faults && w.systems.zookeeper.is_some() {
        why.push(
            "target LockOwner reads the lock's value off a Redis server or a MariaDB row; a \
             ZooKeeper node is not mapped to its client yet"
                .into(),
        );
    }
    if owner_faults && w.systems.mysql.is_some() && !design.starts_with("mysql-unique-index") {
        why.push(
            "target LockOwner on MariaDB reads a unique-index row's owner; a GET_LOCK's owner \
             (IS_USED_LOCK's connection id) is not mapped to its client yet"
                .into(),
        );
    }
    // The proxy carries the clients' links and the Redis servers' links to each other;
    // a ZooKeeper ensemble's own links (quorum and election ports) do not go through
    // it.
    if w.systems
        .zookeeper
        .as_ref()
        .is_some_and(|z| z.names().len() > 1)
    {
        let zk = |t: &Target| match t {
            Target::Host(h) => h.starts_with("zk"),
            Target::Leader
            | Target::BusiestFollower
            | Target::LeaderAfterLockCreate { .. }
            | Target::AllServers
            | Target::LockServer
            | Target::Rest => true,
            _ => false,
        };
        if plan.faults.iter().any(|f| match &f.kind {
            FaultKind::Partition { a, b, .. } => a.iter().any(zk) && b.iter().any(zk),
            // A dead machine must drop its links to the other servers too.
            FaultKind::MachineCrash { target, .. } => zk(target),
            _ => false,
        }) {
            why.push(
                "a partition between ZooKeeper servers, or a machine crash of one, needs the \
                 ensemble's own links behind the proxy (quorum and election ports), not made \
                 real yet"
                    .into(),
            );
        }
    }
    for f in &plan.faults {
        if let Some(r) = refusal(&f.kind)
            && seen.insert(r.clone())
        {
            why.push(r);
        }
    }
    // A clock fault reaches a Redis server or a client only.
    let redis_server = |h: &str| w.servers.iter().any(|s| s.name == h);
    let redis_only = w.systems().iter().all(|b| *b == lock_impl::Backend::Redis);
    let elsewhere = plan.faults.iter().any(|f| match &f.kind {
        FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::ClockSlew { target, .. } => {
            clock_target_refused(target, redis_only, &redis_server)
        }
        _ => false,
    });
    if elsewhere && seen.insert(SERVER_CLOCKS.into()) {
        why.push(SERVER_CLOCKS.into());
    }
    why
}

/// One client process.
struct ClientProc {
    pid: u32,
    stdin: Arc<Mutex<ChildStdin>>,
    incarnation: u64,
    /// A pause armed for its next write: the fault's index and length.
    armed: Option<(usize, u64)>,
    child: std::process::Child,
}

/// The state the parent's threads share during a run.
struct Run {
    cfg: RunConfig,
    exe: PathBuf,
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
    mysql_login: Option<(String, String, String)>,
    horizon_ms: AtomicU64,
    /// Per host, when its last pause ends (µs of true time).
    pause_until: Mutex<BTreeMap<String, u64>>,
    /// Each client host's clock as the parent keeps it (the machine's, which outlives
    /// its process): every change is sent to the process, and a restarted process
    /// starts from it.
    client_clocks: Mutex<BTreeMap<String, HostClock>>,
    /// What each Redis server held under the lock key when last asked (absent: no
    /// key): the servers' own record, sampled (see [`Run::note_lock_value`]).
    lock_values: Mutex<BTreeMap<String, String>>,
    /// Redis servers killed and not yet back: the poller leaves their record alone
    /// (their restart records what it lost).
    down: Mutex<std::collections::BTreeSet<String>>,
    over: AtomicBool,
    readers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// ZooKeeper session expiries read off the servers' logs, recorded once the run is
    /// over (see [`Run::record_zk_expiries`]).
    zk_expiries: Mutex<Vec<record::ZkExpiry>>,
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: a plain kill(2) on a child this process started.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
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
        let until = self.now_us() + ms * 1000;
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

    /// Waits for the moment `kind`'s target waits for, if any (`None`: its wait ran
    /// out, the fault is a no-op), by the servers' own answers and the history, polled
    /// every millisecond.
    fn moment(&self, kind: &FaultKind) -> Option<Moment> {
        let waiting = kind.targets().into_iter().find_map(|t| match t {
            Target::UnreplicatedLockMaster { within_ms }
            | Target::FreshLockMaster { within_ms }
            | Target::LockServerOf { within_ms, .. }
            | Target::LeaderAfterLockCreate { within_ms } => Some((t.clone(), *within_ms)),
            _ => None,
        });
        let Some((target, within_ms)) = waiting else {
            return Some(Moment::default());
        };
        let key = self.cfg.workload.key.clone();
        let deadline = self.now_us() + within_ms * 1000;
        let (grants0, acquires0) = (
            self.grants.load(Ordering::Relaxed),
            self.acquires.load(Ordering::Relaxed),
        );
        let mut zxid0: Option<(String, u64)> = None;
        while self.now_us() <= deadline && !self.over.load(Ordering::Relaxed) {
            let found = match &target {
                Target::UnreplicatedLockMaster { .. } => self
                    .servers
                    .lock()
                    .expect("servers")
                    .unreplicated_lock_master(&key)
                    .map(|(host, detail)| Moment {
                        host: Some(host),
                        detail,
                    }),
                Target::FreshLockMaster { .. } if self.grants.load(Ordering::Relaxed) > grants0 => {
                    let servers = self.servers.lock().expect("servers");
                    self.recorder.holders().into_iter().find_map(|c| {
                        let owner = self.recorder.holder_owner(&c)?;
                        let m = servers.lock_master(&key)?;
                        servers
                            .server_holding(&key, &owner)
                            .filter(|s| *s == m)
                            .map(|m| Moment {
                                host: Some(m),
                                detail: format!("a fresh grant to {c}, owner={owner}"),
                            })
                    })
                }
                Target::LockServerOf { client, .. } => {
                    self.recorder.holder_owner(client).and_then(|owner| {
                        let server = self
                            .servers
                            .lock()
                            .expect("servers")
                            .server_holding(&key, &owner)?;
                        Some(Moment {
                            host: Some(server),
                            detail: format!("{client} holds the lock, owner={owner}"),
                        })
                    })
                }
                Target::LeaderAfterLockCreate { .. }
                    if self.acquires.load(Ordering::Relaxed) > acquires0 =>
                {
                    // The leader's last zxid moves past its value at the acquire: the
                    // lock node's create (the acquire's first write) is committed.
                    let servers = self.servers.lock().expect("servers");
                    servers.zk_leader().and_then(|leader| {
                        let z = servers.zk_zxid(&leader)?;
                        match &zxid0 {
                            None => {
                                zxid0 = Some((leader, z));
                                None
                            }
                            Some((l, z0)) if *l == leader && z > *z0 => Some(Moment {
                                detail: format!("a lock node's create committed at zxid 0x{z:x}"),
                                host: Some(leader),
                            }),
                            Some(_) => None,
                        }
                    })
                }
                _ => None,
            };
            if let Some(m) = found {
                return Some(Moment {
                    detail: format!(" ({})", m.detail),
                    ..m
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// Starts (or restarts) client `name`'s process.
    fn spawn_client(
        self: &Arc<Self>,
        name: &str,
        index: u64,
        incarnation: u64,
    ) -> Result<(), String> {
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
            mysql_login: self.mysql_login.clone(),
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
        let mut cmd = Command::new(&self.exe);
        cmd.arg("__client")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("LOCKSIM_REAL_DEBUG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        let mut child = lock_impl::testing::servers::spawn_kept(cmd)
            .map_err(|e| format!("cannot start client process {}: {e}", self.exe.display()))?;
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
                        EventKind::Op(mut op) => {
                            if op.f == sim::history::OpF::Acquire {
                                match op.phase {
                                    sim::history::Phase::Invoke => {
                                        self.acquires.fetch_add(1, Ordering::Relaxed);
                                    }
                                    sim::history::Phase::Ok => {
                                        self.grants.fetch_add(1, Ordering::Relaxed);
                                    }
                                    _ => {}
                                }
                            }
                            let local = op.op;
                            if op.phase == sim::history::Phase::Invoke {
                                let id = self.recorder.ingest_op(event.at_us, host, op);
                                ids.insert(local, id);
                            } else if let Some(id) = ids.remove(&local) {
                                op.op = id;
                                self.recorder.ingest_op(event.at_us, host, op);
                            }
                        }
                        kind => self.recorder.record_at(event.at_us, host, kind),
                    }
                }
                "S" => {
                    let reply = self.storage.handle(rest, &self.recorder, self.now_us());
                    write_line(stdin, &format!("S {}", reply.trim_end()));
                }
                "H" => {
                    self.horizon_ms
                        .fetch_max(rest.parse().unwrap_or(0), Ordering::Relaxed);
                }
                "P" => {
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
                _ => {}
            }
        }
    }

    /// Stops process `pid` (host `host`) for `ms`, recording the pause; overlapping
    /// pauses of one host end when the last ends.
    fn pause(self: &Arc<Self>, host: &str, pid: u32, fault: usize, ms: u64, detail: String) {
        signal(pid, libc::SIGSTOP);
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
                signal(pid, libc::SIGCONT);
            }
            run.fault(
                &host,
                fault,
                FaultPhase::End,
                format!("pause of {host} ends"),
            );
        });
    }

    /// The hosts `target` names now.
    fn resolve(&self, target: &Target, rng: &mut ChaCha8Rng, moment: &Moment) -> Vec<String> {
        let mut pick = |c: Vec<String>| {
            if c.is_empty() {
                Vec::new()
            } else {
                vec![c[rng.random_range(0..c.len())].clone()]
            }
        };
        if *target == Target::Holder {
            return pick(self.next_holders());
        }
        let servers = self.servers.lock().expect("servers");
        match target {
            Target::Host(h) => {
                let known = self.clients.lock().expect("clients").contains_key(h)
                    || servers.names().contains(h);
                if known { vec![h.clone()] } else { Vec::new() }
            }
            Target::Acquirer => pick(self.recorder.acquirers()),
            Target::AllClients => self
                .clients
                .lock()
                .expect("clients")
                .keys()
                .cloned()
                .collect(),
            Target::AllServers => servers.lock_servers.clone(),
            Target::LockServer => servers
                .lock_server(&self.cfg.workload.key)
                .into_iter()
                .collect(),
            Target::LockOwner => {
                let key = &self.cfg.workload.key;
                let live = |c: &String| self.clients.lock().expect("clients").contains_key(c);
                let Some(name) = servers.mysql_name() else {
                    return servers.lock_owner(key).filter(live).into_iter().collect();
                };
                // On MariaDB the row's owner, by one answer, names the target and is the
                // server's record of the lock at this moment (what the crash probes read).
                let Some(owner) = servers.mysql_row_owner(key) else {
                    return Vec::new();
                };
                let client = writer_of(&owner);
                self.recorder.record_at(
                    self.now_us(),
                    name,
                    EventKind::Server(ServerEvent::Written {
                        by: client.clone().unwrap_or_else(|| name.to_string()),
                        key: key.clone(),
                        value: owner,
                    }),
                );
                client.filter(live).into_iter().collect()
            }
            Target::Leader => servers.zk_leader().into_iter().collect(),
            Target::UnreplicatedLockMaster { .. }
            | Target::FreshLockMaster { .. }
            | Target::LockServerOf { .. }
            | Target::LeaderAfterLockCreate { .. } => moment.host.iter().cloned().collect(),
            Target::Rest => {
                // The clients, the lock servers, then the helpers (Sentinels).
                let mut all: Vec<String> = self
                    .clients
                    .lock()
                    .expect("clients")
                    .keys()
                    .cloned()
                    .collect();
                all.extend(servers.names());
                all
            }
            _ => Vec::new(),
        }
    }

    /// The clients that hold the lock now or, if none does, the first to hold it within a
    /// lease and before the workload ends (polled every millisecond; nothing after that
    /// end is part of the run): a fault aimed at the holder that comes between
    /// two holds waits for the next grant. In the simulator that gap is a round trip,
    /// and a fault at a seed-drawn time nearly always finds a holder; here it is the
    /// clients' and the runner's own latency, which a loaded machine stretches to many
    /// milliseconds. Beside the simulation suite, a `gc-pause` run's first pause found
    /// no holder and its three others all stopped the one holder whose release was
    /// already on its way: no stale write, where the simulator's same seed had one.
    fn next_holders(&self) -> Vec<String> {
        let w = &self.cfg.workload;
        let deadline = (self.now_us() + w.lease_ms * 1000).min((w.duration_ms + w.drain_ms) * 1000);
        loop {
            let holders = self.recorder.holders();
            if !holders.is_empty() || self.now_us() > deadline || self.over.load(Ordering::Relaxed)
            {
                return holders;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// One side of a partition: the hosts its targets name, sorted, once each.
    fn side(&self, targets: &[Target], rng: &mut ChaCha8Rng, moment: &Moment) -> Vec<String> {
        let mut hosts: Vec<String> = targets
            .iter()
            .flat_map(|t| self.resolve(t, rng, moment))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// Applies fault `index` now, once its target's moment (if it waits for one) has
    /// come.
    fn apply(self: &Arc<Self>, index: usize, kind: &FaultKind, rng: &mut ChaCha8Rng) {
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
            } => {
                let Some(net) = self.net.clone() else { return };
                for host in self.resolve(target, rng, m) {
                    let id = net.delay(&host, Duration::from_millis(*latency_ms));
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
                    let (run, net, duration) = (self.clone(), net.clone(), *duration_ms);
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
            FaultKind::ResetConnections { target } => {
                let Some(net) = self.net.clone() else { return };
                let servers = self.servers.lock().expect("servers").lock_servers.clone();
                for host in self.resolve(target, rng, m) {
                    // MariaDB's `GET_LOCK` holder and the sessions whose transactions
                    // hold row locks (a `FOR UPDATE` holder's) before the reset, by its
                    // answers.
                    let key = self.cfg.workload.key.clone();
                    let (holder, row_holders) = {
                        let servers = self.servers.lock().expect("servers");
                        let holder = servers.mysql_lock_holder(&key).flatten();
                        let rows = if servers.mysql_name().is_some() {
                            servers.mysql_row_lock_holders().unwrap_or_default()
                        } else {
                            Vec::new()
                        };
                        (holder, rows)
                    };
                    let n = net.reset(&host, &servers);
                    if let Some(id) = holder {
                        self.watch_session_end(&host, id, key.clone(), record::Held::GetLock);
                    }
                    for id in row_holders.into_iter().filter(|id| Some(*id) != holder) {
                        self.watch_session_end(&host, id, key.clone(), record::Held::RowLock);
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
            FaultKind::ClockJump { target, delta_ms } => {
                for host in self.resolve(target, rng, m) {
                    if !self.step_clock(&host, *delta_ms) {
                        continue;
                    }
                    let direction = if *delta_ms >= 0 { "forward" } else { "back" };
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
            } => {
                let Ok(rate) = i64::try_from(*rate_ppm) else {
                    return;
                };
                if rate == 0 || *delta_ms == 0 {
                    return;
                }
                let change = rate * delta_ms.signum();
                let lasts_ms = (u128::from(delta_ms.unsigned_abs()) * 1_000_000)
                    .div_ceil(u128::from(*rate_ppm));
                let lasts_ms = u64::try_from(lasts_ms).unwrap_or(u64::MAX);
                let direction = if *delta_ms >= 0 { "forward" } else { "back" };
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
            // Refused before the run started.
            _ => {}
        }
    }

    /// Steps `host`'s wall clock by `delta_ms`: a Redis server's through the clock
    /// shim, a client's in its process (its `Deps` clock) and in the parent's copy.
    /// False if `host` has no clock the run moves.
    fn step_clock(&self, host: &str, delta_ms: i64) -> bool {
        // A Redis server's lock value and expiry count just before the step, by its
        // answers: a key the step expires is then known by the server's own count.
        let key = self.cfg.workload.key.clone();
        let port = self.servers.lock().expect("servers").redis_port(host);
        let mut ask = port.map(servers::RedisAsk::new);
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
        // Asked again at once (Redis expires a key on access by its own clock): gone,
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

    /// Runs `host`'s clock (a Redis server's or a client's) at `rate(its rate now)` ppm, for `duration_ms`
    /// (then at its former rate) or to the end; records the start (`detail`) and the
    /// end (`end`, or "runs at N ppm again").
    fn clock_rate(
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
        // What each cut-off Redis server holds, by its answer right after the cut (the
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

    fn pid(&self, host: &str) -> Option<u32> {
        if let Some(c) = self.clients.lock().expect("clients").get(host) {
            return Some(c.pid);
        }
        self.servers.lock().expect("servers").pid(host)
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
            let _ = c.child.kill();
            let _ = c.child.wait();
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
                    if run.spawn_client(&host, client_index, next).is_ok() {
                        run.fault(&host, index, FaultPhase::End, format!("{host} restarts"));
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
            let held = servers
                .redis_port(host)
                .and_then(|port| servers::lock_value_at(port, &key));
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

/// Runs `cfg` against real servers with client processes started from `exe` (this
/// binary, in its `__client` role), and returns its history; `Err` if something the
/// run needs could not be started (a missing package, a refused fault: the message
/// says which).
///
/// Each server's log is copied into `logs` (as `<server>.log`) when the run ends, if
/// given, so a run whose verdict needs them keeps them.
pub fn run_real(cfg: &RunConfig, exe: &Path, logs: Option<&Path>) -> Result<History, String> {
    let w = &cfg.workload;
    let why = refusals(&cfg.design, w, &cfg.plan);
    if !why.is_empty() {
        return Err(format!(
            "cannot run this cell against real servers: {}",
            why.join("; ")
        ));
    }
    let client_names: Vec<String> = (0..w.clients)
        .map(|i| format!("client-{}", i + 1))
        .collect();
    // Partitions between named hosts at 0 ms are in force from the start: cut before
    // the servers start, as the simulated world starts with them.
    let precuts: Vec<servers::Precut> = cfg
        .plan
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
        .collect();
    // Every Redis server runs with the clock shim when the plan moves a server clock
    // (which one a target names is known only when the fault comes).
    let clocked: Vec<String> = if moves_clocks(&cfg.plan) {
        w.servers.iter().map(|s| s.name.clone()).collect()
    } else {
        Vec::new()
    };
    let mut servers = Servers::start(w, needs_net(&cfg.plan), &client_names, &precuts, &clocked)?;
    let precut_ids = std::mem::take(&mut servers.precut_ids);
    let net = servers.net.take().map(Arc::new);
    // Real Sentinels keep a once-a-second rhythm (PING, the down checks). The runner
    // starts the clients once every Sentinel knows the topology, a moment their own
    // rhythm sets, so a fault at a fixed time after it fell at much the same phase of
    // that rhythm in every run (a partition after 3 s was found down about 1 s later in
    // 15 of 17 runs). A deployment's faults fall at any phase: the run begins after a
    // seed-drawn part of a second, as the simulator's Sentinels start at a seed-drawn
    // phase (`sim/src/world/sentinels.rs`).
    if w.sentinel.is_some() {
        let phase_ms = sim::seed::sub_seed(cfg.seed, 0xB007) % 1_000;
        std::thread::sleep(Duration::from_millis(phase_ms));
    }
    let epoch_ns = monotonic_ns();
    let recorder = Recorder::new();
    // Each Redis server's role at the start, as the simulator records it.
    for s in &w.servers {
        let role = match &s.replica_of {
            Some(m) => format!("replica of {m}"),
            None => "master".to_string(),
        };
        recorder.record_at(0, &s.name, EventKind::Server(ServerEvent::Role { role }));
    }
    let run = Arc::new(Run {
        cfg: cfg.clone(),
        exe: exe.to_path_buf(),
        storage: sim::storage::Shared::new(w.initial_stock, w.fencing),
        recorder,
        epoch_ns,
        addrs: servers.addrs.clone(),
        net,
        acquires: AtomicU64::new(0),
        grants: AtomicU64::new(0),
        mysql_login: servers.mysql_login.clone(),
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
        down: Mutex::new(Default::default()),
        over: AtomicBool::new(false),
        readers: Mutex::new(Vec::new()),
        zk_expiries: Mutex::new(Vec::new()),
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
    for i in 0..u64::from(w.clients) {
        run.spawn_client(&format!("client-{}", i + 1), i, 0)?;
    }
    // What each Redis server holds under the lock key and, with Sentinels, its role
    // (a promotion, a demotion), as it answers them, polled every 20 ms; a ZooKeeper
    // ensemble's roles every 100 ms.
    let watched = {
        let servers = run.servers.lock().expect("servers");
        !servers.redis_names().is_empty() || !servers.zk_servers().is_empty()
    };
    let roles = watched.then(|| {
        let run = run.clone();
        std::thread::spawn(move || run.watch_servers())
    });
    // The nemesis: each fault at its time, in time order (ties: plan order).
    let mut order: Vec<usize> = (0..cfg.plan.faults.len()).collect();
    order.sort_by_key(|&i| (cfg.plan.faults[i].at_ms, i));
    let mut rng = ChaCha8Rng::seed_from_u64(sim::seed::sub_seed(cfg.seed, 0x7ea1));
    let end = Duration::from_millis(w.duration_ms + w.drain_ms);
    let mut precuts_healed = false;
    for i in order {
        let at = Duration::from_millis(cfg.plan.faults[i].at_ms);
        if at >= end {
            break;
        }
        if !precuts_healed && at > Duration::ZERO {
            // The plan's own partitions at 0 ms now hold what the precuts held.
            heal_precuts(&run, &precut_ids);
            precuts_healed = true;
        }
        std::thread::sleep(at.saturating_sub(real_since(epoch_ns)));
        let kind = cfg.plan.faults[i].kind.clone();
        let waits = kind.targets().into_iter().any(|t| {
            matches!(
                t,
                Target::UnreplicatedLockMaster { .. }
                    | Target::FreshLockMaster { .. }
                    | Target::LockServerOf { .. }
                    | Target::LeaderAfterLockCreate { .. }
            )
        });
        if waits {
            // It waits for its moment on its own thread; the plan goes on.
            let (run, mut rng) = (run.clone(), ChaCha8Rng::seed_from_u64(rng.random()));
            std::thread::spawn(move || run.apply(i, &kind, &mut rng));
        } else {
            run.apply(i, &kind, &mut rng);
        }
    }
    heal_precuts(&run, &precut_ids);
    std::thread::sleep(end.saturating_sub(real_since(epoch_ns)));
    run.over.store(true, Ordering::Relaxed);
    if let Some(w) = roles {
        let _ = w.join();
    }
    let end_us = run.now_us();
    // The run is over: every client process goes (resumed first, so nothing lingers
    // stopped), and its last lines are read.
    let clients = std::mem::take(&mut *run.clients.lock().expect("clients"));
    for (_, mut c) in clients {
        signal(c.pid, libc::SIGCONT);
        let _ = c.child.kill();
        let _ = c.child.wait();
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
    let horizon = run.horizon_ms.load(Ordering::Relaxed);
    let params = RunParams {
        key: w.key.clone(),
        lease_ms: w.lease_ms,
        liveness_bound_ms: w.lease_ms + w.liveness_slack_ms.max(horizon),
        initial_stock: w.initial_stock,
        clients: w.clients,
        masters: (w.servers.iter().filter(|s| s.replica_of.is_none()).count() as u32).max(1),
        segments: w.segments,
        server_records: false,
    };
    let mut events = run.recorder.clone().into_events();
    run.record_zk_expiries(&mut events);
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
