//! The subcommands that are tools rather than cells of the matrix: `bench`,
//! `serve-model` and `parity`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use clap::Args;

use super::{Cx, Exec, threads};
use crate::commands;
use crate::input::{self, BadInput};

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    /// Runs per throughput figure (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeats: u64,
    /// Seeds in the memory sweep.
    #[arg(long, default_value_t = 1000)]
    memory_seeds: u64,
    /// The main job's pass runs every Kth cell of the catalog (1: every cell, about
    /// the main job's own time).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Worker threads for the sweep (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl Exec for BenchArgs {
    fn exec(self, _cx: &Cx) -> Result<ExitCode, BadInput> {
        crate::bench::run_all(
            self.repeats.max(1),
            self.memory_seeds,
            threads(self.threads),
            self.sample as usize,
        );
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Debug, Args)]
pub(super) struct ServeModelArgs {
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

impl Exec for ServeModelArgs {
    fn exec(self, _cx: &Cx) -> Result<ExitCode, BadInput> {
        let args = self;
        if !args.bind.is_loopback() && !args.allow_non_loopback {
            eprintln!(
                "locksim serve-model: refusing to bind non-loopback address {}: the model has \
                 no authentication; pass --allow-non-loopback to do it anyway",
                args.bind
            );
            return Ok(ExitCode::from(2));
        }
        Ok(
            match sim::redis::serve_model(SocketAddr::new(args.bind, args.port)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("locksim serve-model: {e}");
                    ExitCode::FAILURE
                }
            },
        )
    }
}

#[derive(Debug, Args)]
pub(super) struct ParityArgs {
    /// Real runs per cell (seeds 0..N: the same fault plans the simulator draws).
    #[arg(long, default_value_t = 20)]
    runs: u64,
    /// Simulator seeds per cell: A..B or N.
    #[arg(long, default_value = "0..100", allow_hyphen_values = true)]
    model_seeds: String,
    /// A cell, DESIGN,SCENARIO (repeatable; default: the headline cells, see
    /// `docs/parity.md`).
    #[arg(long = "cell")]
    cells: Vec<String>,
    /// Worker threads for the simulator's side (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Also write the table (Markdown) to FILE (never over an existing file).
    #[arg(long)]
    markdown: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl Exec for ParityArgs {
    fn exec(self, _cx: &Cx) -> Result<ExitCode, BadInput> {
        let a = self;
        let cells: Vec<(String, String)> = if a.cells.is_empty() {
            crate::parity::HEADLINE
                .iter()
                .map(|(d, s)| (d.to_string(), s.to_string()))
                .collect()
        } else {
            a.cells
                .iter()
                .map(|c| {
                    c.split_once(',')
                        .map(|(d, s)| (d.trim().to_string(), s.trim().to_string()))
                        .ok_or_else(|| {
                            BadInput(format!(
                                "invalid --cell '{c}': expected DESIGN,SCENARIO (e.g. set-nx-px-lua,gc-pause)"
                            ))
                        })
                })
                .collect::<Result<_, _>>()?
        };
        if a.runs == 0 {
            return Err(BadInput(
                "invalid --runs 0: expected at least 1 real run per cell".into(),
            ));
        }
        let seeds = input::parse_seeds(&a.model_seeds)?;
        if let Some(path) = &a.markdown
            && path.exists()
        {
            return Err(BadInput(format!(
                "--markdown {}: the file exists; name a new one",
                path.display()
            )));
        }
        Ok(commands::parity(
            &cells,
            a.runs,
            seeds,
            threads(a.threads),
            a.markdown.as_deref(),
            a.json,
        ))
    }
}
