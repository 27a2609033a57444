//! `locksim bench`: the figures the issue notes quote, measured in one process so that
//! ratios compare like with like.
//!
//! 1. Harness throughput on the reference scenario (1 Redis, 8 clients, storage, 60
//!    simulated seconds): simulated seconds and lock operations per wall second, next
//!    to a bare turmoil baseline with the same hosts exchanging the same requests (to
//!    Redis and to the storage, as the reference's median run did) on a fixed schedule
//!    over the same simulated time.
//!    Each world's host runs (a host's runtime run once by turmoil, the unit a run's
//!    cost is made of) and wall time per host run: the floor a world is near.
//! 2. The main job on a sample of the cells (every `sample`-th cell in catalog order,
//!    under the main job's adaptive rule, on every core): its wall and CPU time, host
//!    runs, and the whole job's CPU time extrapolated from it; each sampled cell's
//!    first violation (the seed that settled it and the wall time its runs took up to
//!    it), the slowest named.
//! 3. Peak resident memory of a 1,000-seed sweep on every core, measured on its own
//!    (the process's high-water mark is reset before it).
//!
//! Wall-clock time is read here, in the benchmark driver, never inside a simulation.

use std::time::{Duration, Instant};

use scenarios::catalog::{self, Scenario};
use scenarios::sweep::{DesignSpec, config, sweep};
use sim::world::{RunConfig, Stepping, Workload, run};

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Figures of the reference scenario.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Median wall time of one run.
    pub wall: Duration,
    /// Simulated time of one run.
    pub simulated: Duration,
    /// Request/reply pairs (Redis commands plus storage requests) per run.
    pub messages: u64,
    /// Of which storage requests.
    pub storage_requests: u64,
    /// Client operations completed per run.
    pub ops: u64,
    /// Host runs per run (`RunStats::host_runs`).
    pub host_runs: u64,
}

fn reference_config(seed: u64, replicas: usize, sentinels: u32, design: &str) -> RunConfig {
    let mut scenario = catalog::find("no-faults").expect("catalog scenario");
    scenario.workload = Workload {
        duration_ms: 60_000,
        drain_ms: 0,
        ..Workload::default()
    };
    for i in 1..=replicas {
        let mut replica = sim::world::ServerSpec::named(format!("redis-replica-{i}"));
        replica.replica_of = Some("redis".into());
        scenario.workload.servers.push(replica);
    }
    if sentinels > 0 {
        scenario.workload.sentinel = Some(sim::world::SentinelSpec {
            count: sentinels,
            down_after_ms: 1_000,
            failover_timeout_ms: 5_000,
            ..Default::default()
        });
    }
    // A design on several masters (Redlock) gets the one-master world multiplied.
    config(
        &DesignSpec::builtin(design).expect("built-in"),
        &scenario,
        seed,
    )
}

/// The worlds whose throughput the bench reports, each on both steppings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// The reference: `set-nx-px-lua`, one Redis, 8 clients, storage, 60 s.
    Reference,
    /// The reference plus 2 replicas following the master.
    Replicated,
    /// The replicated reference plus 3 Sentinels (clients ask them for the master).
    Sentinels,
    /// `redlock` on 5 independent masters, 8 clients, 60 s.
    FiveMasters,
    /// The catalog's `flash-sale` (100 clients), `set-nx-px-lua`, run for 10 s.
    FlashSale,
}

impl World {
    /// Every world, in the order the bench prints them.
    pub const ALL: [World; 5] = [
        World::Reference,
        World::Replicated,
        World::Sentinels,
        World::FiveMasters,
        World::FlashSale,
    ];

    /// What the line says.
    pub fn describe(self) -> &'static str {
        match self {
            World::Reference => "reference (set-nx-px-lua, 1 Redis, 8 clients, storage)",
            World::Replicated => "+ replicas (the same, 2 replicas following the master)",
            World::Sentinels => "+ Sentinels (the same, 3 Sentinels; clients ask them)",
            World::FiveMasters => "five masters (redlock on 5 independent masters)",
            World::FlashSale => "flash sale (set-nx-px-lua, 100 clients, try once)",
        }
    }

    /// The world's run for `seed` on `stepping`.
    pub fn config(self, seed: u64, stepping: Stepping) -> RunConfig {
        let mut cfg = match self {
            World::Reference => reference_config(seed, 0, 0, "set-nx-px-lua"),
            World::Replicated => reference_config(seed, 2, 0, "set-nx-px-lua"),
            World::Sentinels => reference_config(seed, 2, 3, "set-nx-px-lua"),
            World::FiveMasters => reference_config(seed, 0, 0, "redlock"),
            World::FlashSale => {
                let mut scenario = catalog::find("flash-sale").expect("catalog scenario");
                scenario.workload.duration_ms = 10_000;
                scenario.workload.drain_ms = 0;
                config(
                    &DesignSpec::builtin("set-nx-px-lua").expect("built-in"),
                    &scenario,
                    seed,
                )
            }
        };
        cfg.stepping = stepping;
        cfg
    }

    /// The figure it must reach, in simulated seconds per wall second (issue 22).
    pub fn target(self) -> f64 {
        match self {
            World::Reference => 1_000.0,
            _ => 300.0,
        }
    }
}

