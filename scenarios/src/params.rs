//! Scenario parameters a sweep varies: the size of a scenario's faults (how long a
//! pause lasts, how late replies come, how far a replica lags, how fast a clock runs)
//! and a few workload knobs (the lease, the number of clients).
//!
//! A parameter pins one quantity that the scenario otherwise draws from the seed; every
//! other draw stays as the seed makes it (the generator still draws the pinned value and
//! throws it away), so two points of a sweep at the same seed differ in that one
//! quantity only. `locksim sweep --param pause-ms=50..1000:50` varies one over a range;
//! `locksim run`/`replay`/`shrink --param pause-ms=300` pin it for one cell, which is
//! how a sweep point's replay command reproduces it.

use std::fmt;

/// A quantity a sweep can vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    /// Every pause's length (GC pauses, server pauses, pauses mid-acquire), ms.
    PauseMs,
    /// The extra latency of a delay on a client's replies, ms.
    DelayMs,
    /// How far behind its master a replica runs (the delay on everything reaching it), ms.
    LagMs,
    /// How fast the servers' clocks run, parts per million.
    DriftPpm,
    /// How far a server's clock jumps forward, ms.
    JumpMs,
    /// How long a partition lasts, ms.
    PartitionMs,
    /// The lease each acquisition asks for, ms (the faults' drawn sizes scale with it).
    LeaseMs,
    /// Client hosts.
    Clients,
    /// Time inside the critical section, ms.
    WorkMs,
    /// How long a crashed server takes to accept connections again (its restart's
    /// downtime), ms of the world's time; by default drawn around the real server's
    /// start on this machine at the world's scale (`lock_impl::scale::SERVER_STARTS`).
    RestartMs,
}

/// Every parameter, in the order `--help` and errors list them.
pub const ALL: [Param; 10] = [
    Param::PauseMs,
    Param::DelayMs,
    Param::LagMs,
    Param::DriftPpm,
    Param::JumpMs,
    Param::PartitionMs,
    Param::LeaseMs,
    Param::Clients,
    Param::WorkMs,
    Param::RestartMs,
];

impl Param {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Param::PauseMs => "pause-ms",
            Param::DelayMs => "delay-ms",
            Param::LagMs => "lag-ms",
            Param::DriftPpm => "drift-ppm",
            Param::JumpMs => "jump-ms",
            Param::PartitionMs => "partition-ms",
            Param::LeaseMs => "lease-ms",
            Param::Clients => "clients",
            Param::WorkMs => "work-ms",
            Param::RestartMs => "restart-ms",
        }
    }

    /// The parameter called `name`, or an error listing the allowed names.
    pub fn parse(name: &str) -> Result<Param, String> {
        ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| {
            format!(
                "unknown parameter '{name}'; allowed: {}",
                ALL.map(Param::name).join(", ")
            )
        })
    }

    /// The smallest and largest value that makes sense.
    fn bounds(self) -> (u64, u64) {
        match self {
            Param::DriftPpm => (0, 1_000_000),
            Param::Clients => (1, 64),
            Param::WorkMs => (0, 60_000),
            _ => (1, 60_000),
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `NAME=VALUES` as a sweep takes it: `A..B:STEP` (inclusive of `B` when a step lands
/// on it), `A..B` (step 1), `V1,V2,…`, or one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamRange {
    /// The parameter.
    pub param: Param,
    /// Its values, in the order given (ranges ascending).
    pub values: Vec<u64>,
}

/// The most points one sweep runs.
pub const MAX_POINTS: usize = 1_000;

impl ParamRange {
    /// Parses `NAME=VALUES`; the error names the flag, the text, and what is allowed.
    pub fn parse(text: &str) -> Result<ParamRange, String> {
        let bad = |why: &str| {
            format!(
                "invalid --param '{text}': {why}; expected NAME=A..B:STEP, NAME=A..B, NAME=V1,V2,… or NAME=V \
                 (e.g. pause-ms=50..1000:50), with NAME one of {}",
                ALL.map(Param::name).join(", ")
            )
        };
        let (name, values) = text.split_once('=').ok_or_else(|| bad("no '='"))?;
        let param = Param::parse(name.trim()).map_err(|e| bad(&e))?;
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| bad(&format!("'{}' is not a whole number", s.trim())))
        };
        let values: Vec<u64> = if let Some((a, rest)) = values.split_once("..") {
            let (b, step) = match rest.split_once(':') {
                Some((b, step)) => (num(b)?, num(step)?),
                None => (num(rest)?, 1),
            };
            let a = num(a)?;
            if step == 0 {
                return Err(bad("the step must be at least 1"));
            }
            if a > b {
                return Err(bad("the range runs backwards"));
            }
            if (b - a) / step >= MAX_POINTS as u64 {
                return Err(bad(&format!("more than {MAX_POINTS} points")));
            }
            (a..=b).step_by(step as usize).collect()
        } else {
            values.split(',').map(num).collect::<Result<_, _>>()?
        };
        if values.is_empty() || values.len() > MAX_POINTS {
            return Err(bad(&format!("give 1 to {MAX_POINTS} values")));
        }
        let (lo, hi) = param.bounds();
        if let Some(v) = values.iter().find(|v| **v < lo || **v > hi) {
            return Err(bad(&format!("{v} is outside {lo}..={hi} for {param}")));
        }
        Ok(ParamRange { param, values })
    }

    /// Parses `NAME=V`: exactly one value (what `run`, `replay` and `shrink` pin).
    pub fn parse_one(text: &str) -> Result<(Param, u64), String> {
        let r = ParamRange::parse(text)?;
        match r.values[..] {
            [v] => Ok((r.param, v)),
            _ => Err(format!(
                "invalid --param '{text}': give one value here (NAME=V); `locksim sweep` takes ranges"
            )),
        }
    }
}
