//! `locksim gate`: compare a fresh run with a committed baseline and fail on a
//! regression.
//!
//! A baseline (`locksim.baseline.json`) records, per design × scenario over a fixed
//! seed range, how many runs fell in each safety class, how many runs each checker
//! found invalid, and a latency budget: the acquire p99 in simulated milliseconds
//! (deterministic, so a budget means the same on every machine) with a quarter of
//! slack. A fresh run regresses a cell when more runs than before fall in a class at
//! least as bad as any given one (safe runs turned unsafe, fenced turned unsafe, …),
//! when a checker finds more invalid runs than before, or when the p99 exceeds its
//! budget. Everything else (fewer violations, new cells) is reported, not failed: a
//! human decides with `--update`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use scenarios::checkers::Safety;
use serde::{Deserialize, Serialize};

use std::ops::Range;
use std::process::ExitCode;

use scenarios::catalog;
use scenarios::sweep::DesignSpec;

use crate::cells::{progress, run_cells_fixed};
use crate::exit::{EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID};
use crate::input::{BadInput, check_pair, design, parse_seeds, scenario};
use crate::table::{CellResult, NO_FAULT};

/// The file the project and its users commit.
pub const DEFAULT_BASELINE: &str = "locksim.baseline.json";

/// A committed baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// The seed range every cell ran over (`A..B`).
    pub seeds: String,
    /// One entry per design × scenario.
    pub cells: Vec<BaselineCell>,
}

/// What one cell looked like when the baseline was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineCell {
    /// The design (a built-in name, or `broken/<name>`).
    pub design: String,
    /// The scenario.
    pub scenario: String,
    /// Runs judged.
    pub runs: u64,
    /// Runs per safety class (`unsafe`, `fenced`, `unknown`, `safe`, `no-fault`).
    pub classes: BTreeMap<String, usize>,
    /// Invalid runs per checker (checkers at zero are left out).
    pub invalid: BTreeMap<String, usize>,
    /// The acquire p99 may not exceed this, in simulated milliseconds.
    pub p99_budget_ms: f64,
}

impl Baseline {
    /// A baseline from a run's cells: the counts as they are, and a p99 budget of the
    /// measured p99 plus a quarter, rounded up to a whole millisecond.
    pub fn from_cells(seeds: &str, cells: &[CellResult]) -> Self {
        Baseline {
            seeds: seeds.to_string(),
            cells: cells
                .iter()
                .map(|c| BaselineCell {
                    design: c.design.clone(),
                    scenario: c.scenario.clone(),
                    runs: c.runs,
                    classes: c.classes.clone(),
                    invalid: c
                        .per_checker
                        .iter()
                        .filter(|(_, n)| **n > 0)
                        .map(|(k, n)| (k.clone(), *n))
                        .collect(),
                    p99_budget_ms: (c.latency.p99_ms * 1.25).ceil(),
                })
                .collect(),
        }
    }

    /// Reads a baseline, naming what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| {
            format!(
                "not a locksim baseline ({e}); expected {{\"seeds\": \"A..B\", \"cells\": [{{\"design\", \"scenario\", \"runs\", \"classes\", \"invalid\", \"p99_budget_ms\"}}]}}"
            )
        })
    }

    /// The baseline as pretty JSON with a trailing newline (stable: maps are ordered).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("serializable");
        s.push('\n');
        s
    }
}

/// One difference between the baseline and a fresh run.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The design.
    pub design: String,
    /// The scenario.
    pub scenario: String,
    /// What changed (`ownership invalid runs`, `runs unsafe or worse`, `acquire p99`).
    pub what: String,
    /// The baseline's figure, as text.
    pub before: String,
    /// The fresh figure, as text.
    pub now: String,
}

/// The comparison.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Cells that got worse.
    pub regressions: Vec<Change>,
    /// Cells that got better (fewer bad runs or violations).
    pub improvements: Vec<Change>,
    /// Cells in the fresh run the baseline does not have (`design / scenario`).
    pub new_cells: Vec<String>,
    /// Cells in the baseline the fresh run did not produce.
    pub missing: Vec<String>,
    /// Cells compared.
    pub compared: usize,
}

