//! The report's pages and `summary.md`: the HTML sections (comparison, matrix, latency,
//! sweeps, one per failing cell with its holder timeline and sequence diagram, on the
//! index or on the cell's own page), drawn from [`Results`] and the first invalid runs;
//! how the runs were made is `mod.rs`'s business.

mod holders;
mod matrix;
mod summary;

use holders::holder_timeline;
pub(super) use summary::summary_md;

use std::fmt::Write as _;
use std::path::Path;

use scenarios::catalog::Scenario;
use scenarios::sweep::{DesignSpec, RunSummary};
use sim::history::History;

use super::Results;
use crate::cells::shrink_command;
use crate::compare::Comparison;
use crate::plot::{self, Series};
use crate::table::CellResult;

/// What a cell with no unsafe run proves, by run count: `no unsafe run in 29 cells of
/// 60 runs: unsafe rate < 4.9% at 95%`, one clause per distinct run count (`None` if
/// every cell has an unsafe run).
fn clean_bound(cells: &[CellResult]) -> Option<String> {
    let mut by_runs: std::collections::BTreeMap<u64, usize> = Default::default();
    for c in cells {
        if c.unsafe_rate().is_some_and(|r| r.count == 0) {
            *by_runs.entry(c.runs).or_insert(0) += 1;
        }
    }
    let clauses: Vec<String> = by_runs
        .iter()
        .filter_map(|(runs, n)| {
            scenarios::stats::Rate::of(0, *runs).map(|r| {
                format!(
                    "no unsafe run in {n} cell{} of {runs} run{}: unsafe rate {} at 95%",
                    if *n == 1 { "" } else { "s" },
                    if *runs == 1 { "" } else { "s" },
                    r.interval().replacen('<', "< ", 1)
                )
            })
        })
        .collect();
    (!clauses.is_empty()).then(|| clauses.join("; "))
}

/// A cell's checkers with an invalid run, each with its share's 95 % interval
/// (`mutual-exclusion 3/30 2.1–27%`).
fn invalid_rates(c: &CellResult) -> Vec<String> {
    c.per_checker
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {}", scenarios::stats::short(*n as u64, c.runs)))
        .collect()
}

/// One row of the latency table: design, outcome, count, p50, p99, p99.9, max (ms).
type LatencyRow<'a> = (&'a str, &'static str, u64, f64, f64, f64, f64);

/// The latency table's rows: per design, each outcome that has samples.
fn latency_rows(r: &Results) -> Vec<LatencyRow<'_>> {
    let mut rows = Vec::new();
    for dl in &r.latency {
        for (name, h) in [
            ("ok", &dl.latency.ok_us),
            ("fail", &dl.latency.fail_us),
            ("info", &dl.latency.info_us),
        ] {
            if h.is_empty() {
                continue;
            }
            let q = |x: f64| h.value_at_quantile(x) as f64 / 1_000.0;
            rows.push((
                dl.design.as_str(),
                name,
                h.len(),
                q(0.5),
                q(0.99),
                q(0.999),
                h.max() as f64 / 1_000.0,
            ));
        }
    }
    rows
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A file-name-safe, anchor-safe form of a name (`broken/x` → `broken-x`).
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn cell_anchor(design: &str, scenario: &str) -> String {
    format!("cell-{}--{}", slug(design), slug(scenario))
}

/// The colour class of a matrix mark.
fn mark_class(mark: char) -> &'static str {
    match mark {
        'U' => "m-unsafe",
        'F' => "m-fenced",
        'O' => "m-overlap",
        'P' => "m-promise",
        'u' | 'f' | 'o' | 'p' => "m-world",
        '?' => "m-unknown",
        'L' => "m-liveness",
        'S' => "m-safe",
        'n' => "m-nofault",
        _ => "m-none",
    }
}

