//! The reentrancy, waiter-liveness and token-order checkers, nested holds in the
//! model, safety classes and their probes, on small hand-built histories.

use crate::common;

use common::invalid_verdict;
use scenarios::checkers::{
    self, Checker, LostUpdate, MutualExclusion, Reentrancy, Safety, TokenOrder, Verdict,
    WaiterLiveness, model, probes,
};
use sim::faults::{Fault, FaultKind, Target};
use sim::history::{
    Event, EventKind, FaultPhase, History, Op, OpF, Phase, ServerEvent, StorageEvent,
};

const MS: u64 = 1_000;

/// Builds a history; events are stably sorted by time at the end.
struct B {
    h: History,
    next_op: u64,
}

impl B {
    fn new() -> Self {
        B {
            h: crate::common::blank_history(7, 5),
            next_op: 0,
        }
    }

    fn end_ms(&mut self, ms: u64) -> &mut Self {
        self.h.end_us = ms * MS;
        self
    }

    fn push(&mut self, ms: u64, host: &str, kind: EventKind) -> &mut Self {
        self.h.events.push(Event {
            at_us: ms * MS,
            host: host.into(),
            kind,
        });
        self
    }

    #[allow(clippy::too_many_arguments)]
    fn op_event(
        &mut self,
        ms: u64,
        host: &str,
        op: u64,
        f: OpF,
        phase: Phase,
        owner: Option<&str>,
        value: Option<i64>,
        detail: Option<&str>,
    ) -> &mut Self {
        self.push(
            ms,
            host,
            EventKind::Op(Op {
                op,
                f,
                phase,
                key: Some("lock".into()),
                owner: owner.map(Into::into),
                value,
                token: None,
                valid_until_us: None,
                detail: detail.map(Into::into),
                mode: None,
            }),
        )
    }

    fn new_op(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }

    /// An acquire invoked at `invoke_ms`, completed ok at `ok_ms` with hold count
    /// `depth` (`None`: an old history without depths); depth 1 or none writes the
    /// key on the server.
    fn acquire_d(
        &mut self,
        host: &str,
        invoke_ms: u64,
        ok_ms: u64,
        owner: &str,
        depth: Option<i64>,
    ) -> &mut Self {
        let op = self.new_op();
        self.op_event(
            invoke_ms,
            host,
            op,
            OpF::Acquire,
            Phase::Invoke,
            None,
            None,
            None,
        );
        if depth.unwrap_or(1) == 1 {
            self.written(ok_ms, host, owner);
        }
        self.op_event(
            ok_ms,
            host,
            op,
            OpF::Acquire,
            Phase::Ok,
            Some(owner),
            depth,
            None,
        )
    }

    fn acquire(&mut self, host: &str, invoke_ms: u64, ok_ms: u64, owner: &str) -> &mut Self {
        self.acquire_d(host, invoke_ms, ok_ms, owner, Some(1))
    }

    /// An acquire invoked at `invoke_ms` that completes with `phase` at `done_ms`
    /// (never, if `None`).
    fn acquire_outcome(
        &mut self,
        host: &str,
        invoke_ms: u64,
        done: Option<(u64, Phase)>,
    ) -> &mut Self {
        let op = self.new_op();
        self.op_event(
            invoke_ms,
            host,
            op,
            OpF::Acquire,
            Phase::Invoke,
            None,
            None,
            None,
        );
        if let Some((ms, phase)) = done {
            self.op_event(ms, host, op, OpF::Acquire, phase, None, None, None);
        }
        self
    }

    /// A release invoked at `ms` with hold count `depth`, completing at `ms + 1` with
    /// `detail`; `removes` records the server removing the key by command at `ms + 1`.
    fn release_d(
        &mut self,
        host: &str,
        ms: u64,
        owner: &str,
        depth: Option<i64>,
        detail: &str,
        removes: bool,
    ) -> &mut Self {
        let op = self.new_op();
        self.op_event(
            ms,
            host,
            op,
            OpF::Release,
            Phase::Invoke,
            Some(owner),
            depth,
            None,
        );
        if removes {
            self.removed(ms + 1, host, owner, "command");
        }
        self.op_event(
            ms + 1,
            host,
            op,
            OpF::Release,
            Phase::Ok,
            Some(owner),
            None,
            Some(detail),
        )
    }

