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

/// `--profile mongodb`: the `mongo-*` worlds at MongoDB's own heartbeat (2 s) and
/// election timeout (10 s), with a 30 s lease and every other time of the world
/// stretched by 30/8; the old primary returns 3-4 election timeouts after its crash,
/// inside the run. The catalog's world is unchanged.
#[test]
fn the_mongo_worlds_run_at_mongodbs_own_election_timeout_under_the_mongodb_profile() {
    assert_eq!(Profile::parse("mongodb"), Ok(Profile::MongoDb));
    for name in ["mongo-failover", "mongo-partition"] {
        let catalog_s = catalog::find(name).expect("scenario");
        let c = &catalog_s.workload;
        let cm = c.systems.mongo.as_ref().expect("a replica set");
        assert_eq!(
            (
                c.lease_ms,
                c.work_ms,
                cm.election_timeout_ms,
                cm.heartbeat_ms
            ),
            (8_000, 3_000, 1_000, 200)
        );
        let s = catalog_s
            .clone()
            .with_profile(Profile::MongoDb)
            .expect("rebuilt");
        let w = &s.workload;
        let m = w.systems.mongo.as_ref().expect("a replica set");
        assert_eq!((m.election_timeout_ms, m.heartbeat_ms), (10_000, 2_000));
        assert_eq!((w.lease_ms, w.work_ms), (30_000, 11_250));
        assert_eq!(s.param_flags(), " --profile mongodb");
        for seed in 0..5 {
            let plan = s.plan(seed);
            let last = plan.faults.last().expect("the machine crash or partition");
            let back_after = match last.kind {
                sim::faults::FaultKind::MachineCrash {
                    restart_after_ms, ..
                } => restart_after_ms.expect("restarts"),
                sim::faults::FaultKind::Partition { duration_ms, .. } => duration_ms,
                ref other => panic!("{other:?}"),
            };
            assert!((30_000..=40_000).contains(&back_after), "{back_after}");
            assert!(last.at_ms + back_after < w.duration_ms + w.drain_ms);
            // The catalog's plan for the seed is as before: 3-4 s.
            let c_last = catalog_s.plan(seed).faults.pop().expect("fault");
            assert!((1_500..=2_500).contains(&c_last.at_ms));
        }
    }
}
