//! `sim::world::config`'s own tests (moved from the module): the workload's checks.

use sim::world::config::Workload;

#[test]
fn a_read_share_is_a_percentage_and_excludes_nesting() {
    let ok = Workload {
        read_share: Some(70),
        ..Workload::default()
    };
    assert!(ok.validate().is_ok());
    let over = Workload {
        read_share: Some(101),
        ..Workload::default()
    };
    let err = over.validate().unwrap_err().to_string();
    assert!(err.contains("workload.read_share=101"), "{err}");
    let nested = Workload {
        read_share: Some(50),
        reentrant_depth: 2,
        ..Workload::default()
    };
    let err = nested.validate().unwrap_err().to_string();
    assert!(err.contains("reentrant_depth"), "{err}");
    // Off by default, and then absent from the serialized workload.
    let json = serde_json::to_string(&Workload::default()).unwrap();
    assert!(!json.contains("read_share"), "{json}");
}
