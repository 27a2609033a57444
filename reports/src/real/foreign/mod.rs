//! Foreign clients (`locksim run --real --client '<command>' --system S`): any
//! program that speaks the client protocol (`docs/clients.md`), run through `sh -c`
//! in place of this binary's client role, under the same faults and checkers.
//!
//! - Each client is its command in a process group of its own, so that a pause
//!   (`SIGSTOP`), a crash (`SIGKILL`) and the run's end reach every process it starts.
//! - It says its hello (`V 1 <name>`) before the servers start; then the parent sends
//!   its configuration (one JSON line) and the run begins. `O` lines ([`lines`]) become
//!   the history's operation events; `S`, `P` and `H` are served as the built-in
//!   client's are.
//! - A client that breaks the protocol (a bad line, another version, an exit before
//!   its hello or before the run's end) ends the run: every process is ended and the
//!   error names the command, the client and the line.
//! - A client clock fault is refused: the built-in client's clock moves inside its
//!   process, and a foreign process reads the machine's clocks, which the servers share.

mod lines;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use indicatif::ProgressBar;
use lock_impl::Backend;
use scenarios::catalog::Scenario;
use scenarios::sweep::{DesignSpec, RunSummary};
use serde::Serialize;
use sim::faults::{FaultKind, FaultPlan, Target};
use sim::world::Workload;

use super::{ClientProc, Clients, Run, signal_group, write_line};
use crate::latency::LatencySummary;
use crate::table::CellResult;
use lines::Line;
pub use lines::PROTOCOL;

/// How long a client has from its start to its hello.
const HELLO_WITHIN: Duration = Duration::from_secs(20);

/// A client's last standard error lines kept for an error message.
const STDERR_LINES: usize = 8;

/// A foreign client: its command (run through `sh -c`) and the system it locks on.
#[derive(Debug, Clone)]
pub struct Foreign {
    /// The command, as given.
    pub command: String,
    /// The system its world is of.
    pub system: Backend,
}

impl Foreign {
    /// `--client COMMAND --system NAME`, or why not (naming the allowed systems).
    pub fn new(command: &str, system: &str) -> Result<Self, String> {
        if command.trim().is_empty() {
            return Err("--client needs a command (run through `sh -c`)".into());
        }
        let slug = |b: Backend| b.name().to_lowercase();
        let backend = Backend::ALL
            .iter()
            .copied()
            .find(|b| slug(*b) == system.to_lowercase())
            .ok_or_else(|| {
                let allowed: Vec<String> = Backend::ALL.iter().map(|b| slug(*b)).collect();
                format!(
                    "invalid --system {system}: allowed are {}",
                    allowed.join(", ")
                )
            })?;
        Ok(Self {
            command: command.to_string(),
            system: backend,
        })
    }

    /// The design a report names for this client in `scenario`'s world: on one
    /// master, or on as many as the scenario's world has (a Redlock world), as the
    /// system's built-in designs lock on.
    pub fn design(&self, scenario: &Scenario) -> Result<DesignSpec, String> {
        let mut masters: Vec<usize> = lock_impl::DESIGNS
            .iter()
            .filter(|d| d.backend == self.system)
            .map(|d| d.masters)
            .collect();
        masters.sort_unstable();
        masters.dedup();
        let fits = masters
            .into_iter()
            .find(|m| scenario.applies_to(self.system, *m))
            .ok_or_else(|| {
                format!(
                    "--scenario {} does not run on {} (see the cells that do not run in \
                     `locksim list`)",
                    scenario.name,
                    self.system.name()
                )
            })?;
        let why = format!("client:{} runs against real servers only", self.command);
        Ok(DesignSpec {
            name: format!("client:{}", self.command),
            factory: Arc::new(move |_| panic!("{why}")),
            masters: fits,
            backend: self.system,
        })
    }

    /// The command that runs `seed` of `scenario` again with this client.
    pub fn replay(&self, scenario: &Scenario, seed: u64) -> String {
        format!(
            "locksim run --real --client '{}' --system {} --scenario {} --seeds {seed}{}",
            self.command.replace('\'', r"'\''"),
            self.system.name().to_lowercase(),
            scenario.name,
            scenario.param_flags()
        )
    }

    /// Names this client in an error.
    fn who(&self, host: &str) -> String {
        format!("client `{}` ({host})", self.command)
    }
}

