//! `scenarios::planfile`'s unit tests, moved here from the module: the `scenarios`
//! library has no unit-test harness, which would compile it a second time.

use scenarios::catalog::find;
use scenarios::planfile::*;

#[test]
fn a_plan_file_round_trips_with_only_the_changed_workload_fields() {
    let s = find("gc-pause").unwrap();
    let plan = s.plan(3);
    let mut w = s.workload.clone();
    w.clients = 2;
    let file = PlanFile::new(&plan, &w, &s.workload);
    assert_eq!(file.workload.len(), 1, "{:?}", file.workload);
    let back = apply(s.clone(), &file.to_json(), "x.json").unwrap();
    assert_eq!(back.workload, w);
    assert_eq!(back.fixed_plan.unwrap().0, plan);
}

#[test]
fn bad_plan_files_name_the_field_and_what_is_allowed() {
    let s = find("gc-pause").unwrap();
    let e = apply(
        s.clone(),
        r#"{"faults": [], "workload": {"clients": 0}}"#,
        "f",
    )
    .unwrap_err();
    assert!(e.contains("workload.clients"), "{e}");
    let e = apply(
        s.clone(),
        r#"{"faults": [], "workload": {"clint": 2}}"#,
        "f",
    )
    .unwrap_err();
    assert!(e.contains("'clint'") && e.contains("clients"), "{e}");
    let e = apply(
        s.clone(),
        r#"{"faults": [{"at_ms": 1, "kind": {"type": "pause", "target": {"host": "client-9"}, "duration_ms": 5}}]}"#,
        "f",
    )
    .unwrap_err();
    assert!(
        e.contains("client-9") && e.contains("client-1 to client-8"),
        "{e}"
    );
    let e = apply(
        s.clone(),
        r#"{"faults": [{"at_ms": 1, "kind": {"type": "clock-slew", "target": "holder", "delta_ms": -50, "rate_ppm": 0}}]}"#,
        "f",
    )
    .unwrap_err();
    assert!(
        e.contains("faults[0]") && e.contains("rate_ppm") && e.contains("1 to 1000000"),
        "{e}"
    );
    let e = apply(
        s.clone(),
        r#"{"faults": [{"at_ms": 1, "kind": {"type": "clock-drift", "target": "holder", "drift_ppm": -2000000}}]}"#,
        "f",
    )
    .unwrap_err();
    assert!(e.contains("drift_ppm") && e.contains("-999999"), "{e}");
    let slew = apply(
        s.clone(),
        r#"{"faults": [{"at_ms": 1, "kind": {"type": "clock-slew", "target": "holder", "delta_ms": -50, "rate_ppm": 500}}]}"#,
        "f",
    );
    assert!(slew.is_ok(), "{:?}", slew.err());
    let e = apply(s, r#"{"faults": [{"at_ms": 1}]}"#, "f").unwrap_err();
    assert!(
        e.contains("machine-crash") && e.contains("clock-slew"),
        "{e}"
    );
}

/// A plan file may pause any server host its world has, whatever its system (a
/// ZooKeeper server, a MongoDB member, a Sentinel), not only the Redis servers; a host
/// the world lacks is refused with the world's hosts listed.
#[test]
fn a_plan_file_may_name_every_server_host_of_its_world() {
    let mut systems_seen = std::collections::BTreeSet::new();
    let worlds = scenarios::catalog::catalog().into_iter().flat_map(|s| {
        let on_each: Vec<_> = lock_impl::Backend::ALL
            .iter()
            .map(|&b| {
                let mut on = s.clone();
                on.workload = s.workload.clone().on_system(b);
                on
            })
            .collect();
        std::iter::once(s).chain(on_each)
    });
    for s in worlds {
        let hosts = s.workload.server_hosts();
        for h in &hosts {
            let text = format!(
                r#"{{"faults": [{{"at_ms": 1, "kind": {{"type": "pause", "target": {{"host": "{h}"}}, "duration_ms": 5}}}}]}}"#
            );
            let back = apply(s.clone(), &text, "f");
            assert!(
                back.is_ok(),
                "{} refuses its own host {h}: {:?}",
                s.name,
                back.err()
            );
            systems_seen.insert(h.trim_end_matches(|c: char| c.is_ascii_digit()).to_string());
        }
        let e = apply(
            s.clone(),
            r#"{"faults": [{"at_ms": 1, "kind": {"type": "pause", "target": {"host": "nowhere-1"}, "duration_ms": 5}}]}"#,
            "f",
        )
        .unwrap_err();
        assert!(
            e.contains("nowhere-1") && hosts.iter().all(|h| e.contains(h.as_str())),
            "{}: {e}",
            s.name
        );
    }
    for prefix in ["zk-", "mongo-", "mysql-", "sentinel-", "etcd-"] {
        assert!(
            systems_seen.contains(prefix),
            "no catalog world has a {prefix}N host: {systems_seen:?}"
        );
    }
}
