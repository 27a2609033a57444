//! Plan files: a hand-written or shrunk fault plan, optionally with the workload knobs
//! that differ from the scenario's.
//!
//! ```json
//! {"faults": [{"at_ms": 500, "kind": {"type": "pause", "target": "holder", "duration_ms": 800}}],
//!  "workload": {"clients": 2, "duration_ms": 1500}}
//! ```
//!
//! `faults` has the shape `locksim replay --json` prints under `history.plan`;
//! `workload` is optional and names only the fields that change (the field names of
//! `locksim replay`'s `workload:` line). `locksim shrink` writes this format, so its
//! result replays with `--plan` like any hand-written plan.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sim::faults::{FaultPlan, Target};
use sim::world::Workload;

use crate::catalog::Scenario;

/// The file's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    /// The faults.
    pub faults: Vec<sim::faults::Fault>,
    /// Workload fields that differ from the scenario's.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub workload: Map<String, Value>,
}

const SHAPE: &str = r#"expected {"faults": [{"at_ms": 500, "kind": {"type": "pause", "target": "holder", "duration_ms": 800}}], "workload": {"clients": 2}} with type one of pause, crash, machine-crash, delay, drop-pushes, partition, clock-jump, clock-drift, clock-slew, pause-before-write, slow-work, reset-connections; target one of holder, acquirer, lock-owner, lock-server, all-servers, all-clients, {"host": "client-N"} or {"host": "<server>"}; "workload" is optional"#;

impl PlanFile {
    /// The plan file for `plan` run with `workload` in place of `base`'s: only the
    /// fields that differ are written.
    pub fn new(plan: &FaultPlan, workload: &Workload, base: &Workload) -> Self {
        let (Value::Object(new), Value::Object(old)) = (
            serde_json::to_value(workload).expect("serializable"),
            serde_json::to_value(base).expect("serializable"),
        ) else {
            unreachable!("a workload serializes to an object")
        };
        let workload = new
            .into_iter()
            .filter(|(k, v)| old.get(k) != Some(v))
            .collect();
        PlanFile {
            faults: plan.faults.clone(),
            workload,
        }
    }

    /// Pretty JSON, as `locksim shrink` writes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable") + "\n"
    }
}

/// Parses a plan file and returns `scenario` with its plan (and workload changes) in
/// place; `label` names the file in errors and replay commands. Errors name the field
/// and what is allowed.
pub fn apply(mut scenario: Scenario, text: &str, label: &str) -> Result<Scenario, String> {
    let file: PlanFile =
        serde_json::from_str(text).map_err(|e| format!("invalid --plan {label}: {e}; {SHAPE}"))?;
    if !file.workload.is_empty() {
        let Value::Object(mut merged) =
            serde_json::to_value(&scenario.workload).expect("serializable")
        else {
            unreachable!("a workload serializes to an object")
        };
        for (k, v) in &file.workload {
            if !merged.contains_key(k) {
                let mut allowed: Vec<&str> = merged.keys().map(String::as_str).collect();
                allowed.sort_unstable();
                return Err(format!(
                    "invalid --plan {label}: unknown workload field '{k}'; allowed: {}",
                    allowed.join(", ")
                ));
            }
            merged.insert(k.clone(), v.clone());
        }
        let workload: Workload = serde_json::from_value(Value::Object(merged))
            .map_err(|e| format!("invalid --plan {label}: workload: {e}"))?;
        workload
            .validate()
            .map_err(|e| format!("invalid --plan {label}: {e}"))?;
        scenario.workload = workload;
    }
    let plan = FaultPlan {
        faults: file.faults,
    };
    check_hosts(&plan, &scenario.workload).map_err(|e| format!("invalid --plan {label}: {e}"))?;
    check_values(&plan).map_err(|e| format!("invalid --plan {label}: {e}"))?;
    scenario.fixed_plan = Some((plan, label.to_string()));
    Ok(scenario)
}

/// Every fault's values are ones it can have: a slew needs a rate, and no rate may
/// stop a clock or run it backwards.
pub fn check_values(plan: &FaultPlan) -> Result<(), String> {
    for (i, f) in plan.faults.iter().enumerate() {
        if let sim::faults::FaultKind::ClockDrift { drift_ppm, .. } = f.kind
            && !(-999_999..=1_000_000).contains(&drift_ppm)
        {
            return Err(format!(
                "faults[{i}]: clock-drift's drift_ppm is {drift_ppm}; allowed: -999999 to 1000000 (a clock that stops or runs backwards is not one)"
            ));
        }
        if let sim::faults::FaultKind::ClockSlew { rate_ppm, .. } = f.kind
            && !(1..=1_000_000).contains(&rate_ppm)
        {
            return Err(format!(
                "faults[{i}]: clock-slew's rate_ppm is {rate_ppm}; allowed: 1 to 1000000 (chrony slews at up to 83333 ppm, ntpd at 500)"
            ));
        }
    }
    Ok(())
}

/// Every host a plan names exists in `workload`'s world.
pub fn check_hosts(plan: &FaultPlan, workload: &Workload) -> Result<(), String> {
    let known = |h: &str| {
        let client = h
            .strip_prefix("client-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| (1..=workload.clients).contains(&n));
        client || workload.servers.iter().any(|s| s.name == h)
    };
    let allowed = || {
        let mut names = vec![format!("client-1 to client-{}", workload.clients)];
        names.extend(workload.servers.iter().map(|s| s.name.clone()));
        names.join(", ")
    };
    for (i, f) in plan.faults.iter().enumerate() {
        for t in f.kind.targets() {
            let named = match t {
                Target::Host(h) | Target::LockServerOf { client: h, .. } => Some(h),
                _ => None,
            };
            if let Some(h) = named
                && !known(h)
            {
                return Err(format!(
                    "faults[{i}] targets host '{h}'; allowed: {}",
                    allowed()
                ));
            }
        }
    }
    Ok(())
}
