//! The design × scenario table: per cell, how many runs each checker found invalid.
//!
//! A [`CellResult`] is plain data filled from verdicts (by [`CellResult::record`] or
//! by whatever runs the seeds); this module never runs anything, so a local sweep, a
//! CI matrix shard or a merge of shards all render the same way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use scenarios::adaptive::Settled;
use scenarios::checkers::{self, Safety, Verdict};
use scenarios::stats::{self, Rate};
use serde::{Deserialize, Serialize};

use crate::latency::Quantiles;

/// The results of many runs of one design under one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// The lock design.
    pub design: String,
    /// The scenario.
    pub scenario: String,
    /// Runs (seeds) judged.
    pub runs: u64,
    /// Per checker name, the number of runs it judged invalid.
    pub per_checker: BTreeMap<String, usize>,
    /// Per safety class name (`safe`, `fenced`, `unsafe`, `unknown`; see
    /// [`checkers::safety`]), the number of runs in it. Empty in tables written before
    /// classes existed.
    #[serde(default)]
    pub classes: BTreeMap<String, usize>,
    /// Verdicts that were unknown (all checkers, all runs).
    pub unknown: usize,
    /// Runs in which the scenario's fault really happened (its probe saw it).
    #[serde(default)]
    pub fault_seen: u64,
    /// The first seed (in recording order) any checker judged invalid.
    pub first_invalid_seed: Option<u64>,
    /// The command that replays `first_invalid_seed`.
    pub replay: Option<String>,
    /// Acquire latency (ok outcomes) over all runs.
    pub latency: Quantiles,
    /// Per safety class, the runs in it whose first violation began before the
    /// scenario's first fault ([`scenarios::checkers::broke_before_fault`]): the world
    /// broke the design, not the fault. A cell whose worst class is all such runs is
    /// marked in lower case in the matrix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub before_fault: BTreeMap<String, usize>,
    /// How the main job's adaptive seeds stopped the cell
    /// ([`scenarios::adaptive`]): the seed of its first violation, or the clean runs
    /// bounding its unsafe rate (and whether that bound is weak). Absent for a fixed
    /// seed range (`--seeds A..B`), where every seed ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<Settled>,
    /// What the cell's kept runs cost under the adaptive seeds: their host runs
    /// (`RunStats::host_runs`, a host's runtime run once by the simulator; the unit the
    /// adaptive budget counts, the same on every machine and thread count). Absent for
    /// a fixed seed range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_runs: Option<u64>,
}

impl CellResult {
    /// An empty cell.
    pub fn new(design: impl Into<String>, scenario: impl Into<String>) -> Self {
        CellResult {
            design: design.into(),
            scenario: scenario.into(),
            runs: 0,
            per_checker: BTreeMap::new(),
            classes: BTreeMap::new(),
            unknown: 0,
            fault_seen: 0,
            first_invalid_seed: None,
            replay: None,
            latency: Quantiles::default(),
            before_fault: BTreeMap::new(),
            settled: None,
            host_runs: None,
        }
    }

    /// Counts one run's verdicts. Every checker gets a column, even at zero, so a
    /// checker that never fires is visibly present rather than silently missing.
    /// The run's safety class ([`checkers::safety`], which needs to know whether the
    /// storage refused anyone) is counted in `classes`, except that a run that would be
    /// `safe` but never saw the scenario's fault counts as [`NO_FAULT`]: it is no
    /// evidence of safety.
    pub fn record(
        &mut self,
        seed: u64,
        verdicts: &[(&str, Verdict)],
        storage: impl Into<checkers::StorageFacts>,
        fault_seen: bool,
    ) {
        self.runs += 1;
        if fault_seen {
            self.fault_seen += 1;
        }
        let class = checkers::safety(verdicts, storage);
        let name = if class == Safety::Safe && !fault_seen {
            NO_FAULT
        } else {
            class.name()
        };
        *self.classes.entry(name.to_string()).or_insert(0) += 1;
        for (name, v) in verdicts {
            let n = self.per_checker.entry((*name).to_string()).or_insert(0);
            match v {
                Verdict::Invalid(_) => {
                    *n += 1;
                    self.first_invalid_seed.get_or_insert(seed);
                }
                Verdict::Unknown { .. } => self.unknown += 1,
                Verdict::Valid => {}
            }
        }
    }