    /// A plain release that frees the lock.
    fn release(&mut self, host: &str, ms: u64, owner: &str) -> &mut Self {
        self.release_d(host, ms, owner, Some(1), "removed", true)
    }

    fn written(&mut self, ms: u64, by: &str, value: &str) -> &mut Self {
        self.push(
            ms,
            "redis",
            EventKind::Server(ServerEvent::Written {
                by: by.into(),
                key: "lock".into(),
                value: value.into(),
            }),
        )
    }

    fn removed(&mut self, ms: u64, by: &str, value: &str, cause: &str) -> &mut Self {
        self.push(
            ms,
            "redis",
            EventKind::Server(ServerEvent::Removed {
                by: by.into(),
                key: "lock".into(),
                value: value.into(),
                cause: cause.into(),
            }),
        )
    }

    fn fault(&mut self, kind: FaultKind, host: &str, start_ms: u64, end_ms: u64) -> &mut Self {
        let fault = self.h.plan.faults.len();
        self.h.plan.faults.push(Fault {
            at_ms: start_ms,
            kind,
        });
        let ev = |phase| EventKind::Fault {
            fault,
            phase,
            detail: format!("fault {fault} on {host}"),
            peers: Vec::new(),
        };
        self.push(start_ms, host, ev(FaultPhase::Start));
        self.push(end_ms, host, ev(FaultPhase::End))
    }

    fn drop_pushes(&mut self, start_ms: u64, end_ms: u64) -> &mut Self {
        let kind = FaultKind::DropPushes {
            duration_ms: end_ms - start_ms,
        };
        self.fault(kind, "redis", start_ms, end_ms)
    }

    fn pause(&mut self, host: &str, start_ms: u64, end_ms: u64) -> &mut Self {
        let kind = FaultKind::Pause {
            target: Target::Host(host.into()),
            duration_ms: end_ms - start_ms,
        };
        self.fault(kind, host, start_ms, end_ms)
    }

    fn read(&mut self, ms: u64, reader: &str, token: Option<u64>, accepted: bool) -> &mut Self {
        self.push(
            ms,
            "storage",
            EventKind::Storage(StorageEvent::Read {
                reader: reader.into(),
                value: 10,
                token,
                accepted,
                segment: None,
            }),
        )
    }

    fn write(
        &mut self,
        ms: u64,
        writer: &str,
        read: i64,
        current: i64,
        token: Option<u64>,
        accepted: bool,
    ) -> &mut Self {
        self.push(
            ms,
            "storage",
            EventKind::Storage(StorageEvent::Write {
                writer: writer.into(),
                read,
                wrote: read - 1,
                current,
                token,
                accepted,
                segment: None,
            }),
        )
    }

    fn build(&self) -> History {
        let mut h = self.h.clone();
        h.events.sort_by_key(|e| e.at_us);
        h
    }
}

fn invalid(v: Verdict) -> checkers::Evidence {
    match v {
        Verdict::Invalid(e) => e,
        other => panic!("expected invalid, got {other:?}"),
    }
}

fn unknown(v: Verdict) -> String {
    match v {
        Verdict::Unknown { reason } => reason,
        other => panic!("expected unknown, got {other:?}"),
    }
}

/// client-1 takes the lock, takes it again (count 2), releases the nested hold
/// (still held, count 1) and then the outer one; client-2 acquires afterwards.
fn nested_round() -> B {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .release_d("client-1", 200, "o1", Some(2), "still-held count=1", false)
        .release_d("client-1", 300, "o1", Some(1), "removed", true)
        .acquire("client-2", 150, 400, "o2")
        .release("client-2", 500, "o2");
    b
}

