//! Sweeps split across machines: `--shard I/N` runs one contiguous slice of the seed
//! range, `--out FILE` writes the cells with their latency histograms, and
//! `locksim merge` adds the shards back into exactly the cells of the unsharded run.
//!
//! The main job's adaptive seeds (no `--seeds`) have no range to slice: a cell's next
//! seed depends on its own runs. Its shards split the cells instead: shard `I` of `N`
//! runs cells `I`, `I + N`, `I + 2N`, … of the run (counted from 1, in the matrix's
//! order), each one whole, and the merge puts them back in their places. A cell's
//! adaptive runs do not depend on the other cells, so the merge is the unsharded run.
//!
//! locksim ships no scheduler: any job runner that can start N copies with an index
//! (a CI matrix, a Kubernetes Indexed Job) and collect N files will do.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::input::BadInput;
use crate::latency::LatencySummary;
use crate::table::CellResult;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: u64,
    /// How many slices.
    pub count: u64,
}

impl Shard {
    /// The whole range as one shard.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Parses `I/N` with `1 <= I <= N`, naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--shard '{text}' is not I/N with 1 <= I <= N (e.g. 2/4: the second of four slices)"
            )
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The indexes (from 0) of this shard's cells among `total`: every `count`-th from
    /// `index - 1`, so each shard gets a share of every design's cells (the cells of a
    /// five-master design cost many times a single master's).
    pub fn cells_of(&self, total: usize) -> impl Iterator<Item = usize> + use<> {
        (self.index as usize - 1..total).step_by(self.count as usize)
    }

    /// How many of `total` cells are this shard's ([`Shard::cells_of`]'s length),
    /// without walking them (a shard file's `of_cells` is read from disk).
    pub fn share_of(&self, total: u64) -> u64 {
        // index <= count, so the numerator is never negative.
        ((u128::from(total) + u128::from(self.count - self.index)) / u128::from(self.count)) as u64
    }

    /// This shard's contiguous slice of `seeds` (the slices of `1..=N` partition it;
    /// some are empty when there are fewer seeds than shards).
    pub fn seeds_of(&self, seeds: &Range<u64>) -> Range<u64> {
        let len = seeds.end.saturating_sub(seeds.start);
        let at = |k: u64| {
            seeds.start + (u128::from(len) * u128::from(k) / u128::from(self.count)) as u64
        };
        at(self.index - 1)..at(self.index)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How shards divide a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// Each shard ran every cell over its slice of the seed range (`--seeds A..B`).
    #[default]
    Seeds,
    /// Each shard ran every `N`-th cell whole ([`Shard::cells_of`]): the main job's
    /// adaptive seeds.
    Cells,
}

impl Split {
    fn is_seeds(&self) -> bool {
        *self == Split::Seeds
    }

    /// What is split, for messages.
    fn what(self) -> &'static str {
        match self {
            Split::Seeds => "seeds",
            Split::Cells => "cells",
        }
    }
}

/// What a shard writes with `--out`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    /// The whole seed range the shards split (`A..B`); for shards that split the
    /// cells, the adaptive rule the cells ran under, in words.
    pub seeds: String,
    /// Which shard this is (`I/N`).
    pub shard: String,
    /// What the shards split (absent: the seed range).
    #[serde(default, skip_serializing_if = "Split::is_seeds")]
    pub split: Split,
    /// For shards that split the cells: how many cells the whole run has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_cells: Option<u64>,
    /// Its cells, in the order the run produced them.
    pub cells: Vec<ShardCell>,
    /// The whole seed range of the sweeps' points (`locksim sweep` and `report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_seeds: Option<String>,
    /// Its slice of each sweep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<SweepShard>,
}

/// A shard's slice of one sweep: per design, per value, the point's cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepShard {
    /// The scenario.
    pub scenario: String,
    /// The parameter.
    pub param: String,
    /// Quantities pinned at every point, as `--param` flags (empty if none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pinned: String,
    /// The scenario's lease, ms.
    pub lease_ms: u64,
    /// One line per design.
    pub lines: Vec<SweepShardLine>,
}

/// One design's points in a [`SweepShard`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepShardLine {
    /// The design.
    pub design: String,
    /// (value, the point's cell), in the sweep's order.
    pub points: Vec<(u64, ShardCell)>,
}

