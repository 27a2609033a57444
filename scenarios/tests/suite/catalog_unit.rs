//! `scenarios::catalog`'s unit tests, moved here from the module: the `scenarios`
//! library has no unit-test harness, which would compile it a second time.

use scenarios::catalog::*;
use scenarios::params::{ALL, Param};
use sim::faults::FaultKind;

#[test]
fn every_scenario_has_its_own_name() {
    let mut names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), SCENARIOS.len());
}

#[test]
fn find_names_the_allowed_scenarios_when_it_knows_none() {
    assert_eq!(find("gc-pause").unwrap().name, "gc-pause");
    let e = find("gc").unwrap_err();
    assert!(e.contains("unknown scenario 'gc'") && e.contains("no-faults, client-crash"));
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
            catalog().iter().any(|s| s.has_param(p)),
            "{p} belongs to no scenario"
        );
    }
}