// ---- model::holds with nesting ----

#[test]
fn a_nested_acquisition_and_release_neither_start_nor_end_a_hold() {
    let h = nested_round().build();
    let holds = model::holds(&h).unwrap();
    assert_eq!(holds.len(), 2, "{holds:?}");
    assert_eq!(holds[0].host, "client-1");
    assert_eq!(holds[0].start_us, 110 * MS);
    assert_eq!(holds[0].end_us, 300 * MS, "the outer release ends the hold");
    assert_eq!(holds[0].end, model::HoldEnd::Release);
    assert_eq!(holds[1].host, "client-2");
    assert_eq!(MutualExclusion.check(&h), Verdict::Valid);
}

#[test]
fn a_nested_release_does_not_end_the_hold_so_a_later_overlap_is_seen() {
    // client-2 acquires after client-1's nested release but before its outer one.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .release_d("client-1", 200, "o1", Some(2), "still-held count=1", false)
        .acquire("client-2", 150, 250, "o2")
        .release_d("client-1", 300, "o1", Some(1), "removed", true);
    let e = invalid(MutualExclusion.check(&b.build()));
    assert_eq!(e.hosts, ["client-1", "client-2"]);
    assert!(
        e.summary.contains("from 0.250 s to 0.300 s"),
        "{}",
        e.summary
    );
}

#[test]
fn acquires_and_releases_without_a_depth_behave_as_depth_one() {
    let mut b = B::new();
    b.acquire_d("client-1", 100, 110, "o1", None)
        .release_d("client-1", 200, "o1", None, "removed", true);
    let holds = model::holds(&b.build()).unwrap();
    assert_eq!(holds.len(), 1);
    assert_eq!(holds[0].end_us, 200 * MS);
    assert_eq!(holds[0].end, model::HoldEnd::Release);
}

// ---- reentrancy ----

#[test]
fn nested_releases_that_count_down_are_valid() {
    let h = nested_round().build();
    assert_eq!(Reentrancy.check(&h), Verdict::Valid);
}

#[test]
fn a_run_without_nested_acquisitions_is_valid_and_the_probe_says_so() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .release("client-1", 200, "o1");
    let h = b.build();
    assert_eq!(Reentrancy.check(&h), Verdict::Valid);
    assert_eq!(probes::nested_acquisition(&h), None);
}

#[test]
fn a_nested_release_that_reports_the_lock_removed_is_invalid_without_a_server_record() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .release_d("client-1", 200, "o1", Some(2), "removed", false);
    let mut h = b.build();
    // A real run's history: no server record, so the reply is all there is.
    h.params.server_records = false;
    let e = invalid(Reentrancy.check(&h));
    assert_eq!(e.hosts, ["client-1"]);
    assert_eq!(e.owners, ["o1"]);
    assert_eq!(e.at_us, 201 * MS);
    assert!(
        e.summary
            .contains("hold count 2 completed ok at 0.201 s with the lock removed"),
        "{}",
        e.summary
    );
}

#[test]
fn a_nested_release_answered_removed_is_valid_when_the_servers_record_kept_the_lock() {
    // MariaDB answers `1` to every RELEASE_LOCK of a nested hold; the server's record
    // shows the lock kept until the outer release, so nothing was freed early.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .release_d("client-1", 200, "o1", Some(2), "removed", false)
        .release_d("client-1", 300, "o1", Some(1), "removed", true);
    let h = b.build();
    assert!(h.params.server_records);
    assert_eq!(Reentrancy.check(&h), Verdict::Valid);
}