/// Why a foreign client cannot run in `w` under `plan` (empty: it can).
pub(super) fn refusals(w: &Workload, plan: &FaultPlan) -> Vec<String> {
    let mut why = Vec::new();
    let clock_on_client = plan.faults.iter().find_map(|f| match &f.kind {
        FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::ClockSlew { target, .. }
            if reaches_client(target) =>
        {
            Some(target)
        }
        _ => None,
    });
    if let Some(target) = clock_on_client {
        why.push(format!(
            "a client clock fault (on {target:?}) cannot reach a foreign client: the built-in \
             client's clock is moved inside its process, and a foreign process reads the \
             machine's clocks, which the servers share (a client under libfaketime is not \
             built yet)"
        ));
    }
    if w.sentinel.is_some() {
        why.push(
            "a foreign client is given the servers' addresses only: the Sentinels' answers \
             name servers by addresses the fault proxy does not rewrite for it yet"
                .into(),
        );
    }
    why
}

/// Why a foreign client cannot run as `design` in `scenario` over `seeds`, besides
/// what the real runner refuses of any client (empty: it can).
pub fn refusals_over(design: &DesignSpec, scenario: &Scenario, seeds: Range<u64>) -> Vec<String> {
    let mut why: Vec<String> = Vec::new();
    for seed in seeds {
        let cfg = scenarios::sweep::config(design, scenario, seed);
        for r in refusals(&cfg.workload, &cfg.plan) {
            if !why.contains(&r) {
                why.push(r);
            }
        }
    }
    why
}

/// Whether a clock fault on `target` can reach a client host.
fn reaches_client(target: &Target) -> bool {
    match target {
        Target::Host(h) => h.starts_with("client-"),
        Target::LockServer
        | Target::LockServerOf { .. }
        | Target::UnreplicatedLockMaster { .. }
        | Target::FreshLockMaster { .. }
        | Target::Leader
        | Target::LeaderAfterLockCreate { .. }
        | Target::AllServers => false,
        _ => true,
    }
}

/// A foreign client's process, started, with its hello read.
pub(crate) struct Started {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Option<std::io::Lines<BufReader<ChildStdout>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The name its hello gives.
    hello: String,
}

impl Drop for Started {
    /// A process never handed to a run is ended with everything it started.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `f`'s `n` client processes at once and reads each one's hello.
pub(super) fn start_all(f: &Foreign, n: u32) -> Result<Vec<Started>, String> {
    let spawned: Vec<Result<Spawned, String>> =
        (1..=n).map(|i| spawn(f, &format!("client-{i}"))).collect();
    spawned
        .into_iter()
        .enumerate()
        .map(|(i, s)| hello(f, &format!("client-{}", i + 1), s?))
        .collect()
}

/// A process started, its hello on the way.
struct Spawned {
    started: Started,
    hello: mpsc::Receiver<(std::io::Lines<BufReader<ChildStdout>>, Option<String>)>,
}

/// Starts one process of `f` for client `host`, in a process group of its own, and
/// reads its first line on a thread of its own.
fn spawn(f: &Foreign, host: &str) -> Result<Spawned, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&f.command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setpgid(2) between fork and exec (async-signal-safe).
        unsafe {
            cmd.pre_exec(|| {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = lock_impl::testing::servers::spawn_kept(cmd)
        .map_err(|e| format!("cannot start {}: {e}", f.who(host)))?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    keep_stderr(child.stderr.take().expect("piped"), stderr.clone());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok);
        let _ = tx.send((lines, first));
    });
    Ok(Spawned {
        started: Started {
            child: Some(child),
            stdin: Some(stdin),
            lines: None,
            stderr,
            hello: String::new(),
        },
        hello: rx,
    })
}

/// Keeps the last lines of a client's standard error (shown under
/// `LOCKSIM_REAL_DEBUG` as they come).
fn keep_stderr(stderr: std::process::ChildStderr, kept: Arc<Mutex<VecDeque<String>>>) {
    let echo = std::env::var_os("LOCKSIM_REAL_DEBUG").is_some();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut reader = BufReader::new(stderr);
        loop {
            text.clear();
            let mut bytes = Vec::new();
            match reader.by_ref().read_until(b'\n', &mut bytes) {
                Ok(0) | Err(_) => break,
                Ok(_) => text.push_str(String::from_utf8_lossy(&bytes).trim_end()),
            }
            if echo {
                eprintln!("{text}");
            }
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.push_back(text.clone());
            if kept.len() > STDERR_LINES {
                kept.pop_front();
            }
        }
    });
}

/// The last lines a client wrote to its standard error, for an error message.
fn stderr_tail(kept: &Mutex<VecDeque<String>>) -> String {
    // The reader thread may still hold the last lines of a process that just ended.
    std::thread::sleep(Duration::from_millis(50));
    let kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    if kept.is_empty() {
        return "it wrote nothing to its standard error".into();
    }
    let lines: Vec<&str> = kept.iter().map(String::as_str).collect();
    format!("its standard error ended: {}", lines.join(" | "))
}