    /// Counts one run's summary ([`CellResult::record`]), and, if it broke before the
    /// scenario's fault began, that too.
    pub fn record_run(&mut self, r: &scenarios::sweep::RunSummary) {
        let verdicts: Vec<(&str, Verdict)> = r
            .verdicts
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone()))
            .collect();
        self.record(r.seed, &verdicts, r.facts(), r.fault_seen.is_some());
        if r.before_fault {
            *self
                .before_fault
                .entry(r.safety().name().to_string())
                .or_insert(0) += 1;
        }
    }

    /// Whether every run of the cell's worst class (an unsafe, fenced, overlap or
    /// promise one) broke before the scenario's fault began: the cell's verdict is not
    /// the fault's doing.
    pub fn worst_before_fault(&self) -> bool {
        match self.worst_class() {
            Some(c @ (Safety::Unsafe | Safety::Fenced | Safety::Overlap | Safety::Promise)) => {
                let n = self.classes.get(c.name()).copied().unwrap_or(0);
                n > 0 && self.before_fault.get(c.name()).copied().unwrap_or(0) >= n
            }
            _ => false,
        }
    }

    /// The class column's text: each class with runs, worst first
    /// (`fenced 18, safe 2`; `unsafe 3 (3 before the fault)` where runs broke before
    /// the scenario's fault began); `-` if the cell has no classes (an old table).
    pub fn class_text(&self) -> String {
        let rank = |name: &str| Safety::from_name(name).map_or(usize::MAX, Safety::rank);
        let mut classes: Vec<(&String, &usize)> =
            self.classes.iter().filter(|(_, n)| **n > 0).collect();
        classes.sort_by_key(|(name, _)| rank(name));
        if classes.is_empty() {
            return "-".to_string();
        }
        classes
            .iter()
            .map(|(name, n)| match self.before_fault.get(name.as_str()) {
                Some(b) if *b > 0 => format!("{name} {n} ({b} before the fault)"),
                _ => format!("{name} {n}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The worst class any run of the cell fell in, if any.
    pub fn worst_class(&self) -> Option<Safety> {
        Safety::WORST_FIRST
            .into_iter()
            .find(|c| self.classes.get(c.name()).is_some_and(|n| *n > 0))
    }

    /// Total invalid verdicts in the cell.
    pub fn invalid(&self) -> usize {
        self.per_checker.values().sum()
    }

    /// Runs of class `name` (0 if none).
    fn class_count(&self, name: &str) -> u64 {
        self.classes.get(name).copied().unwrap_or(0) as u64
    }

    /// The share of unsafe runs with its 95 % interval ([`stats::Rate`]); `None` with
    /// no runs, or in a table written before classes existed (nothing to count).
    pub fn unsafe_rate(&self) -> Option<Rate> {
        if self.classes.is_empty() {
            return None;
        }
        Rate::of(self.class_count("unsafe"), self.runs)
    }

    /// The unsafe share as a sentence: `unsafe 3/30, 10%, 95% CI 2.1–27%`, `unsafe
    /// 0/60: rate < 4.9% at 95%`, or why there is none.
    pub fn unsafe_text(&self) -> String {
        if self.classes.is_empty() && self.runs > 0 {
            return "unsafe: no classes recorded, no interval".into();
        }
        stats::describe("unsafe", self.class_count("unsafe"), self.runs)
    }

    /// Every rate of the cell with its 95 % interval: the unsafe share and each
    /// checker's invalid share (what `--json`, `results.json` and the report carry).
    pub fn rates(&self) -> CellRates {
        CellRates {
            method: stats::METHOD,
            confidence: stats::CONFIDENCE,
            unsafe_runs: self.unsafe_rate(),
            invalid: self
                .per_checker
                .iter()
                .map(|(k, n)| (k.clone(), Rate::of(*n as u64, self.runs)))
                .collect(),
        }
    }
}

/// A cell's rates with their 95 % intervals ([`CellResult::rates`]); computed from the
/// counts whenever a cell is written out, never stored, so a merged or an old table
/// gets them too.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellRates {
    /// How the intervals are computed ([`stats::METHOD`]).
    pub method: &'static str,
    /// Their confidence ([`stats::CONFIDENCE`]).
    pub confidence: f64,
    /// Unsafe runs of all runs (`null` with no runs or no classes).
    #[serde(rename = "unsafe")]
    pub unsafe_runs: Option<Rate>,
    /// Per checker, the runs it judged invalid of all runs (`null` with no runs).
    pub invalid: BTreeMap<String, Option<Rate>>,
}

/// A cell as it is written out: its fields, and its `rates`.
#[derive(Serialize)]
struct CellOut<'a> {
    #[serde(flatten)]
    cell: &'a CellResult,
    rates: CellRates,
}

/// Serializes a cell with its [`CellRates`] under `rates` (for `#[serde(serialize_with)]`;
/// reading it back ignores them).
pub fn serialize_cell<S: serde::Serializer>(c: &CellResult, s: S) -> Result<S::Ok, S::Error> {
    CellOut {
        cell: c,
        rates: c.rates(),
    }
    .serialize(s)
}

/// [`serialize_cell`] for every cell of a list.
pub fn serialize_cells<S: serde::Serializer>(
    cells: &[CellResult],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(cells.len()))?;
    for c in cells {
        seq.serialize_element(&CellOut {
            cell: c,
            rates: c.rates(),
        })?;
    }
    seq.end()
}

