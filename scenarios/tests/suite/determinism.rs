//! The same seed gives a byte-identical history.

use crate::common;

use common::{design, scenario};
use scenarios::sweep::config;

#[test]
fn one_seed_run_twice_gives_the_same_history_for_every_design() {
    for s in [
        "gc-pause",
        "client-crash",
        "server-restart",
        "server-pause",
        "partition",
        "clock-jump",
        "redlock-clock-jump",
    ] {
        let s = scenario(s);
        for d in lock_impl::DESIGNS
            .iter()
            .filter(|d| s.applies_to(d.backend, d.masters))
        {
            let cfg = config(&design(d.name), &s, 7);
            let a = sim::world::run(&cfg).expect("run");
            let b = sim::world::run(&cfg).expect("run");
            assert_eq!(
                a.digest(),
                b.digest(),
                "design={} scenario={}",
                d.name,
                s.name
            );
            assert_eq!(
                serde_json::to_vec(&a).unwrap(),
                serde_json::to_vec(&b).unwrap(),
                "design={} scenario={}",
                d.name,
                s.name
            );
            assert!(a.events.len() > 100, "the run did something");
        }
    }
}

#[test]
fn different_seeds_give_different_histories() {
    let s = scenario("no-faults");
    let d = design("set-nx-px-lua");
    let a = sim::world::run(&config(&d, &s, 1)).expect("run");
    let b = sim::world::run(&config(&d, &s, 2)).expect("run");
    assert_ne!(a.digest(), b.digest());
}
