//! `locksim sweep`: designs at every value of one scenario parameter, printed and
//! optionally plotted.

use std::ops::Range;
use std::process::ExitCode;

use scenarios::catalog::Scenario;
use scenarios::sweep::DesignSpec;

use crate::cells::progress;
use crate::exit::{EXIT_BAD_INPUT, EXIT_UNKNOWN};
use crate::input::BadInput;

/// Where `locksim sweep` puts its result besides the table.
pub struct SweepOutput<'a> {
    /// Print JSON instead of the table.
    pub json: bool,
    /// Draw the plot to this `.svg` or `.png` file.
    pub plot: Option<&'a std::path::Path>,
    /// Run one shard of the seeds and write it to this file.
    pub shard: Option<(crate::shard::Shard, std::path::PathBuf)>,
}

/// `locksim sweep`: every design at every value of one parameter.
pub fn sweep_cmd(
    designs: &[DesignSpec],
    scenario: &Scenario,
    range: &scenarios::params::ParamRange,
    seeds: Range<u64>,
    threads: usize,
    out: SweepOutput<'_>,
) -> Result<ExitCode, BadInput> {
    let SweepOutput {
        json,
        plot: plot_to,
        shard,
    } = out;
    crate::sweeps::check(designs, scenario, range)?;
    let whole = seeds.clone();
    let seeds = shard.as_ref().map_or(seeds, |(s, _)| s.seeds_of(&whole));
    let plot_to = plot_to.map(plot_target).transpose()?;
    if !json {
        println!(
            "locksim sweep: scenario={}{} {}={} seeds={}..{} designs={} threads={threads}",
            scenario.name,
            scenario.param_flags(),
            range.param,
            range
                .values
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            seeds.start,
            seeds.end,
            designs
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let total = designs.len() as u64 * range.values.len() as u64 * (seeds.end - seeds.start);
    let bar = progress(total, !json);
    let result = crate::sweeps::run(designs, scenario, range, seeds.clone(), threads, &bar);
    bar.finish_and_clear();
    let (part, exit) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("locksim sweep: {e}");
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
    };
    let result = crate::sweeps::of_shard(&part, &format!("{}..{}", seeds.start, seeds.end));
    if let Some((s, path)) = &shard {
        let whole_text = format!("{}..{}", whole.start, whole.end);
        crate::shard::write_file(
            path,
            &crate::shard::ShardFile {
                seeds: whole_text.clone(),
                shard: s.to_string(),
                split: crate::shard::Split::Seeds,
                of_cells: None,
                cells: Vec::new(),
                sweep_seeds: Some(whole_text),
                sweeps: vec![part],
            },
        )?;
    }
    if let Some((path, png)) = &plot_to {
        let written = if *png {
            crate::plot::render(&result.plot(), Some(path)).map(|_| ())
        } else {
            crate::plot::render(&result.plot(), None).and_then(|svg| {
                std::fs::write(path, svg)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            })
        };
        if let Err(e) = written {
            eprintln!("locksim sweep: --plot: {e}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).expect("serializable")
        );
    } else {
        print!("{}", result.render_text());
        println!(
            "cells count unsafe runs / runs; * marks a point where the scenario's fault did not happen in every run."
        );
        for (design, value, replay) in result.replays().into_iter().take(20) {
            println!("{design} at {}={value}: {replay}", result.param);
        }
        if let Some((path, _)) = &plot_to {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::from(exit))
}

/// Checks `--plot`: `.svg` or `.png`, never over an existing file. Returns the path and
/// whether it is a PNG.
fn plot_target(path: &std::path::Path) -> Result<(std::path::PathBuf, bool), BadInput> {
    let png = match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => false,
        Some("png") => true,
        _ => {
            return Err(BadInput(format!(
                "invalid --plot {}: the file name must end in .svg or .png",
                path.display()
            )));
        }
    };
    if path.exists() {
        return Err(BadInput(format!(
            "--plot {} exists; choose another file (locksim never writes over one)",
            path.display()
        )));
    }
    Ok((path.to_path_buf(), png))
}
