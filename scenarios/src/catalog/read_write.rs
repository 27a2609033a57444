//! A read-write lock's worlds: a read/write mix (Dewu's cache/DB consistency, most
//! requests read), with no faults (`read-write-contention`, short holds, and
//! `read-write-long-work`, holds that live on the watchdog: a correct read-write lock
//! is safe in both, so a catch there is the design's own bug), and with a writer that
//! stops the world past its lease (`read-write`).

use sim::faults::{Fault, FaultKind, Target};
use sim::world::Workload;

use super::{Def, Draw, FaultClass};
use crate::checkers::probes;
use crate::params::Param;

/// The share of rounds that read, percent.
pub const READ_SHARE: u8 = 70;

pub(super) static READ_WRITE: Def = Def {
    name: "read-write",
    description: "a read/write mix (70 % of rounds take the read lock and only read); a writer stops the world for 2-4 leases just before its write",
    fault_about: "a pause began during a hold and outlasted the lease",
    class: FaultClass::ClientPause,
    needs: &[],
    // A design with one, exclusive, mode refuses the read rounds (recorded as failed
    // acquisitions) and runs the write rounds as everywhere else.
    world: |base| Workload {
        read_share: Some(READ_SHARE),
        ..base.clone()
    },
    quantities: &[Param::PauseMs],
    plan: writer_pauses,
    probe: |h, _| probes::pause_outlasted_a_hold(h),
};

pub(super) static READ_WRITE_CONTENTION: Def = Def {
    name: "read-write-contention",
    description: "a read/write mix (70 % of rounds take the read lock and only read), every hold 40 ms and clients back within 5 ms: readers overlap and writers meet them; nothing goes wrong",
    fault_about: "none (readers shared the lock and a writer asked for it while one read)",
    class: FaultClass::None,
    needs: &[],
    // Holds twice as long as the catalog's critical section, and clients come back
    // within 5 ms: at most moments some reader holds the lock, so every bug that
    // lets a writer in beside a reader, or a reader beside a writer, has its chance
    // many times a run. Holds stay far below the 200 ms lease, so no lock expires.
    world: |base| Workload {
        read_share: Some(READ_SHARE),
        work_ms: 40,
        think_ms_max: 5,
        duration_ms: 2_000,
        drain_ms: 500,
        ..base.clone()
    },
    quantities: &[],
    plan: super::no_faults::nothing,
    probe: |h, _| probes::readers_shared_and_a_writer_met_a_reader(h),
};

pub(super) static READ_WRITE_LONG_WORK: Def = Def {
    name: "read-write-long-work",
    description: "the read/write mix (70 % read) with every hold three leases long and waits of up to ten leases; nothing goes wrong (a read-write lock's watchdog must keep readers' and writers' holds)",
    fault_about: "none (a read hold outlasted the lease, readers shared the lock and a writer asked for it while one read)",
    class: FaultClass::None,
    needs: &[],
    // `long-work` for a read-write lock: every hold lives on its renewals, readers'
    // included, and a writer waits long enough to see readers leave.
    world: |base| Workload {
        read_share: Some(READ_SHARE),
        work_ms: base.lease_ms * 3,
        wait_ms: base.lease_ms * 10,
        duration_ms: 6_000,
        drain_ms: base.lease_ms * 13 + 1_000,
        ..base.clone()
    },
    quantities: &[],
    plan: super::no_faults::nothing,
    probe: |h, _| probes::long_reads_shared_and_a_writer_met_a_reader(h),
};

/// Four pauses, 2-4 leases each, armed for the holder's next write: readers never
/// write, so each strikes a writer inside its critical section, after its read.
fn writer_pauses(d: &mut Draw) -> Vec<Fault> {
    let lease = d.lease;
    let mut faults = Vec::new();
    for _ in 0..4 {
        faults.push(Fault {
            at_ms: d.at(),
            kind: FaultKind::PauseBeforeWrite {
                target: Target::Holder,
                duration_ms: d.quantity(Param::PauseMs, lease * 2..=lease * 4),
            },
        });
    }
    faults
}
