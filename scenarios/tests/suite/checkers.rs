//! Checkers and probes on small hand-built histories.

use scenarios::checkers::{
    self, Belief, Checker, Liveness, LostUpdate, MutualExclusion, Ownership, TokenOrder, Verdict,
    probes,
};
use sim::faults::{Fault, FaultKind, Target};
use sim::history::{
    Event, EventKind, FaultPhase, History, Op, OpF, Phase, ServerEvent, StorageEvent,
};

const MS: u64 = 1_000;

/// Builds a history; events may be added out of time order and are stably sorted by
/// time at the end (ties keep the order they were added in).
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

    fn end_ms(mut self, ms: u64) -> Self {
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

    fn op_event(
        &mut self,
        ms: u64,
        host: &str,
        op: u64,
        f: OpF,
        phase: Phase,
        owner: Option<&str>,
    ) {
        self.push(
            ms,
            host,
            EventKind::Op(Op {
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
        );
    }

    fn new_op(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }

    /// An acquire invoked at `invoke_ms`, written on the server and completed ok at
    /// `ok_ms`.
    fn acquire(&mut self, host: &str, invoke_ms: u64, ok_ms: u64, owner: &str) -> &mut Self {
        let op = self.new_op();
        self.op_event(invoke_ms, host, op, OpF::Acquire, Phase::Invoke, None);
        self.written(ok_ms, host, owner);
        self.op_event(ok_ms, host, op, OpF::Acquire, Phase::Ok, Some(owner));
        self
    }

    /// An acquire invoked at `invoke_ms` that completes with `phase` at `done_ms`.
    fn acquire_outcome(
        &mut self,
        host: &str,
        invoke_ms: u64,
        done_ms: u64,
        phase: Phase,
    ) -> &mut Self {
        let op = self.new_op();
        self.op_event(invoke_ms, host, op, OpF::Acquire, Phase::Invoke, None);
        self.op_event(done_ms, host, op, OpF::Acquire, phase, None);
        self
    }

    /// A release invoked at `ms` that removes the key by command and completes ok.
    fn release(&mut self, host: &str, ms: u64, owner: &str) -> &mut Self {
        let op = self.new_op();
        self.op_event(ms, host, op, OpF::Release, Phase::Invoke, Some(owner));
        self.removed(ms + 1, host, owner, "command");
        self.op_event(ms + 1, host, op, OpF::Release, Phase::Ok, Some(owner));
        self
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

    fn fault(
        &mut self,
        kind: FaultKind,
        host: &str,
        start_ms: u64,
        end_ms: Option<u64>,
    ) -> &mut Self {
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
        if let Some(end) = end_ms {
            self.push(end, host, ev(FaultPhase::End));
        }
        self
    }

    /// A partition from `start_ms` to `end_ms`: `side` cut off from `peers`, recorded
    /// on each host of `side` as the nemesis records it.
    fn partition(
        &mut self,
        side: &[&str],
        peers: &[&str],
        start_ms: u64,
        end_ms: u64,
    ) -> &mut Self {
        let fault = self.h.plan.faults.len();
        let hosts = |h: &[&str]| h.iter().map(|h| Target::Host(h.to_string())).collect();
        self.h.plan.faults.push(Fault {
            at_ms: start_ms,
            kind: FaultKind::Partition {
                a: hosts(side),
                b: hosts(peers),
                one_way: false,
                duration_ms: end_ms - start_ms,
            },
        });
        for host in side {
            for (ms, phase) in [(start_ms, FaultPhase::Start), (end_ms, FaultPhase::End)] {
                self.push(
                    ms,
                    host,
                    EventKind::Fault {
                        fault,
                        phase,
                        detail: format!("partition {side:?} from {peers:?}"),
                        peers: peers.iter().map(|p| p.to_string()).collect(),
                    },
                );
            }
        }
        self
    }

    /// A server's recorded role (`master` or `replica of X`) from `ms`.
    fn role(&mut self, ms: u64, server: &str, role: &str) -> &mut Self {
        self.push(
            ms,
            server,
            EventKind::Server(ServerEvent::Role { role: role.into() }),
        )
    }

    fn crash(&mut self, host: &str, ms: u64) -> &mut Self {
        let kind = FaultKind::Crash {
            target: Target::Holder,
            restart_after_ms: None,
        };
        self.fault(kind, host, ms, None)
    }

    /// A crash at `ms` and the restart at `back_ms` that begins the host's next life.
    fn crash_and_restart(&mut self, host: &str, ms: u64, back_ms: u64) -> &mut Self {
        let kind = FaultKind::Crash {
            target: Target::Holder,
            restart_after_ms: Some(back_ms - ms),
        };
        self.fault(kind, host, ms, Some(back_ms))
    }

    fn pause(&mut self, host: &str, start_ms: u64, end_ms: u64) -> &mut Self {
        let kind = FaultKind::Pause {
            target: Target::Host(host.into()),
            duration_ms: end_ms - start_ms,
        };
        self.fault(kind, host, start_ms, Some(end_ms))
    }

    fn write(
        &mut self,
        ms: u64,
        writer: &str,
        read: i64,
        current: i64,
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
                token: None,
                accepted,
                segment: None,
            }),
        )
    }

    /// An acquire that completes ok at `ok_ms` believing `owner` (and, if given, a
    /// validity until `valid_ms` and a token), with no server write of its own.
    fn believed(
        &mut self,
        host: &str,
        invoke_ms: u64,
        ok_ms: u64,
        owner: &str,
        valid_ms: Option<u64>,
        token: Option<u64>,
    ) -> &mut Self {
        let op = self.new_op();
        self.op_event(invoke_ms, host, op, OpF::Acquire, Phase::Invoke, None);
        self.push(
            ok_ms,
            host,
            EventKind::Op(Op {
                op,
                f: OpF::Acquire,
                phase: Phase::Ok,
                key: Some("lock".into()),
                owner: Some(owner.into()),
                value: None,
                token,
                valid_until_us: valid_ms.map(|v| v * MS),
                detail: None,
                mode: None,
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

// ---- mutual-exclusion ----

#[test]
fn overlapping_holds_by_two_clients_are_invalid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .acquire("client-4", 1_150, 1_203, "o4")
        .release("client-1", 1_310, "o1")
        .release("client-4", 1_500, "o4")
        .build();
    let e = invalid(MutualExclusion.check(&h));
    assert_eq!(
        e.summary,
        "client-1 and client-4 both believed they held lock lock from 1.203 s to 1.310 s (owner=o1 and owner=o4)"
    );
    assert_eq!(e.hosts, ["client-1", "client-4"]);
    assert_eq!(e.owners, ["o1", "o4"]);
    assert_eq!(e.at_us, 1_203 * MS);
    let second_ok = h
        .events
        .iter()
        .position(|ev| {
            ev.at_us == 1_203 * MS && matches!(&ev.kind, EventKind::Op(op) if op.phase == Phase::Ok)
        })
        .unwrap();
    assert_eq!(e.first_event, second_ok);
    assert!(e.events.contains(&second_ok));
    assert!(e.events.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn holds_that_touch_but_do_not_overlap_are_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .acquire("client-2", 400, 500, "o2")
        .release("client-2", 900, "o2")
        .build();
    assert_eq!(MutualExclusion.check(&h), Verdict::Valid);
}

#[test]
fn a_crash_ends_the_crashed_clients_hold() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 300)
        .acquire("client-2", 200, 1_200, "o2")
        .build();
    assert_eq!(MutualExclusion.check(&h), Verdict::Valid);
}

#[test]
fn a_paused_client_still_believes_it_holds_the_lock() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .pause("client-1", 200, 2_000)
        .acquire("client-2", 300, 1_200, "o2")
        .release("client-1", 2_010, "o1")
        .build();
    let e = invalid(MutualExclusion.check(&h));
    assert!(
        e.summary.contains("from 1.200 s to 2.010 s"),
        "{}",
        e.summary
    );
}

#[test]
fn holds_still_open_at_the_end_overlap_until_the_end_of_the_run() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 300, 400, "o2")
        .build();
    let e = invalid(MutualExclusion.check(&h));
    assert!(
        e.summary
            .ends_with("to the end of the run (owner=o1 and owner=o2)"),
        "{}",
        e.summary
    );
}