/// The class of a run that judged safe but never saw its scenario's fault.
pub const NO_FAULT: &str = "no-fault";

/// Checker columns: the standard checkers in their fixed order, then any other names
/// the cells mention, alphabetically.
pub fn checker_columns(cells: &[CellResult]) -> Vec<String> {
    let mut cols: Vec<String> = checkers::names().into_iter().map(String::from).collect();
    let mut extra: Vec<&String> = cells
        .iter()
        .flat_map(|c| c.per_checker.keys())
        .filter(|k| !cols.contains(k))
        .collect();
    extra.sort();
    extra.dedup();
    cols.extend(extra.into_iter().cloned());
    cols
}

/// The table as aligned text: design, scenario, runs, the runs per safety class (worst
/// first, [`CellResult::class_text`]), the unsafe share with its 95 % interval
/// ([`Rate::short`]: `3/30 2.1–27%`, `0/60 <4.9%`), how the main job's adaptive seeds
/// stopped the cell ([`Settled::text`]; only when some cell has it), one column per checker with its
/// violation count, unknown verdicts, acquire p50/p99 in ms, the first invalid seed
/// and the replay command (last, as it is long).
pub fn render_text(cells: &[CellResult]) -> String {
    let cols = checker_columns(cells);
    let mut header: Vec<String> = vec![
        "design".into(),
        "scenario".into(),
        "runs".into(),
        "fault".into(),
        "class".into(),
        "unsafe, 95%".into(),
    ];
    // Cells of the main job's adaptive seeds: how each stopped.
    let adaptive = cells.iter().any(|c| c.settled.is_some());
    if adaptive {
        header.push("stopped".into());
    }
    header.extend(cols.iter().cloned());
    header.extend(
        [
            "unknown",
            "p50 ms",
            "p99 ms",
            "first invalid seed",
            "replay",
        ]
        .map(String::from),
    );
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            let mut r = vec![
                c.design.clone(),
                c.scenario.clone(),
                c.runs.to_string(),
                c.fault_seen.to_string(),
                c.class_text(),
                c.unsafe_rate().map_or_else(|| "-".into(), |r| r.short()),
            ];
            if adaptive {
                r.push(c.settled.as_ref().map_or_else(|| "-".into(), Settled::text));
            }
            r.extend(
                cols.iter()
                    .map(|k| c.per_checker.get(k).copied().unwrap_or(0).to_string()),
            );
            r.push(c.unknown.to_string());
            r.push(format!("{:.1}", c.latency.p50_ms));
            r.push(format!("{:.1}", c.latency.p99_ms));
            r.push(c.first_invalid_seed.map_or("-".into(), |s| s.to_string()));
            r.push(c.replay.clone().unwrap_or_else(|| "-".into()));
            r
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Text columns (design, scenario, class, the unsafe rate, replay) align left,
    // numbers right; the replay command is not padded.
    let first_count = if adaptive { 7 } else { 6 };
    let numeric = |i: usize| i == 2 || i == 3 || (i >= first_count && i < header.len() - 1);
    let fmt_row = |r: &[String]| {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i] - cell.chars().count();
            if numeric(i) {
                let _ = write!(line, "{}{cell}", " ".repeat(pad));
            } else if i == r.len() - 1 {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell}{}", " ".repeat(pad));
            }
        }
        line.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", fmt_row(&header));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let _ = writeln!(out, "{}", fmt_row(&rule));
    for r in &rows {
        let _ = writeln!(out, "{}", fmt_row(r));
    }
    out
}

