//! A client host of a real run: this very binary in its client role
//! (`locksim __client`, started by the parent, never by a person). It runs one
//! client's workload (acquire, read the stock, work, write, release, think) with the
//! design's own code on a real tokio runtime over real sockets, and talks to its parent
//! over its standard streams, so that a `SIGSTOP` of this process stops everything the
//! client is (its watchdog and lease timers too), as a GC pause does.
//!
//! Lines to the parent (stdout): `E <event json>` an event, stamped on the machine's
//! monotonic clock from the run's epoch (one timeline for every process); `S <request>`
//! a storage request (the storage lives in the parent); `P` the client is at the moment
//! an armed pause-before-write strikes; `H <ms>` the design's retry horizon; `X` done.
//! Lines from the parent (stdin): the configuration (first line, JSON), then `S <reply>`,
//! `P` (the pause is over: go on), `A <ms>` (arm a pause before the next write),
//! `W <ms>` (the next critical section works this much longer), `C <ms>` (the host's
//! wall clock steps by this much, signed), `R <ppm>` (from now on the host's clock runs
//! at this rate error: its monotonic clock, its timers and its wall clock alike).
//!
//! The client's clock is the design's `Deps` clock ([`HostClock`] over the run's true
//! time), as in the simulator: a client clock fault moves what the design reads and how
//! long its timers take, not the machine's clocks, which the servers share.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_impl::{AcquireOptions, Deps, LockDesign};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sim::clock::HostClock;
use sim::history::{Event, EventKind, Op, OpF, Phase};
use sim::world::Workload;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Mutex, mpsc};

/// What the parent tells a client process before it starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientConfig {
    /// The design's name (a built-in, or `broken/<name>`).
    pub design: String,
    /// The client's host name, `client-N`.
    pub name: String,
    /// N − 1.
    pub index: u64,
    /// How many times this client was started before (a restarted client is a new
    /// process with fresh owner values).
    pub incarnation: u64,
    /// The run's seed (owner values and the think times derive from it).
    pub seed: u64,
    /// The world.
    pub workload: Workload,
    /// The run's epoch on the machine's monotonic clock, ns.
    pub epoch_ns: u64,
    /// Every server's address by its world name.
    pub addrs: BTreeMap<String, SocketAddr>,
    /// The servers' credentials, when their launcher made them.
    #[serde(default)]
    pub login: Option<(String, String, String)>,
    /// Behind the fault proxy: how this client reaches an address a server gives
    /// (`addrs` are then this client's own listeners).
    #[serde(default)]
    pub net: Option<super::net::ClientNet>,
    /// The host's clock when this process starts (the machine's clock outlives a
    /// crashed process): its wall clock's offset from true time and its rate error.
    #[serde(default)]
    pub clock: Option<StartClock>,
}

/// A client host's clock as a new process of it finds it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct StartClock {
    /// The wall clock's offset from true time, µs (positive: ahead).
    pub wall_offset_us: i64,
    /// The rate error, ppm.
    pub drift_ppm: i64,
}

/// One line to the parent; a broken pipe means the parent is gone, and so are we.
fn send(line: &str) {
    let mut out = std::io::stdout().lock();
    if out.write_all(line.as_bytes()).is_err()
        || out.write_all(b"\n").is_err()
        || out.flush().is_err()
    {
        std::process::exit(0);
    }
}

/// The run's epoch on the machine's monotonic clock (set once, from the configuration).
static EPOCH_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// True time of the real run: the monotonic clock since its epoch.
fn true_now() -> Duration {
    sim::clock::real_since(EPOCH_NS.get().copied().unwrap_or(0))
}

fn now_us() -> u64 {
    true_now().as_micros() as u64
}

/// A client host's clock in a real run: the simulator's [`HostClock`] schedule over the
/// run's true time (the machine's monotonic clock since the epoch). The monotonic
/// reading follows the host's rate; the wall reading is the machine's wall clock moved
/// by the host's steps and rate; a sleep lasts what the host's own clock says (a rate
/// change during it is honoured at its end, as in the simulator's `SimClock`).
#[derive(Debug, Clone)]
struct RealClock {
    clock: HostClock,
}

impl lock_impl::Clock for RealClock {
    fn now(&self) -> Duration {
        self.clock.monotonic(true_now())
    }

    fn wall(&self) -> Duration {
        let machine = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as i128;
        let us = machine + i128::from(self.clock.wall_offset_us(true_now()));
        Duration::from_micros(u64::try_from(us.max(0)).unwrap_or(u64::MAX))
    }

    fn sleep(&self, duration: Duration) -> lock_impl::Sleep {
        self.clock.sleep_local(duration, true_now)
    }
}