const CSS: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:24px}h2{font-size:20px;margin-top:36px;border-bottom:1px solid #ccc}h3{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 5px;text-align:center}
th.row{text-align:left;white-space:nowrap}
.matrix th.col{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:normal}
.matrix td a{color:inherit;text-decoration:none;display:block}
.m-unsafe{background:#e45756;color:#fff}.m-overlap{background:#f2a541}.m-fenced{background:#f6d18b}.m-world{background:#e8e8e8;color:#555;font-style:italic}.m-promise{background:#4c78a8;color:#fff}.m-unknown{background:#9d9d9d;color:#fff}
.m-liveness{background:#b279a2;color:#fff}.m-safe{background:#7fc97f}.m-nofault{background:#fdf0a6}.m-none{background:#f4f4f4;color:#aaa}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}pre{background:#f6f6f6;padding:8px;overflow-x:auto}
.plots{display:flex;flex-wrap:wrap;gap:8px}.plot{margin:8px 0}.plot svg{max-width:100%;height:auto;border:1px solid #eee}
.legend span{display:inline-block;padding:2px 6px;margin-right:6px;font-size:12px}
.diagram svg{max-width:100%;height:auto}
.small{font-size:12px;color:#555}
.matrix.grid{margin-bottom:14px}.matrix.grid td{padding:2px 3px;min-width:20px}
.matrix.grid thead th{position:sticky;background:#fff;z-index:1}
.matrix.grid thead tr.cls th{top:0;height:15px;font-size:11px;font-weight:normal;color:#444;background:#f4f4f4;white-space:nowrap;overflow:hidden}
.matrix.grid thead tr.sc th{top:22px}
.matrix.grid th.row{position:sticky;left:0;background:#fff}
.matrix.grid .cls-start{border-left:2px solid #888}
.matrix.grid th.broken{font-weight:normal;font-style:italic}
h2 .world{font-size:14px;font-weight:normal;color:#555}
";

#[derive(Default)]
pub(super) struct Page {
    pub(super) html: String,
    /// Everything inline and a PNG of every plot (`--full`); otherwise a page per
    /// failing cell, the latency plots on a page of their own, and no PNG.
    pub(super) full: bool,
    /// The path from this page to the report's top directory (`../` for a cell's page).
    pub(super) root: &'static str,
}

/// A failing cell's own page, from the report's top directory (`cells/D--S.html`).
pub(super) fn cell_page_path(design: &str, scenario: &str) -> String {
    format!("cells/{}--{}.html", slug(design), slug(scenario))
}

/// The seeds in words: the main job's adaptive search, or one fixed range in every
/// cell (`Results::seeds` holds the rule's own words or the range).
fn seeds_text(r: &Results) -> String {
    if r.seeds.starts_with("adaptive") {
        format!(
            "the main job's search, as locksim with no subcommand runs it: {}; a cell's runs are its seeds from 0 (U17: unsafe at seed 17; ~: the cell spent its budget first, with the weaker bound its runs give)",
            r.seeds
        )
    } else {
        format!(
            "seeds {} in every cell (a fixed range, not the main job's adaptive search)",
            r.seeds
        )
    }
}

/// What a failing cell contributed (for `summary.md`).
pub(super) struct CellNote {
    seed: u64,
    design: String,
    scenario: String,
    checker: String,
    summary: String,
    replay: String,
}

impl Page {
    pub(super) fn header(&mut self, r: &Results) {
        let _ = write!(
            self.html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"generator\" content=\"locksim {}\">\
             <title>locksim report</title><style>{CSS}</style></head><body>\n\
             <h1>locksim report</h1>\n<p>{} designs × {} scenarios. Seeds: {} \
             ({}).</p>\n<p class=\"small\">Every run is deterministic: each command below replays it. \
             Times are simulated.</p>\n<p class=\"small\"><a href=\"#by-system\">by system</a> · \
             <a href=\"#matrix\">matrix</a> · <a href=\"#latency\">latency</a> · <a href=\"#sweeps\">sweeps</a> · \
             <a href=\"#cells\">first violations</a></p>\n",
            env!("CARGO_PKG_VERSION"),
            r.designs.len(),
            r.scenarios.len(),
            esc(&seeds_text(r)),
            if r.sweeps.is_empty() {
                "no sweeps".to_string()
            } else {
                format!("sweeps: seeds {}", esc(&r.sweep_seeds))
            },
        );
    }

    /// The lock-service comparison: a row group per system family, a column per fault class
    /// ([`crate::compare`]), and each system's promise.
    pub(super) fn comparison(&mut self, r: &Results) {
        let c = Comparison::of(&r.cells);
        if c.rows.is_empty() {
            return;
        }
        self.html.push_str(
            "<h2 id=\"by-system\">By system: the lock-service comparison</h2>\n<p class=\"small\">\
             Per system family, the design the lock-service comparison names for it (seed; for \
             Redlock, which it lacks, the Redis docs' redlock) and the family's best design over \
             these runs (best: the smallest share of unsafe runs over the family's scenarios, \
             then of overlap, fenced, promise, liveness, unknown and no-fault runs); per fault \
             class, the worst class over that design's runs in the class's scenarios (the \
             matrix's marks and colours), the runs in it / the runs; · where no scenario of the \
             class ran the design in that family's world.</p>\n<table class=\"matrix\"><tr>\
             <th>system</th><th>row</th><th>design</th>",
        );
        for k in &c.classes {
            let _ = write!(self.html, "<th>{}</th>", esc(k.name()));
        }
        self.html.push_str("</tr>\n");
        for (i, row) in c.rows.iter().enumerate() {
            let first = i == 0 || c.rows[i - 1].family != row.family;
            let _ = write!(
                self.html,
                "<tr><th class=\"row\">{}</th><td>{}</td><th class=\"row\">{}</th>",
                if first {
                    esc(row.family.name())
                } else {
                    String::new()
                },
                row.role.name(),
                esc(&row.design)
            );
            for t in &row.tallies {
                match t {
                    Some(t) => {
                        let _ = write!(
                            self.html,
                            "<td class=\"{}\">{}</td>",
                            mark_class(t.mark),
                            esc(&t.text())
                        );
                    }
                    None => self.html.push_str(
                        "<td class=\"m-none\" title=\"no scenario of this class runs it\">·</td>",
                    ),
                }
            }
            self.html.push_str("</tr>\n");
        }
        self.html
            .push_str("</table>\n<ul class=\"small promises\">");
        for b in c.backends() {
            let _ = write!(self.html, "<li>{}</li>", esc(b.promise()));
        }
        self.html.push_str("</ul>\n");
    }

    /// Draws a plot inline as SVG, with a PNG copy in `png/` if `png` (a PNG costs 100
    /// to 300 kB: only `--full` writes them).
    fn plot(
        &mut self,
        name: &str,
        p: &impl plot::Draw,
        out: &Path,
        png: bool,
    ) -> Result<(), String> {
        let png_path = out.join("png").join(format!("{name}.png"));
        let svg = plot::render(p, png.then_some(png_path.as_path()))?;
        // Drop the XML declaration, if any, for inline use.
        let svg = svg.trim_start_matches(|c| c != '<');
        let svg = match svg.strip_prefix("<?xml") {
            Some(rest) => rest.split_once("?>").map_or(rest, |(_, r)| r),
            None => svg,
        };
        let link = if png {
            format!(
                "<div class=\"small\">PNG: <a href=\"{}png/{}.png\">png/{}.png</a></div>",
                self.root,
                esc(name),
                esc(name)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            self.html,
            "<div class=\"plot\" id=\"plot-{}\">{}{link}</div>",
            esc(name),
            svg.trim(),
        );
        Ok(())
    }

    pub(super) fn latency(&mut self, r: &Results, out: &Path) -> Result<(), String> {
        self.html.push_str(
            "<h2 id=\"latency\">Acquire latency</h2>\n<p class=\"small\">Per design, over every \
             cell it ran: time from invoking an acquire to its outcome, by percentile \
             (HdrHistogram's plot: the x axis is 1 / (1 − quantile) on a log scale). ok: got the \
             lock; fail: refused; info: outcome unknown (timed out).</p>\n\
             <table><tr><th>design</th><th>outcome</th><th>count</th><th>p50 ms</th><th>p99 ms</th>\
             <th>p99.9 ms</th><th>max ms</th></tr>\n",
        );
        for (design, name, n, p50, p99, p999, max) in latency_rows(r) {
            let _ = writeln!(
                self.html,
                "<tr><th class=\"row\">{}</th><td>{name}</td><td>{n}</td><td>{p50:.1}</td><td>{p99:.1}</td><td>{p999:.1}</td><td>{max:.1}</td></tr>",
                esc(design)
            );
        }
        self.html.push_str("</table>\n");
        if self.full {
            self.latency_plots(r, out)?;
        } else {
            self.html.push_str(
                "<p>The percentile plot of every design: <a href=\"latency.html\">latency.html</a>.</p>\n",
            );
        }
        Ok(())
    }

    /// Per design, its acquire latency by percentile.
    pub(super) fn latency_plots(&mut self, r: &Results, out: &Path) -> Result<(), String> {
        self.html.push_str("<div class=\"plots\">\n");
        for dl in &r.latency {
            let series: Vec<Series> = [
                ("ok", &dl.latency.ok_us, plot::COLORS[2]),
                ("fail", &dl.latency.fail_us, plot::COLORS[1]),
                ("info", &dl.latency.info_us, plot::COLORS[3]),
            ]
            .into_iter()
            .filter(|(_, h, _)| !h.is_empty())
            .map(|(n, h, color)| Series {
                label: format!("{n} ({})", h.len()),
                color,
                points: plot::percentile_points(h),
                band: Vec::new(),
            })
            .collect();
            self.plot(
                &format!("latency-{}", slug(&dl.design)),
                &plot::Percentiles {
                    title: format!("{}: acquire latency by percentile", dl.design),
                    series,
                },
                out,
                self.full,
            )?;
        }
        self.html.push_str("</div>\n");
        Ok(())
    }

    pub(super) fn sweeps(&mut self, r: &Results, out: &Path) -> Result<(), String> {
        if r.sweeps.is_empty() {
            return Ok(());
        }
        self.html.push_str(
            "<h2 id=\"sweeps\">Sweeps</h2>\n<p class=\"small\">The share of unsafe runs as one \
             quantity of a scenario grows, every other draw of each seed unchanged; the band \
             around each line is its points' 95% intervals (exact Clopper–Pearson). Lines that \
             coincide are listed in the table under each plot; `*` marks a point where the \
             scenario's fault did not happen in every run.</p>\n",
        );
        for s in &r.sweeps {
            let name = format!("sweep-{}-{}", slug(&s.scenario), slug(&s.param));
            let _ = writeln!(
                self.html,
                "<h3 id=\"{name}\">{} × {}</h3>",
                esc(&s.scenario),
                esc(&s.param)
            );
            self.plot(&name, &s.plot(), out, self.full)?;
            self.html.push_str("<table><tr><th>design</th>");
            if let Some(l) = s.lines.first() {
                for p in &l.points {
                    let _ = write!(self.html, "<th>{}={}</th>", esc(&s.param), p.value);
                }
            }
            self.html.push_str("</tr>\n");
            for l in &s.lines {
                let _ = write!(self.html, "<tr><th class=\"row\">{}</th>", esc(&l.design));
                for p in &l.points {
                    let u = p.cell.classes.get("unsafe").copied().unwrap_or(0);
                    let class = if u > 0 { "m-unsafe" } else { "m-safe" };
                    let star = if p.cell.fault_seen < p.cell.runs {
                        "*"
                    } else {
                        ""
                    };
                    let title = p.cell.replay.clone().unwrap_or_default();
                    let interval = scenarios::stats::Rate::of(u as u64, p.cell.runs)
                        .map(|r| format!("<br><span class=\"small\">{}</span>", esc(&r.interval())))
                        .unwrap_or_default();
                    let _ = write!(
                        self.html,
                        "<td class=\"{class}\" title=\"{}\">{u}/{}{star}{interval}</td>",
                        esc(&title),
                        p.cell.runs
                    );
                }
                self.html.push_str("</tr>\n");
            }
            self.html.push_str("</table>\n");
            let cmd = format!(
                "locksim sweep --scenario {}{} --param {}={} --seeds {}",
                s.scenario,
                s.pinned,
                s.param,
                s.lines
                    .first()
                    .map(|l| l
                        .points
                        .iter()
                        .map(|p| p.value.to_string())
                        .collect::<Vec<_>>()
                        .join(","))
                    .unwrap_or_default(),
                s.seeds
            );
            let _ = writeln!(
                self.html,
                "<p class=\"small\">Re-run: <code>{}</code></p>",
                esc(&cmd)
            );
        }
        Ok(())
    }

    pub(super) fn cell(
        &mut self,
        d: &DesignSpec,
        s: &Scenario,
        seed: u64,
        summary: &RunSummary,
        history: &History,
        out: &Path,
    ) -> Result<CellNote, String> {
        if self.full && !self.html.contains("<h2 id=\"cells\">") {
            self.html.push_str(
                "<h2 id=\"cells\">First violations</h2>\n<p class=\"small\">For each failing cell, \
                 its first invalid run: the holder timeline (who believed it held the lock, what \
                 the server recorded, the faults) and the run's sequence diagram around the \
                 violation.</p>\n",
            );
        }
        let (checker, evidence) = summary
            .verdicts
            .iter()
            .filter_map(|(n, v)| v.evidence().map(|e| (n.clone(), e.clone())))
            .min_by_key(|(_, e)| e.at_us)
            .ok_or("a failing cell's first invalid run has no evidence")?;
        let anchor = cell_anchor(&d.name, s.name);
        let replay = crate::cells::replay_for(d, s, seed);
        let _ = writeln!(
            self.html,
            "<h3 id=\"{anchor}\">{} / {} (seed {seed})</h3>\n<p><b>{}</b>: {}</p>\n\
             <p class=\"small\">Replay: <code>{}</code><br>Shrink to a minimal run: <code>{}</code><br>\
             Diagram: <code>{} --diagram {}.svg</code></p>",
            esc(&d.name),
            esc(s.name),
            esc(&checker),
            esc(&evidence.summary),
            esc(&replay),
            esc(&shrink_command(&d.name, s, seed)),
            esc(&replay),
            esc(&anchor),
        );
        let others: Vec<String> = summary
            .verdicts
            .iter()
            .filter(|(n, v)| v.is_invalid() && *n != checker)
            .map(|(n, _)| n.clone())
            .collect();
        if !others.is_empty() {
            let _ = writeln!(
                self.html,
                "<p class=\"small\">Also invalid in this run: {}</p>",
                esc(&others.join(", "))
            );
        }
        let diagram = crate::diagram::build(history, &summary.verdicts, false);
        self.plot(
            &anchor,
            &holder_timeline(
                history,
                &diagram,
                &evidence,
                &format!("{} / {}", d.name, s.name),
            ),
            out,
            self.full,
        )?;
        let svg = crate::diagram::svg(&diagram);
        let _ = writeln!(
            self.html,
            "<details class=\"diagram\"{}><summary>Sequence diagram</summary>{}</details>",
            if self.full { "" } else { " open" },
            svg.trim()
        );
        Ok(CellNote {
            seed,
            design: d.name.clone(),
            scenario: s.name.to_string(),
            checker,
            summary: evidence.summary,
            replay,
        })
    }

    /// The top of a page under the index (a failing cell's, the latency plots'): the
    /// index's style and a way back to it.
    /// `heading`: open with `title` as the page's heading (a cell's page has its own).
    pub(super) fn sub_header(&mut self, title: &str, r: &Results, heading: bool) {
        let _ = write!(
            self.html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"generator\" content=\"locksim {}\">\
             <title>{} · locksim report</title><style>{CSS}</style></head><body>\n\
             <p class=\"small\"><a href=\"{}index.html\">← the report</a> · \
             <a href=\"{}index.html#matrix\">matrix</a> · seeds: {}</p>\n",
            env!("CARGO_PKG_VERSION"),
            esc(title),
            self.root,
            self.root,
            esc(&seeds_text(r)),
        );
        if heading {
            let _ = writeln!(self.html, "<h1>{}</h1>", esc(title));
        }
    }

    /// The end of a page under the index.
    pub(super) fn sub_footer(&mut self) {
        let _ = write!(
            self.html,
            "<p class=\"small\"><a href=\"{}index.html\">← the report</a></p>\n</body></html>\n",
            self.root
        );
    }

    /// The index's list of first violations, each linking to its cell's page.
    pub(super) fn violations(&mut self, notes: &[CellNote]) {
        if notes.is_empty() {
            return;
        }
        let _ = writeln!(
            self.html,
            "<h2 id=\"cells\">First violations</h2>\n<p class=\"small\">{} failing cells. Each \
             has a page of its own: its first invalid run's evidence, the replay, shrink and \
             diagram commands, the holder timeline (who believed it held the lock, what the \
             server recorded, the faults) and the sequence diagram around the violation.</p>\n\
             <details><summary>Every failing cell</summary>\n<table><tr><th>design</th>\
             <th>scenario</th><th>seed</th><th>checker</th><th>evidence</th></tr>",
            notes.len()
        );
        for n in notes {
            let _ = writeln!(
                self.html,
                "<tr><th class=\"row\">{}</th><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td>\
                 <td style=\"text-align:left\">{}</td></tr>",
                esc(&n.design),
                cell_page_path(&n.design, &n.scenario),
                esc(&n.scenario),
                n.seed,
                esc(&n.checker),
                esc(&n.summary)
            );
        }
        self.html.push_str("</table></details>\n");
    }

    pub(super) fn footer(&mut self) {
        self.html.push_str(
            "<p class=\"small\">Generated by locksim. results.json holds every figure on this page; \
             summary.md the matrix in Markdown.</p>\n</body></html>\n",
        );
    }
}
