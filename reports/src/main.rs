//! `locksim`: the command-line front end ([`reports::cli`]), over the built-in designs.

/// mimalloc as the binary's allocator: a world allocates for every message and every
/// command (the `redis` crate's pipeline, mlua's values, the models' replies), and
/// glibc's malloc and free were 15 to 18 % of a five-master world's instructions
/// (callgrind, `node-redlock × clock-drift`). The allocator changes no history: no
/// simulated path reads an address or iterates a map keyed by one.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`: 15 in v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // Free memory goes back to the system at once, not 10 ms later: every run is a
    // thread of its own (`sim::world::run_bounded`), and with the default delay a
    // 400-seed sweep peaked at 100 MB against glibc's 22 MB (40 MB with this).
    // SAFETY: setting an option is allowed at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    reports::cli::main_with(Vec::new())
}