/// The host's clock at this process's start: as the parent says (a perfect clock if it
/// says nothing), with the host's uptime as in the simulator.
fn start_clock(config: &ClientConfig) -> HostClock {
    let start = config.clock.unwrap_or(StartClock {
        wall_offset_us: 0,
        drift_ppm: 0,
    });
    let clock = HostClock::new(sim::clock::ClockSpec::default())
        .booted(HostClock::uptime_for(config.seed, &config.name));
    // The offset in µs, as a step; the rate from now on.
    let now = true_now();
    let ms = start.wall_offset_us / 1000;
    clock.step(ms);
    clock.set_drift(now, start.drift_ppm);
    clock
}

/// The client's side of the history: each event goes to the parent as it happens.
struct Rec {
    host: String,
    next: AtomicU64,
}

impl Rec {
    fn event(&self, kind: EventKind) {
        let event = Event {
            at_us: now_us(),
            host: self.host.clone(),
            kind,
        };
        send(&format!(
            "E {}",
            serde_json::to_string(&event).expect("serializable")
        ));
    }

    fn invoke(&self, f: OpF, fill: impl FnOnce(&mut Op)) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.event(EventKind::Op(op(id, f, Phase::Invoke, fill)));
        id
    }

    fn complete(&self, id: u64, f: OpF, phase: Phase, fill: impl FnOnce(&mut Op)) {
        self.event(EventKind::Op(op(id, f, phase, fill)));
    }
}

fn op(id: u64, f: OpF, phase: Phase, fill: impl FnOnce(&mut Op)) -> Op {
    let mut op = Op {
        op: id,
        f,
        phase,
        key: None,
        owner: None,
        value: None,
        token: None,
        valid_until_us: None,
        detail: None,
        mode: None,
    };
    fill(&mut op);
    op
}

/// What the parent's lines carry back.
struct Inbox {
    storage: Mutex<mpsc::UnboundedReceiver<String>>,
    resume: Mutex<mpsc::UnboundedReceiver<()>>,
    pause_before_write: AtomicU64,
    slow_ms: AtomicU64,
    /// The host's clock, which `C` and `R` lines move.
    clock: HostClock,
}

/// Reads the parent's lines until it closes our stdin (then the run is over).
async fn read_parent(
    mut lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>,
    storage: mpsc::UnboundedSender<String>,
    resume: mpsc::UnboundedSender<()>,
    inbox: Arc<Inbox>,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        let (tag, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match tag {
            "S" => {
                let _ = storage.send(rest.to_string());
            }
            "P" => {
                let _ = resume.send(());
            }
            "A" => inbox
                .pause_before_write
                .store(rest.parse().unwrap_or(0), Ordering::Relaxed),
            "W" => {
                inbox
                    .slow_ms
                    .fetch_add(rest.parse().unwrap_or(0), Ordering::Relaxed);
            }
            "C" | "R" => move_clock(&inbox.clock, tag, rest),
            _ => {}
        }
    }
    std::process::exit(0);
}

/// Applies the parent's clock line `C <ms>` (a step of the wall clock) or
/// `R <ppm> <at_us>` (the rate from true time `at_us` on: a process the parent had
/// stopped reads it late) to `clock`.
fn move_clock(clock: &HostClock, tag: &str, rest: &str) {
    let mut parts = rest.split(' ');
    let n = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    match tag {
        "C" => clock.step(n),
        _ => {
            let at = parts
                .next()
                .and_then(|t| t.parse().ok())
                .map_or_else(true_now, Duration::from_micros);
            clock.set_drift(at, n);
        }
    }
}

/// Records a watchdog's renewals, as the simulator's client does.
struct Renewals {
    rec: Arc<Rec>,
    clock: HostClock,
}

impl lock_impl::Observer for Renewals {
    fn renewed(&self, key: &str, owner: &str, valid_until: Duration) {
        let t = self.clock.true_time_of(true_now(), valid_until);
        self.rec.event(EventKind::Renewed {
            key: key.to_string(),
            owner: owner.to_string(),
            valid_until_us: u64::try_from(t.as_micros()).unwrap_or(u64::MAX),
        });
    }
}