/// Adds the parts of one cell from every shard (in shard order): counts add, the
/// first invalid seed is the lowest, histograms merge.
pub fn merge_cell(parts: &[&ShardCell]) -> ShardCell {
    let first = &parts[0].cell;
    let mut cell = CellResult::new(&first.design, &first.scenario);
    let mut latency = LatencySummary::default();
    for part in parts {
        let c = &part.cell;
        cell.runs += c.runs;
        cell.unknown += c.unknown;
        cell.fault_seen += c.fault_seen;
        for (k, n) in &c.per_checker {
            *cell.per_checker.entry(k.clone()).or_insert(0) += n;
        }
        for (k, n) in &c.classes {
            *cell.classes.entry(k.clone()).or_insert(0) += n;
        }
        if let Some(seed) = c.first_invalid_seed
            && cell.first_invalid_seed.is_none_or(|s| seed < s)
        {
            cell.first_invalid_seed = Some(seed);
            cell.replay = c.replay.clone();
        }
        latency.merge(&part.latency);
    }
    cell.latency = latency.ok();
    ShardCell { cell, latency }
}

/// What merged shard files come to.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The matrix's whole seed range.
    pub seeds: String,
    /// The matrix's cells, with their histograms.
    pub cells: Vec<ShardCell>,
    /// The sweeps' whole seed range, if the shards ran sweeps.
    pub sweep_seeds: Option<String>,
    /// The sweeps, merged.
    pub sweeps: Vec<SweepShard>,
}

/// One cell of a shard, with the histograms a merge needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardCell {
    /// The cell as the shard's table shows it.
    pub cell: CellResult,
    /// Its acquire latencies (hdrhistogram V2, deflated, hex).
    pub latency: LatencySummary,
}

/// Merges shard files into the cells of the unsharded run and its seed range. The
/// files must be the `N` shards of one range, each once, with the same cells.
pub fn merge(files: &[(String, ShardFile)]) -> Result<(String, Vec<CellResult>), String> {
    let m = merge_all(files)?;
    Ok((m.seeds, m.cells.into_iter().map(|c| c.cell).collect()))
}

