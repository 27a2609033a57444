//! The report's comparison matrix: one table per world, with the scenarios that run
//! there grouped by fault class, and every cell's rates under it.

use std::fmt::Write as _;

use scenarios::catalog::{FaultClass, Scenario};
use scenarios::sweep::DesignSpec;

use super::{Page, cell_anchor, cell_page_path, clean_bound, esc, invalid_rates, mark_class};
use crate::report::Results;
use crate::table::matrix_mark;

impl Page {
    /// The matrix, one table per world (the designs that lock on one system the same
    /// way: Redis, Redlock's independent masters, ZooKeeper, …), each with only the
    /// scenarios that run there, grouped by fault class: no column of `·`, and every
    /// table fits a 1,600-pixel window. Its header sticks while its rows scroll.
    pub(in crate::report) fn matrix(
        &mut self,
        r: &Results,
        designs: &[DesignSpec],
        scenarios: &[Scenario],
    ) {
        self.matrix_legend(r);
        // Worlds in the designs' order.
        let world = |d: &DesignSpec| (d.backend, d.masters > 1);
        let mut worlds: Vec<(lock_impl::Backend, bool)> = Vec::new();
        for d in designs {
            if !worlds.contains(&world(d)) {
                worlds.push(world(d));
            }
        }
        let cell = |d: &str, s: &str| r.cells.iter().find(|c| c.design == d && c.scenario == s);
        for w in worlds {
            let rows: Vec<&DesignSpec> = designs.iter().filter(|d| world(d) == w).collect();
            let mut cols: Vec<&Scenario> = scenarios
                .iter()
                .filter(|s| rows.iter().any(|d| cell(&d.name, s.name).is_some()))
                .collect();
            if cols.is_empty() {
                continue;
            }
            let class_at = |s: &Scenario| FaultClass::ALL.iter().position(|k| *k == s.class);
            cols.sort_by_key(|s| class_at(s));
            let title = if w.1 {
                format!("{} on independent masters (Redlock)", w.0.name())
            } else {
                w.0.name().to_string()
            };
            self.world_table(r, &title, &rows, &cols);
        }
        self.rates(r);
    }

    /// The matrix's heading and its legend: what each mark means, and how the tables
    /// are laid out.
    fn matrix_legend(&mut self, r: &Results) {
        self.html.push_str(
            "<h2 id=\"matrix\">Comparison matrix</h2>\n<p class=\"legend\">\
             <span class=\"m-unsafe\">U unsafe: harm at the storage or server</span>\
             <span class=\"m-overlap\">O holds overlapped in belief, nothing refused the stale holder (it happened not to write after the newer grant)</span>\
             <span class=\"m-fenced\">F fenced: holds overlapped, the stale holder was refused</span>\
             <span class=\"m-promise\">P a promise broken without harm (a fencing token reissued)</span>\
             <span class=\"m-world\">u o f p every such run broke before the scenario's fault began: the world's doing, not the fault's</span>\
             <span class=\"m-unknown\">? unknown</span>\
             <span class=\"m-liveness\">L stuck or starved (liveness)</span>\
             <span class=\"m-safe\">S safe, fault seen</span>\
             <span class=\"m-nofault\">n fault never happened: no evidence</span></p>\n",
        );
        let _ = writeln!(
            self.html,
            "<p class=\"small\">One table per world, with the scenarios that run in it, grouped \
             by fault class (the first header row; a number where the name does not fit: {}). \
             {} Hover a cell for its runs, classes and fault-seen count; a failing cell links to \
             its first violation{}. <i>Italic</i>: a deliberately broken design. What each \
             system promises: <a href=\"#by-system\">by system</a>.</p>",
            FaultClass::ALL
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{} {}", i + 1, k.name()))
                .collect::<Vec<_>>()
                .join(", "),
            if r.seeds.starts_with("adaptive") {
                "A number after U is the seed of the cell's first unsafe run; after another mark, \
                 the runs in that class when not all were; ~: the cell spent its budget first."
            } else {
                "A number after the mark counts the runs in that class when not all were."
            },
            if self.full { "" } else { " (its own page)" }
        );
    }

