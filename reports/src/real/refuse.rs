//! What the real runner cannot make real yet, refused before anything starts with
//! one line naming why: a system with no real side, what a system itself refuses (its
//! plugin's refusals), workloads the real client does not run, fault kinds and targets
//! a real server does not show the runner, and clock faults on servers whose clocks
//! are not moved.

use sim::faults::{FaultKind, FaultPlan, Target};
use sim::world::Workload;

use super::servers::{SERVER_CLOCKS, in_world, unlisted};

/// Why the real runner cannot make `kind` real on this machine, if it cannot.
pub fn refusal(kind: &FaultKind) -> Option<String> {
    let target_ok = |t: &Target| match t {
        Target::Host(_)
        | Target::Holder
        | Target::Acquirer
        | Target::AllClients
        | Target::AllServers
        | Target::Rest
        | Target::LockServer
        | Target::LockOwner
        | Target::Leader
        | Target::UnreplicatedLockMaster { .. }
        | Target::FreshLockMaster { .. }
        | Target::LockServerOf { .. }
        | Target::LeaderAfterLockCreate { .. } => None,
        other => Some(format!(
            "target {other:?} needs a server's internal record (which session a follower \
             serves, which acquisition a server granted in flight), which a real server does \
             not show the runner"
        )),
    };
    let all_ok = |ts: Vec<&Target>| ts.into_iter().find_map(target_ok);
    match kind {
        FaultKind::Pause { .. }
        | FaultKind::Crash { .. }
        | FaultKind::PauseBeforeWrite { .. }
        | FaultKind::SlowWork { .. }
        | FaultKind::Partition { .. }
        | FaultKind::Delay { .. }
        | FaultKind::ResetConnections { .. }
        | FaultKind::MachineCrash { .. } => all_ok(kind.targets()),
        FaultKind::DropPushes { .. } => Some(
            "dropping pub/sub messages needs a proxy that parses RESP pushes, not made real \
             yet"
            .into(),
        ),
        // A server's clock moves through the clock shim (`clock.rs`), a client's
        // through its process's `Deps` clock (`child.rs`); which hosts a target can
        // reach in the world is checked in `refusals`.
        FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::ClockSlew { target, .. } => target_ok(target),
    }
}

/// Whether a clock fault on `target` can reach a host the real run cannot move the
/// clock of, in a world whose lock servers' clocks all move (`all_lock_servers`) or
/// not; `server` says whether a host is a server whose clock moves.
fn clock_target_refused(
    target: &Target,
    all_lock_servers: bool,
    server: &dyn Fn(&str) -> bool,
) -> bool {
    match target {
        Target::Host(h) => !(server(h) || h.starts_with("client-")),
        Target::Holder
        | Target::Acquirer
        | Target::LockOwner
        | Target::MidAcquire { .. }
        | Target::AllClients => false,
        Target::LockServer
        | Target::LockServerOf { .. }
        | Target::UnreplicatedLockMaster { .. }
        | Target::FreshLockMaster { .. } => !all_lock_servers,
        // A helper, a server whose clock does not move, or every host.
        _ => true,
    }
}

/// Whether `plan` moves a clock.
pub(super) fn moves_clocks(plan: &FaultPlan) -> bool {
    plan.faults.iter().any(|f| {
        matches!(
            f.kind,
            FaultKind::ClockJump { .. }
                | FaultKind::ClockDrift { .. }
                | FaultKind::ClockSlew { .. }
        )
    })
}

/// Whether a run of `plan` needs the fault proxy (partitions, delays, resets, machine
/// crashes).
pub fn needs_net(plan: &FaultPlan) -> bool {
    plan.faults.iter().any(|f| {
        matches!(
            f.kind,
            FaultKind::Partition { .. }
                | FaultKind::Delay { .. }
                | FaultKind::ResetConnections { .. }
                | FaultKind::MachineCrash { .. }
        )
    })
}

/// Every reason a run of `design` in `w` under `plan` cannot be made real (empty: it
/// can).
pub fn refusals(design: &str, w: &Workload, plan: &FaultPlan) -> Vec<String> {
    let mut why = Vec::new();
    // A system the runner has no real side for is refused, naming it, so a new system
    // stays model-only until it has one.
    for system in unlisted(w) {
        why.push(format!(
            "the real runner starts no {} servers yet",
            system.name()
        ));
    }
    let systems = in_world(w);
    why.extend(systems.iter().filter_map(|s| s.refuses_world(w)));
    if w.read_share.is_some() || w.segments.is_some() || w.reentrant_depth > 1 {
        why.push(
            "read/write mixes, segmented stocks and reentrant rounds are not in the real \
             client's workload yet"
                .into(),
        );
    }
    for s in &systems {
        why.extend(s.refuses_plan(design, w, plan));
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in &plan.faults {
        if let Some(r) = refusal(&f.kind)
            && seen.insert(r.clone())
        {
            why.push(r);
        }
    }
    // A clock fault reaches a server whose clock the run moves, or a client.
    let clocked: Vec<String> = systems.iter().flat_map(|s| s.clocked_hosts(w)).collect();
    let server = |h: &str| clocked.iter().any(|c| c == h);
    let all_lock_servers =
        systems.iter().all(|s| s.moves_lock_server_clocks()) && unlisted(w).is_empty();
    let elsewhere = plan.faults.iter().any(|f| match &f.kind {
        FaultKind::ClockJump { target, .. }
        | FaultKind::ClockDrift { target, .. }
        | FaultKind::ClockSlew { target, .. } => {
            clock_target_refused(target, all_lock_servers, &server)
        }
        _ => false,
    });
    if elsewhere && seen.insert(SERVER_CLOCKS.into()) {
        why.push(SERVER_CLOCKS.into());
    }
    why
}
