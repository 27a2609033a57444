//! `locksim`: the command-line front end ([`reports::cli`]), over the built-in designs.

/// mimalloc as the binary's allocator: a world allocates for every message and every
/// command (the `redis` crate's pipeline, mlua's values, the models' replies), and
/// glibc's malloc and free were 15 to 18 % of a five-master world's instructions
/// (callgrind, `node-redlock × clock-drift`). The allocator changes no history: no
/// simulated path reads an address or iterates a map keyed by one.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    reports::cli::main_with(Vec::new())
}
