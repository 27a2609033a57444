//! `locksim`: the command-line front end ([`reports::cli`]), over the built-in designs.

/// mimalloc as the binary's allocator: a world allocates for every message and every
/// command (the `redis` crate's pipeline, mlua's values, the models' replies), and
/// glibc's malloc and free were 15 to 18 % of a five-master world's instructions
/// (callgrind, `node-redlock × clock-drift`). The allocator changes no history: no
/// simulated path reads an address or iterates a map keyed by one. Its price is memory
/// (docs/performance.md, stop 38): purging at once instead (`mi_option_purge_delay` 0)
/// took a third less peak memory but added 6 % of system CPU time to the main job.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    reports::cli::main_with(Vec::new())
}
