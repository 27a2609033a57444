//! `locksim parity`: the front end of [`crate::parity`].

use std::ops::Range;
use std::process::ExitCode;

use crate::exit::{EXIT_BAD_INPUT, EXIT_UNKNOWN};

/// `locksim parity`.
pub fn parity(
    cells: &[(String, String)],
    real_runs: u64,
    model_seeds: Range<u64>,
    threads: usize,
    markdown: Option<&std::path::Path>,
    json: bool,
) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("locksim parity: cannot find this binary: {e}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let rows = match crate::parity::run(cells, real_runs, model_seeds, threads, &exe, !json) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("locksim parity: {e}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let table = crate::parity::markdown(&rows);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("serializable")
        );
    } else {
        print!("{table}");
    }
    if let Some(path) = markdown
        && let Err(e) = std::fs::write(path, &table)
    {
        eprintln!("locksim parity: cannot write {}: {e}", path.display());
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let flagged = rows.iter().filter(|r| !r.flags.is_empty()).count();
    if flagged > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
