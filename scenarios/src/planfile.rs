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
use sim::faults::FaultPlan;
use sim::world::Workload;

use crate::catalog::Scenario;
use crate::plancheck::{check_hosts, check_values};

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