#[test]
fn a_completion_without_an_invocation_is_unknown() {
    let mut b = B::new();
    b.op_event(100, "client-1", 42, OpF::Acquire, Phase::Ok, Some("o1"));
    let reason = unknown(MutualExclusion.check(&b.build()));
    assert!(reason.contains("op 42"), "{reason}");
}

// ---- lost-update ----

#[test]
fn serial_sales_are_valid() {
    let h = B::new()
        .write(100, "client-1", 10, 10, true)
        .write(200, "client-2", 9, 9, true)
        .build();
    assert_eq!(LostUpdate.check(&h), Verdict::Valid);
}

#[test]
fn a_write_based_on_a_stale_read_is_a_lost_update() {
    let h = B::new()
        .write(100, "client-1", 10, 10, true)
        .write(200, "client-2", 10, 9, true)
        .build();
    let e = invalid(LostUpdate.check(&h));
    assert_eq!(e.hosts, ["client-2", "client-1"]);
    assert_eq!(e.first_event, 1);
    assert_eq!(e.events, [0, 1]);
    assert!(e.summary.contains("client-2 wrote 9 at 0.200 s based on a read of 10, but the storage held 9 (client-1 wrote it at 0.100 s)"), "{}", e.summary);
    assert!(
        e.summary
            .contains("final stock 9 but 10 - 2 accepted sales = 8"),
        "{}",
        e.summary
    );
}

#[test]
fn a_write_rejected_by_fencing_is_not_a_lost_update() {
    let h = B::new()
        .write(100, "client-1", 10, 10, true)
        .write(200, "client-2", 10, 9, false)
        .build();
    assert_eq!(LostUpdate.check(&h), Verdict::Valid);
}

#[test]
fn a_final_stock_that_disagrees_with_the_sales_is_invalid() {
    // The first write found 8 in storage though the run started with 10.
    let h = B::new().write(100, "client-1", 8, 8, true).build();
    let e = invalid(LostUpdate.check(&h));
    assert_eq!(e.summary, "final stock 7 but 10 - 1 accepted sales = 9");
}

#[test]
fn a_write_that_is_not_a_sale_of_one_is_unknown() {
    let mut b = B::new();
    b.push(
        100,
        "storage",
        EventKind::Storage(StorageEvent::Write {
            writer: "client-1".into(),
            read: 10,
            wrote: 5,
            current: 10,
            token: None,
            accepted: true,
            segment: None,
        }),
    );
    assert!(unknown(LostUpdate.check(&b.build())).contains("not a sale of one"));
}

#[test]
fn acknowledged_writes_the_storage_never_recorded_are_unknown() {
    let mut b = B::new();
    b.op_event(100, "client-1", 1, OpF::Write, Phase::Invoke, None);
    b.op_event(110, "client-1", 1, OpF::Write, Phase::Ok, None);
    assert!(unknown(LostUpdate.check(&b.build())).contains("1 write operations completed ok"));
}

// ---- ownership ----

#[test]
fn releasing_another_clients_lock_is_invalid() {
    let h = B::new()
        .acquire("client-5", 100, 110, "o5")
        .removed(1_500, "client-2", "o5", "command")
        .build();
    let e = invalid(Ownership.check(&h));
    assert_eq!(
        e.summary,
        "client-2's command removed client-5's lock lock (owner=o5) at 1.500 s"
    );
    assert_eq!(e.hosts, ["client-2", "client-5"]);
    assert_eq!(e.owners, ["o5"]);
    assert_eq!(h.events[e.first_event].at_us, 1_500 * MS);
}

