//! The run's seed, split: every random stream of a run (the simulation's, the
//! nemesis's, each client's, each host's boot time) is drawn from a sub-seed of it, so
//! the same seed gives the same history. A floor below `world`, so the models and
//! clocks use it without importing the world.

/// Mixes the run seed with a stream id: independent, reproducible sub-seeds.
pub fn sub_seed(seed: u64, stream: u64) -> u64 {
    // SplitMix64 finaliser over seed ^ stream·golden.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
