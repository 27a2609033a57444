//! The server drops pub/sub messages: waiters never hear the unlock.

use rand::RngExt;
use sim::faults::{Fault, FaultKind};
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use sim::system::Capability;

pub(super) static UNLOCK_MESSAGE_LOST: Def = Def {
    name: "unlock-message-lost",
    description: "the server drops pub/sub messages: waiters never hear the unlock and must fall back on the TTL",
    fault_about: "a release freed the lock while messages were dropped and a waiter waited",
    class: FaultClass::LostNotification,
    needs: &[Capability::Notifications],
    // A wait budget far beyond the bound, so only the TTL fallback can rescue a waiter
    // whose unlock message was lost.
    world: |base| Workload {
        wait_ms: 3_000,
        ..base.clone()
    },
    quantities: &[],
    plan,
    probe: |h, _| probes::unlock_message_dropped_with_a_waiter(h),
};

/// Two long windows with a short gap at a seed-chosen time.
fn plan(d: &mut Draw) -> Vec<Fault> {
    // Not a timed fault (nothing here to place: the gap is where the fault is not).
    let gap_at = d.rng.random_range(d.window.clone());
    vec![
        Fault {
            at_ms: 200,
            kind: FaultKind::DropPushes {
                duration_ms: gap_at - 200,
            },
        },
        Fault {
            at_ms: gap_at + 100,
            kind: FaultKind::DropPushes {
                duration_ms: d.workload.duration_ms - gap_at,
            },
        },
    ]
}