/// A release sent just before a `kill -9` still reaches the server (the dead process's
/// kernel sends what its socket held): it is the dying life's own, not the next life's.
/// After the restart, the same removal is the new life taking its old life's lock.
#[test]
fn a_release_delivered_after_its_clients_crash_is_the_old_lifes_own() {
    let h = |removed_ms| {
        B::new()
            .acquire("client-1", 100, 110, "o1")
            .crash_and_restart("client-1", 500, 1_500)
            .removed(removed_ms, "client-1", "o1", "command")
            .build()
    };
    assert_eq!(Ownership.check(&h(501)), Verdict::Valid);
    let e = invalid(Ownership.check(&h(1_600)));
    assert!(e.summary.contains("previous life"), "{}", e.summary);
}

#[test]
fn releasing_ones_own_lock_and_expiry_are_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 200, "o1")
        .acquire("client-2", 300, 310, "o2")
        .removed(1_400, "expiry", "o2", "expired")
        .build();
    assert_eq!(Ownership.check(&h), Verdict::Valid);
}

#[test]
fn an_acquire_ok_attributes_a_value_the_server_did_not_record() {
    let mut b = B::new();
    let op = b.new_op();
    b.op_event(100, "client-3", op, OpF::Acquire, Phase::Invoke, None);
    b.op_event(110, "client-3", op, OpF::Acquire, Phase::Ok, Some("o3"));
    b.removed(500, "client-1", "o3", "command");
    assert_eq!(
        invalid(Ownership.check(&b.build())).hosts,
        ["client-1", "client-3"]
    );
}

/// A grant whose acquire timed out (`info`): its client never believed it held the
/// lock, so another client's late `DEL` of it harms nobody (it was flagged as harm).
#[test]
fn removing_a_grant_nobody_believed_in_is_not_foreign() {
    let mut b = B::new();
    b.acquire_outcome("client-1", 100, 600, Phase::Info);
    b.written(105, "client-1", "o1");
    b.acquire("client-2", 50, 60, "o2");
    b.removed(700, "client-2", "o1", "command");
    assert!(!Ownership.check(&b.build()).is_invalid());
    // Had client-1's acquire come back ok with that value, the removal is foreign.
    let mut b = B::new();
    b.acquire("client-1", 100, 105, "o1");
    b.removed(700, "client-2", "o1", "command");
    assert!(Ownership.check(&b.build()).is_invalid());
}

#[test]
fn removals_of_values_no_known_host_wrote_are_unknown() {
    let h = B::new()
        .removed(500, "client-1", "mystery", "command")
        .build();
    assert!(unknown(Ownership.check(&h)).contains("1 removals by command"));
    assert_eq!(checkers::unattributed_removals(&h), [0]);
}

// ---- liveness ----

#[test]
fn a_lock_stuck_after_its_holder_crashed_is_invalid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .acquire_outcome("client-2", 600, 3_000, Phase::Fail)
        .acquire("client-2", 3_100, 9_000, "o2")
        .build();
    let e = invalid(Liveness.check(&h));
    assert_eq!(e.at_us, 500 * MS);
    assert_eq!(e.hosts, ["client-1", "client-2"]);
    assert_eq!(e.owners, ["o1"]);
    assert!(
        e.summary.contains("for 8500 ms until 9.000 s"),
        "{}",
        e.summary
    );
    assert!(matches!(
        h.events[e.first_event].kind,
        EventKind::Fault { .. }
    ));
}

#[test]
fn a_lock_stuck_until_the_end_of_the_run_says_so() {
    let h = B::new()
        .end_ms(5_000)
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .acquire_outcome("client-2", 600, 4_000, Phase::Fail)
        .build();
    assert!(
        invalid(Liveness.check(&h))
            .summary
            .contains("until the end of the run")
    );
}

#[test]
fn a_lock_freed_within_the_bound_is_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .removed(1_110, "expiry", "o1", "expired")
        .acquire("client-2", 600, 1_200, "o2")
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_released_lock_a_server_brought_back_by_itself_and_kept_is_invalid() {
    // The server's recovery lost client-1's release: the row came back, held by nobody.
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .written(600, "redis", "o1")
        .acquire_outcome("client-2", 700, 3_000, Phase::Fail)
        .build();
    let e = invalid(Liveness.check(&h));
    assert!(
        e.summary
            .contains("redis brought lock lock back by itself at 0.600 s (owner=o1), which client-1 had released at 0.501 s"),
        "{}",
        e.summary
    );
    assert_eq!(e.hosts, ["redis", "client-2"]);
}

#[test]
fn a_lock_without_expiry_brought_back_and_refused_to_the_runs_end_is_stuck_before_the_bound() {
    // The run ends 1.4 s after the lock came back, before the 2 s bound; the grant
    // reported no validity and no expiry was set: nothing will ever free it.
    let h = B::new()
        .end_ms(2_000)
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .written(600, "redis", "o1")
        .acquire_outcome("client-2", 700, 900, Phase::Fail)
        .acquire_outcome("client-2", 1_000, 1_200, Phase::Fail)
        .build();
    let e = invalid(Liveness.check(&h));
    assert!(
        e.summary.contains("nobody held it and it has no expiry")
            && e.summary
                .contains("2 acquires refused, the first client-2's at 0.900 s")
            && e.summary.contains("stuck whatever the bound"),
        "{}",
        e.summary
    );
    assert_eq!(e.hosts, ["redis", "client-2"]);
}

