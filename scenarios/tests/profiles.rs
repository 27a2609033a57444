//! Time scales as users run them (issue 26): under Redisson's defaults (30 s lease,
//! renewal every 10 s, 3 s reply timeout), a holder cut off for a few seconds, far
//! less than the 20 s its lease still has, keeps its lock: Redisson's executor resends
//! the renewal (and 3.52.0's watchdog schedules the next one after a failure). What
//! the Redisson ports do under the cut is in `renewal.rs`.

use scenarios::catalog::{self, Profile};
use scenarios::sweep::{DesignSpec, config};
use sim::faults::FaultPlan;

#[test]
fn the_renewal_blip_world_runs_at_redissons_scale_and_its_probe_needs_the_cut() {
    let s = catalog::find("renewal-blip").expect("scenario");
    assert_eq!(s.workload.lease_ms, 30_000);
    assert_eq!(s.workload.response_timeout_ms, 3_000);
    assert!(s.workload.work_ms > 2 * s.workload.lease_ms);
    let mut cfg = config(
        &DesignSpec::builtin("reentrant-watchdog").expect("design"),
        &s,
        0,
    );
    cfg.plan = FaultPlan { faults: vec![] };
    let h = sim::world::run(&cfg).expect("run completes");
    assert_eq!(s.probe(&h), None, "no cut, no fault seen");
}

#[test]
fn a_profile_is_named_and_a_wrong_name_lists_the_allowed_ones() {
    assert_eq!(Profile::parse("redisson"), Ok(Profile::Redisson));
    assert_eq!(Profile::Catalog.base(), catalog::base());
    let err = Profile::parse("jedis").unwrap_err();
    assert!(
        err.contains("jedis") && err.contains("catalog, redisson"),
        "{err}"
    );
}

#[test]
fn any_scenario_runs_at_a_profiles_scale_and_its_replay_command_says_so() {
    let s = catalog::find("gc-pause")
        .expect("scenario")
        .with_param(scenarios::params::Param::Clients, 3)
        .expect("pinned")
        .with_profile(Profile::Redisson)
        .expect("rebuilt");
    assert_eq!(s.workload.lease_ms, 30_000);
    assert_eq!(s.workload.response_timeout_ms, 3_000);
    // A pinned quantity stays pinned through the rebuild.
    assert_eq!(s.workload.clients, 3);
    assert_eq!(s.param_flags(), " --profile redisson --param clients=3");
    // The pauses are drawn as multiples of the lease: 2-4 of Redisson's.
    let plan = s.plan(0);
    assert!(!plan.faults.is_empty());
    for f in &plan.faults {
        let sim::faults::FaultKind::Pause { duration_ms, .. } = f.kind else {
            panic!("gc-pause plans pauses: {f:?}");
        };
        assert!((60_000..=120_000).contains(&duration_ms), "{duration_ms}");
    }
    // The catalog's scale is the default, and names no flag.
    let c = catalog::find("gc-pause").expect("scenario");
    assert_eq!(c.profile, Profile::Catalog);
    assert_eq!(c.param_flags(), "");
}
