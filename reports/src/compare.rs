//! The comparison by system that the lock-service comparison "常见分布式锁方案对比"
//! asks for (docs/designs.md, "Where the designs come from"): its table (a MySQL
//! unique index, MongoDB `findAndModify`, ZooKeeper, Redis), measured. A row group per
//! system family ([`Family`]: Redis single, Redis + Sentinel, Redlock, ZooKeeper, MySQL,
//! MongoDB), two rows in each: the design the seed names for it
//! ([`Family::seed_design`]) and the family's best design over the runs at hand
//! ([`Comparison::of`] says how it is chosen); a column per fault class
//! ([`FaultClass::ALL`], in its order); each cell the worst class over that design's
//! runs in the class's scenarios, with the matrix's marks and order ([`worst_mark`]:
//! unsafe, overlap, fenced, promise, liveness, unknown, safe, no fault) and how many of
//! the runs fell in it (`U 12/40`).
//!
//! Like the table, it is plain data made from cells, never from runs: the main job,
//! a report and a report merged from shards give the same comparison for the same
//! cells. A design that is not built in (a user's own, through the library) has no
//! known system and is left out.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use lock_impl::Backend;
use scenarios::catalog::{self, FaultClass};
use scenarios::checkers;
use scenarios::family::Family;

use crate::table::{CellResult, NO_FAULT, worst_mark};

/// The widest line the main job prints.
pub const WIDTH: usize = 120;

/// One cell of the comparison: the worst mark over the runs it covers, the runs behind
/// the mark, and the runs in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    /// The matrix's mark ([`worst_mark`]).
    pub mark: char,
    /// Runs in the worst class (for `L`, runs a liveness checker flagged; for `n`, runs
    /// that never saw their fault).
    pub count: usize,
    /// Runs in all.
    pub runs: u64,
}

impl Tally {
    /// The tally of `cells`, as one cell.
    fn of(cells: &[&CellResult]) -> Tally {
        let merged = merge(cells);
        let (mark, count) = worst_mark(&merged);
        Tally {
            mark,
            count,
            runs: merged.runs,
        }
    }

    /// `U 12/40`: the mark, the runs in it and the runs in all (`-` without runs).
    pub fn text(&self) -> String {
        if self.mark == '-' {
            return "-".into();
        }
        format!("{} {}/{}", self.mark, self.count, self.runs)
    }

    /// The matrix's short form: the mark, and the runs in it when not all runs were
    /// (`U`, `U12`, `U+` from 100).
    pub fn short(&self) -> String {
        if self.mark == '-' || self.count as u64 >= self.runs {
            self.mark.to_string()
        } else if self.count < 100 {
            format!("{}{}", self.mark, self.count)
        } else {
            format!("{}+", self.mark)
        }
    }
}

/// Which of a family's rows a design is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The design the lock-service comparison names for the family.
    Seed,
    /// The family's best design over the runs.
    Best,
    /// The seed's design is the family's best too.
    SeedAndBest,
}

impl Role {
    /// Its label in the table.
    pub fn name(self) -> &'static str {
        match self {
            Role::Seed => "seed",
            Role::Best => "best",
            Role::SeedAndBest => "seed+best",
        }
    }
}

/// One row: a design of a family, and per column its tally (`None` where no scenario
/// of the class ran the design in the family's world).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The family.
    pub family: Family,
    /// Seed's, best, or both.
    pub role: Role,
    /// The design.
    pub design: String,
    /// Per column of [`Comparison::classes`].
    pub tallies: Vec<Option<Tally>>,
}

/// The comparison: its columns and its rows, families in [`Family::all`]'s order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The fault classes that have a cell, in [`FaultClass::ALL`]'s order.
    pub classes: Vec<FaultClass>,
    /// Per family with cells: the seed's design's row (if it ran), then the best
    /// design's (one row when they are the same design).
    pub rows: Vec<Row>,
}