/// The table as JSON: the checker column order and the cells.
pub fn render_json(cells: &[CellResult]) -> String {
    #[derive(Serialize)]
    struct Table<'a> {
        checkers: Vec<String>,
        #[serde(serialize_with = "serialize_cells")]
        cells: &'a [CellResult],
    }
    serde_json::to_string_pretty(&Table {
        checkers: checker_columns(cells),
        cells,
    })
    .expect("a table always serializes")
}

/// Reads the cells back from [`render_json`]'s output.
pub fn cells_from_json(json: &str) -> Result<Vec<CellResult>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Table {
        cells: Vec<CellResult>,
    }
    serde_json::from_str::<Table>(json).map(|t| t.cells)
}

/// One cell of the compact matrix: the worst class's mark, and the number of runs in
/// it when that is not every run (`U`, `U2`; `U+` for 100 or more).
///
/// Marks, worst first: `U` unsafe, `O` two holders in belief but the stale one never
/// wrote after the newer grant (nothing refused it), `F` fenced, `P` a promise broken without harm (a fencing token
/// issued twice), `L` no safety harm proven but a liveness checker failed (a stuck
/// lock, a stranded waiter), `?` unknown and no liveness failure, `S` safe, `n` nothing broke but
/// the fault never happened (no evidence), `-` no runs. `U`, `F`, `O` and `P` are in
/// lower case (`u3`) when every run of that class broke before the scenario's fault
/// began ([`CellResult::worst_before_fault`]): the world's doing, not the fault's.
///
/// A cell the main job's adaptive seeds ran ([`CellResult::settled`]) shows an unsafe
/// mark with the seed of its first violation instead (`U0`, `u17`), or `Up` when a
/// placed fault found it ([`scenarios::place`]); any other mark is followed by `p` when
/// every placement of the fault over a client's steps ran with every checker valid, and by `~` when its
/// seeded bound is weak (fewer clean runs than the rule wanted: `S~`, `Sp~`, `F3~`).
pub fn matrix_mark(c: &CellResult) -> (char, String) {
    let (mark, n) = worst_mark(c);
    match &c.settled {
        Some(Settled::Violation { place: None, seed }) => {
            return (mark, format!("{mark}{seed}"));
        }
        Some(Settled::Violation { place: Some(_), .. }) => return (mark, format!("{mark}p")),
        Some(settled) => {
            let (_, text) = fixed_mark(c, mark, n);
            let placed = if settled.cover().is_some_and(|c| c.clean()) {
                "p"
            } else {
                ""
            };
            let weak = if settled.is_weak() { "~" } else { "" };
            return (mark, format!("{text}{placed}{weak}"));
        }
        _ => {}
    }
    fixed_mark(c, mark, n)
}

/// [`matrix_mark`] of a cell over fixed seeds.
fn fixed_mark(c: &CellResult, mark: char, n: usize) -> (char, String) {
    let text = if mark == '-' || n as u64 >= c.runs {
        mark.to_string()
    } else if n < 100 {
        format!("{mark}{n}")
    } else {
        format!("{mark}+")
    };
    (mark, text)
}

/// A cell's [`matrix_mark`] and the number of runs behind it: the runs in its worst
/// class (`U`, `O`, `F`, `P`, `?`, `S`), the runs a liveness checker flagged (`L`, at
/// least the larger checker's count), or the runs that never saw the fault (`n`).
pub fn worst_mark(c: &CellResult) -> (char, usize) {
    // Runs a liveness checker flagged: at least the larger of the two counts.
    let liveness = checkers::LIVENESS_CHECKERS
        .iter()
        .filter_map(|k| c.per_checker.get(*k).copied())
        .max()
        .unwrap_or(0);
    let count = |name: &str| c.classes.get(name).copied().unwrap_or(0);
    let (mark, n) = match c.worst_class() {
        Some(Safety::Unsafe) => ('U', count("unsafe")),
        Some(Safety::Fenced) => ('F', count("fenced")),
        Some(Safety::Overlap) => ('O', count("overlap")),
        Some(Safety::Promise) => ('P', count("promise")),
        // A proven liveness violation says more than a safety checker that had
        // nothing to judge (a stuck lock nobody else ever held leaves `ownership`
        // nothing to judge).
        _ if liveness > 0 => ('L', liveness),
        Some(Safety::Unknown) => ('?', count("unknown")),
        Some(Safety::Safe) => ('S', count("safe")),
        None if count(NO_FAULT) > 0 => ('n', count(NO_FAULT)),
        None => ('-', 0),
    };
    let mark = if c.worst_before_fault() {
        mark.to_ascii_lowercase()
    } else {
        mark
    };
    (mark, n)
}

