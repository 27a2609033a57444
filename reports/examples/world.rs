//! Runs one of the bench's worlds, for a profiler: `cargo run --release --example world
//! -- <reference|replicated|sentinels|five-masters|flash-sale> [seeds] [tick|jump]`.
use reports::bench::World;
use sim::world::Stepping;

/// The `locksim` binary's allocator, so the figures are the main job's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let world = match args.get(1).map(String::as_str) {
        Some("reference") | None => World::Reference,
        Some("replicated") => World::Replicated,
        Some("sentinels") => World::Sentinels,
        Some("five-masters") => World::FiveMasters,
        Some("flash-sale") => World::FlashSale,
        Some(other) => {
            eprintln!(
                "unknown world {other:?}: expected reference, replicated, sentinels, five-masters or flash-sale"
            );
            std::process::exit(2);
        }
    };
    let seeds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let stepping = match args.get(3).map(String::as_str) {
        Some("tick") => Stepping::Tick,
        _ => Stepping::default(),
    };
    for seed in 0..seeds {
        let t = std::time::Instant::now();
        let h = sim::world::run(&world.config(seed, stepping)).expect("run");
        println!(
            "seed {seed}: {} events in {:?}, {:?}",
            h.events.len(),
            t.elapsed(),
            h.stats
        );
    }
}