/// Waits for `s`'s hello and checks it.
fn hello(f: &Foreign, host: &str, s: Spawned) -> Result<Started, String> {
    let Spawned { mut started, hello } = s;
    let who = f.who(host);
    let (lines, first) = match hello.recv_timeout(HELLO_WITHIN) {
        Ok(got) => got,
        Err(_) => {
            return Err(format!(
                "{who} said nothing within {} s of its start; a client's first line is \
                 its hello `V {PROTOCOL} <client name>` ({})",
                HELLO_WITHIN.as_secs(),
                stderr_tail(&started.stderr)
            ));
        }
    };
    started.lines = Some(lines);
    let Some(first) = first else {
        let status = started
            .child
            .as_mut()
            .and_then(|c| c.wait().ok())
            .map_or("unknown".to_string(), |s| s.to_string());
        return Err(format!(
            "{who} exited before its hello `V {PROTOCOL} <client name>` ({status}); {}",
            stderr_tail(&started.stderr)
        ));
    };
    started.hello = lines::hello(&first)
        .map_err(|why| format!("{who} broke the protocol at its line 1 `{first}`: {why}"))?;
    Ok(started)
}

/// What a foreign client is told before its run starts (`docs/clients.md`).
#[derive(Serialize)]
struct Config<'a> {
    protocol: u32,
    name: &'a str,
    index: u64,
    incarnation: u64,
    seed: u64,
    system: String,
    servers: BTreeMap<String, String>,
    lock_servers: Vec<String>,
    login: Option<Login>,
    key: &'a str,
    lease_ms: u64,
    wait_ms: u64,
    work_ms: u64,
    think_ms_max: u64,
    duration_ms: u64,
    check_validity_ms: Option<u64>,
    response_timeout_ms: u64,
    connect_timeout_ms: u64,
    /// A ZooKeeper world's session timeout (`null` in other worlds).
    session_timeout_ms: Option<u32>,
    time_scale: f64,
    epoch_ns: u64,
}

#[derive(Serialize)]
struct Login {
    user: String,
    password: String,
    database: String,
}

impl Run {
    /// Hands client `name`'s foreign process (`started`, or one started now) its
    /// configuration and serves its lines.
    pub(super) fn spawn_foreign(
        self: &Arc<Self>,
        f: &Foreign,
        name: &str,
        index: u64,
        incarnation: u64,
        started: Option<Started>,
    ) -> Result<(), String> {
        let mut started = match started {
            Some(s) => s,
            None => hello(f, name, spawn(f, name)?)?,
        };
        let w = &self.cfg.workload;
        let addrs = self
            .net
            .as_ref()
            .and_then(|n| n.client_addrs.get(name).cloned())
            .unwrap_or_else(|| self.addrs.clone());
        let scale = lock_impl::TimeScale::for_lease(w.lease_ms);
        let config = Config {
            protocol: PROTOCOL,
            name,
            index,
            incarnation,
            seed: self.cfg.seed,
            system: f.system.name().to_lowercase(),
            servers: addrs
                .iter()
                .map(|(k, a)| (k.clone(), a.to_string()))
                .collect(),
            lock_servers: self.servers.lock().expect("servers").lock_servers.clone(),
            login: self.login.clone().map(|(user, password, database)| Login {
                user,
                password,
                database,
            }),
            key: &w.key,
            lease_ms: w.lease_ms,
            wait_ms: w.wait_ms,
            work_ms: w.work_ms,
            think_ms_max: w.think_ms_max,
            duration_ms: w.duration_ms,
            check_validity_ms: w.check_validity_ms,
            response_timeout_ms: w.response_timeout_ms,
            connect_timeout_ms: w.connect_timeout_ms,
            session_timeout_ms: w.systems.zookeeper.as_ref().map(|z| z.session_timeout_ms),
            time_scale: scale.exact(Duration::from_secs(1)).as_secs_f64(),
            epoch_ns: self.epoch_ns,
        };
        let stdin = Arc::new(Mutex::new(started.stdin.take().expect("its stdin")));
        let pid = {
            // Under the clients' lock: a restart whose hello came after the run's end
            // is not handed to it (`started`, dropped, ends its process group).
            let mut clients = self.clients.lock().expect("clients");
            if self.over.load(Ordering::Relaxed) {
                return Ok(());
            }
            let config = serde_json::to_string(&config).expect("serializable");
            write_line(&stdin, &config);
            let child = started.child.take().expect("its process");
            let pid = child.id();
            let proc = ClientProc {
                pid,
                stdin: stdin.clone(),
                incarnation,
                armed: None,
                child,
                group: true,
            };
            clients.insert(name.to_string(), proc);
            pid
        };
        let run = self.clone();
        let (host, who) = (name.to_string(), f.who(name));
        let reader = std::thread::spawn(move || {
            let lines = started.lines.take().expect("its stdout");
            let said_done = run.read_foreign(&host, lines, &stdin, pid);
            if let Err(e) = said_done {
                run.break_run(format!("{who} {e}"));
            } else if said_done == Ok(false)
                && !run.over.load(Ordering::Relaxed)
                && run.still_running(&host, pid)
            {
                run.break_run(format!(
                    "{who} exited before the run's end without its `X` line; {}",
                    stderr_tail(&started.stderr)
                ));
            }
        });
        self.readers.lock().expect("readers").push(reader);
        Ok(())
    }

