//! `locksim`: the command-line front end ([`reports::cli`]), over the built-in designs.

fn main() -> std::process::ExitCode {
    reports::cli::main_with(Vec::new())
}