#[test]
fn a_lock_with_a_validity_brought_back_is_not_judged_before_the_bound() {
    // As above, but the grant reported a validity: the lock may expire after the run.
    let h = B::new()
        .end_ms(2_000)
        .believed("client-1", 100, 110, "o1", Some(310), None)
        .written(110, "client-1", "o1")
        .release("client-1", 500, "o1")
        .written(600, "redis", "o1")
        .acquire_outcome("client-2", 700, 900, Phase::Fail)
        .acquire_outcome("client-2", 1_000, 1_200, Phase::Fail)
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_holder_of_a_lock_without_expiry_that_crashed_near_the_end_leaves_it_stuck() {
    let h = B::new()
        .end_ms(1_500)
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .acquire_outcome("client-2", 600, 900, Phase::Fail)
        .build();
    let e = invalid(Liveness.check(&h));
    assert!(
        e.summary.contains(
            "client-1 crashed at 0.500 s holding lock lock (owner=o1), which has no expiry"
        ) && e.summary.contains("1 acquires refused"),
        "{}",
        e.summary
    );
    // A lock that lives with its holder's ZooKeeper session is freed by its expiry.
    let mut h = h;
    h.events.insert(
        0,
        Event {
            at_us: 0,
            host: "zk-1".into(),
            kind: EventKind::Server(ServerEvent::ZkSession {
                session: "0x1".into(),
                client: "client-1".into(),
                event: "created".into(),
                timeout_ms: 1_000,
                ephemerals: Vec::new(),
            }),
        },
    );
    assert!(!Liveness.check(&h).is_invalid(), "{:?}", Liveness.check(&h));
}

#[test]
fn a_lock_brought_back_and_freed_within_the_bound_is_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .written(600, "redis", "o1")
        .removed(1_000, "expiry", "o1", "expired")
        .acquire("client-2", 700, 1_100, "o2")
        .acquire_outcome("client-3", 1_200, 4_000, Phase::Fail)
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_stuck_lock_nobody_wanted_is_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_crash_of_a_client_not_holding_the_lock_is_not_judged() {
    let h = B::new()
        .end_ms(1_000)
        .acquire("client-1", 100, 110, "o1")
        .crash("client-2", 500)
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_crash_too_close_to_the_end_of_the_run_is_unknown() {
    let h = B::new()
        .end_ms(1_000)
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .build();
    assert!(unknown(Liveness.check(&h)).contains("client-1 at 0.500 s"));
}

// ---- check_all ----

struct Panics;

impl Checker for Panics {
    fn name(&self) -> &'static str {
        "panics"
    }
    fn check(&self, _: &History) -> Verdict {
        panic!("boom")
    }
}

#[test]
fn a_panicking_checker_is_unknown_never_valid() {
    let h = B::new().build();
    let out = checkers::check_with(&[Box::new(Panics), Box::new(MutualExclusion)], &h);
    assert_eq!(out[0].0, "panics");
    assert!(unknown(out[0].1.clone()).contains("boom"));
    assert_eq!(out[1], ("mutual-exclusion", MutualExclusion.check(&h)));
}

#[test]
fn check_all_runs_every_checker_in_a_fixed_order() {
    let h = B::new().build();
    let names: Vec<_> = checkers::check_all(&h)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
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
    assert_eq!(names, checkers::names());
}

#[test]
fn verdicts_do_not_depend_on_the_design_or_scenario_labels() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 300, 400, "o2");
    let h = b.build();
    let mut relabelled = h.clone();
    relabelled.design = "other".into();
    relabelled.scenario = "other".into();
    assert_eq!(checkers::check_all(&h), checkers::check_all(&relabelled));
}

#[test]
fn verdicts_round_trip_through_json() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 300, 400, "o2")
        .build();
    let v = MutualExclusion.check(&h);
    let json = serde_json::to_string(&v).unwrap();
    assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
}

// ---- probes ----

#[test]
fn a_pause_longer_than_the_lease_during_a_hold_is_witnessed() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .pause("client-1", 200, 1_500)
        .release("client-1", 1_600, "o1")
        .build();
    let w = probes::pause_outlasted_a_hold(&h).expect("witness");
    assert!(w.contains("client-1 paused at 0.200 s for 1300 ms"), "{w}");
}

#[test]
fn a_short_pause_or_a_pause_of_a_non_holder_is_not_witnessed() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .pause("client-1", 200, 900)
        .pause("client-2", 200, 5_000)
        .release("client-1", 1_600, "o1")
        .build();
    assert_eq!(probes::pause_outlasted_a_hold(&h), None);
}

#[test]
fn a_crash_while_holding_on_the_server_is_witnessed() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .build();
    assert!(
        probes::crash_while_holding(&h)
            .unwrap()
            .contains("client-1 crashed at 0.500 s")
    );
}

#[test]
fn a_crash_after_the_key_expired_is_not_a_crash_while_holding() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .removed(1_110, "expiry", "o1", "expired")
        .crash("client-1", 1_500)
        .build();
    assert_eq!(probes::crash_while_holding(&h), None);
}

#[test]
fn a_hold_longer_than_the_lease_is_witnessed() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 1_500, "o1")
        .build();
    assert!(
        probes::hold_outlasted_lease(&h)
            .unwrap()
            .contains("until its release")
    );
    let short = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .build();
    assert_eq!(probes::hold_outlasted_lease(&short), None);
}

#[test]
fn an_acquire_reply_slower_than_the_lease_is_witnessed() {
    let slow = B::new().acquire("client-1", 100, 1_200, "o1").build();
    assert!(
        probes::acquire_reply_later_than_lease(&slow)
            .unwrap()
            .contains("after 1100 ms")
    );
    let fast = B::new().acquire("client-1", 100, 200, "o1").build();
    assert_eq!(probes::acquire_reply_later_than_lease(&fast), None);
}