/// `locksim __client`: runs one client host of a real run and exits.
pub fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => {
            send("X");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("locksim __client: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), String> {
    // Every line from the parent, the configuration first, goes through one reader.
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let first = lines
        .next_line()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no configuration on stdin")?;
    let config: ClientConfig =
        serde_json::from_str(&first).map_err(|e| format!("bad configuration: {e}"))?;
    let _ = EPOCH_NS.set(config.epoch_ns);
    let (storage_tx, storage_rx) = mpsc::unbounded_channel();
    let (resume_tx, resume_rx) = mpsc::unbounded_channel();
    let inbox = Arc::new(Inbox {
        storage: Mutex::new(storage_rx),
        resume: Mutex::new(resume_rx),
        pause_before_write: AtomicU64::new(0),
        slow_ms: AtomicU64::new(0),
        clock: start_clock(&config),
    });
    tokio::spawn(read_parent(lines, storage_tx, resume_tx, inbox.clone()));
    let rec = Arc::new(Rec {
        host: config.name.clone(),
        next: AtomicU64::new(0),
    });
    let design_spec = crate::input::design(&config.design).map_err(|e| e.0)?;
    let w = &config.workload;
    let host_clock = inbox.clock.clone();
    let deps = deps(&config, rec.clone(), host_clock.clone()).await?;
    let design = (design_spec.factory)(deps);
    send(&format!("H {}", design.retry_horizon().as_millis()));
    let stream_id = (config.index << 16) | config.incarnation;
    let mut rng = ChaCha8Rng::seed_from_u64(sim::seed::sub_seed(
        config.seed,
        sim::seed::stream::client_rounds(stream_id),
    ));
    let options = AcquireOptions::new(w.lease_ms as i64, w.wait_ms as i64)
        .expect("lease validated by the parent");
    let deadline = Duration::from_millis(w.duration_ms);
    let client = Client {
        rec,
        inbox,
        workload: w.clone(),
        clock: host_clock,
    };
    while true_now() < deadline {
        if let Some(guard) = client.acquire(design.as_ref(), &w.key, options).await {
            client.critical_section(&guard).await;
            client.release(design.as_ref(), &w.key, &guard).await;
        }
        let think = rng.random_range(0..=w.think_ms_max);
        tokio::time::sleep(Duration::from_millis(think)).await;
    }
    Ok(())
}

/// The design's dependencies for this world's system, over real sockets: the
/// system's plugin builds them; the clock, the entropy and the observer are the
/// run's.
async fn deps(config: &ClientConfig, rec: Arc<Rec>, host: HostClock) -> Result<Deps, String> {
    let w = &config.workload;
    let clock: Arc<dyn lock_impl::Clock> = Arc::new(RealClock {
        clock: host.clone(),
    });
    let scale = lock_impl::TimeScale::for_lease(w.lease_ms);
    let stream_id = (config.index << 16) | config.incarnation;
    let entropy = Arc::new(lock_impl::SeededEntropy::new(
        sim::seed::sub_seed(config.seed, sim::seed::stream::client_entropy(stream_id)),
        config.name.clone(),
    ));
    let observer: Arc<dyn lock_impl::Observer> = Arc::new(Renewals { rec, clock: host });
    let system = *super::servers::in_world(w)
        .first()
        .ok_or("a world without a system the real runner starts")?;
    let ctx = super::system::ClientCtx {
        addrs: &config.addrs,
        login: config.login.clone(),
        net: config.net.as_ref(),
        clock,
        entropy,
        spawner: Arc::new(lock_impl::TokioSpawner),
        scale,
    };
    let mut deps = system.client_deps(w, ctx).await?;
    deps.observer = Some(observer);
    deps.scale = scale;
    Ok(deps)
}

/// One client's rounds.
struct Client {
    rec: Arc<Rec>,
    inbox: Arc<Inbox>,
    workload: Workload,
    /// The host's clock (the design's; its guards' validity is read on it).
    clock: HostClock,
}

impl Client {
    async fn storage(&self, request: String) -> std::io::Result<String> {
        let mut replies = self.inbox.storage.lock().await;
        send(&format!("S {request}"));
        replies
            .recv()
            .await
            .ok_or_else(|| std::io::Error::other("the parent closed the storage"))
    }

    async fn acquire(
        &self,
        design: &dyn LockDesign,
        key: &str,
        options: AcquireOptions,
    ) -> Option<lock_impl::Guard> {
        let id = self.rec.invoke(OpF::Acquire, |o| o.key = Some(key.into()));
        let outcome = design.acquire(key, options).await;
        let (phase, guard, detail) = sim::outcome::acquired(outcome);
        self.rec.complete(id, OpF::Acquire, phase, |o| {
            o.key = Some(key.into());
            o.detail = detail;
            if let Some(g) = &guard {
                o.owner = Some(g.owner.clone());
                o.token = g.token;
                o.value = Some(1);
                o.valid_until_us = g.valid_until.map(|local| {
                    let t = self.clock.true_time_of(true_now(), local);
                    u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
                });
            }
        });
        guard
    }

    async fn release(&self, design: &dyn LockDesign, key: &str, guard: &lock_impl::Guard) {
        let id = self.rec.invoke(OpF::Release, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.value = Some(1);
        });
        let (phase, detail) = sim::outcome::released(design.release(guard).await);
        self.rec.complete(id, OpF::Release, phase, |o| {
            o.key = Some(key.into());
            o.owner = Some(guard.owner.clone());
            o.detail = Some(detail);
        });
    }

    /// Read the stock, work, write stock − 1 (the simulator's critical section).
    async fn critical_section(&self, guard: &lock_impl::Guard) {
        let token = guard.token;
        let name = &self.rec.host;
        let tok = token.map_or("-".to_string(), |t| t.to_string());
        let id = self.rec.invoke(OpF::Read, |o| o.token = token);
        let read = match self.storage(format!("R {name} {tok}")).await {
            Ok(reply) if reply == "REJECTED" => {
                self.rec.complete(id, OpF::Read, Phase::Fail, |o| {
                    o.detail = Some("rejected by fencing".into())
                });
                return;
            }
            Ok(reply) => match reply.parse::<i64>() {
                Ok(v) => {
                    self.rec
                        .complete(id, OpF::Read, Phase::Ok, |o| o.value = Some(v));
                    v
                }
                Err(_) => {
                    self.rec.complete(id, OpF::Read, Phase::Info, |o| {
                        o.detail = Some(format!("bad storage reply {reply:?}"))
                    });
                    return;
                }
            },
            Err(e) => {
                self.rec.complete(id, OpF::Read, Phase::Info, |o| {
                    o.detail = Some(e.to_string())
                });
                return;
            }
        };
        let extra = self.inbox.slow_ms.swap(0, Ordering::Relaxed);
        // Work lasts what the host's own clock says, as in the simulator.
        let work = Duration::from_millis(self.workload.work_ms + extra);
        self.clock.sleep_local(work, true_now).await;
        let id = self.rec.invoke(OpF::Write, |o| {
            o.value = Some(read - 1);
            o.token = token;
        });
        if let Some(margin) = self.workload.check_validity_ms {
            let left = guard.remaining(self.clock.monotonic(true_now()));
            if left.is_some_and(|l| l < Duration::from_millis(margin)) {
                let left_ms = left.unwrap_or_default().as_millis();
                self.rec.complete(id, OpF::Write, Phase::Fail, |o| {
                    o.detail = Some(format!(
                        "abandoned: {left_ms} ms of validity left, {margin} ms required"
                    ))
                });
                return;
            }
        }
        if self.inbox.pause_before_write.swap(0, Ordering::Relaxed) > 0 {
            // The parent stops this process now and says `P` once it lets it go on.
            let mut resume = self.inbox.resume.lock().await;
            send("P");
            let _ = resume.recv().await;
        }
        match self
            .storage(format!("W {name} {read} {} {tok}", read - 1))
            .await
        {
            Ok(reply) if reply == "OK" => self
                .rec
                .complete(id, OpF::Write, Phase::Ok, |o| o.value = Some(read - 1)),
            Ok(_) => self.rec.complete(id, OpF::Write, Phase::Fail, |o| {
                o.detail = Some("rejected by fencing".into())
            }),
            Err(e) => self.rec.complete(id, OpF::Write, Phase::Info, |o| {
                o.detail = Some(e.to_string())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_impl::Clock as _;

    /// The parent's lines move the design's clock as the simulator's nemesis moves a
    /// client host's: a step moves the wall clock only; a rate moves the monotonic
    /// clock, the wall clock and how long a sleep takes.
    #[tokio::test]
    async fn a_clients_clock_moves_as_the_parents_lines_say() {
        let host = HostClock::new(sim::clock::ClockSpec::default());
        let clock = RealClock {
            clock: host.clone(),
        };
        let (mono, wall) = (clock.now(), clock.wall());
        move_clock(&host, "C", "-60000");
        let back = wall.as_millis() as i64 - clock.wall().as_millis() as i64;
        assert!((59_990..=60_010).contains(&back), "stepped back {back} ms");
        assert!(
            clock.now() >= mono,
            "a step does not move the monotonic clock"
        );
        // Twice as fast from now: 200 ms on the host's clock take about 100 ms.
        let at = true_now().as_micros();
        move_clock(&host, "R", &format!("1000000 {at}"));
        assert_eq!(host.drift_ppm(), 1_000_000);
        let (t0, m0) = (std::time::Instant::now(), clock.now());
        clock.sleep(Duration::from_millis(200)).await;
        let took = t0.elapsed();
        let local = clock.now() - m0;
        assert!(
            local >= Duration::from_millis(200),
            "{local:?} on the host's clock"
        );
        assert!(
            took < Duration::from_millis(180),
            "a sleep of 200 ms at twice the rate took {took:?}"
        );
    }
}
