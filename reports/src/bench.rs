//! `locksim bench`: the figures the issue notes quote, measured in one process so that
//! ratios compare like with like.
//!
//! 1. Harness throughput on the reference scenario (1 Redis, 8 clients, storage, 60
//!    simulated seconds): simulated seconds and lock operations per wall second, next
//!    to a bare turmoil baseline with the same hosts exchanging the same requests (to
//!    Redis and to the storage, as the reference's median run did) on a fixed schedule
//!    over the same simulated time.
//! 2. Wall time to the first Invalid run of every (design, scenario, checker) cell that
//!    has one, searching sequentially from seed 0.
//! 3. Peak resident memory of a 1,000-seed sweep on every core, measured on its own
//!    (the process's high-water mark is reset before it).
//!
//! Wall-clock time is read here, in the benchmark driver, never inside a simulation.

use std::time::{Duration, Instant};

use scenarios::catalog::{self, Scenario};
use scenarios::sweep::{DesignSpec, config, run_seed, sweep};
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

/// For one cell, runs seeds `0..bound` in order and returns, per checker, the first
/// Invalid seed and the wall time from the start of the search to the end of that run.
pub fn time_to_first_invalid(
    design: &DesignSpec,
    scenario: &Scenario,
    bound: u64,
) -> Vec<(String, u64, Duration)> {
    let start = Instant::now();
    let mut found: Vec<(String, u64, Duration)> = Vec::new();
    for seed in 0..bound {
        let s = run_seed(design, scenario, seed, false).expect("run");
        for (name, v) in &s.verdicts {
            if v.is_invalid() && !found.iter().any(|(n, _, _)| n == name) {
                found.push((name.clone(), seed, start.elapsed()));
            }
        }
    }
    found
}

/// [`time_to_first_invalid`] for every cell, the cells shared among `threads` workers
/// (each cell searched by one worker, so its time is its own); in cell order.
pub fn first_invalid_per_cell(
    cells: &[(DesignSpec, Scenario)],
    bound: u64,
    threads: usize,
) -> Vec<Vec<(String, u64, Duration)>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![Vec::new(); cells.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((design, scenario)) = cells.get(i) else {
                        break;
                    };
                    let found = time_to_first_invalid(design, scenario, bound);
                    results.lock().expect("bench results")[i] = found;
                }
            });
        }
    });
    results.into_inner().expect("bench results")
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
pub fn run_all(repeats: u64, memory_seeds: u64, threads: usize, search_bound: u64) {
    println!("locksim bench: repeats={repeats} memory_seeds={memory_seeds} threads={threads}");
    // Each world on both steppings, in this one process: jumping (what every command
    // runs) against tick-by-tick stepping (turmoil's own, what ran before; the same
    // histories, proven by scenarios/tests/stepping.rs).
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
        "   {:<56} {:>6} {:>9} {:>9} {:>9} {:>6} {:>7}",
        "world", "sim s", "jump ms", "jump x", "tick x", "ratio", "target"
    );
    for (w, jump, tick) in &worlds {
        let rate = |t: &Throughput| t.simulated.as_secs_f64() / t.wall.as_secs_f64();
        println!(
            "   {:<56} {:>6.0} {:>9.1} {:>9.0} {:>9.0} {:>6.2} {:>7}",
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
            )
        );
    }

    println!(
        "\n2. wall time to the first Invalid run of each checker, searching seeds 0..{search_bound} in order (cells on {threads} threads, each searched by one):"
    );
    let cells: Vec<(DesignSpec, Scenario)> = lock_impl::DESIGNS
        .iter()
        .flat_map(|d| {
            catalog::catalog()
                .into_iter()
                .filter(move |s| s.applies_to(d.backend, d.masters))
                .map(move |s| (DesignSpec::from_info(d), s))
        })
        .collect();
    let found = first_invalid_per_cell(&cells, search_bound, threads);
    let mut slowest: Option<(String, Duration)> = None;
    for ((design, scenario), found) in cells.iter().zip(&found) {
        for (c, seed, wall) in found {
            println!(
                "   {:<20} {:<22} {:<17} seed {:>3}  {:>7.1} ms",
                design.name,
                scenario.name,
                c,
                seed,
                wall.as_secs_f64() * 1e3
            );
            if slowest.as_ref().is_none_or(|(_, w)| wall > w) {
                slowest = Some((format!("{} × {} ({c})", design.name, scenario.name), *wall));
            }
        }
    }
    if let Some((cell, wall)) = slowest {
        println!(
            "   slowest first violation: {cell}, {:.1} ms (target < 1000 ms)",
            wall.as_secs_f64() * 1e3
        );
    }

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
