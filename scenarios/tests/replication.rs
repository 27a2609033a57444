//! With a replica following the master and no faults, every design keeps every
//! promise: the replica's own record (writes by its master, on another host) must not
//! confuse any checker.

mod common;

use common::{design, scenario};
use scenarios::sweep::{replay_command, sweep};
use sim::world::ServerSpec;

#[test]
fn a_replica_in_the_world_changes_no_verdict_without_faults() {
    let mut s = scenario("no-faults");
    let mut replica = ServerSpec::named("redis-replica");
    replica.replica_of = Some("redis".into());
    s.workload.servers = vec![ServerSpec::named("redis"), replica];
    for d in lock_impl::DESIGNS {
        let runs = sweep(&design(d.name), &s, 0..20, 2, false, &|_, _| {}).expect("runs complete");
        for run in &runs {
            for (checker, verdict) in &run.verdicts {
                assert!(
                    verdict.is_valid(),
                    "{} seed {}: {checker} is {verdict:?}; replay: {}",
                    d.name,
                    run.seed,
                    replay_command(d.name, s.name, run.seed)
                );
            }
            assert!(
                run.acquisitions > 10,
                "{} seed {}: too few acquisitions",
                d.name,
                run.seed
            );
        }
    }
}