#[test]
fn a_nested_release_whose_command_removed_the_key_is_invalid_whatever_it_reported() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .release_d("client-1", 200, "o1", Some(2), "still-held count=1", true);
    let h = b.build();
    let e = invalid(Reentrancy.check(&h));
    assert!(
        matches!(
            h.events[e.first_event].kind,
            EventKind::Server(ServerEvent::Removed { .. })
        ),
        "{e:?}"
    );
    assert!(
        e.summary.contains("removed the lock (value o1) at 0.201 s"),
        "{}",
        e.summary
    );
    assert!(e.summary.contains("down to 1"), "{}", e.summary);
}

#[test]
fn a_removal_by_expiry_during_a_nested_release_is_not_the_releases_doing() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .removed(200, "expiry", "o1", "expired")
        .release_d("client-1", 199, "o1", Some(2), "not-found", false);
    assert_eq!(Reentrancy.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_nested_release_that_never_completed_is_not_blamed_for_later_removals() {
    // client-1's nested release is invoked and never completes (its reply is lost and
    // the client moves on); its next operation, a fresh acquire and release, removes
    // the key by command. That removal belongs to the later release.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2));
    let op = b.new_op();
    b.op_event(
        200,
        "client-1",
        op,
        OpF::Release,
        Phase::Invoke,
        Some("o1"),
        Some(2),
        None,
    );
    b.removed(900, "expiry", "o1", "expired")
        .acquire("client-1", 1_000, 1_010, "o2")
        .release("client-1", 1_100, "o2");
    assert_eq!(Reentrancy.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_still_held_count_that_does_not_go_down_by_one_is_invalid() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_d("client-1", 120, 130, "o1", Some(2))
        .acquire_d("client-1", 140, 150, "o1", Some(3))
        .release_d("client-1", 200, "o1", Some(3), "still-held count=1", false);
    let e = invalid(Reentrancy.check(&b.build()));
    assert!(
        e.summary
            .contains("hold count 3 reported still-held count=1 at 0.201 s, expected count=2"),
        "{}",
        e.summary
    );
}

#[test]
fn a_malformed_history_is_unknown_for_reentrancy() {
    let mut b = B::new();
    b.op_event(
        100,
        "client-1",
        9,
        OpF::Release,
        Phase::Ok,
        Some("o1"),
        None,
        None,
    );
    assert!(unknown(Reentrancy.check(&b.build())).contains("op 9"));
}

#[test]
fn a_nested_acquisition_is_witnessed() {
    let w = probes::nested_acquisition(&nested_round().build()).expect("witness");
    assert_eq!(
        w,
        "client-1 acquired lock again at 0.130 s (owner=o1, hold count 2)"
    );
}

// ---- waiter-liveness ----

#[test]
fn a_waiter_that_gets_the_lock_soon_after_the_release_is_valid() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 600, "o2")
        .release("client-1", 500, "o1");
    assert_eq!(WaiterLiveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_lock_left_free_while_a_waiter_waits_past_the_bound_is_invalid() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 4_000, "o2")
        .release("client-1", 500, "o1");
    let h = b.build();
    let e = invalid(WaiterLiveness.check(&h));
    assert_eq!(e.at_us, 501 * MS);
    assert_eq!(e.hosts, ["client-1", "client-2"]);
    assert_eq!(e.owners, ["o1"]);
    assert!(
        matches!(
            h.events[e.first_event].kind,
            EventKind::Server(ServerEvent::Removed { .. })
        ),
        "{e:?}"
    );
    assert_eq!(
        e.summary,
        "client-1 released lock lock (owner=o1) at 0.501 s while client-2 (acquire invoked at 0.150 s, ok at 4.000 s) waited; the lock stayed free for 3499 ms until client-2 took it at 4.000 s, bound 2000 ms"
    );
}

#[test]
fn a_waiter_that_never_completes_while_the_lock_stays_free_is_invalid() {
    let mut b = B::new();
    b.end_ms(5_000)
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-3", 150, None)
        .release("client-1", 500, "o1");
    let e = invalid(WaiterLiveness.check(&b.build()));
    assert!(
        e.summary
            .contains("client-3 (acquire invoked at 0.150 s, never completed)"),
        "{}",
        e.summary
    );
    assert!(
        e.summary
            .contains("stayed free for 4499 ms until the end of the run"),
        "{}",
        e.summary
    );
}