/// The cells summed as one: runs, classes, checker counts and runs that broke before
/// the fault.
fn merge(cells: &[&CellResult]) -> CellResult {
    let mut m = CellResult::new("", "");
    for c in cells {
        m.runs += c.runs;
        m.unknown += c.unknown;
        m.fault_seen += c.fault_seen;
        for (k, n) in &c.per_checker {
            *m.per_checker.entry(k.clone()).or_insert(0) += n;
        }
        for (k, n) in &c.classes {
            *m.classes.entry(k.clone()).or_insert(0) += n;
        }
        for (k, n) in &c.before_fault {
            *m.before_fault.entry(k.clone()).or_insert(0) += n;
        }
    }
    m
}

/// How bad a design's runs are, worst first: the runs unsafe, overlapping, fenced,
/// breaking a promise, flagged by a liveness checker, unknown, and never seeing their
/// fault; and the runs in all.
fn badness(c: &CellResult) -> ([usize; 7], u64) {
    let count = |name: &str| c.classes.get(name).copied().unwrap_or(0);
    let liveness = checkers::LIVENESS_CHECKERS
        .iter()
        .filter_map(|k| c.per_checker.get(*k).copied())
        .max()
        .unwrap_or(0);
    (
        [
            count("unsafe"),
            count("overlap"),
            count("fenced"),
            count("promise"),
            liveness,
            count("unknown"),
            count(NO_FAULT),
        ],
        c.runs,
    )
}

/// Orders two designs' badness, better first: the smaller share of unsafe runs, then
/// of overlap, fenced, promise, liveness, unknown and no-fault runs (shares compared
/// exactly), then more runs.
fn better(a: &([usize; 7], u64), b: &([usize; 7], u64)) -> Ordering {
    let (ca, ra) = a;
    let (cb, rb) = b;
    for (x, y) in ca.iter().zip(cb) {
        // x / ra against y / rb, without division.
        let o = (*x as u128 * u128::from(*rb)).cmp(&(*y as u128 * u128::from(*ra)));
        if o != Ordering::Equal {
            return o;
        }
    }
    rb.cmp(ra)
}

/// A design's name and its cells in one family, each with its scenario's class.
type DesignCells<'a> = (String, Vec<(FaultClass, &'a CellResult)>);

impl Comparison {
    /// The comparison of `cells` (any order). A cell's family is its design's system
    /// with its scenario's world ([`Family::of_cell`]), its column its scenario's
    /// [`FaultClass`]; cells of designs or scenarios not built in are left out.
    ///
    /// A family's best design is the one whose runs over all the family's cells it
    /// ran are least bad: the smallest share of unsafe runs, then of overlap, fenced,
    /// promise, liveness-flagged, unknown, and no-fault runs (the matrix's order of
    /// marks, worst first), then the most runs; on a tie, the seed's design, then the
    /// first design in the cells' order. Nothing about a design's name decides it.
    pub fn of(cells: &[CellResult]) -> Comparison {
        let catalog = catalog::catalog();
        // (family, design) → (class, cell), in the cells' order.
        let mut by_design: BTreeMap<(Family, usize), DesignCells> = BTreeMap::new();
        let mut order: Vec<&str> = Vec::new();
        let mut present: Vec<FaultClass> = Vec::new();
        for c in cells {
            let Some(s) = catalog.iter().find(|s| s.name == c.scenario) else {
                continue;
            };
            let Some(family) = Family::of_cell(&c.design, s) else {
                continue;
            };
            let di = match order.iter().position(|d| *d == c.design) {
                Some(i) => i,
                None => {
                    order.push(&c.design);
                    order.len() - 1
                }
            };
            by_design
                .entry((family, di))
                .or_insert_with(|| (c.design.clone(), Vec::new()))
                .1
                .push((s.class, c));
            if !present.contains(&s.class) {
                present.push(s.class);
            }
        }
        let classes: Vec<FaultClass> = FaultClass::ALL
            .iter()
            .copied()
            .filter(|c| present.contains(c))
            .collect();
        let row =
            |family: Family, role: Role, design: &str, cs: &[(FaultClass, &CellResult)]| Row {
                family,
                role,
                design: design.to_string(),
                tallies: classes
                    .iter()
                    .map(|class| {
                        let of_class: Vec<&CellResult> = cs
                            .iter()
                            .filter(|(k, _)| k == class)
                            .map(|(_, c)| *c)
                            .collect();
                        (!of_class.is_empty()).then(|| Tally::of(&of_class))
                    })
                    .collect(),
            };
        let mut rows = Vec::new();
        for family in Family::all() {
            let designs: Vec<&DesignCells> = by_design
                .range((family, 0)..=(family, usize::MAX))
                .map(|(_, v)| v)
                .collect();
            let seed = designs
                .iter()
                .find(|(name, _)| name == family.seed_design());
            let badness_of = |cs: &[(FaultClass, &CellResult)]| {
                let all: Vec<&CellResult> = cs.iter().map(|(_, c)| *c).collect();
                badness(&merge(&all))
            };
            // The least bad; on a tie the seed's design, then the first.
            let mut best: Option<(&String, &Vec<(FaultClass, &CellResult)>, _)> = None;
            for (name, cs) in &designs {
                let b = badness_of(cs);
                let take = match &best {
                    None => true,
                    Some((best_name, _, best_b)) => match better(&b, best_b) {
                        Ordering::Less => true,
                        Ordering::Equal => {
                            name == family.seed_design() && *best_name != family.seed_design()
                        }
                        Ordering::Greater => false,
                    },
                };
                if take {
                    best = Some((name, cs, b));
                }
            }
            match (seed, best) {
                (Some((s, cs)), Some((b, _, _))) if s == b => {
                    rows.push(row(family, Role::SeedAndBest, s, cs));
                }
                (seed, best) => {
                    if let Some((s, cs)) = seed {
                        rows.push(row(family, Role::Seed, s, cs));
                    }
                    if let Some((b, cs, _)) = best {
                        rows.push(row(family, Role::Best, b, cs));
                    }
                }
            }
        }
        Comparison { classes, rows }
    }

