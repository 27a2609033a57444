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

/// The run's derived streams: each random stream's id for [`sub_seed`] (or, where a
/// model mixes the seed itself, its mask), named here so no two streams share one.
/// Changing a number changes every history that draws from its stream.
pub mod stream {
    /// turmoil's RNG (message latencies).
    pub const SIMULATION: u64 = 0;
    /// The nemesis's picks (which holder, which acquirer).
    pub const NEMESIS: u64 = 1;
    /// The MySQL world's servers.
    pub const MYSQL: u64 = 7;
    /// The MongoDB world's members.
    pub const MONGO: u64 = 8;
    /// A catalog scenario's fault plan drawn from the seed.
    pub const FAULT_PLAN: u64 = 0xFA17;
    /// The phase of the Sentinels' pings.
    pub const SENTINEL_PING_PHASE: u64 = 0xB007;
    /// The real-server runner's nemesis.
    pub const REAL_NEMESIS: u64 = 0x7ea1;
    /// Mixed into the MySQL world's seed for its replica's server.
    pub const MYSQL_REPLICA_MASK: u64 = 0x5eed;
    /// Mixed into the run's seed for the etcd members' election timeouts.
    pub const ETCD_ELECTION_MASK: u64 = 0xe7cd_0f1e_1ec7_1011;

    /// Sentinel `index`'s own stream (its run id, its timers).
    pub fn sentinel(index: usize) -> u64 {
        0x5E47_0000 + index as u64
    }

    /// The entropy (owner values) of a client's `stream_id`-th life
    /// (`index << 16 | incarnation`).
    pub fn client_entropy(stream_id: u64) -> u64 {
        2 + 2 * stream_id
    }

    /// The rounds (think times, read shares, segments) of a client's `stream_id`-th life.
    pub fn client_rounds(stream_id: u64) -> u64 {
        3 + 2 * stream_id
    }

    /// A host's own stream, by its name (FNV-1a: stable, no randomly seeded hasher):
    /// its uptime at the run's start, a Redis server's engine.
    pub fn host(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}
