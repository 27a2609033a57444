//! `locksim`: the command-line front end ([`reports::cli`]), over the built-in designs.

/// mimalloc as the binary's allocator: a world allocates for every message and every
/// command (the `redis` crate's pipeline, mlua's values, the models' replies), and
/// glibc's malloc and free were 15 to 18 % of a five-master world's instructions
/// (callgrind, `node-redlock × clock-drift`). The allocator changes no history: no
/// simulated path reads an address or iterates a map keyed by one. Its price is memory
/// (the 1,000-seed sweep of `locksim bench` peaks at 131 to 162 MiB, 59 MiB with
/// glibc): purging at once instead (`mi_option_purge_delay` 0) took the main job's peak
/// from 393 to 346 MB but its system CPU time from 9 to 42 s (docs/performance.md,
/// "Tried and rejected").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    reports::cli::main_with(Vec::new())
}