#[test]
fn a_failed_acquire_or_a_wait_behind_a_holder_is_contention() {
    let failed = B::new()
        .acquire_outcome("client-1", 100, 200, Phase::Fail)
        .build();
    assert!(probes::contended(&failed).unwrap().contains("failed"));
    let waited = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .acquire("client-2", 300, 510, "o2")
        .build();
    assert!(
        probes::contended(&waited)
            .unwrap()
            .contains("client-2 waited on lock from 0.300 s while client-1 held it")
    );
    let alone = B::new()
        .acquire("client-1", 100, 110, "o1")
        .release("client-1", 500, "o1")
        .build();
    assert_eq!(probes::contended(&alone), None);
}

// ---- belief ----

#[test]
fn an_ok_for_a_value_the_server_never_wrote_for_that_client_is_invalid() {
    // client-2's SET timed out while client-1 held the lock; client-2 took the
    // timeout for success.
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .believed("client-2", 150, 450, "o2", Some(350), None)
        .build();
    let e = invalid(Belief.check(&h));
    assert!(e.summary.contains("client-2"), "{}", e.summary);
    assert!(e.summary.contains("ever held that value"), "{}", e.summary);
    assert!(e.summary.contains("held owner=o1"), "{}", e.summary);
}

#[test]
fn the_same_value_written_by_another_client_does_not_back_a_belief() {
    // SETNX key 1 by everyone: client-2's ok names a value client-1 wrote.
    let h = B::new()
        .acquire("client-1", 100, 110, "1")
        .believed("client-2", 150, 160, "1", None, None)
        .build();
    invalid(Belief.check(&h));
}

#[test]
fn an_ok_after_the_server_lost_the_lock_is_invalid_only_if_still_believed_valid() {
    // Events are sorted by time at `build`: invoke 0.100, write 0.101, expiry 0.301,
    // ok 0.400.
    let late = |valid_ms: Option<u64>| {
        B::new()
            .believed("client-1", 100, 400, "o1", valid_ms, None)
            .written(101, "client-1", "o1")
            .removed(301, "expiry", "o1", "expired")
            .build()
    };
    // A lease counted from the send: it ran out before the expiry. Not flagged.
    assert_eq!(Belief.check(&late(Some(300))), Verdict::Valid);
    // A lease counted from the reply: believed until 600, lost at 301.
    let e = invalid(Belief.check(&late(Some(600))));
    assert!(e.summary.contains("already removed"), "{}", e.summary);
    // No validity at all (a watchdog lock): believed until released.
    invalid(Belief.check(&late(None)));
}

#[test]
fn a_backed_acquisition_is_valid_and_no_acquisition_is_unknown() {
    let h = B::new().acquire("client-1", 100, 110, "o1").build();
    assert_eq!(Belief.check(&h), Verdict::Valid);
    let none = B::new()
        .acquire_outcome("client-1", 100, 200, Phase::Fail)
        .build();
    unknown(Belief.check(&none));
}

#[test]
fn a_restarted_client_is_not_backed_by_its_previous_lifes_write() {
    let h = B::new()
        .acquire("client-1", 100, 110, "same")
        .crash_and_restart("client-1", 200, 1_200)
        .believed("client-1", 1_300, 1_310, "same", None, None)
        .build();
    invalid(Belief.check(&h));
}

// ---- token-order: the lock's own promise ----

#[test]
fn tokens_that_go_down_in_the_servers_order_of_grants_are_invalid() {
    // client-1 took token 7 before waiting; client-2 took 8 and won first.
    let h = B::new()
        .written(100, "client-2", "o2")
        .believed("client-2", 90, 110, "o2", None, Some(8))
        .release("client-2", 200, "o2")
        .written(300, "client-1", "o1")
        .believed("client-1", 50, 310, "o1", None, Some(7))
        .build();
    let e = invalid(TokenOrder.check(&h));
    assert!(e.summary.contains("went down"), "{}", e.summary);
    assert_eq!(e.hosts, ["client-1", "client-2"]);
}

#[test]
fn tokens_rising_in_grant_order_are_valid_even_if_oks_arrive_out_of_order() {
    // The grant with token 8 was written after token 7's, though its ok came first.
    let h = B::new()
        .written(100, "client-1", "o1")
        .removed(150, "expiry", "o1", "expired")
        .written(160, "client-2", "o2")
        .believed("client-2", 90, 170, "o2", None, Some(8))
        .believed("client-1", 50, 400, "o1", None, Some(7))
        .build();
    assert_eq!(TokenOrder.check(&h), Verdict::Valid);
}

/// Redisson's fenced lock against a real server (`redisson-fenced × gc-pause`, a real
/// run's seed 0): every hold of a client writes the same owner value (its hash field
/// `{client id}:{thread}`), and the runner samples the server's key every 20 ms, so a
/// hold's sample comes after its `ok` or not at all.
fn sampled_redisson_grants() -> B {
    let mut b = B::new();
    b.h.params.server_records = false;
    b.believed("client-4", 20, 47, "o4", None, Some(2))
        .written(51, "client-4", "o4")
        .release("client-4", 60, "o4")
        .believed("client-1", 53, 91, "o1", None, Some(3))
        .written(85, "client-1", "o1")
        .release("client-1", 95, "o1")
        .believed("client-4", 99, 137, "o4", None, Some(5))
        .release("client-4", 150, "o4")
        .written(153, "client-4", "o4");
    b
}

#[test]
fn a_grant_is_not_placed_at_an_earlier_holds_write_of_the_same_owner_value() {
    // The old placement put the token-5 grant at client-4's write of 0.051 s (its
    // token-2 hold's), before client-1's token 3: "went down".
    assert_eq!(
        TokenOrder.check(&sampled_redisson_grants().build()),
        Verdict::Valid
    );
    // The same history with a complete record (the simulator's) is valid too.
    let mut b = sampled_redisson_grants();
    b.h.params.server_records = true;
    assert_eq!(TokenOrder.check(&b.build()), Verdict::Valid);
}