    /// Whether process `pid` is still client `host`'s (not crashed by a fault, nor
    /// ended by the run's end).
    fn still_running(&self, host: &str, pid: u32) -> bool {
        self.clients
            .lock()
            .expect("clients")
            .get(host)
            .is_some_and(|c| c.pid == pid)
    }

    /// Serves a foreign client's lines until it exits, or the first line that breaks
    /// the protocol; `Ok(false)` if it ended without its `X` line while it was still
    /// the run's.
    fn read_foreign(
        self: &Arc<Self>,
        host: &str,
        lines: std::io::Lines<BufReader<ChildStdout>>,
        stdin: &Mutex<ChildStdin>,
        pid: u32,
    ) -> Result<bool, String> {
        let mut ids = std::collections::HashMap::new();
        let key = self.cfg.workload.key.clone();
        let mut done = false;
        for (n, line) in lines.enumerate() {
            let Ok(line) = line else { break };
            // Lines of a process already crashed or past the run's end are dropped.
            if self.over.load(Ordering::Relaxed) || !self.still_running(host, pid) {
                return Ok(true);
            }
            let parsed = lines::parse(&line, self.now_us(), &key).map_err(|why| {
                format!("broke the protocol at its line {} `{line}`: {why}", n + 2)
            })?;
            match parsed {
                Line::Op { at_us, op } => self.ingest_op(host, at_us, op, &mut ids),
                Line::Renewed { at_us, kind } => self.recorder.record_at(at_us, host, kind),
                Line::RenewAttempt => {}
                Line::Storage(request) => self.serve_storage(&request, stdin),
                Line::PausePoint => self.pause_point(host, stdin),
                Line::Horizon(ms) => self.note_horizon(ms),
                Line::Done => done = true,
            }
        }
        Ok(done)
    }
}

/// [`crate::cells::run_real_cell_with`] for a foreign client: each seed's world and
/// fault plan against real servers, one run at a time, every history judged by the
/// same checkers; the servers' logs and the history of a run with an Invalid verdict
/// kept as the built-in client's are.
pub fn run_cell(
    f: &Foreign,
    design: &DesignSpec,
    scenario: &Scenario,
    seeds: Range<u64>,
    bar: &ProgressBar,
) -> Result<(CellResult, Vec<RunSummary>, LatencySummary), String> {
    // A client that exits on its own may still be written to before its end is read:
    // that write fails (EPIPE) instead of ending locksim with SIGPIPE.
    let _sigpipe = IgnoreSigpipe::new();
    let mut latency = LatencySummary::default();
    let mut runs = Vec::new();
    let dir: String = design
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    for seed in seeds {
        let cfg = scenarios::sweep::config(design, scenario, seed);
        let logs = std::env::temp_dir()
            .join("locksim-real-logs")
            .join(format!("{dir}-{}-seed-{seed}", scenario.name));
        let history = super::run_real_with(&cfg, Clients::Foreign(f.clone()), Some(&logs))
            .inspect_err(|_| {
                // A run the client broke leaves nothing behind: its error says why.
                let _ = std::fs::remove_dir_all(&logs);
            })?;
        runs.push(crate::cells::judge_real(
            scenario,
            &history,
            &logs,
            &mut latency,
        ));
        bar.inc(1);
    }
    let mut cell = crate::cells::cell_of(design, scenario, &runs, &latency);
    cell.replay = cell.first_invalid_seed.map(|seed| f.replay(scenario, seed));
    Ok((cell, runs, latency))
}

/// SIGPIPE ignored while it lives, restored as it was after.
struct IgnoreSigpipe(libc::sighandler_t);

impl IgnoreSigpipe {
    fn new() -> Self {
        // SAFETY: changing a signal's disposition; the previous one is kept to restore.
        Self(unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) })
    }
}

impl Drop for IgnoreSigpipe {
    fn drop(&mut self) {
        // SAFETY: restoring the disposition `new` found.
        unsafe { libc::signal(libc::SIGPIPE, self.0) };
    }
}
