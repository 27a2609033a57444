//! A small hand-built history shared by the report tests.

use sim::faults::{Fault, FaultKind, FaultPlan, Target};
use sim::history::{
    Event, EventKind, FaultPhase, History, Op, OpF, Phase, RunParams, ServerEvent, StorageEvent,
};

pub fn op(at_us: u64, host: &str, op: u64, f: OpF, phase: Phase, owner: Option<&str>) -> Event {
    Event {
        at_us,
        host: host.into(),
        kind: EventKind::Op(Op {
            op,
            f,
            phase,
            key: Some("lock".into()),
            owner: owner.map(Into::into),
            value: None,
            token: None,
            valid_until_us: None,
            detail: None,
            mode: None,
        }),
    }
}

/// client-1 acquires (latency 10 ms), is paused 800 ms; client-4 acquires (latency
/// 1103 ms) while client-1 still believes it holds; client-2's release removes
/// client-4's value; client-3's acquire never completes; client-5's fails.
pub fn history() -> History {
    let ev = |at_us, host: &str, kind| Event {
        at_us,
        host: String::from(host),
        kind,
    };
    let events = vec![
        op(100_000, "client-1", 1, OpF::Acquire, Phase::Invoke, None),
        op(100_000, "client-4", 2, OpF::Acquire, Phase::Invoke, None),
        ev(
            110_000,
            "redis",
            EventKind::Server(ServerEvent::Written {
                by: "client-1".into(),
                key: "lock".into(),
                value: "o1".into(),
            }),
        ),
        op(110_000, "client-1", 1, OpF::Acquire, Phase::Ok, Some("o1")),
        ev(
            200_000,
            "client-1",
            EventKind::Fault {
                fault: 0,
                phase: FaultPhase::Start,
                detail: "pause holder".into(),
                peers: Vec::new(),
            },
        ),
        op(
            1_203_000,
            "client-4",
            2,
            OpF::Acquire,
            Phase::Ok,
            Some("o4"),
        ),
        ev(
            1_000_000,
            "client-1",
            EventKind::Fault {
                fault: 0,
                phase: FaultPhase::End,
                detail: "pause holder".into(),
                peers: Vec::new(),
            },
        ),
        ev(
            1_250_000,
            "storage",
            EventKind::Storage(StorageEvent::Write {
                writer: "client-1".into(),
                read: 10,
                wrote: 9,
                current: 10,
                token: None,
                accepted: true,
                segment: None,
            }),
        ),
        ev(
            1_300_000,
            "redis",
            EventKind::Server(ServerEvent::Removed {
                by: "client-2".into(),
                key: "lock".into(),
                value: "o4".into(),
                cause: "command".into(),
            }),
        ),
        op(1_400_000, "client-3", 3, OpF::Acquire, Phase::Invoke, None),
        op(1_500_000, "client-5", 4, OpF::Acquire, Phase::Invoke, None),
        op(1_520_000, "client-5", 4, OpF::Acquire, Phase::Fail, None),
    ];
    // Recorded histories are in time order; keep ties in the order written above.
    let mut events = events;
    events.sort_by_key(|e| e.at_us);
    History {
        seed: 42,
        design: "naive".into(),
        scenario: "pause-holder".into(),
        params: RunParams {
            key: "lock".into(),
            lease_ms: 1_000,
            liveness_bound_ms: 2_000,
            initial_stock: 10,
            clients: 5,
            masters: 1,
            segments: None,
            server_records: true,
        },
        plan: FaultPlan {
            faults: vec![Fault {
                at_ms: 200,
                kind: FaultKind::Pause {
                    target: Target::Holder,
                    duration_ms: 800,
                },
            }],
        },
        events,
        end_us: 2_000_000,
        stats: Default::default(),
    }
}