#[test]
fn on_a_sampled_record_tokens_that_go_down_between_grants_apart_in_time_are_invalid() {
    // client-2's acquire began after client-1's token-9 grant had returned, and got 6.
    let mut b = sampled_redisson_grants();
    b.believed("client-1", 200, 210, "o1", None, Some(9))
        .release("client-1", 220, "o1")
        .believed("client-2", 230, 240, "o2", None, Some(6));
    let e = invalid(TokenOrder.check(&b.build()));
    assert!(e.summary.contains("went down"), "{}", e.summary);
    assert_eq!(e.hosts, ["client-2", "client-1"]);
    // Overlapping in time, the sampled record cannot order them: not judged.
    let mut b = sampled_redisson_grants();
    b.believed("client-1", 200, 235, "o1", None, Some(9))
        .written(236, "client-1", "o1")
        .believed("client-2", 230, 240, "o2", None, Some(6))
        .written(260, "client-2", "o2");
    assert_eq!(TokenOrder.check(&b.build()), Verdict::Valid);
}

// ---- liveness: free and wanted, never granted ----

#[test]
fn an_acquire_refused_while_nobody_held_the_lock_is_invalid() {
    let h = B::new()
        .acquire_outcome("client-1", 100, 400, Phase::Fail)
        .build();
    let e = invalid(Liveness.check(&h));
    assert!(e.summary.contains("nobody held the lock"), "{}", e.summary);
}

#[test]
fn an_acquire_refused_while_another_held_the_lock_is_valid() {
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 120, 400, Phase::Fail)
        .release("client-1", 500, "o1")
        .build();
    assert_eq!(Liveness.check(&h), Verdict::Valid);
}

#[test]
fn a_waiter_that_sleeps_through_a_free_lock_past_the_bound_is_invalid() {
    // Freed at 501; client-2 gave up at 3000, 2.5 s later (bound 2 s).
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .acquire_outcome("client-2", 120, 3_000, Phase::Fail)
        .release("client-1", 500, "o1")
        .build();
    let e = invalid(Liveness.check(&h));
    assert!(e.summary.contains("had been absent"), "{}", e.summary);
}

#[test]
fn a_refusal_during_a_fault_is_not_judged_and_nothing_judged_is_unknown() {
    let mut b = B::new();
    b.pause("client-1", 50, 600)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    unknown(Liveness.check(&b.build()));
}

// ---- what a fault explains (`checkers::excuse`) ----

/// One master `redis` and a replica `redis-2`, as the world records their roles at the
/// start.
fn replicated() -> B {
    let mut b = B::new();
    b.role(0, "redis", "master")
        .role(0, "redis-2", "replica of redis");
    b
}

#[test]
fn a_fault_on_another_client_does_not_excuse_a_refusal_of_a_free_lock() {
    // client-2 is paused for the whole run; client-1, untouched, is refused a free lock.
    let mut b = B::new();
    b.pause("client-2", 0, 10_000)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    let e = invalid(Liveness.check(&b.build()));
    assert!(e.summary.contains("no fault explains it"), "{}", e.summary);
}

#[test]
fn a_lagging_replica_does_not_excuse_a_refusal_but_a_crashed_master_does() {
    let lag = FaultKind::Delay {
        target: Target::Host("redis-2".into()),
        latency_ms: 20,
        duration_ms: 10_000,
    };
    // The replica lags the whole run: the master client-1 needs is fine.
    let mut b = replicated();
    b.fault(lag.clone(), "redis-2", 0, Some(10_000))
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    invalid(Liveness.check(&b.build()));
    // The master is down while client-1 is refused: explained, nothing else to judge.
    let mut b = replicated();
    b.fault(lag, "redis-2", 0, Some(10_000))
        .crash("redis", 50)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    unknown(Liveness.check(&b.build()));
}

#[test]
fn once_a_replica_is_promoted_the_crashed_master_no_longer_excuses_a_refusal() {
    let mut b = replicated();
    b.crash("redis", 50)
        .acquire_outcome("client-1", 100, 400, Phase::Fail)
        .role(1_000, "redis-2", "master")
        .acquire_outcome("client-2", 1_500, 1_600, Phase::Fail);
    let e = invalid(Liveness.check(&b.build()));
    assert_eq!(e.hosts, vec!["client-2".to_string()], "{}", e.summary);
}

/// Five independent masters, each recorded as master at the start.
fn five_masters() -> B {
    let mut b = B::new();
    b.h.params.masters = 5;
    for i in 1..=5 {
        b.role(0, &format!("redis-{i}"), "master");
    }
    b
}

#[test]
fn a_minority_of_masters_out_of_reach_does_not_excuse_a_refusal_but_a_majority_does() {
    // client-1 never reaches redis-4 and redis-5 (Redlock tolerates that).
    let mut b = five_masters();
    b.partition(&["client-1"], &["redis-4", "redis-5"], 0, 10_000)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    invalid(Liveness.check(&b.build()));
    // One of its three also crashes: no majority left for client-1, but client-2
    // still reaches four masters.
    let mut b = five_masters();
    b.partition(&["client-1"], &["redis-4", "redis-5"], 0, 10_000)
        .crash("redis-1", 50)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    unknown(Liveness.check(&b.build()));
    b.acquire_outcome("client-2", 500, 600, Phase::Fail);
    let e = invalid(Liveness.check(&b.build()));
    assert_eq!(e.hosts, vec!["client-2".to_string()], "{}", e.summary);
}

