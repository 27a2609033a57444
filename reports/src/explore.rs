//! `locksim explore`: the step × fault grid of [`scenarios::explore`], as a person
//! reads it, with a plan file and a replay command for every placement that broke
//! something.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use scenarios::catalog::Scenario;
use scenarios::explore::{Exploration, Params, Sort};
use scenarios::planfile::PlanFile;
use scenarios::sweep::DesignSpec;

use crate::exit::{EXIT_UNKNOWN, code_of};
use crate::input::BadInput;

/// Marks a directory as explore's own (so a re-run may replace its plan files).
const MARKER: &str = ".locksim-explore";

/// A checker's two-letter code in the grid (`mutual-exclusion` → `ME`); a checker
/// without one shows its initials.
pub fn code(checker: &str) -> String {
    let known = match checker {
        "mutual-exclusion" => "ME",
        "lost-update" => "LU",
        "token-order" => "TO",
        "ownership" => "OW",
        "overrun" => "OR",
        "liveness" => "LV",
        "waiter-liveness" => "WL",
        "reentrancy" => "RE",
        "validity" => "VA",
        "belief" => "BE",
        "rw-exclusion" => "RW",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    checker
        .split('-')
        .filter_map(|w| w.chars().next())
        .collect::<String>()
        .to_ascii_uppercase()
}

fn duration_text(d: u64, lease: u64) -> String {
    if lease == 0 {
        return format!("{d}ms");
    }
    let m = d as f64 / lease as f64;
    if (m - 0.5).abs() < 1e-9 {
        "½L".into()
    } else if (m - m.round()).abs() < 1e-9 {
        format!("{}L", m.round() as u64)
    } else {
        format!("{d}ms")
    }
}

/// The grid as text: one row per step and side, one column per fault and duration.
pub fn render(e: &Exploration) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "locksim explore: design={} scenario={} seed={} client={} lease={} ms: {} steps, {} placements",
        e.design,
        e.scenario,
        e.seed,
        e.client,
        e.lease_ms,
        e.steps.len(),
        e.runs
    );
    if !e.baseline_invalid.is_empty() {
        let _ = writeln!(
            o,
            "the fault-free run already fails {}: placements are judged on the other checkers",
            e.baseline_invalid.join(", ")
        );
    }
    let step_text = |i: Option<usize>| match i {
        Some(i) => {
            let st = &e.steps[i];
            format!("{:>2} {} ({}ms)", i + 1, st.label, st.at_us / 1_000)
        }
        None => "-".to_string(),
    };
    let after_w = e
        .rows
        .iter()
        .map(|r| step_text(r.after).len())
        .max()
        .unwrap_or(1);
    let before_w = e
        .rows
        .iter()
        .map(|r| step_text(r.before).len())
        .max()
        .unwrap_or(1);
    let label_w = 9 + after_w + 3 + before_w;
    let cell_w = e
        .rows
        .iter()
        .flat_map(|r| &r.outcomes)
        .map(|x| {
            x.broken
                .iter()
                .map(|b| code(b))
                .collect::<Vec<_>>()
                .join(",")
                .len()
        })
        .max()
        .unwrap_or(1)
        .max(5);
    // Header: fault kinds over their durations.
    let mut h1 = format!("{:label_w$}", "");
    let mut h2 = format!(
        "{:>7}  {:after_w$} | {:before_w$}",
        "at", "after step", "before step"
    );
    let mut last: Option<Sort> = None;
    for (sort, d) in &e.columns {
        let name = if last != Some(*sort) { sort.name() } else { "" };
        last = Some(*sort);
        let _ = write!(h1, " {name:<cell_w$}");
        let _ = write!(h2, " {:<cell_w$}", duration_text(*d, e.lease_ms));
    }
    let _ = writeln!(o, "{}", h1.trim_end());
    let _ = writeln!(o, "{}", h2.trim_end());
    for r in &e.rows {
        let label = format!(
            "{:>5}ms  {:after_w$} | {:before_w$}",
            r.at_ms,
            step_text(r.after),
            step_text(r.before)
        );
        let mut line = label;
        for x in &r.outcomes {
            let text = if x.broken.is_empty() {
                if x.unknown {
                    "?".to_string()
                } else {
                    ".".to_string()
                }
            } else {
                x.broken
                    .iter()
                    .map(|b| code(b))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let _ = write!(line, " {text:<cell_w$}");
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
    let mut codes: Vec<String> = e
        .rows
        .iter()
        .flat_map(|r| &r.outcomes)
        .flat_map(|x| x.broken.iter().cloned())
        .collect();
    codes.sort();
    codes.dedup();
    let legend = codes
        .iter()
        .map(|c| format!("{} {c}", code(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        o,
        "\n. nothing broke; ? a checker could not judge; {}; L = lease ({} ms)",
        if legend.is_empty() {
            "no placement broke anything".to_string()
        } else {
            format!("codes name the checkers a placement broke: {legend}")
        },
        e.lease_ms
    );
    o
}

/// Checks `--out`: new, empty, or an earlier explore's directory.
pub fn check_out(dir: &Path) -> Result<(), BadInput> {
    if !dir.exists() {
        return Ok(());
    }
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| BadInput(format!("cannot read --out {}: {e}", dir.display())))?
        .collect();
    if entries.is_empty() || dir.join(MARKER).exists() {
        return Ok(());
    }
    Err(BadInput(format!(
        "--out {} holds files explore did not write; choose a new or empty directory",
        dir.display()
    )))
}

/// `locksim explore`.
pub fn run(
    design: &DesignSpec,
    scenario: &Scenario,
    params: &Params,
    out: &Path,
    json: bool,
) -> Result<ExitCode, BadInput> {
    crate::input::check_pair(design, scenario)?;
    check_out(out)?;
    let e = match scenarios::explore::explore(design, scenario, params) {
        Ok(e) => e,
        Err(msg) => {
            eprintln!("locksim explore: {msg}");
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
    };
    // Per row and fault kind, the durations that broke the same checkers: one line,
    // one plan file (the shortest duration's) and its replay command.
    let mut written: Vec<(String, String)> = Vec::new();
    let mut created = false;
    for row in &e.rows {
        let mut groups: Vec<(Sort, &Vec<String>, Vec<&scenarios::explore::Outcome>)> = Vec::new();
        for x in row.outcomes.iter().filter(|x| !x.broken.is_empty()) {
            match groups
                .iter_mut()
                .find(|(s, b, _)| *s == x.sort && *b == &x.broken)
            {
                Some((_, _, xs)) => xs.push(x),
                None => groups.push((x.sort, &x.broken, vec![x])),
            }
        }
        for (sort, broken, xs) in groups {
            let first = xs[0];
            let file = out.join(format!(
                "{}-{}ms-at-{}ms.json",
                sort.name(),
                first.duration_ms,
                first.at_ms
            ));
            if !created {
                std::fs::create_dir_all(out)
                    .and_then(|()| {
                        std::fs::write(out.join(MARKER), "plan files written by locksim explore\n")
                    })
                    .map_err(|err| {
                        BadInput(format!("cannot write --out {}: {err}", out.display()))
                    })?;
                created = true;
            }
            let plan = PlanFile::new(&e.plan_of(first), &scenario.workload, &scenario.workload);
            std::fs::write(&file, plan.to_json())
                .map_err(|err| BadInput(format!("cannot write {}: {err}", file.display())))?;
            let what = format!(
                "{} {} at {} ms, after {} and before {}: breaks {}",
                sort.name(),
                xs.iter()
                    .map(|x| duration_text(x.duration_ms, e.lease_ms))
                    .collect::<Vec<_>>()
                    .join(","),
                row.at_ms,
                row.after.map_or("the start".to_string(), |i| format!(
                    "step {} ({})",
                    i + 1,
                    e.steps[i].label
                )),
                row.before.map_or("the end".to_string(), |i| format!(
                    "step {} ({})",
                    i + 1,
                    e.steps[i].label
                )),
                broken.join(", ")
            );
            let replay = format!(
                "locksim replay --design {} --scenario {} --seed {} --plan {}",
                e.design,
                e.scenario,
                e.seed,
                file.display()
            );
            written.push((what, replay));
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&e).expect("serializable")
        );
    } else {
        print!("{}", render(&e));
        if !written.is_empty() {
            println!(
                "\nplacements that broke something (plan files in {}):",
                out.display()
            );
            for (what, replay) in &written {
                println!("  {what}\n    {replay}");
            }
        }
    }
    Ok(ExitCode::from(code_of(
        !written.is_empty(),
        e.rows.iter().flat_map(|r| &r.outcomes).any(|x| x.unknown),
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_checker_has_its_own_code() {
        let names = scenarios::checkers::names();
        let mut codes: Vec<String> = names.iter().map(|n| super::code(n)).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), names.len(), "{codes:?}");
    }
}
