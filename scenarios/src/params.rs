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

use crate::catalog::Scenario;

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
}

/// Every parameter, in the order `--help` and errors list them.
pub const ALL: [Param; 9] = [
    Param::PauseMs,
    Param::DelayMs,
    Param::LagMs,
    Param::DriftPpm,
    Param::JumpMs,
    Param::PartitionMs,
    Param::LeaseMs,
    Param::Clients,
    Param::WorkMs,
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

impl Scenario {
    /// This scenario with `param` pinned to `value`, or an error naming the scenarios
    /// whose faults have that quantity.
    pub fn with_param(mut self, param: Param, value: u64) -> Result<Scenario, String> {
        if !self.has_param(param) {
            let fitting: Vec<&str> = crate::catalog::catalog()
                .into_iter()
                .filter(|s| s.has_param(param))
                .map(|s| s.name)
                .collect();
            return Err(format!(
                "--param {param}: scenario {} has no such quantity; scenarios with it: {}",
                self.name,
                fitting.join(", ")
            ));
        }
        let w = &mut self.workload;
        match param {
            Param::LeaseMs => w.lease_ms = value,
            Param::Clients => w.clients = value as u32,
            Param::WorkMs => w.work_ms = value,
            _ => {}
        }
        self.params.retain(|(p, _)| *p != param);
        self.params.push((param, value));
        self.params.sort();
        Ok(self)
    }

    /// The pinned parameters, as `--param` flags (empty if none), for replay commands.
    pub fn param_flags(&self) -> String {
        self.params
            .iter()
            .map(|(p, v)| format!(" --param {p}={v}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::find;
    use sim::faults::FaultKind;

    #[test]
    fn ranges_lists_and_single_values_parse() {
        let r = ParamRange::parse("pause-ms=50..200:50").unwrap();
        assert_eq!(r.param, Param::PauseMs);
        assert_eq!(r.values, vec![50, 100, 150, 200]);
        assert_eq!(
            ParamRange::parse("drift-ppm=0,5000").unwrap().values,
            vec![0, 5000]
        );
        assert_eq!(
            ParamRange::parse("clients=2..4").unwrap().values,
            vec![2, 3, 4]
        );
        assert_eq!(
            ParamRange::parse_one("lag-ms=30").unwrap(),
            (Param::LagMs, 30)
        );
    }

    #[test]
    fn bad_parameters_name_the_flag_and_what_is_allowed() {
        for (text, says) in [
            ("pause=5", "unknown parameter 'pause'"),
            ("pause-ms", "no '='"),
            ("pause-ms=9..3", "backwards"),
            ("pause-ms=1..9:0", "step"),
            ("pause-ms=x", "not a whole number"),
            ("pause-ms=0", "outside"),
            ("clients=1..100000", "more than"),
        ] {
            let e = ParamRange::parse(text).unwrap_err();
            assert!(e.contains(says) && e.contains("--param"), "{text}: {e}");
            assert!(e.contains("pause-ms, delay-ms"), "{text}: {e}");
        }
        let e = ParamRange::parse_one("pause-ms=1,2").unwrap_err();
        assert!(e.contains("one value"), "{e}");
    }

    #[test]
    fn pinning_a_quantity_changes_it_and_nothing_else() {
        let base = find("gc-pause").unwrap();
        let pinned = base.clone().with_param(Param::PauseMs, 333).unwrap();
        for seed in 0..5 {
            let (a, b) = (base.plan(seed), pinned.plan(seed));
            assert_eq!(a.faults.len(), b.faults.len());
            for (fa, fb) in a.faults.iter().zip(&b.faults) {
                assert_eq!(fa.at_ms, fb.at_ms, "seed {seed}: times stay the seed's");
                match (&fa.kind, &fb.kind) {
                    (
                        FaultKind::Pause { target: ta, .. },
                        FaultKind::Pause {
                            target: tb,
                            duration_ms,
                        },
                    ) => {
                        assert_eq!(ta, tb);
                        assert_eq!(*duration_ms, 333);
                    }
                    other => panic!("seed {seed}: {other:?}"),
                }
            }
        }
        assert_eq!(pinned.param_flags(), " --param pause-ms=333");
        assert_eq!(base.param_flags(), "");
        let lease = base.clone().with_param(Param::LeaseMs, 500).unwrap();
        assert_eq!(lease.workload.lease_ms, 500);
    }

    #[test]
    fn a_quantity_the_scenario_lacks_is_refused_with_the_scenarios_that_have_it() {
        let e = find("no-faults")
            .unwrap()
            .with_param(Param::PauseMs, 100)
            .unwrap_err();
        assert!(e.contains("no-faults has no such quantity"), "{e}");
        assert!(e.contains("gc-pause") && e.contains("server-pause"), "{e}");
        // Every parameter some scenario has.
        for p in ALL {
            assert!(
                crate::catalog::catalog().iter().any(|s| s.has_param(p)),
                "{p} belongs to no scenario"
            );
        }
    }
}
