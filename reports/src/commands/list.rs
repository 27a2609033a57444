//! `locksim list`: the designs, the broken-design catalog, scenarios and checkers, the
//! cells that do not run and why, and the one clock scale's constants.

use std::process::ExitCode;

use scenarios::catalog;
use scenarios::checkers;
use scenarios::sweep::DesignSpec;

/// `locksim list`, with the caller's own designs (`extra`) after the built-ins.
pub fn list(extra: &[DesignSpec]) -> ExitCode {
    println!("designs:");
    for d in lock_impl::DESIGNS {
        println!(
            "  {:<22} {} (from {}); known for: {}",
            d.name, d.summary, d.sources, d.known_failure
        );
    }
    for d in extra {
        println!(
            "  {:<22} your own design (on {} master{})",
            d.name,
            d.masters,
            if d.masters == 1 { "" } else { "s" }
        );
    }
    println!(
        "broken designs (caught by checker, in scenario; `locksim run --design broken/<name>`):"
    );
    for b in scenarios::broken::catalog() {
        println!(
            "  {:<29} {} ({}, in {}; a broken {})",
            format!("{}{}", scenarios::broken::PREFIX, b.name),
            b.bug,
            b.checker,
            b.scenario,
            b.parent
        );
    }
    println!("scenarios:");
    for s in catalog::catalog() {
        println!("  {:<22} {}", s.name, s.description);
    }
    println!("checkers:");
    for c in checkers::all_names() {
        println!("  {c}");
    }
    print!("{}", unfit_cells_table());
    print!("{}", time_scale_table());
    ExitCode::SUCCESS
}

/// Why each `.` cell of the matrix does not run: per scenario, the kinds of design it
/// does not fit (by system, and on Redis by the number of masters they lock on) with
/// the reason [`Scenario::fit`] gives.
pub fn unfit_cells_table() -> String {
    let mut kinds: Vec<(&str, lock_impl::Backend, usize)> = Vec::new();
    for d in lock_impl::DESIGNS {
        let label = if d.masters > 1 {
            "Redlock"
        } else {
            d.backend.name()
        };
        if !kinds.iter().any(|(l, _, _)| *l == label) {
            kinds.push((label, d.backend, d.masters));
        }
    }
    let mut out = String::from(
        "cells that do not run (`.` in the matrix), and why (by the designs' system; Redlock: designs on independent masters):\n",
    );
    for s in catalog::catalog() {
        let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
        for (label, backend, masters) in &kinds {
            let why = match s.missing(*backend) {
                Some(need) => format!("need {}", need.describe()),
                None => match s.fit(*backend, *masters) {
                    Ok(()) => continue,
                    Err(why) => why,
                },
            };
            match reasons.iter_mut().find(|(w, _)| *w == why) {
                Some((_, labels)) => labels.push(label),
                None => reasons.push((why, vec![label])),
            }
        }
        if reasons.is_empty() {
            continue;
        }
        let text: Vec<String> = reasons
            .into_iter()
            .map(|(why, labels)| format!("{}: {why}", labels.join(", ")))
            .collect();
        out.push_str(&format!("  {:<24} {}\n", s.name, text.join("; ")));
    }
    out
}

/// The one clock scale's constants (`lock_impl::scale`), as `locksim list` prints them:
/// each client constant and server start with its real value, its value in the
/// catalog's world (200 ms leases, 1/150 of real time), how it scales and its source.
pub fn time_scale_table() -> String {
    use lock_impl::scale::{CONSTANTS, SERVER_STARTS, Scaling, TimeScale};
    let catalog = TimeScale::for_lease(catalog::base().lease_ms);
    let mut out = format!(
        "time scale: a world's lease stands for {} ms of real time; the catalog's {} ms lease runs at {}; every constant below is read through it:\n",
        lock_impl::scale::REFERENCE_LEASE_MS,
        catalog::base().lease_ms,
        catalog.describe()
    );
    for c in CONSTANTS.iter().chain(SERVER_STARTS) {
        let how = match c.scaling {
            Scaling::Scaled => "scaled".to_string(),
            Scaling::KeptReal { why } => format!("kept real: {why}"),
        };
        out.push_str(&format!(
            "  {:<66} real {:>6} ms, catalog {:>4} ms, {how}; {}\n",
            c.name,
            c.real_ms,
            catalog.ms_of(c),
            c.source
        ));
    }
    out
}
