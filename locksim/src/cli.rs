//! The `locksim` command over your own designs: a binary in your crate that failure
//! messages' replay and shrink commands run.
//!
//! ```no_run
//! // src/bin/locksim.rs
//! fn main() -> std::process::ExitCode {
//!     # let my_design = || locksim::builtin("set-nx-px-lua").named("my-lock");
//!     locksim::cli::main([my_design()])
//! }
//! ```
//!
//! Then, in your crate, `cargo run --bin locksim -- replay --design my-lock --scenario
//! gc-pause --seed 7` is the command a failure printed, and every other subcommand
//! (`run`, `shrink`, `explore`, `sweep`, `report`, `gate`, `list`, the matrix with no
//! subcommand) takes `--design my-lock` too, and includes it by default where the
//! plain command runs every built-in design. `cargo run --bin locksim -- --help` lists
//! them; docs/commands.md describes each.

use std::process::ExitCode;

use crate::Design;

/// Runs the `locksim` command over the process's arguments, with `designs` found by
/// name before the built-ins: what your binary's `main` returns.
pub fn main(designs: impl IntoIterator<Item = Design>) -> ExitCode {
    reports::cli::main_with(specs(designs))
}

/// Runs the `locksim` command over `args` (the first is the program's name) with
/// `designs`, in this process: for a test that runs a printed command. Its output goes
/// to this process's stdout and stderr; the exit code is the command's (0 valid, 1
/// invalid, 2 bad input, 3 unknown).
///
/// ```
/// use std::process::ExitCode;
/// let design = locksim::builtin("set-nx-px-lua").named("my-lock");
/// let code = locksim::cli::run(
///     ["locksim", "replay", "--design", "my-lock", "--scenario", "no-faults", "--seed", "0"],
///     [design],
/// );
/// assert_eq!(code, ExitCode::SUCCESS);
/// ```
pub fn run<I, T>(args: I, designs: impl IntoIterator<Item = Design>) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    reports::cli::run_from(args, specs(designs))
}

fn specs(designs: impl IntoIterator<Item = Design>) -> Vec<scenarios::sweep::DesignSpec> {
    designs.into_iter().map(|d| d.spec().clone()).collect()
}