    /// The systems its rows stand on, once each, in [`Family::all`]'s order.
    pub fn backends(&self) -> Vec<Backend> {
        let mut out: Vec<Backend> = Vec::new();
        for r in &self.rows {
            let b = r.family.backend();
            if !out.contains(&b) {
                out.push(b);
            }
        }
        out
    }
}

/// A class's short heading, for a terminal's narrow columns.
pub fn short_heading(class: FaultClass) -> &'static str {
    match class {
        FaultClass::None => "none",
        FaultClass::ClientPause => "c.pause",
        FaultClass::ClientCrash => "c.crash",
        FaultClass::SlowWork => "slow",
        FaultClass::NetworkDelay => "delay",
        FaultClass::Partition => "partition",
        FaultClass::ServerPause => "s.pause",
        FaultClass::ServerCrash => "s.crash",
        FaultClass::Failover => "failover",
        FaultClass::ServerClock => "s.clock",
        FaultClass::ClientClock => "c.clock",
        FaultClass::LostNotification => "lost-note",
    }
}

/// The marks, the row roles and what decides the best row; `none` is the mark of a
/// class no scenario of which ran the design; `full`: cells are `U 12/40`, else the
/// matrix's short marks.
fn legend_text(none: &str, full: bool) -> String {
    let count = if full {
        "the runs in it / the runs"
    } else {
        "and, when not every run was in it, how many were"
    };
    format!(
        "U unsafe  O overlap in belief only  F fenced  P promise broken without harm  L safe, but stuck or \
         stranded  ? unknown  S safe  n the fault never happened (no evidence)  u o f p: every such run broke \
         before its fault began  {none} no scenario of the class ran the design. A cell: the worst mark over the \
         design's runs in the class's scenarios, {count}. seed: the design the lock-service comparison \
         names for the system (for Redlock, which it lacks, the Redis docs' redlock). best: the design with the \
         smallest share of unsafe runs over the family's scenarios, then of overlap, fenced, promise, liveness, \
         unknown and no-fault runs."
    )
}