#[test]
fn another_host_taking_the_lock_within_the_bound_satisfies_the_waiters() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, Some((4_000, Phase::Fail)))
        .release("client-1", 500, "o1")
        .acquire("client-3", 600, 700, "o3");
    assert_eq!(WaiterLiveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_release_without_waiters_or_a_waiter_that_gave_up_is_not_judged() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .acquire("client-2", 600, 610, "o2")
        .acquire_outcome("client-3", 650, Some((900, Phase::Fail)))
        .release("client-2", 800, "o2");
    assert_eq!(WaiterLiveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_waiter_paused_through_the_bound_does_not_count() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 4_000, "o2")
        .release("client-1", 500, "o1")
        .pause("client-2", 400, 3_900);
    assert_eq!(WaiterLiveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_waiter_whose_master_was_down_does_not_count_but_a_lagging_replica_excuses_nothing() {
    let delay = |host: &str| FaultKind::Delay {
        target: Target::Host(host.into()),
        latency_ms: 20,
        duration_ms: 4_000,
    };
    let run = |delayed: &str| {
        let mut b = B::new();
        b.push(
            0,
            "redis",
            EventKind::Server(ServerEvent::Role {
                role: "master".into(),
            }),
        )
        .push(
            0,
            "redis-2",
            EventKind::Server(ServerEvent::Role {
                role: "replica of redis".into(),
            }),
        )
        .fault(delay(delayed), delayed, 0, 4_000)
        .acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 4_000, "o2")
        .release("client-1", 500, "o1");
        WaiterLiveness.check(&b.build())
    };
    assert_eq!(run("redis"), Verdict::Valid);
    invalid(run("redis-2"));
}

#[test]
fn a_release_with_a_waiter_too_close_to_the_end_is_unknown() {
    let mut b = B::new();
    b.end_ms(1_500)
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, None)
        .release("client-1", 500, "o1");
    let reason = unknown(WaiterLiveness.check(&b.build()));
    assert!(reason.contains("client-1's release at 0.501 s"), "{reason}");
}

#[test]
fn a_removal_by_expiry_is_not_a_release_for_waiter_liveness() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, None)
        .removed(1_110, "expiry", "o1", "expired");
    assert_eq!(WaiterLiveness.check(&b.build()), Verdict::Valid);
}

// ---- token-order ----

