//! The checks a fault plan passes before it runs, whoever wrote it (a plan file, a
//! pinned `--param`, the shrinker): its values are ones its faults can have, and the
//! hosts it names exist in the workload's world.

use sim::faults::{FaultPlan, Target};
use sim::world::Workload;

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
    let servers = workload.server_hosts();
    let known = |h: &str| {
        let client = h
            .strip_prefix("client-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| (1..=workload.clients).contains(&n));
        client || servers.iter().any(|s| s == h)
    };
    let allowed = || {
        let mut names = vec![format!("client-1 to client-{}", workload.clients)];
        names.extend(servers.iter().cloned());
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