/// Runs `config(seed)` for seeds `0..repeats` and returns the figures of the run whose
/// wall time is the median.
pub fn throughput(repeats: u64, config: impl Fn(u64) -> RunConfig) -> Throughput {
    let mut runs: Vec<Throughput> = Vec::new();
    for seed in 0..repeats.max(1) {
        let cfg = config(seed);
        let start = Instant::now();
        let h = run(&cfg).expect("reference run");
        let wall = start.elapsed();
        runs.push(Throughput {
            wall,
            simulated: Duration::from_micros(h.end_us),
            messages: h.stats.redis_commands + h.stats.storage_requests,
            storage_requests: h.stats.storage_requests,
            ops: h
                .ops()
                .filter(|(_, o)| o.phase != sim::history::Phase::Invoke)
                .count() as u64,
            host_runs: h.stats.host_runs,
        });
    }
    runs.sort_by_key(|t| t.wall);
    runs[runs.len() / 2]
}

/// A bare turmoil world with the reference's hosts (`redis`, `storage`, 8 clients) and
/// its message pattern: each client sends its share of the reference run's Redis
/// commands to `redis` and of its storage requests to `storage`, one-line requests
/// echoed back, each sent at its own slot on a fixed schedule over `simulated` (so a
/// round trip delays no later request and the baseline simulates the same time).
/// Returns the median wall time and the simulated time the last run took.
pub fn baseline(reference: &Throughput, repeats: u64) -> (Duration, Duration) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let clients = 8u64;
    let simulated = reference.simulated;
    let to_redis = (reference.messages - reference.storage_requests) / clients;
    let to_storage = reference.storage_requests / clients;
    let mut walls = Vec::new();
    let mut took = Duration::ZERO;
    for seed in 0..repeats.max(1) {
        let start = Instant::now();
        let mut sim = turmoil::Builder::new()
            .rng_seed(seed)
            .simulation_duration(simulated + Duration::from_secs(60))
            .tick_duration(Duration::from_millis(1))
            .min_message_latency(Duration::from_millis(1))
            .max_message_latency(Duration::from_millis(2))
            .build();
        for host in ["redis", "storage"] {
            sim.host(host, || async {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 6379)).await?;
                loop {
                    let (stream, _) = listener.accept().await?;
                    tokio::task::spawn_local(async move {
                        let (r, mut w) = stream.into_split();
                        let mut lines = BufReader::new(r).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            if w.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        }
        let ended = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
        for i in 0..clients {
            let ended = ended.clone();
            sim.client(format!("client-{i}"), async move {
                // One connection to each server, as a reference client has.
                let drive = |host: &'static str, count: u64| async move {
                    let stream = turmoil::net::TcpStream::connect((host, 6379)).await?;
                    let (r, mut w) = stream.into_split();
                    let mut lines = BufReader::new(r).lines();
                    let t0 = tokio::time::Instant::now();
                    for n in 0..count {
                        // Request n's slot on the schedule, whatever the replies cost.
                        let slot = simulated.mul_f64(n as f64 / count.max(1) as f64);
                        tokio::time::sleep_until(t0 + slot).await;
                        w.write_all(
                            format!("SET lock:stock client-{i}-{n} NX PX 200\n").as_bytes(),
                        )
                        .await?;
                        lines.next_line().await?;
                    }
                    tokio::time::sleep_until(t0 + simulated).await;
                    Ok::<(), Box<dyn std::error::Error>>(())
                };
                let (a, b) = tokio::join!(drive("redis", to_redis), drive("storage", to_storage));
                a?;
                b?;
                let mut e = ended.lock().expect("baseline clock");
                *e = (*e).max(turmoil::sim_elapsed().unwrap_or_default());
                Ok(())
            });
        }
        sim.run().expect("baseline run");
        walls.push(start.elapsed());
        took = *ended.lock().expect("baseline clock");
    }
    (median(walls), took)
}

/// This process's CPU time (user and system, every thread), for the sample's figures
/// on a machine shared with other work.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Every `k`-th cell of `cells` (the first, then every `k`-th after it): a sample spread
/// over every design and scenario, the same on every machine.
pub fn sample<T: Clone>(cells: &[T], k: usize) -> Vec<T> {
    cells.iter().step_by(k.max(1)).cloned().collect()
}

/// The main job's adaptive pass over `cells`: what it cost and how each cell settled.
pub struct SamplePass {
    /// Each cell, in order.
    pub cells: Vec<crate::cells::AdaptiveCell>,
    /// Wall time of the pass.
    pub wall: Duration,
    /// CPU time of the pass (the process's, every thread).
    pub cpu: Duration,
}

/// Runs `cells` under the main job's rule on `threads` threads.
pub fn main_job_pass(cells: &[(DesignSpec, Scenario)], threads: usize) -> SamplePass {
    let pairs: Vec<(&DesignSpec, &Scenario)> = cells.iter().map(|(d, s)| (d, s)).collect();
    let bar = crate::cells::progress_cells(pairs.len() as u64, true);
    let (wall0, cpu0) = (Instant::now(), cpu_now());
    let out = crate::cells::run_cells_adaptive(
        &pairs,
        scenarios::adaptive::Rule::DEFAULT,
        0,
        threads,
        &bar,
    )
    .expect("a catalog cell's configuration is valid");
    bar.finish_and_clear();
    SamplePass {
        cells: out,
        wall: wall0.elapsed(),
        cpu: cpu_now().saturating_sub(cpu0),
    }
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Runs every benchmark and prints the figures.
pub fn run_all(repeats: u64, memory_seeds: u64, threads: usize, sample_every: usize) {
    println!("locksim bench: repeats={repeats} memory_seeds={memory_seeds} threads={threads}");
    print_throughput(repeats);
    print_main_job(threads, sample_every);
    print_memory(memory_seeds, threads);
}

/// 1: the reference world's throughput against bare turmoil, and each world's
/// simulated seconds per wall second, jumping against tick-by-tick stepping.
fn print_throughput(repeats: u64) {
    // Each world on both steppings, in this one process: jumping (what every command
    // runs) against tick-by-tick stepping (turmoil's own; the same histories, proven
    // by scenarios/tests/suite/stepping.rs).
    let worlds: Vec<(World, Throughput, Throughput)> = World::ALL
        .iter()
        .map(|&w| {
            let jump = throughput(repeats, |seed| w.config(seed, Stepping::Jump));
            let tick = throughput(repeats, |seed| w.config(seed, Stepping::Tick));
            (w, jump, tick)
        })
        .collect();
    let r = worlds[0].1;
    let (base, base_simulated) = baseline(&r, repeats);
    let sim_rate = r.simulated.as_secs_f64() / r.wall.as_secs_f64();
    let harness_msgs = r.messages as f64 / r.wall.as_secs_f64();
    let base_msgs = r.messages as f64 / base.as_secs_f64();
    println!(
        "\n1. reference scenario (set-nx-px-lua, no-faults, 8 clients, {:.0} simulated s), median of {repeats}:",
        r.simulated.as_secs_f64()
    );
    println!(
        "   harness:  {:>8.1} ms wall, {:>6.1} simulated s per wall s, {:>9.0} lock ops per wall s, {:>9.0} request/replies per wall s ({} per run)",
        r.wall.as_secs_f64() * 1e3,
        sim_rate,
        r.ops as f64 / r.wall.as_secs_f64(),
        harness_msgs,
        r.messages
    );
    println!(
        "   baseline: {:>8.1} ms wall, bare turmoil, same 10 hosts, same {} request/replies ({} to the storage) over {:.1} simulated s: {:>9.0} per wall s",
        base.as_secs_f64() * 1e3,
        r.messages,
        r.storage_requests,
        base_simulated.as_secs_f64(),
        base_msgs
    );
    println!(
        "   harness / baseline throughput: {:.2} (target ≥ 0.5)",
        harness_msgs / base_msgs
    );
    println!(
        "\n   simulated s per wall s, median of {repeats}: jumping to the next event (the default) against tick-by-tick stepping, in this run:"
    );
    println!(
        "   {:<56} {:>6} {:>9} {:>9} {:>9} {:>6} {:>7} {:>10} {:>8}",
        "world", "sim s", "jump ms", "jump x", "tick x", "ratio", "target", "host runs", "µs/run"
    );
    for (w, jump, tick) in &worlds {
        let rate = |t: &Throughput| t.simulated.as_secs_f64() / t.wall.as_secs_f64();
        println!(
            "   {:<56} {:>6.0} {:>9.1} {:>9.0} {:>9.0} {:>6.2} {:>7} {:>10} {:>8.2}",
            w.describe(),
            jump.simulated.as_secs_f64(),
            jump.wall.as_secs_f64() * 1e3,
            rate(jump),
            rate(tick),
            rate(jump) / rate(tick),
            format!(
                "{}{:.0}",
                if rate(jump) >= w.target() { "ok " } else { "<" },
                w.target()
            ),
            jump.host_runs,
            jump.wall.as_secs_f64() * 1e6 / jump.host_runs.max(1) as f64
        );
    }
}

/// 2: the main job's adaptive pass over a sample of the catalog's cells, and the
/// cells' first violations, slowest first.
fn print_main_job(threads: usize, sample_every: usize) {
    let cells: Vec<(DesignSpec, Scenario)> = lock_impl::DESIGNS
        .iter()
        .flat_map(|d| {
            catalog::catalog()
                .into_iter()
                .filter(move |s| s.applies_to(d.backend, d.masters))
                .map(move |s| (DesignSpec::from_info(d), s))
        })
        .collect();
    let picked = sample(&cells, sample_every);
    println!(
        "\n2. the main job (adaptive seeds, its budget) on one cell in {} in catalog order: {} of {} cells, {threads} threads:",
        sample_every.max(1),
        picked.len(),
        cells.len()
    );
    let pass = main_job_pass(&picked, threads);
    let runs: u64 = pass.cells.iter().map(|c| c.cell.runs).sum();
    let host_runs: u64 = pass.cells.iter().map(|c| c.cost).sum();
    // The cells an unsafe run settled: counted here, listed slowest first below.
    let mut firsts: Vec<&crate::cells::AdaptiveCell> = pass
        .cells
        .iter()
        .filter(|c| {
            c.cell
                .settled
                .as_ref()
                .is_some_and(|s| s.violation().is_some())
        })
        .collect();
    let settled = firsts.len();
    let weak = pass
        .cells
        .iter()
        .filter(|c| c.cell.settled.as_ref().is_some_and(|s| s.is_weak()))
        .count();
    let scale = cells.len() as f64 / picked.len().max(1) as f64;
    println!(
        "   {:.1} s wall, {:.1} s CPU; {runs} runs, {host_runs} host runs ({:.2} µs of CPU each); {settled} cells unsafe (settled), {} bounded, {weak} of them weak",
        pass.wall.as_secs_f64(),
        pass.cpu.as_secs_f64(),
        pass.cpu.as_secs_f64() * 1e6 / host_runs.max(1) as f64,
        pass.cells.len() - settled
    );
    println!(
        "   the whole main job, extrapolated (× {scale:.1}): about {:.0} s of CPU, {:.0} s wall on {threads} threads",
        pass.cpu.as_secs_f64() * scale,
        pass.wall.as_secs_f64() * scale
    );
    println!(
        "   first violations (the seed that settled the cell; its runs\' wall time up to it, runs ahead on other threads included), slowest first:"
    );
    firsts.sort_by_key(|c| std::cmp::Reverse(c.wall));
    for c in &firsts {
        println!(
            "   {:<26} {:<24} seed {:>3}  {:>8.1} ms",
            c.cell.design,
            c.cell.scenario,
            c.cell
                .settled
                .as_ref()
                .and_then(|s| s.violation())
                .unwrap_or_default(),
            c.wall.as_secs_f64() * 1e3
        );
    }
    if let Some(c) = firsts.first() {
        println!(
            "   slowest first violation in the sample: {} × {}, {:.1} ms (target < 1000 ms)",
            c.cell.design,
            c.cell.scenario,
            c.wall.as_secs_f64() * 1e3
        );
    }
}

/// 3: the peak memory of a long sweep.
fn print_memory(memory_seeds: u64, threads: usize) {
    // The sweep's own peak: reset the process's high-water mark first (Linux:
    // `5` in /proc/self/clear_refs), so the earlier phases do not count.
    let before = peak_rss_kib();
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let design = DesignSpec::builtin("set-nx-px-lua").expect("built-in");
    let scenario = catalog::find("gc-pause").expect("catalog");
    let start = Instant::now();
    let runs = sweep(
        &design,
        &scenario,
        0..memory_seeds,
        threads,
        false,
        &|_, _| {},
    )
    .expect("sweep");
    let wall = start.elapsed();
    let after = peak_rss_kib();
    println!(
        "\n3. sweep of {} seeds (set-nx-px-lua, gc-pause) on {threads} threads: {:.1} s wall, {:.1} runs/s; peak RSS {} {} MiB (the whole process's peak before it: {} MiB)",
        runs.len(),
        wall.as_secs_f64(),
        runs.len() as f64 / wall.as_secs_f64(),
        if reset {
            "during the sweep alone"
        } else {
            "(whole process: the high-water mark could not be reset)"
        },
        after.map_or("?".into(), |k| (k / 1024).to_string()),
        before.map_or("?".into(), |k| (k / 1024).to_string())
    );
}