#[test]
fn accepted_tokens_that_never_go_down_are_valid() {
    let mut b = B::new();
    b.read(100, "client-1", Some(1), true)
        .write(110, "client-1", 10, 10, Some(1), true)
        .read(200, "client-2", Some(2), true)
        .write(210, "client-2", 9, 9, Some(2), true)
        // The fence working: a stale request refused.
        .write(220, "client-1", 9, 9, Some(1), false);
    assert_eq!(TokenOrder.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_run_without_tokens_is_valid_for_token_order() {
    let mut b = B::new();
    b.read(100, "client-2", None, true)
        .write(200, "client-1", 10, 10, None, true)
        .write(300, "client-2", 10, 9, None, true);
    assert_eq!(TokenOrder.check(&b.build()), Verdict::Valid);
}

#[test]
fn an_accepted_request_with_a_stale_token_is_invalid() {
    let mut b = B::new();
    b.read(100, "client-2", Some(5), true)
        .write(200, "client-1", 10, 10, Some(4), true);
    let h = b.build();
    let e = invalid(TokenOrder.check(&h));
    assert_eq!(e.hosts, ["client-1", "client-2"]);
    assert_eq!(e.first_event, 1);
    assert_eq!(e.events, [0, 1]);
    assert_eq!(
        e.summary,
        "the storage accepted client-1's write with token 4 at 0.200 s after accepting client-2's read with token 5 at 0.100 s: a stale holder got through"
    );
}

// ---- safety classes ----

#[test]
fn overlapping_belief_with_fenced_effects_is_fenced() {
    // client-1 paused past its lease; client-2 took the lock; the storage refused
    // client-1's stale token when it woke.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .pause("client-1", 120, 2_000)
        .removed(1_110, "expiry", "o1", "expired")
        .acquire("client-2", 1_150, 1_200, "o2")
        .read(1_210, "client-2", Some(2), true)
        .write(1_220, "client-2", 10, 10, Some(2), true)
        .release("client-2", 1_300, "o2")
        .read(2_010, "client-1", Some(1), false)
        .release_d("client-1", 2_020, "o1", Some(1), "not-found", false);
    let h = b.build();
    let verdicts = checkers::check_all(&h);
    assert!(MutualExclusion.check(&h).is_invalid());
    assert_eq!(LostUpdate.check(&h), Verdict::Valid);
    assert_eq!(TokenOrder.check(&h), Verdict::Valid);
    assert!(checkers::storage_refused(&h));
    assert_eq!(
        checkers::safety(&verdicts, checkers::storage_refused(&h)),
        Safety::Fenced
    );
}

#[test]
fn overlapping_holds_that_no_storage_refused_are_unsafe_not_fenced() {
    // Two holders, nothing lost, but nothing refused either: luck, not a fence.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 300, 400, "o2")
        .write(500, "client-1", 10, 9, None, true)
        .write(600, "client-2", 9, 8, None, true);
    let h = b.build();
    let verdicts = checkers::check_all(&h);
    assert!(MutualExclusion.check(&h).is_invalid());
    assert!(!checkers::storage_refused(&h));
    assert_eq!(checkers::safety(&verdicts, false), Safety::Unsafe);
}

#[test]
fn a_lost_update_is_unsafe_even_when_belief_also_overlaps() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 300, 400, "o2")
        .write(500, "client-1", 10, 10, None, true)
        .write(600, "client-2", 10, 9, None, true);
    let verdicts = checkers::check_all(&b.build());
    assert_eq!(checkers::safety(&verdicts, true), Safety::Unsafe);
}

#[test]
fn a_clean_run_is_safe_and_liveness_does_not_change_the_class() {
    let verdicts = vec![
        ("mutual-exclusion", Verdict::Valid),
        ("lost-update", Verdict::Valid),
        (
            "liveness",
            Verdict::Unknown {
                reason: "too close to the end".into(),
            },
        ),
        ("waiter-liveness", invalid_verdict()),
    ];
    assert_eq!(checkers::safety(&verdicts, false), Safety::Safe);
}

#[test]
fn an_unknown_safety_verdict_is_unknown_unless_something_is_invalid() {
    let unknown = || Verdict::Unknown {
        reason: "cannot tell".into(),
    };
    let owned: Vec<(String, Verdict)> = vec![
        ("mutual-exclusion".into(), Verdict::Valid),
        ("ownership".into(), unknown()),
    ];
    assert_eq!(checkers::safety(&owned, true), Safety::Unknown);
    // An effect checker that could not judge leaves the class unknown, even with a
    // refusal and overlapping belief: "fenced" needs every effect judged.
    let fenced = [
        ("ownership", unknown()),
        ("mutual-exclusion", invalid_verdict()),
    ];
    assert_eq!(checkers::safety(&fenced, true), Safety::Unknown);
    let fenced = [
        ("ownership", Verdict::Valid),
        ("mutual-exclusion", invalid_verdict()),
    ];
    assert_eq!(checkers::safety(&fenced, true), Safety::Fenced);
    // Overlapping holders and no refusal: unsafe, whatever could not be judged (issue
    // 23, item 6: this was `unknown`).
    let overlapped = [
        ("lost-update", unknown()),
        ("ownership", unknown()),
        ("mutual-exclusion", invalid_verdict()),
    ];
    assert_eq!(checkers::safety(&overlapped, false), Safety::Unsafe);
    for effect in checkers::EFFECT_CHECKERS {
        let v = [("mutual-exclusion", unknown()), (effect, invalid_verdict())];
        assert_eq!(checkers::safety(&v, true), Safety::Unsafe, "{effect}");
    }
    assert_eq!(checkers::safety::<&str>(&[], false), Safety::Safe);
}