/// [`merge`], keeping the histograms and merging the sweeps too.
pub fn merge_all(files: &[(String, ShardFile)]) -> Result<Merged, String> {
    let Some((first_name, first)) = files.first() else {
        return Err("merge needs at least one shard file".into());
    };
    let shards: Vec<Shard> = files
        .iter()
        .map(|(name, f)| Shard::parse(&f.shard).map_err(|e| format!("{name}: {e}")))
        .collect::<Result<_, _>>()?;
    let count = shards[0].count;
    // Each sweep's identity: scenario, pins, parameter, and per design its values.
    let sweep_keys = |f: &ShardFile| -> Vec<String> {
        f.sweeps
            .iter()
            .map(|s| {
                let lines: Vec<String> = s
                    .lines
                    .iter()
                    .map(|l| {
                        let values: Vec<String> =
                            l.points.iter().map(|p| p.0.to_string()).collect();
                        format!("{}={}", l.design, values.join(","))
                    })
                    .collect();
                format!(
                    "{}{} {}: {}",
                    s.scenario,
                    s.pinned,
                    s.param,
                    lines.join(" ")
                )
            })
            .collect()
    };
    for ((name, f), s) in files.iter().zip(&shards) {
        if f.split != first.split {
            return Err(format!(
                "{name} split its run by {} but {first_name} by {}: shards of different runs",
                f.split.what(),
                first.split.what()
            ));
        }
        if f.seeds != first.seeds || f.sweep_seeds != first.sweep_seeds {
            return Err(match f.split {
                Split::Seeds => format!(
                    "{name} covers seeds {} but {first_name} covers {}: shards of different runs",
                    f.seeds, first.seeds
                ),
                Split::Cells => format!(
                    "{name} ran its cells under {} but {first_name} under {}: shards of different runs",
                    f.seeds, first.seeds
                ),
            });
        }
        if s.count != count {
            return Err(format!(
                "{name} is shard {s} but {first_name} is one of {count}"
            ));
        }
        if f.split == Split::Cells {
            continue;
        }
        let keys = |f: &ShardFile| -> Vec<(String, String)> {
            f.cells
                .iter()
                .map(|c| (c.cell.design.clone(), c.cell.scenario.clone()))
                .collect()
        };
        if keys(f) != keys(first) || sweep_keys(f) != sweep_keys(first) {
            return Err(format!(
                "{name} has other cells than {first_name}: shards of different runs"
            ));
        }
    }
    let mut seen: Vec<u64> = shards.iter().map(|s| s.index).collect();
    seen.sort_unstable();
    let want: Vec<u64> = (1..=count).collect();
    if seen != want {
        return Err(format!(
            "shards {} of {count} given; every shard 1..={count} is needed exactly once",
            seen.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if first.split == Split::Cells {
        return Ok(Merged {
            seeds: first.seeds.clone(),
            cells: place_cells(files, &shards)?,
            sweep_seeds: None,
            sweeps: Vec::new(),
        });
    }
    let cells = (0..first.cells.len())
        .map(|i| merge_cell(&files.iter().map(|(_, f)| &f.cells[i]).collect::<Vec<_>>()))
        .collect();
    let sweeps = first
        .sweeps
        .iter()
        .enumerate()
        .map(|(si, s)| SweepShard {
            scenario: s.scenario.clone(),
            param: s.param.clone(),
            pinned: s.pinned.clone(),
            lease_ms: s.lease_ms,
            lines: s
                .lines
                .iter()
                .enumerate()
                .map(|(li, l)| SweepShardLine {
                    design: l.design.clone(),
                    points: l
                        .points
                        .iter()
                        .enumerate()
                        .map(|(pi, (v, _))| {
                            let parts: Vec<&ShardCell> = files
                                .iter()
                                .map(|(_, f)| &f.sweeps[si].lines[li].points[pi].1)
                                .collect();
                            (*v, merge_cell(&parts))
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(Merged {
        seeds: first.seeds.clone(),
        cells,
        sweep_seeds: first.sweep_seeds.clone(),
        sweeps,
    })
}

/// The cells of shards that split the cells (each shard once, checked), each put back
/// in its place in the whole run's order ([`Shard::cells_of`]).
fn place_cells(files: &[(String, ShardFile)], shards: &[Shard]) -> Result<Vec<ShardCell>, String> {
    let (first_name, first) = &files[0];
    let total = first.of_cells.ok_or_else(|| {
        format!("{first_name} splits cells but does not say how many the run has (of_cells)")
    })?;
    for ((name, f), s) in files.iter().zip(shards) {
        if f.of_cells != first.of_cells {
            return Err(format!(
                "{name} is a share of {} cells but {first_name} of {total}: shards of different runs",
                f.of_cells
                    .map_or("an unknown number of".to_string(), |n| n.to_string())
            ));
        }
        if !f.sweeps.is_empty() {
            return Err(format!(
                "{name} splits cells but has sweeps: only the main job splits its cells"
            ));
        }
        let share = s.share_of(total);
        if f.cells.len() as u64 != share {
            return Err(format!(
                "{name} has {} cells where shard {s} of a run of {total} has {share}: not a whole shard",
                f.cells.len()
            ));
        }
    }
    // Every shard once, each with its whole share: the cells read are all `total` of
    // them, and every place gets one.
    let total = files.iter().map(|(_, f)| f.cells.len()).sum();
    let mut placed: Vec<Option<ShardCell>> = vec![None; total];
    let mut seen = std::collections::BTreeSet::new();
    for ((name, f), s) in files.iter().zip(shards) {
        for (cell, at) in f.cells.iter().zip(s.cells_of(total)) {
            if !seen.insert((cell.cell.design.clone(), cell.cell.scenario.clone())) {
                return Err(format!(
                    "{} × {} is in two shards ({name} and another): shards of different runs",
                    cell.cell.design, cell.cell.scenario
                ));
            }
            placed[at] = Some(cell.clone());
        }
    }
    Ok(placed.into_iter().flatten().collect())
}

/// Reads shard files, naming the file in every error.
pub fn read_files(paths: &[std::path::PathBuf]) -> Result<Vec<(String, ShardFile)>, BadInput> {
    let mut files = Vec::new();
    for p in paths {
        let name = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|e| BadInput(format!("{name}: {e}")))?;
        let f: ShardFile = serde_json::from_str(&text).map_err(|e| {
            BadInput(format!(
                "{name}: not a locksim shard file ({e}); write one with `--shard I/N --out FILE`"
            ))
        })?;
        files.push((name, f));
    }
    Ok(files)
}

/// Writes a shard file (`--out`) of a fixed seed range, refusing to replace an
/// existing file.
pub fn write(
    path: &std::path::Path,
    seeds: &Range<u64>,
    shard: Shard,
    cells: Vec<ShardCell>,
) -> Result<(), BadInput> {
    write_file(
        path,
        &ShardFile {
            seeds: format!("{}..{}", seeds.start, seeds.end),
            shard: shard.to_string(),
            split: Split::Seeds,
            of_cells: None,
            cells,
            sweep_seeds: None,
            sweeps: Vec::new(),
        },
    )
}

/// Writes a shard file (`--out`) of cells run whole under the adaptive `rule` (its
/// words), shard `shard`'s share of `of_cells`, refusing to replace an existing file.
pub fn write_cells(
    path: &std::path::Path,
    rule: &str,
    shard: Shard,
    of_cells: usize,
    cells: Vec<ShardCell>,
) -> Result<(), BadInput> {
    write_file(
        path,
        &ShardFile {
            seeds: rule.to_string(),
            shard: shard.to_string(),
            split: Split::Cells,
            of_cells: Some(of_cells as u64),
            cells,
            sweep_seeds: None,
            sweeps: Vec::new(),
        },
    )
}

/// Why `--out` cannot be `path`: it exists, and locksim never replaces a file.
fn exists_already(path: &std::path::Path) -> BadInput {
    BadInput(format!(
        "{} exists; locksim does not overwrite it (remove it or pick another --out)",
        path.display()
    ))
}

/// Refuses an `--out` that exists before any run starts (a main job's shard runs for
/// minutes); [`write_file`] refuses it again at the end, should it appear meanwhile.
pub fn check_out(path: &std::path::Path) -> Result<(), BadInput> {
    if path.exists() {
        return Err(exists_already(path));
    }
    Ok(())
}

/// Writes a shard file as it is, refusing to replace an existing file.
pub fn write_file(path: &std::path::Path, file: &ShardFile) -> Result<(), BadInput> {
    let mut text = serde_json::to_string_pretty(file).expect("serializable");
    text.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                exists_already(path)
            } else {
                BadInput(format!("{}: {e}", path.display()))
            }
        })?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slices_of_a_range_partition_it_in_order() {
        for (len, n) in [(10u64, 4u64), (3, 4), (0, 2), (1_000, 7)] {
            let seeds = 5..5 + len;
            let mut next = seeds.start;
            for i in 1..=n {
                let s = Shard { index: i, count: n }.seeds_of(&seeds);
                assert_eq!(s.start, next, "{len} seeds in {n}: slice {i}");
                assert!(s.end >= s.start);
                next = s.end;
            }
            assert_eq!(next, seeds.end);
        }
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "4", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shares_of_the_cells_partition_them_round_robin() {
        for (total, n) in [(10usize, 4u64), (3, 4), (0, 2), (921, 8)] {
            let mut all: Vec<usize> = (1..=n)
                .flat_map(|i| Shard { index: i, count: n }.cells_of(total))
                .collect();
            let sizes: Vec<usize> = (1..=n)
                .map(|i| Shard { index: i, count: n }.cells_of(total).count())
                .collect();
            assert!(
                sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0) <= 1,
                "{total} cells in {n}: {sizes:?}"
            );
            for i in 1..=n {
                let shard = Shard { index: i, count: n };
                assert_eq!(
                    shard.share_of(total as u64) as usize,
                    shard.cells_of(total).count(),
                    "{total} cells, shard {shard}"
                );
            }
            all.sort_unstable();
            assert_eq!(all, (0..total).collect::<Vec<_>>(), "{total} cells in {n}");
        }
        let second: Vec<usize> = Shard { index: 2, count: 3 }.cells_of(8).collect();
        assert_eq!(second, [1, 4, 7]);
    }

    /// The main job's shards (adaptive seeds: each shard runs its share of the cells
    /// whole) merge into the cells the unsharded run gives, in its order, whatever the
    /// order of the files; a shard missing, a shard of a seed range, or one of a run
    /// with other cells is refused. One design's row, under a small budget.
    #[test]
    fn the_main_jobs_cell_shards_merge_into_the_unsharded_cells() {
        use crate::commands::catalog_table;
        use crate::seeds::Seeds;
        use scenarios::adaptive::Rule;
        use scenarios::sweep::DesignSpec;

        let dir = std::env::temp_dir().join(format!("locksim-cell-shards-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = |name: &str| dir.join(name);
        let rule = Rule {
            budget: Some(6_000),
            ..Rule::DEFAULT
        };
        let row = |designs: &[DesignSpec], shard: Shard, out: &str| {
            catalog_table(
                designs,
                Seeds::Adaptive(rule),
                2,
                true,
                false,
                Some((shard, file(out))),
            );
        };
        let one = [DesignSpec::builtin("set-nx-px-del").expect("built-in")];
        row(&one, Shard::WHOLE, "whole.json");
        for i in 1..=3 {
            row(&one, Shard { index: i, count: 3 }, &format!("s{i}.json"));
        }
        let read = |names: &[&str]| {
            let paths: Vec<std::path::PathBuf> = names.iter().map(|n| file(n)).collect();
            read_files(&paths).expect("shard files")
        };
        let cells = |m: Merged| -> String {
            let cells: Vec<CellResult> = m.cells.into_iter().map(|c| c.cell).collect();
            serde_json::to_string(&cells).expect("json")
        };
        let whole = merge_all(&read(&["whole.json"])).expect("one shard of one");
        let n = whole.cells.len();
        assert!(n >= 20, "the design's row: {n} cells");
        assert!(
            whole.cells.iter().all(|c| c.cell.settled.is_some()),
            "every cell ran under the adaptive seeds"
        );
        let three = merge_all(&read(&["s3.json", "s1.json", "s2.json"])).expect("three shards");
        assert_eq!(whole.seeds, three.seeds);
        assert!(
            whole.seeds.contains("within 6000 host runs"),
            "{}",
            whole.seeds
        );
        assert_eq!(
            cells(whole),
            cells(three),
            "merged shards differ from the unsharded run"
        );
        let sizes: Vec<usize> = read(&["s1.json", "s2.json", "s3.json"])
            .iter()
            .map(|(_, f)| f.cells.len())
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), n);

        // Refused: a shard missing; a shard of one of three merged with the whole run;
        // a shard of a seed range; a shard of a run with other cells.
        let err = merge_all(&read(&["s1.json", "s3.json"])).unwrap_err();
        assert!(err.contains("every shard 1..=3"), "{err}");
        let err = merge_all(&read(&["whole.json", "s2.json"])).unwrap_err();
        assert!(err.contains("one of 1"), "{err}");
        let mut seeds_split = read(&["s2.json"]);
        seeds_split[0].1.split = Split::Seeds;
        let mut mixed = read(&["s1.json", "s3.json"]);
        mixed.extend(seeds_split);
        let err = merge_all(&mixed).unwrap_err();
        assert!(err.contains("split its run by seeds but"), "{err}");
        let mut other = read(&["s1.json", "s2.json", "s3.json"]);
        other[1].1.of_cells = Some(n as u64 + 30);
        let err = merge_all(&other).unwrap_err();
        assert!(err.contains("share of"), "{err}");
        // A file that claims a huge run is refused by arithmetic, not by a walk or an
        // allocation of that size.
        let mut huge = read(&["s1.json", "s2.json", "s3.json"]);
        for f in &mut huge {
            f.1.of_cells = Some(u64::MAX);
        }
        let err = merge_all(&huge).unwrap_err();
        assert!(err.contains("not a whole shard"), "{err}");
        let mut twice = read(&["s1.json", "s2.json", "s3.json"]);
        twice[1].1.cells[0] = twice[0].1.cells[0].clone();
        let err = merge_all(&twice).unwrap_err();
        assert!(err.contains("is in two shards"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