/// What the marks of the main job's adaptive seeds mean (under the matrix's legend).
pub fn adaptive_legend(clean: u64) -> String {
    let bound = Rate::of(0, clean).map_or_else(String::new, |r| r.interval());
    format!(
        "Adaptive seeds: each cell ran seeds 0, 1, 2, … until its first unsafe run (U7: at seed 7) or {clean} clean runs (no\n\
         unsafe run: unsafe rate {bound} at 95%); after U the number is that seed, not a count. Up: its fault placed at a\n\
         step of a client's protocol (the bare run's history, `--detail` says when) broke it; p after a mark: every such\n\
         placement ran clean. ~ a weak bound: fewer clean runs (budget spent, or too many unknown runs; `--detail` says\n\
         which); `--budget none` runs every cell to its first unsafe run or its {clean} clean runs, at many times the cost."
    )
}

/// The compact matrix the default `locksim` prints: designs as rows, scenarios as
/// numbered columns (`designs` and `scenarios` give the order), one [`matrix_mark`]
/// per cell (`.` where the scenario's world does not fit the design), then the legend
/// and the scenario numbers, all within 120 columns. `color` adds ANSI colours to the
/// marks (for a terminal that wants them).
pub fn render_matrix(
    cells: &[CellResult],
    designs: &[&str],
    scenarios: &[&str],
    color: bool,
) -> String {
    let name_w = designs
        .iter()
        .map(|d| d.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    // Adaptive cells' marks run to three characters (`U59`, `F3~`): a column more.
    let adaptive = cells.iter().any(|c| c.settled.is_some());
    let col_w = if adaptive { 4 } else { 3 };
    let paint = |mark: char, text: &str| {
        if !color {
            return text.to_string();
        }
        let code = match mark {
            'U' => "31;1",
            'F' => "33",
            'O' => "33;2",
            'P' => "34",
            'u' | 'f' | 'o' | 'p' => "2",
            '?' => "35",
            'L' => "36",
            'S' => "32",
            _ => "2",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    };
    let mut out = String::new();
    // As many scenario columns as fit 120 columns beside the design names; a catalog
    // wider than that is printed in panels, each with its own header, the scenario
    // numbers running on.
    let per_panel = ((120 - name_w.min(100)) / col_w).max(1);
    let indexed: Vec<(usize, &&str)> = scenarios.iter().enumerate().collect();
    for (p, panel) in indexed.chunks(per_panel).enumerate() {
        if p > 0 {
            out.push('\n');
        }
        let mut header = format!("{:<name_w$}", "design");
        for (i, _) in panel {
            let _ = write!(header, "{:>col_w$}", i + 1);
        }
        let _ = writeln!(out, "{}", header.trim_end());
        for d in designs {
            let mut line = format!("{d:<name_w$}");
            for (_, s) in panel {
                let (mark, text) = cells
                    .iter()
                    .find(|c| c.design == *d && c.scenario == **s)
                    .map_or(('.', ".".to_string()), matrix_mark);
                let pad = col_w.saturating_sub(text.chars().count());
                let _ = write!(line, "{}{}", " ".repeat(pad), paint(mark, &text));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let _ = writeln!(
        out,
        "\nU unsafe  O overlap in belief only (nothing refused the stale holder; it never wrote after the newer grant)\nF fenced (the storage refused the stale holder)  P a promise broken without harm (a token reissued)  ? unknown\nL safe, but a lock got stuck or a waiter stranded  S safe  n nothing broke, but the fault never happened (no evidence)\n. world does not fit the design  u o f p: every such run broke before the fault began (the world's doing)\nA number after a mark: runs in that class."
    );
    if adaptive {
        let _ = writeln!(
            out,
            "{}",
            adaptive_legend(scenarios::adaptive::Rule::DEFAULT.clean)
        );
    }
    // Scenario numbers, packed into lines of at most 120 columns.
    let mut line = String::new();
    for (i, s) in scenarios.iter().enumerate() {
        let item = format!("{:>2} {s}", i + 1);
        if !line.is_empty() && line.chars().count() + 2 + item.chars().count() > 120 {
            let _ = writeln!(out, "{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(&item);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{line}");
    }
    out
}