/// Classes from worst to best, `no-fault` last (no evidence either way).
fn class_order() -> Vec<&'static str> {
    let mut order: Vec<&'static str> = Safety::WORST_FIRST.iter().map(|c| c.name()).collect();
    order.push(NO_FAULT);
    order
}

/// Compares `fresh` with `baseline` cell by cell.
pub fn compare(baseline: &Baseline, fresh: &[CellResult]) -> Comparison {
    let mut out = Comparison::default();
    let key = |d: &str, s: &str| format!("{d} / {s}");
    for b in &baseline.cells {
        let Some(c) = fresh
            .iter()
            .find(|c| c.design == b.design && c.scenario == b.scenario)
        else {
            out.missing.push(key(&b.design, &b.scenario));
            continue;
        };
        out.compared += 1;
        let change = |what: String, before: String, now: String| Change {
            design: b.design.clone(),
            scenario: b.scenario.clone(),
            what,
            before,
            now,
        };
        // Class by class, worst first: more runs at least this bad is worse (the first
        // level that grew is the regression); otherwise the first level that shrank is
        // the improvement.
        let order = class_order();
        let levels: Vec<(String, usize, usize)> = order[..order.len() - 2]
            .iter()
            .scan((0usize, 0usize), |(bc, nc), class| {
                *bc += b.classes.get(*class).copied().unwrap_or(0);
                *nc += c.classes.get(*class).copied().unwrap_or(0);
                Some((format!("runs {class} or worse"), *bc, *nc))
            })
            .collect();
        if let Some((what, before, now)) = levels.iter().find(|(_, b, n)| n > b) {
            out.regressions
                .push(change(what.clone(), before.to_string(), now.to_string()));
        } else if let Some((what, before, now)) = levels.iter().find(|(_, b, n)| n < b) {
            out.improvements
                .push(change(what.clone(), before.to_string(), now.to_string()));
        }
        let checkers: std::collections::BTreeSet<&String> =
            b.invalid.keys().chain(c.per_checker.keys()).collect();
        for k in checkers {
            let before = b.invalid.get(k).copied().unwrap_or(0);
            let now = c.per_checker.get(k).copied().unwrap_or(0);
            let what = format!("{k} invalid runs");
            if now > before {
                out.regressions
                    .push(change(what, before.to_string(), now.to_string()));
            } else if now < before {
                out.improvements
                    .push(change(what, before.to_string(), now.to_string()));
            }
        }
        if c.latency.count > 0 && c.latency.p99_ms > b.p99_budget_ms {
            out.regressions.push(change(
                "acquire p99 (simulated ms)".into(),
                format!("budget {}", b.p99_budget_ms),
                format!("{:.1}", c.latency.p99_ms),
            ));
        }
    }
    for c in fresh {
        if !baseline
            .cells
            .iter()
            .any(|b| b.design == c.design && b.scenario == c.scenario)
        {
            out.new_cells.push(key(&c.design, &c.scenario));
        }
    }
    out
}

/// Compares `fresh` with `baseline` and writes the comparison as Markdown, each
/// regression with the replay command of its cell's first failing run: what
/// `locksim gate` prints, and the project's own gate test asserts.
pub fn judge(baseline: &Baseline, fresh: &[CellResult]) -> (Comparison, String) {
    let cmp = compare(baseline, fresh);
    let replay = |c: &Change| {
        fresh
            .iter()
            .find(|x| x.design == c.design && x.scenario == c.scenario)
            .and_then(|x| x.replay.clone())
    };
    let text = markdown(baseline, &cmp, &replay);
    (cmp, text)
}

