//! Sweeps split across machines: `--shard I/N` runs one contiguous slice of the seed
//! range, `--out FILE` writes the cells with their latency histograms, and
//! `locksim merge` adds the shards back into exactly the cells of the unsharded run.
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

/// What a shard writes with `--out`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    /// The whole seed range the shards split (`A..B`).
    pub seeds: String,
    /// Which shard this is (`I/N`).
    pub shard: String,
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
        if f.seeds != first.seeds || f.sweep_seeds != first.sweep_seeds {
            return Err(format!(
                "{name} covers seeds {} but {first_name} covers {}: shards of different runs",
                f.seeds, first.seeds
            ));
        }
        if s.count != count {
            return Err(format!(
                "{name} is shard {s} but {first_name} is one of {count}"
            ));
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

/// Writes a shard file (`--out`), refusing to replace an existing file.
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
            cells,
            sweep_seeds: None,
            sweeps: Vec::new(),
        },
    )
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
            BadInput(if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "{} exists; locksim does not overwrite it (remove it or pick another --out)",
                    path.display()
                )
            } else {
                format!("{}: {e}", path.display())
            })
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
}