    /// One world's table: the fault classes' row, the scenarios' row, a row per design.
    fn world_table(&mut self, r: &Results, title: &str, rows: &[&DesignSpec], cols: &[&Scenario]) {
        let cell = |d: &str, s: &str| r.cells.iter().find(|c| c.design == d && c.scenario == s);
        let class_at = |s: &Scenario| FaultClass::ALL.iter().position(|k| *k == s.class);
        let _ = write!(
            self.html,
            "<h3>{}</h3>\n<table class=\"matrix grid\"><thead><tr class=\"cls\"><th></th>",
            esc(title)
        );
        // The class row: a cell per run of columns of one class.
        let mut i = 0;
        while i < cols.len() {
            let k = cols[i].class;
            let span = cols[i..].iter().take_while(|s| s.class == k).count();
            let label = if k.name().len() * 6 <= span * 26 {
                k.name().to_string()
            } else {
                (class_at(cols[i]).unwrap_or(0) + 1).to_string()
            };
            let _ = write!(
                self.html,
                "<th colspan=\"{span}\" class=\"cls-start\" title=\"{}\">{}</th>",
                esc(k.name()),
                esc(&label)
            );
            i += span;
        }
        self.html.push_str("</tr><tr class=\"sc\"><th></th>");
        for (i, s) in cols.iter().enumerate() {
            let start = i == 0 || cols[i - 1].class != s.class;
            let _ = write!(
                self.html,
                "<th class=\"col{}\" title=\"{}\">{}</th>",
                if start { " cls-start" } else { "" },
                esc(s.description),
                esc(s.name)
            );
        }
        self.html.push_str("</tr></thead><tbody>\n");
        for d in rows {
            let _ = write!(
                self.html,
                "<tr><th class=\"row{}\">{}</th>",
                if d.name.starts_with("broken/") {
                    " broken"
                } else {
                    ""
                },
                esc(&d.name)
            );
            for (i, s) in cols.iter().enumerate() {
                let start = if i == 0 || cols[i - 1].class != s.class {
                    " cls-start"
                } else {
                    ""
                };
                let Some(c) = cell(&d.name, s.name) else {
                    let _ = write!(
                        self.html,
                        "<td class=\"m-none{start}\" title=\"does not run in this world\">·</td>"
                    );
                    continue;
                };
                let (mark, text) = matrix_mark(c);
                let mut title = format!(
                    "{} / {}: {} runs; {}; fault seen in {}; {}",
                    d.name,
                    s.name,
                    c.runs,
                    c.classes
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    c.fault_seen,
                    c.unsafe_text()
                );
                if let Some(settled) = &c.settled {
                    let _ = write!(title, "; {}", settled.text());
                }
                if c.first_invalid_seed.is_some() {
                    let _ = write!(
                        self.html,
                        "<td class=\"{}{start}\" title=\"{}\"><a href=\"{}\">{}</a></td>",
                        mark_class(mark),
                        esc(&title),
                        self.cell_href(&d.name, s.name),
                        esc(&text)
                    );
                } else {
                    let _ = write!(
                        self.html,
                        "<td class=\"{}{start}\" title=\"{}\">{}</td>",
                        mark_class(mark),
                        esc(&title),
                        esc(&text)
                    );
                }
            }
            self.html.push_str("</tr>\n");
        }
        self.html.push_str("</tbody></table>\n");
    }

    /// Where a failing cell's details are: its section on this page (`--full`), or its
    /// own page.
    fn cell_href(&self, design: &str, scenario: &str) -> String {
        if self.full {
            format!("#{}", cell_anchor(design, scenario))
        } else {
            format!("{}{}", self.root, cell_page_path(design, scenario))
        }
    }

    /// Every cell's unsafe share and each checker's invalid share with its 95 %
    /// interval, under the matrix.
    fn rates(&mut self, r: &Results) {
        self.html.push_str(
            "<p class=\"small\">Every rate comes with its 95% interval (exact \
             Clopper–Pearson): a count of k unsafe runs in n bounds the true per-run rate, \
             two-sided when 0 &lt; k &lt; n, one-sided at the edges (0 of n: below the \
             bound; n of n: above it).",
        );
        if let Some(b) = clean_bound(&r.cells) {
            let _ = write!(self.html, " {}.", esc(&b));
        }
        self.html.push_str(
            "</p>\n<details class=\"rates\"><summary>Rates of every cell, with 95% intervals\
             </summary>\n<table><tr><th>design</th><th>scenario</th><th>runs</th>\
             <th>classes</th><th>unsafe</th><th>invalid runs by checker</th></tr>\n",
        );
        for c in &r.cells {
            let _ = writeln!(
                self.html,
                "<tr><th class=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.design),
                esc(&c.scenario),
                c.runs,
                esc(&c.class_text()),
                esc(&c.unsafe_text()),
                invalid_rates(c)
                    .iter()
                    .map(|t| esc(t))
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
        self.html.push_str("</table></details>\n");
    }
}