/// The comparison as Markdown, for a pull-request comment.
pub fn markdown(
    baseline: &Baseline,
    cmp: &Comparison,
    replay: &dyn Fn(&Change) -> Option<String>,
) -> String {
    let mut out = String::new();
    let verdict = if cmp.regressions.is_empty() {
        "no regression".to_string()
    } else {
        format!(
            "{} regression{}",
            cmp.regressions.len(),
            if cmp.regressions.len() == 1 { "" } else { "s" }
        )
    };
    let _ = writeln!(
        out,
        "## locksim gate: {verdict} in {} cells (seeds {})\n",
        cmp.compared, baseline.seeds
    );
    let table = |out: &mut String, title: &str, rows: &[Change], with_replay: bool| {
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "### {title}\n");
        let _ = writeln!(out, "| design | scenario | what | baseline | now |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for r in rows {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} | {} |",
                r.design, r.scenario, r.what, r.before, r.now
            );
        }
        if with_replay {
            let mut lines: Vec<String> = rows.iter().filter_map(replay).collect();
            lines.dedup();
            if !lines.is_empty() {
                let _ = writeln!(out, "\nReplay:\n\n```sh");
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
                let _ = writeln!(out, "```");
            }
        }
        let _ = writeln!(out);
    };
    table(&mut out, "Regressions", &cmp.regressions, true);
    table(&mut out, "Improvements", &cmp.improvements, false);
    for (title, list) in [
        ("New cells (not in the baseline)", &cmp.new_cells),
        ("Missing cells (in the baseline, not run)", &cmp.missing),
    ] {
        if !list.is_empty() {
            let _ = writeln!(out, "### {title}\n");
            for k in list {
                let _ = writeln!(out, "- {k}");
            }
            let _ = writeln!(out);
        }
    }
    if !cmp.regressions.is_empty() || !cmp.improvements.is_empty() || !cmp.new_cells.is_empty() {
        let _ = writeln!(
            out,
            "If the change is intended, record it: `locksim gate --update` and commit `{DEFAULT_BASELINE}`."
        );
    }
    out
}

/// What `locksim gate` was asked to do.
#[derive(Clone)]
pub struct GateArgs {
    /// The baseline file.
    pub baseline: std::path::PathBuf,
    /// Rewrite the baseline from a fresh run instead of comparing.
    pub update: bool,
    /// Seeds for `--update` (a comparison always uses the baseline's).
    pub seeds: Option<Range<u64>>,
    /// Only these designs (names as `locksim list` shows, or `broken/<name>`); all
    /// built-ins if empty.
    pub designs: Vec<String>,
    /// Only these scenarios; all if empty.
    pub scenarios: Vec<String>,
    /// Also write the Markdown report here.
    pub markdown: Option<std::path::PathBuf>,
    /// Worker threads.
    pub threads: usize,
    /// Designs of the caller's own (a user's crate calling [`gate`] from its own
    /// binary): found by name before the built-ins, and run by default alongside them.
    pub extra_designs: Vec<DesignSpec>,
}

/// A partial update: `fresh`'s cells replace theirs in `old`, which keeps the rest in
/// its order; cells `old` lacks come last.
fn keep_others(old: &Baseline, fresh: &mut Baseline) {
    let mut merged: Vec<BaselineCell> = old
        .cells
        .iter()
        .map(|o| {
            fresh
                .cells
                .iter()
                .find(|f| f.design == o.design && f.scenario == o.scenario)
                .unwrap_or(o)
                .clone()
        })
        .collect();
    for f in &fresh.cells {
        if !merged
            .iter()
            .any(|m| m.design == f.design && m.scenario == f.scenario)
        {
            merged.push(f.clone());
        }
    }
    fresh.cells = merged;
}

