//! A stop-the-world pause freezes a client's watchdog with it, and a crash kills it:
//! the Redis server's own record shows renewals (`ExpireSet` by the client) before the
//! fault, none during a pause or after a crash, and the lock expiring meanwhile.

use std::time::Duration;

use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{EventKind, FaultPhase, History, ServerEvent};
use sim::world::{RunConfig, Workload, builtin_factory, run};

const LEASE_MS: u64 = 200;

/// One client holding a watchdog lock through long critical sections.
fn config(kind: FaultKind) -> RunConfig {
    RunConfig {
        seed: 3,
        design: "reentrant-watchdog".into(),
        factory: builtin_factory("reentrant-watchdog").unwrap(),
        scenario: "watchdog-freeze".into(),
        workload: Workload {
            clients: 2,
            lease_ms: LEASE_MS,
            work_ms: 3_000,
            duration_ms: 4_000,
            drain_ms: 500,
            ..Workload::default()
        },
        client_clocks: vec![],
        server_clock: Default::default(),
        plan: FaultPlan {
            faults: vec![Fault { at_ms: 1_000, kind }],
        },
        stepping: Default::default(),
    }
}

fn fault_window(h: &History) -> (String, u64, Option<u64>) {
    let mut start = None;
    let mut end = None;
    for e in &h.events {
        if let EventKind::Fault { phase, .. } = e.kind {
            match phase {
                FaultPhase::Start => start = Some((e.host.clone(), e.at_us)),
                FaultPhase::End => end = Some(e.at_us),
            }
        }
    }
    let (host, start) = start.expect("the fault hit a holder");
    (host, start, end)
}

/// Renewals of the lock key by `host`, as (time, ttl).
fn renewals(h: &History, host: &str) -> Vec<u64> {
    h.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Server(ServerEvent::ExpireSet { by, key, .. })
                if by == host && *key == h.params.key =>
            {
                Some(e.at_us)
            }
            _ => None,
        })
        .collect()
}

fn expired_between(h: &History, from_us: u64, to_us: u64) -> bool {
    h.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Server(ServerEvent::Removed { cause, key, .. })
            if cause == "expired" && *key == h.params.key)
            && (from_us..=to_us).contains(&e.at_us)
    })
}

#[test]
fn the_watchdog_does_not_renew_while_its_client_is_paused() {
    let h = run(&config(FaultKind::Pause {
        target: Target::Holder,
        duration_ms: 1_000,
    }))
    .unwrap();
    let (host, start, end) = fault_window(&h);
    let end = end.expect("the pause ended");
    let renewed = renewals(&h, &host);
    let before = renewed.iter().filter(|&&t| t < start).count();
    let during: Vec<_> = renewed.iter().filter(|&&t| t > start && t < end).collect();
    assert!(
        before >= 3,
        "the watchdog renewed before the pause: {before} renewals"
    );
    assert!(
        during.is_empty(),
        "renewals during the pause at {during:?} (pause {start}..{end} us)"
    );
    assert!(
        expired_between(&h, start, end),
        "the lock expired on the server during the pause (the fault outlasted the lease)"
    );
}

#[test]
fn the_watchdog_dies_with_its_crashed_client() {
    let h = run(&config(FaultKind::Crash {
        target: Target::Holder,
        restart_after_ms: None,
    }))
    .unwrap();
    let (host, start, _) = fault_window(&h);
    let renewed = renewals(&h, &host);
    let before = renewed.iter().filter(|&&t| t < start).count();
    let after: Vec<_> = renewed.iter().filter(|&&t| t > start).collect();
    assert!(
        before >= 3,
        "the watchdog renewed before the crash: {before} renewals"
    );
    assert!(after.is_empty(), "renewals after the crash at {after:?}");
    let lease_us = Duration::from_millis(LEASE_MS).as_micros() as u64;
    assert!(
        expired_between(&h, start, start + lease_us + 150_000),
        "the lock expired within a lease of the crash"
    );
}
