//! Bad input, and the argument helpers that several commands share: seed ranges,
//! design and scenario names, `--param` pins, plan files, and whether a design runs
//! in a scenario. Every refusal is a [`BadInput`] whose message names the field and
//! what is allowed (the command then exits 2).
//!
//! The command front ends (the subcommands, gate, report, sweeps, explore) resolve
//! what they were given here, and this module imports none of them: the imports go
//! one way, so a new command, design or scenario touches one place.

use std::ops::Range;

use scenarios::catalog::{self, Scenario};
use scenarios::sweep::DesignSpec;

/// A bad-input error: the message names the field and what is allowed.
#[derive(Debug)]
pub struct BadInput(pub String);

/// Parses `A..B` (half-open, `A < B`) or a single seed `N` (meaning `N..N+1`).
pub fn parse_seeds(text: &str) -> Result<Range<u64>, BadInput> {
    let bad = || {
        BadInput(format!(
            "invalid --seeds '{text}': expected a range A..B with A < B (e.g. 0..100) or one seed N"
        ))
    };
    match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (
                a.trim().parse::<u64>().map_err(|_| bad())?,
                b.trim().parse::<u64>().map_err(|_| bad())?,
            );
            if a >= b {
                return Err(bad());
            }
            Ok(a..b)
        }
        None => {
            let n = text.trim().parse::<u64>().map_err(|_| bad())?;
            Ok(n..n.checked_add(1).ok_or_else(bad)?)
        }
    }
}

/// Parses `--budget`: a cell's budget of host runs under adaptive seeds (a positive
/// number), or `none` for no budget.
pub fn parse_budget(text: &str) -> Result<Option<u64>, BadInput> {
    match text.trim() {
        "none" => Ok(None),
        n => match n.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(BadInput(format!(
                "invalid --budget '{text}': expected a number of host runs above 0 (e.g. 300000) or `none`"
            ))),
        },
    }
}

/// Resolves a design name (a built-in, or `broken/<name>` from the broken-design
/// catalog), or says which are allowed.
pub fn design(name: &str) -> Result<DesignSpec, BadInput> {
    if name.starts_with(scenarios::broken::PREFIX) {
        return scenarios::broken::find(name)
            .map(|b| b.spec())
            .ok_or_else(|| {
                let names: Vec<String> = scenarios::broken::catalog()
                    .iter()
                    .map(|b| format!("{}{}", scenarios::broken::PREFIX, b.name))
                    .collect();
                BadInput(format!(
                    "unknown broken design '{name}'; allowed: {}",
                    names.join(", ")
                ))
            });
    }
    DesignSpec::builtin(name).map_err(|_| {
        BadInput(format!(
            "unknown design '{name}'; allowed: {}, or broken/<name> (see `locksim list`)",
            lock_impl::design_names()
        ))
    })
}

/// Resolves a design name among `extra` (a caller's own designs, found first), then as
/// [`design`] does; the error lists the extra names too.
pub fn design_among(name: &str, extra: &[DesignSpec]) -> Result<DesignSpec, BadInput> {
    if let Some(d) = extra.iter().find(|d| d.name == name) {
        return Ok(d.clone());
    }
    design(name).map_err(|e| {
        if extra.is_empty() {
            return e;
        }
        let names: Vec<&str> = extra.iter().map(|d| d.name.as_str()).collect();
        BadInput(format!("{}; your own: {}", e.0, names.join(", ")))
    })
}

/// Resolves a scenario name, or says which are allowed.
pub fn scenario(name: &str) -> Result<Scenario, BadInput> {
    catalog::find(name).map_err(BadInput)
}

/// Rebuilds `scenario`'s world at `--profile`'s time scale (`catalog` leaves it as it
/// is), or says which profiles there are.
pub fn with_profile(scenario: Scenario, profile: &str) -> Result<Scenario, BadInput> {
    let profile = scenarios::catalog::Profile::parse(profile)
        .map_err(|e| BadInput(format!("--profile: {e}")))?;
    if profile == scenarios::catalog::Profile::Catalog {
        return Ok(scenario);
    }
    scenario.with_profile(profile).map_err(BadInput)
}

/// Reads a plan file (hand-written, or written by `locksim shrink`: faults, and
/// optionally the workload fields that differ) and puts it in place of the scenario's.
pub fn with_plan(scenario: Scenario, path: Option<&std::path::Path>) -> Result<Scenario, BadInput> {
    let Some(path) = path else {
        return Ok(scenario);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read --plan {}: {e}", path.display())))?;
    scenarios::planfile::apply(scenario, &text, &path.display().to_string()).map_err(BadInput)
}

/// Pins each `--param NAME=V` on `scenario` (before a plan file, which may override
/// workload fields in turn).
pub fn with_params(mut scenario: Scenario, params: &[String]) -> Result<Scenario, BadInput> {
    for text in params {
        let (p, v) = scenarios::params::ParamRange::parse_one(text).map_err(BadInput)?;
        scenario = scenario.with_param(p, v).map_err(BadInput)?;
    }
    Ok(scenario)
}

/// Refuses a design × scenario pair that does not run (a Redlock design in a world
/// with replicas, a single-master design in a world of independent masters), naming
/// the scenarios that do.
pub fn check_pair(design: &DesignSpec, scenario: &Scenario) -> Result<(), BadInput> {
    if scenario.applies_to(design.backend, design.masters) {
        return Ok(());
    }
    let fitting: Vec<&str> = catalog::catalog()
        .into_iter()
        .filter(|s| s.applies_to(design.backend, design.masters))
        .map(|s| s.name)
        .collect();
    let on = if counts_masters(design.backend) {
        format!(
            "{} master{}",
            design.masters,
            if design.masters == 1 { "" } else { "s" }
        )
    } else {
        format!("a {} server", design.backend.name())
    };
    Err(BadInput(format!(
        "--scenario {} does not run design {} (it locks on {on}, and the scenario's world \
         is {:?}); allowed for it: {}",
        scenario.name,
        design.name,
        scenario.topology(),
        fitting.join(", ")
    )))
}

/// Whether a design on `backend` is told apart by the number of masters it locks on:
/// the system has designs on several independent masters (Redlock's), so its worlds
/// are one master or several.
pub fn counts_masters(backend: lock_impl::Backend) -> bool {
    lock_impl::DESIGNS
        .iter()
        .any(|d| d.backend == backend && d.masters > 1)
}

/// Places `scenario`'s fault as `--place` says: `none` (the world's standing faults
/// only) or a millisecond (see [`scenarios::catalog::Placement`]); refused beside a
/// plan file, which replaces every fault.
pub fn with_place(
    scenario: Scenario,
    place: Option<&str>,
    has_plan: bool,
) -> Result<Scenario, BadInput> {
    use scenarios::catalog::Placement;
    let Some(text) = place else {
        return Ok(scenario);
    };
    if has_plan {
        return Err(BadInput(
            "--place and --plan both set the faults: give one of them".into(),
        ));
    }
    let placement = match text.trim() {
        "none" => Placement::Bare,
        ms => Placement::At(ms.parse().map_err(|_| {
            BadInput(format!(
                "invalid --place '{text}': a start in ms (a whole number) or `none`"
            ))
        })?),
    };
    if scenario.timed_faults() == 0 {
        return Err(BadInput(format!(
            "--place: scenario {} has no timed fault to place (its faults are the world's from the start)",
            scenario.name
        )));
    }
    Ok(scenario.placed(Some(placement)))
}