#[test]
fn a_master_cut_off_from_the_client_excuses_the_refusal_whichever_side_records_it() {
    // The partition is recorded on the master's side; client-1 is among its peers.
    let mut b = replicated();
    b.partition(&["redis"], &["client-1", "redis-2"], 0, 10_000)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    unknown(Liveness.check(&b.build()));
    // A client on the master's own side still reaches it.
    let mut b = replicated();
    b.partition(&["redis", "client-1"], &["redis-2"], 0, 10_000)
        .acquire_outcome("client-1", 100, 400, Phase::Fail);
    invalid(Liveness.check(&b.build()));
}

#[test]
fn lost_unlock_messages_do_not_excuse_a_waiter_that_slept_through_a_free_lock() {
    let mut b = B::new();
    b.fault(
        FaultKind::DropPushes {
            duration_ms: 10_000,
        },
        "redis",
        0,
        Some(10_000),
    )
    .acquire("client-1", 100, 110, "o1")
    .acquire_outcome("client-2", 120, 3_000, Phase::Fail)
    .release("client-1", 500, "o1");
    let e = invalid(Liveness.check(&b.build()));
    assert!(e.summary.contains("had been absent"), "{}", e.summary);
}

#[test]
fn a_regrant_whose_grantee_crashed_before_its_ok_still_frees_the_lock() {
    // client-1 dies holding the lock; the server grants it to client-2 at 1.2 s, and
    // client-2 dies before the ok reaches it. The lock was not stuck: it was granted.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .crash("client-1", 500)
        .removed(700, "expiry", "o1", "expired");
    let op = b.new_op();
    b.op_event(1_100, "client-2", op, OpF::Acquire, Phase::Invoke, None);
    b.written(1_200, "client-2", "o2")
        .crash("client-2", 1_250)
        .acquire_outcome("client-3", 1_000, 3_000, Phase::Fail);
    assert_eq!(Liveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_final_stock_read_from_the_storage_that_disagrees_with_the_writes_is_invalid() {
    // Every recorded write is a clean sale of one, but the storage ended elsewhere
    // (a write it applied without recording it, say): only its own final value shows.
    let mut b = B::new();
    b.write(100, "client-1", 10, 10, true)
        .write(200, "client-2", 9, 9, true);
    assert_eq!(LostUpdate.check(&b.build()), Verdict::Valid);
    b.push(
        300,
        "storage",
        EventKind::Storage(StorageEvent::Final {
            value: 7,
            segment: None,
        }),
    );
    let e = invalid(LostUpdate.check(&b.build()));
    assert!(e.summary.contains("final stock 7"), "{}", e.summary);
}

#[test]
fn a_belief_needs_a_majority_of_the_masters_at_the_ok() {
    let on = |b: &mut B, ms: u64, server: &str, removed: bool| {
        let kind = if removed {
            ServerEvent::Removed {
                by: "expiry".into(),
                key: "lock".into(),
                value: "o1".into(),
                cause: "expired".into(),
            }
        } else {
            ServerEvent::Written {
                by: "client-1".into(),
                key: "lock".into(),
                value: "o1".into(),
            }
        };
        b.push(ms, server, EventKind::Server(kind));
    };
    let run = |events: &[(u64, &str, bool)]| {
        let mut b = B::new();
        b.h.params.masters = 3;
        b.believed("client-1", 100, 400, "o1", Some(900), None);
        for (ms, server, removed) in events {
            on(&mut b, *ms, server, *removed);
        }
        Belief.check(&b.build())
    };
    // Two of three: backed.
    assert_eq!(
        run(&[(110, "redis-1", false), (120, "redis-2", false)]),
        Verdict::Valid
    );
    // One of three: never backed.
    let e = invalid(run(&[(110, "redis-1", false)]));
    assert!(
        e.summary.contains("needed 2 of 3 masters, had 1"),
        "{}",
        e.summary
    );
    // Three, then two expired before the ok (a jumped clock, say): the second loss
    // left one, and the client still believes until 0.900 s.
    let e = invalid(run(&[
        (110, "redis-1", false),
        (120, "redis-2", false),
        (130, "redis-3", false),
        (200, "redis-3", true),
        (300, "redis-1", true),
    ]));
    assert!(
        e.summary
            .contains("redis-1 had already removed that value at 0.300 s"),
        "{}",
        e.summary
    );
}

/// A release that ends with `phase` (and no server removal), for the failed-release
/// rule.
fn release_outcome(b: &mut B, host: &str, ms: u64, owner: &str, phase: Phase) {
    let op = b.new_op();
    b.op_event(ms, host, op, OpF::Release, Phase::Invoke, Some(owner));
    b.op_event(ms + 5, host, op, OpF::Release, phase, Some(owner));
}

#[test]
fn a_lock_kept_after_its_live_holders_release_failed_is_stuck() {
    // MySQL's unique-index lock: the holder's DELETE went out on a connection the
    // server had closed; the row has no expiry, and everyone else is refused.
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1");
    release_outcome(&mut b, "client-1", 500, "o1", Phase::Info);
    b.acquire_outcome("client-2", 600, 3_000, Phase::Fail)
        .acquire_outcome("client-1", 600, 3_100, Phase::Fail);
    let h = b.build();
    let e = invalid(Liveness.check(&h));
    assert!(
        e.summary.contains(
            "client-1's release of lock lock ended with an unknown outcome at 0.505 s, and the server kept the lock under its name (owner=o1) until the end of the run"
        ) && e.summary.contains("a release that failed left the lock stuck"),
        "{}",
        e.summary
    );
    assert_eq!(e.hosts, ["client-1", "client-2"]);
}

#[test]
fn a_failed_release_whose_lock_expired_within_the_bound_is_not_stuck() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1");
    release_outcome(&mut b, "client-1", 500, "o1", Phase::Fail);
    b.removed(1_110, "expiry", "o1", "expired")
        .acquire("client-2", 600, 1_200, "o2")
        .acquire_outcome("client-3", 1_300, 4_000, Phase::Fail);
    assert_eq!(Liveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn a_lock_an_unsuccessful_attempt_left_behind_and_nobody_removed_is_stuck() {
    // A create whose reply was lost: the server made the node, the client gave up (an
    // unknown outcome) and never reported it; nobody believes they hold it.
    let mut b = B::new();
    let op = b.new_op();
    b.op_event(100, "client-1", op, OpF::Acquire, Phase::Invoke, None);
    b.written(150, "client-1", "orphan");
    b.op_event(400, "client-1", op, OpF::Acquire, Phase::Info, None);
    b.acquire_outcome("client-2", 500, 3_000, Phase::Fail);
    let h = b.build();
    let e = invalid(Liveness.check(&h));
    assert!(
        e.summary.contains(
            "client-1's acquire of lock lock ended with an unknown outcome at 0.400 s, but it had written the lock on redis at 0.150 s (value=orphan), which no acquisition ever reported"
        ),
        "{}",
        e.summary
    );
    assert_eq!(e.owners, ["orphan"]);
}

#[test]
fn a_value_an_acquisition_reported_is_no_orphan() {
    // The first attempt timed out but its retry found the node and reported it: a hold.
    let mut b = B::new();
    let op = b.new_op();
    b.op_event(100, "client-1", op, OpF::Acquire, Phase::Invoke, None);
    b.written(150, "client-1", "o1");
    b.op_event(400, "client-1", op, OpF::Acquire, Phase::Info, None);
    let again = b.new_op();
    b.op_event(410, "client-1", again, OpF::Acquire, Phase::Invoke, None);
    b.op_event(420, "client-1", again, OpF::Acquire, Phase::Ok, Some("o1"));
    b.release("client-1", 900, "o1");
    b.acquire("client-2", 500, 950, "o2");
    assert_eq!(Liveness.check(&b.build()), Verdict::Valid);
}

#[test]
fn an_overlap_in_belief_whose_stale_holder_never_wrote_after_the_newer_grant_is_overlap_not_unsafe()
{
    // client-1 wrote before client-2's grant, then was paused to the end of the run: two
    // holders in belief, but nothing of the stale one reached the storage after.
    let h = B::new()
        .acquire("client-1", 100, 110, "o1")
        .write(200, "client-1", 10, 10, true)
        .removed(1_110, "expiry", "o1", "expired")
        .acquire("client-2", 1_200, 1_210, "o2")
        .write(1_300, "client-2", 9, 9, true)
        .build();
    let verdicts = checkers::check_all(&h);
    assert!(
        verdicts
            .iter()
            .any(|(n, v)| *n == "mutual-exclusion" && v.is_invalid())
    );
    assert!(!checkers::stale_write_accepted(&h));
    let facts = checkers::StorageFacts::of(&h);
    assert_eq!(
        checkers::safety(&verdicts, facts),
        checkers::Safety::Overlap
    );
    // The same overlap with the stale holder writing after the newer grant is unsafe.
    let acted = B::new()
        .acquire("client-1", 100, 110, "o1")
        .removed(1_110, "expiry", "o1", "expired")
        .acquire("client-2", 1_200, 1_210, "o2")
        .write(1_300, "client-2", 10, 10, true)
        .write(1_400, "client-1", 10, 9, true)
        .build();
    assert!(checkers::stale_write_accepted(&acted));
    let verdicts = checkers::check_all(&acted);
    assert_eq!(
        checkers::safety(&verdicts, checkers::StorageFacts::of(&acted)),
        checkers::Safety::Unsafe
    );
    // A caller that only knows whether the storage refused anyone reads it as before.
    assert_eq!(
        checkers::safety(&checkers::check_all(&h), false),
        checkers::Safety::Unsafe
    );
}

#[test]
fn a_session_lock_the_server_ended_is_the_clients_overrun_not_a_broken_promise() {
    // A lock without expiry (a ZooKeeper node): the leader expired client-1's session
    // while it was paused; client-2 got the lock; client-1 then wrote.
    let h = B::new()
        .believed("client-1", 100, 110, "/l/n1", None, None)
        .written(110, "client-1", "/l/n1")
        .removed(800, "expiry", "/l/n1", "expired")
        .believed("client-2", 850, 900, "/l/n2", None, None)
        .written(900, "client-2", "/l/n2")
        .write(1_000, "client-2", 10, 10, true)
        .write(1_200, "client-1", 10, 9, true)
        .build();
    assert_eq!(checkers::Validity.check(&h), Verdict::Valid);
    let e = invalid(checkers::Overrun.check(&h));
    assert!(
        e.summary.contains(
            "redis expired the session that held it at 0.800 s (the lock's promise, kept)"
        ),
        "{}",
        e.summary
    );
}

#[test]
fn a_violation_before_the_first_fault_is_the_worlds_doing() {
    let mut b = B::new();
    b.acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 160, "o2")
        .pause("client-3", 2_000, 2_500);
    let h = b.build();
    let verdicts = checkers::check_all(&h);
    assert!(checkers::broke_before_fault(&h, &verdicts));
    let mut late = B::new();
    late.pause("client-3", 50, 60)
        .acquire("client-1", 100, 110, "o1")
        .acquire("client-2", 150, 160, "o2");
    let h = late.build();
    assert!(!checkers::broke_before_fault(&h, &checkers::check_all(&h)));
}

#[test]
fn a_lock_returned_already_expired_is_never_within_its_validity() {
    // client-2's acquisition came back with a validity that had already run out (it
    // retried past its duration): its own validity never overlaps client-1's.
    let h = B::new()
        .believed("client-1", 100, 110, "o1", Some(1_000), None)
        .believed("client-2", 200, 600, "o2", Some(500), None)
        .build();
    assert_eq!(checkers::Validity.check(&h), Verdict::Valid);
}
