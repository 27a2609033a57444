//! `summary.md`: the report's Markdown summary.

use std::fmt::Write as _;

use super::{CellNote, clean_bound, invalid_rates, latency_rows, seeds_text};
use crate::compare::{self, Comparison};
use crate::report::Results;
use crate::table::{CellResult, matrix_mark};

/// `summary.md`: the matrix, the latency table, the sweeps and the first violations.
pub(in crate::report) fn summary_md(r: &Results, cells: &[CellNote]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# locksim report\n\n{} designs × {} scenarios. Seeds: {} (sweeps: seeds {}).\n\n\
         U unsafe, O overlap in belief only (the stale holder never wrote after the newer grant), F fenced, P promise broken without harm, ? unknown, L liveness, S safe, n fault never happened, · does not run; lower case (u o f p): every such run broke before the fault began; \
         a number counts the runs in that class when not all were.\n",
        r.designs.len(),
        r.scenarios.len(),
        seeds_text(r),
        r.sweep_seeds
    );
    o.push_str("| design |");
    for (i, _) in r.scenarios.iter().enumerate() {
        let _ = write!(o, " {} |", i + 1);
    }
    o.push_str("\n|---|");
    for _ in &r.scenarios {
        o.push_str("---|");
    }
    o.push('\n');
    for d in &r.designs {
        let _ = write!(o, "| {d} |");
        for s in &r.scenarios {
            let text = r
                .cells
                .iter()
                .find(|c| &c.design == d && &c.scenario == s)
                .map_or("·".to_string(), |c| matrix_mark(c).1);
            let _ = write!(o, " {text} |");
        }
        o.push('\n');
    }
    o.push_str("\nScenarios: ");
    o.push_str(
        &r.scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{} {s}", i + 1))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let by_system = Comparison::of(&r.cells);
    if !by_system.rows.is_empty() {
        o.push_str("\n\n## By system: the lock-service comparison\n\n");
        o.push_str(compare::render_markdown(&by_system).trim_end());
    }
    o.push_str("\n\n## Rates (95% intervals, exact Clopper–Pearson)\n\n");
    if let Some(b) = clean_bound(&r.cells) {
        let _ = writeln!(o, "{}{}.\n", b[..1].to_uppercase(), &b[1..]);
    }
    let broken: Vec<&CellResult> = r
        .cells
        .iter()
        .filter(|c| c.first_invalid_seed.is_some() || c.unsafe_rate().is_some_and(|u| u.count > 0))
        .collect();
    if broken.is_empty() {
        o.push_str("No cell has an invalid run.\n");
    } else {
        o.push_str("| design | scenario | unsafe | invalid runs by checker |\n|---|---|---|---|\n");
        for c in broken {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                c.design,
                c.scenario,
                c.unsafe_text(),
                invalid_rates(c).join("; ")
            );
        }
    }
    o.push_str("\n## Acquire latency (simulated ms)\n\n| design | outcome | count | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
    for (design, name, n, p50, p99, p999, max) in latency_rows(r) {
        let _ = writeln!(
            o,
            "| {design} | {name} | {n} | {p50:.1} | {p99:.1} | {p999:.1} | {max:.1} |"
        );
    }
    for s in &r.sweeps {
        let _ = writeln!(
            o,
            "\n## Sweep: {} × {} (unsafe runs / runs and the 95% interval, seeds {})\n",
            s.scenario, s.param, s.seeds
        );
        o.push_str("| design |");
        if let Some(l) = s.lines.first() {
            for p in &l.points {
                let _ = write!(o, " {} |", p.value);
            }
            o.push_str("\n|---|");
            for _ in &l.points {
                o.push_str("---|");
            }
        }
        o.push('\n');
        for l in &s.lines {
            let _ = write!(o, "| {} |", l.design);
            for p in &l.points {
                let u = p.cell.classes.get("unsafe").copied().unwrap_or(0) as u64;
                let _ = write!(o, " {} |", scenarios::stats::short(u, p.cell.runs));
            }
            o.push('\n');
        }
    }
    if !cells.is_empty() {
        o.push_str("\n## First violations\n\n");
        for c in cells {
            let _ = writeln!(
                o,
                "- **{} / {}** — {}: {}  \n  `{}`",
                c.design, c.scenario, c.checker, c.summary, c.replay
            );
        }
    }
    o
}
