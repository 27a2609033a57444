//! `locksim report`: the report directory, and the lines the command prints about it.

use std::process::ExitCode;

use crate::exit::EXIT_UNKNOWN;

/// `locksim report`.
pub fn report(args: &crate::report::ReportArgs) -> ExitCode {
    println!(
        "locksim report: {} designs × {} scenarios, {}, sweeps {}, into {}",
        args.designs.len(),
        args.scenarios.len(),
        args.seeds.describe(),
        if args.sweeps {
            format!("seeds {}..{}", args.sweep_seeds.start, args.sweep_seeds.end)
        } else {
            "off".into()
        },
        args.out.display()
    );
    match crate::report::build(args) {
        Ok((results, page)) => {
            let failing = results
                .cells
                .iter()
                .filter(|c| c.first_invalid_seed.is_some())
                .count();
            println!(
                "wrote {} (open it in a browser), {}, {} and {} ({failing} of {} cells have an invalid run)",
                page.display(),
                args.out.join("summary.md").display(),
                args.out.join("results.json").display(),
                if args.full {
                    format!("{} (every plot)", args.out.join("png").display())
                } else {
                    format!(
                        "{} (a page per failing cell)",
                        args.out.join("cells").display()
                    )
                },
                results.cells.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("locksim report: {e}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}
