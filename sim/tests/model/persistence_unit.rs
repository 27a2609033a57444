//! `sim::redis::persistence`'s own tests (moved from the module): what each
//! `appendfsync` policy keeps through a process crash and a machine crash.

use sim::redis::keyspace::{Entry, Value};
use sim::redis::persistence::{DurableStore, Fsync, Persistence, State};

fn state(v: &str) -> State {
    vec![(
        0,
        b"lock".to_vec(),
        Entry {
            value: Value::Str(v.as_bytes().to_vec()),
            expire_at_ms: None,
        },
    )]
}

fn aof(fsync: Fsync) -> DurableStore {
    DurableStore::new(Persistence::Aof { fsync })
}

#[test]
fn without_persistence_a_restart_loads_nothing() {
    let mut d = DurableStore::new(Persistence::None);
    d.after_iteration(|| state("a"), 0);
    d.crash_process();
    assert!(d.surviving().is_empty());
}

#[test]
fn always_keeps_every_acknowledged_write_through_a_machine_crash() {
    let mut d = aof(Fsync::Always);
    d.after_iteration(|| state("a"), 10);
    d.after_iteration(|| state("b"), 20);
    d.crash_machine();
    assert_eq!(d.surviving(), state("b"));
}

#[test]
fn everysec_loses_the_last_second_in_a_machine_crash_but_not_in_a_process_crash() {
    let mut d = aof(Fsync::Everysec);
    d.after_iteration(|| state("a"), 0); // first fsync
    d.after_iteration(|| state("b"), 400_000);
    let mut machine = d.clone();
    machine.crash_machine();
    assert_eq!(machine.surviving(), state("a"));
    d.crash_process();
    assert_eq!(d.surviving(), state("b"));
}

#[test]
fn everysec_fsyncs_on_the_cron_even_without_new_writes() {
    let mut d = aof(Fsync::Everysec);
    d.after_iteration(|| state("a"), 0);
    d.after_iteration(|| state("b"), 500_000);
    d.tick(1_100_000);
    d.crash_machine();
    assert_eq!(d.surviving(), state("b"));
}

#[test]
fn no_fsync_loses_the_last_thirty_seconds_in_a_machine_crash() {
    let mut d = aof(Fsync::No);
    d.after_iteration(|| state("a"), 0);
    for t in (100_000..40_000_000).step_by(100_000) {
        d.tick(t);
    }
    d.after_iteration(|| state("b"), 40_000_000);
    let mut machine = d.clone();
    machine.crash_machine();
    assert_eq!(machine.surviving(), state("a"));
    d.crash_process();
    assert_eq!(d.surviving(), state("b"));
}