/// `locksim gate`: runs the cells of the baseline (or, with `--update`, of the
/// catalog) over the baseline's seeds and compares; exit 0 when nothing got worse, 1
/// on a regression, 2 on bad input.
pub fn gate(a: &GateArgs) -> Result<ExitCode, BadInput> {
    let resolve = |name: &str| match a.extra_designs.iter().find(|d| d.name == name) {
        Some(d) => Ok(d.clone()),
        None => design(name),
    };
    let existing = match std::fs::read_to_string(&a.baseline) {
        Ok(text) => Some(
            Baseline::parse(&text)
                .map_err(|e| BadInput(format!("{}: {e}", a.baseline.display())))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(BadInput(format!("{}: {e}", a.baseline.display()))),
    };
    let seeds = match (&existing, &a.seeds, a.update) {
        (_, Some(s), true) => s.clone(),
        (Some(b), None, _) => parse_seeds(&b.seeds)
            .map_err(|e| BadInput(format!("{}: seeds: {}", a.baseline.display(), e.0)))?,
        (None, None, true) => 0..3,
        (None, _, false) => {
            return Err(BadInput(format!(
                "no baseline at {}; create one with `locksim gate --update` (and commit it)",
                a.baseline.display()
            )));
        }
        (Some(_), Some(_), false) => {
            return Err(BadInput(
                "--seeds only applies with --update: a comparison uses the baseline's seeds".into(),
            ));
        }
    };
    // The cells: the baseline's (filtered), or for an update the catalog's.
    let wanted = |d: &str, s: &str| {
        (a.designs.is_empty() || a.designs.iter().any(|x| x == d))
            && (a.scenarios.is_empty() || a.scenarios.iter().any(|x| x == s))
    };
    let filtered = !a.designs.is_empty() || !a.scenarios.is_empty();
    if let (Some(b), true, true) = (&existing, a.update, filtered)
        && parse_seeds(&b.seeds).ok() != Some(seeds.clone())
    {
        return Err(BadInput(format!(
            "--update of some cells keeps the others, so it must use the baseline's seeds ({})",
            b.seeds
        )));
    }
    // A comparison runs the baseline's cells. An update runs the catalog's cells for
    // the designs asked for (every built-in and the caller's own by default), so new
    // scenarios and designs enter the baseline, plus any other cell the baseline has
    // (a `broken/…` design, say).
    let mut pairs: Vec<(String, String)> = Vec::new();
    if a.update {
        let designs: Vec<String> = if a.designs.is_empty() {
            lock_impl::DESIGNS
                .iter()
                .map(|d| d.name.to_string())
                .chain(a.extra_designs.iter().map(|d| d.name.clone()))
                .collect()
        } else {
            a.designs.clone()
        };
        for d in &designs {
            let spec = resolve(d)?;
            for s in catalog::catalog() {
                if s.applies_to(spec.backend, spec.masters) && wanted(d, s.name) {
                    pairs.push((d.clone(), s.name.to_string()));
                }
            }
        }
    }
    if let Some(b) = &existing {
        for c in b.cells.iter().filter(|c| wanted(&c.design, &c.scenario)) {
            if !pairs
                .iter()
                .any(|(d, s)| *d == c.design && *s == c.scenario)
            {
                pairs.push((c.design.clone(), c.scenario.clone()));
            }
        }
    }
    for s in &a.scenarios {
        scenario(s)?;
    }
    if pairs.is_empty() {
        return Err(BadInput(
            "no cell to run: the --design/--scenario filters match nothing".into(),
        ));
    }
    let total = pairs.len() as u64 * (seeds.end - seeds.start);
    let bar = progress(total, true);
    let mut resolved = Vec::new();
    for (d, s) in &pairs {
        let spec = resolve(d)?;
        let sc = scenario(s)?;
        check_pair(&spec, &sc)?;
        resolved.push((spec, sc));
    }
    let refs: Vec<(&DesignSpec, &catalog::Scenario)> =
        resolved.iter().map(|(d, s)| (d, s)).collect();
    let cells: Vec<_> = match run_cells_fixed(&refs, seeds.clone(), a.threads, false, &bar) {
        Ok(ran) => ran.into_iter().map(|c| c.cell).collect(),
        Err(e) => {
            bar.finish_and_clear();
            eprintln!("locksim gate: {e}");
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
    };
    bar.finish_and_clear();
    let seeds_text = format!("{}..{}", seeds.start, seeds.end);
    if a.update {
        // The cells run replace theirs; a partial update keeps the rest, in order.
        let mut fresh = Baseline::from_cells(&seeds_text, &cells);
        if let Some(old) = &existing
            && filtered
        {
            keep_others(old, &mut fresh);
        }
        std::fs::write(&a.baseline, fresh.to_json())
            .map_err(|e| BadInput(format!("{}: {e}", a.baseline.display())))?;
        if let Some(old) = &existing {
            print!("{}", markdown(old, &compare(old, &cells), &|_| None));
        }
        println!(
            "locksim gate: wrote {} ({} cells, seeds {seeds_text})",
            a.baseline.display(),
            fresh.cells.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Compare only the cells the filters kept: the rest were not asked for.
    let mut baseline = existing.expect("a comparison has a baseline");
    baseline.cells.retain(|c| wanted(&c.design, &c.scenario));
    let (cmp, text) = judge(&baseline, &cells);
    print!("{text}");
    if let Some(path) = &a.markdown {
        std::fs::write(path, &text).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    }
    Ok(ExitCode::from(if cmp.regressions.is_empty() {
        EXIT_VALID
    } else {
        EXIT_INVALID
    }))
}