/// `text` wrapped to `width` columns at spaces (a run of spaces between two words on
/// one line is kept: `U unsafe  F fenced`), each line after the first indented by
/// `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let mut spaces = 0;
    for word in text.split(' ') {
        if word.is_empty() {
            spaces += 1;
            continue;
        }
        let gap = if line.is_empty() || line == indent {
            0
        } else {
            spaces + 1
        };
        if gap > 0 && line.chars().count() + gap + word.chars().count() > width {
            let _ = writeln!(out, "{line}");
            line = indent.to_string();
        } else {
            line.push_str(&" ".repeat(gap));
        }
        line.push_str(word);
        spaces = 0;
    }
    if !line.trim().is_empty() {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The table as aligned text: system, role, design, then a column per class. `full`:
/// cells as `U 12/40` under the classes' short headings; otherwise the matrix's short
/// marks (`U12`) under numbered columns, with the numbers' key below.
fn render_table(c: &Comparison, full: bool) -> String {
    let heads: Vec<String> = c
        .classes
        .iter()
        .enumerate()
        .map(|(i, k)| {
            if full {
                short_heading(*k).to_string()
            } else {
                (i + 1).to_string()
            }
        })
        .collect();
    let cell = |t: &Option<Tally>| match t {
        None => ".".to_string(),
        Some(t) if full => t.text(),
        Some(t) => t.short(),
    };
    let body: Vec<Vec<String>> = c
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let first = i == 0 || c.rows[i - 1].family != r.family;
            let mut line = vec![
                if first { r.family.name() } else { "" }.to_string(),
                r.role.name().to_string(),
                r.design.clone(),
            ];
            line.extend(r.tallies.iter().map(cell));
            line
        })
        .collect();
    let mut header = vec!["system".to_string(), "row".into(), "design".into()];
    header.extend(heads);
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            body.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String]| {
        let mut s = String::new();
        for (i, v) in r.iter().enumerate() {
            let w = widths[i];
            if i < 3 {
                if i > 0 {
                    s.push(' ');
                }
                let _ = write!(s, "{v:<w$}");
            } else {
                let _ = write!(s, "  {v:>w$}");
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(&header));
    for r in &body {
        let _ = writeln!(out, "{}", line(r));
    }
    if !full {
        let key: Vec<String> = c
            .classes
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{} {}", i + 1, k.name()))
            .collect();
        out.push_str(&wrap(&key.join("  "), WIDTH, ""));
    }
    out
}

/// The legend (`full`: of `U 12/40` cells): the marks and rows, then each system's promise, wrapped to
/// [`WIDTH`].
fn legend(c: &Comparison, full: bool) -> String {
    let mut out = wrap(&legend_text(".", full), WIDTH, "");
    for b in c.backends() {
        out.push_str(&wrap(&format!("- {}", b.promise()), WIDTH, "  "));
    }
    out
}

/// What the main job prints after its matrix: the comparison with `U 12/40` cells if
/// that fits [`WIDTH`] columns, else with the matrix's short marks, else a line that
/// points to the report; nothing if no cell has a family.
pub fn for_terminal(c: &Comparison) -> String {
    if c.rows.is_empty() {
        return String::new();
    }
    let title = "By system (the lock-service comparison): per fault class, the worst class over a design's runs.\n";
    let fits = |s: &str| s.lines().all(|l| l.chars().count() <= WIDTH);
    for full in [true, false] {
        let table = render_table(c, full);
        if fits(&table) {
            return format!("{title}{table}{}", legend(c, full));
        }
    }
    "By system (the lock-service comparison): too wide for 120 columns; `locksim report` writes it to summary.md and index.html.\n"
        .to_string()
}

/// The comparison as a Markdown table (for `summary.md`): full class names as headings,
/// `U 12/40` cells, `·` where no scenario of the class ran the design; then the legend
/// and each system's promise.
pub fn render_markdown(c: &Comparison) -> String {
    let mut o = String::new();
    o.push_str("| system | row | design |");
    for k in &c.classes {
        let _ = write!(o, " {} |", k.name());
    }
    o.push_str("\n|---|---|---|");
    for _ in &c.classes {
        o.push_str("---|");
    }
    o.push('\n');
    for (i, r) in c.rows.iter().enumerate() {
        let first = i == 0 || c.rows[i - 1].family != r.family;
        let _ = write!(
            o,
            "| {} | {} | {} |",
            if first { r.family.name() } else { "" },
            r.role.name(),
            r.design
        );
        for t in &r.tallies {
            let _ = write!(o, " {} |", t.as_ref().map_or("·".to_string(), Tally::text));
        }
        o.push('\n');
    }
    let _ = writeln!(o, "\n{}\n", legend_text("·", true));
    for b in c.backends() {
        let _ = writeln!(o, "- {}", b.promise());
    }
    o
}
