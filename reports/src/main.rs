//! `locksim`: the command-line front end. Parsing only; the work lives in the library
//! crates.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

/// Deterministic simulation of distributed Redis locks.
#[derive(Debug, Parser)]
#[command(name = "locksim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Redis model on a real TCP port with the real clock, to poke at it with
    /// redis-cli or any client.
    ServeModel(ServeModelArgs),
}

#[derive(Debug, Args)]
struct ServeModelArgs {
    /// TCP port to listen on.
    #[arg(long)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Allow binding a non-loopback address (the model has no authentication).
    #[arg(long)]
    allow_non_loopback: bool,
}

fn serve_model(args: ServeModelArgs) -> ExitCode {
    if !args.bind.is_loopback() && !args.allow_non_loopback {
        eprintln!(
            "locksim serve-model: refusing to bind non-loopback address {}: the model has \
             no authentication; pass --allow-non-loopback to do it anyway",
            args.bind
        );
        return ExitCode::from(2);
    }
    match sim::redis::serve_model(SocketAddr::new(args.bind, args.port)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("locksim serve-model: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => {
            // Later: the main job. For now, help.
            let _ = Cli::command().print_help();
            ExitCode::SUCCESS
        }
        Some(Command::ServeModel(args)) => serve_model(args),
    }
}
