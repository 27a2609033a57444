//! The seeds a command runs: a fixed range, or the main job's adaptive search
//! ([`scenarios::adaptive`]), and how `--seeds` and `--budget` choose between them.

use std::ops::Range;

use crate::input::{BadInput, parse_budget, parse_seeds};

/// The seeds of the main job or of one cell: a fixed range (`--seeds A..B`: every seed
/// runs, the rates mean what they say), or the adaptive default
/// ([`scenarios::adaptive`]: each cell until its first unsafe run or its clean runs).
#[derive(Debug, Clone)]
pub enum Seeds {
    /// Every seed of the range.
    Fixed(Range<u64>),
    /// Seeds from 0 until the rule stops the cell.
    Adaptive(scenarios::adaptive::Rule),
}

impl Seeds {
    /// The header's words: `seeds 0..10`, or the adaptive rule.
    pub fn describe(&self) -> String {
        match self {
            Seeds::Fixed(r) => format!("seeds {}..{}", r.start, r.end),
            Seeds::Adaptive(rule) => format!(
                "adaptive seeds{} (each cell from seed 0 until its first unsafe run or {} clean runs, {})",
                if rule.placed {
                    " and placed faults"
                } else {
                    " only"
                },
                rule.clean,
                match rule.budget {
                    Some(b) => format!("within {b} host runs"),
                    None => "no budget".to_string(),
                }
            ),
        }
    }
}

/// `--seeds` of the main job and `run`: a fixed range, or adaptive without it, which
/// `run`'s one cell cannot split (`sharded`: it has no range; the main job's shards
/// split its cells and pass `false`).
pub(crate) fn seeds_of(
    seeds: Option<&str>,
    budget: Option<&str>,
    sharded: bool,
    seeds_only: bool,
) -> Result<Seeds, BadInput> {
    if seeds_only && seeds.is_some() {
        return Err(BadInput(
            "--seeds-only leaves placed faults out of the adaptive search; --seeds runs a fixed range, which places none: give one of them".into(),
        ));
    }
    match (seeds, budget) {
        (Some(_), Some(_)) => Err(BadInput(
            "--budget bounds adaptive seeds, and --seeds gives a fixed range that runs whole: give one of them".into(),
        )),
        (Some(text), None) => Ok(Seeds::Fixed(parse_seeds(text)?)),
        (None, _) if sharded => Err(BadInput(
            "--shard splits a fixed seed range here: give --seeds A..B (without it, one cell's adaptive seeds are one sequence, with no range to split; the main job's shards split its cells instead)".into(),
        )),
        (None, budget) => Ok(Seeds::Adaptive(rule_with(budget, seeds_only)?)),
    }
}

/// The main job's adaptive rule, with `--budget` if given, and without placed faults
/// with `--seeds-only` (the seeds alone, to measure what placement adds).
pub(crate) fn rule_with(
    budget: Option<&str>,
    seeds_only: bool,
) -> Result<scenarios::adaptive::Rule, BadInput> {
    let mut rule = scenarios::adaptive::Rule::DEFAULT;
    rule.placed = !seeds_only;
    if let Some(b) = budget {
        rule.budget = parse_budget(b)?;
    }
    Ok(rule)
}