#[test]
fn safety_classes_have_names_and_a_worst_first_order() {
    let names: Vec<&str> = Safety::WORST_FIRST.iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        ["unsafe", "overlap", "fenced", "promise", "unknown", "safe"]
    );
    for c in Safety::WORST_FIRST {
        assert_eq!(Safety::from_name(c.name()), Some(c));
        assert_eq!(c.to_string(), c.name());
    }
    assert_eq!(Safety::from_name("bogus"), None);
}

#[test]
fn the_new_checkers_follow_the_first_four_in_a_fixed_order() {
    assert_eq!(
        checkers::names(),
        [
            "mutual-exclusion",
            "lost-update",
            "ownership",
            "liveness",
            "reentrancy",
            "waiter-liveness",
            "token-order",
            "validity",
            "overrun",
            "belief"
        ]
    );
}

// ---- unlock message dropped probe ----

#[test]
fn a_release_while_pushes_are_dropped_and_someone_waits_is_witnessed() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, None)
        .drop_pushes(400, 900)
        .release("client-1", 500, "o1");
    // Without a message lost on its way to a subscriber, nothing was lost.
    assert_eq!(
        probes::unlock_message_dropped_with_a_waiter(&b.build()),
        None,
        "no message was dropped"
    );
    b.push(
        502,
        "redis",
        EventKind::Server(ServerEvent::MessageDropped {
            channel: "unlock:lock".into(),
        }),
    );
    let w = probes::unlock_message_dropped_with_a_waiter(&b.build()).expect("witness");
    assert_eq!(
        w,
        "client-1 released lock (owner=o1) at 0.501 s while redis dropped pub/sub messages (since 0.400 s) and client-2 waited (acquire invoked at 0.150 s); the message on unlock:lock was dropped at 0.502 s"
    );
}

#[test]
fn a_release_outside_the_drop_window_or_without_a_waiter_is_not_witnessed() {
    let mut outside = B::new();
    outside
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, None)
        .drop_pushes(600, 900)
        .release("client-1", 500, "o1");
    assert_eq!(
        probes::unlock_message_dropped_with_a_waiter(&outside.build()),
        None
    );
    let mut alone = B::new();
    alone
        .acquire("client-1", 100, 110, "o1")
        .drop_pushes(400, 900)
        .release("client-1", 500, "o1");
    assert_eq!(
        probes::unlock_message_dropped_with_a_waiter(&alone.build()),
        None
    );
    // A pause (a client's fault) is not a dropped push.
    let mut paused = B::new();
    paused
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 150, None)
        .pause("client-3", 400, 900)
        .release("client-1", 500, "o1");
    assert_eq!(
        probes::unlock_message_dropped_with_a_waiter(&paused.build()),
        None
    );
}

#[test]
fn on_an_empty_history_the_safety_checkers_have_nothing_to_judge_and_say_unknown() {
    let h = B::new().build();
    for (name, v) in checkers::check_all(&h) {
        match name {
            // Nothing held, written or released: no evidence of safety either way.
            "mutual-exclusion" | "lost-update" | "ownership" => {
                assert!(v.is_unknown(), "{name}: {v:?}")
            }
            // Properties of nested holds, waiters and tokens apply only where those
            // exist; their absence is not a violation.
            _ => assert!(!v.is_invalid(), "{name}: {v:?}"),
        }
    }
    assert_eq!(
        checkers::safety(&checkers::check_all(&h), false),
        checkers::Safety::Unknown
    );
    let _: &dyn Checker = &Reentrancy;
}
