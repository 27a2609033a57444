//! Jumping to the next event gives the history that stepping tick by tick gives: for
//! every design and every scenario that fits its world, byte for byte, and no timer
//! fires inside a jump unhinted. `LOCKSIM_STEPPING_SEEDS=N` runs N seeds per cell
//! (default 1). A cell whose jumping history the golden file pins (seeds 0 and 1, the
//! `golden_histories` suite) is compared with that digest rather than jumped again,
//! which would only repeat that suite's run; the first design of each scenario is
//! jumped here all the same, to count the steps jumping saves.

use crate::common;

use std::collections::BTreeMap;

use common::{design, seeds_from_env};
use scenarios::catalog;
use scenarios::sweep::config;
use sim::history::{EventKind, OpF, Phase};
use sim::world::Stepping;

/// The golden file's history digests (`tests/golden/histories.txt`, pinned by the
/// `golden_histories` suite, whose runs jump): `(design, scenario, seed)` to the SHA-1
/// of the history's JSON.
fn jumped_digests() -> BTreeMap<(String, String, u64), String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/histories.txt"
    ))
    .expect("tests/golden/histories.txt");
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            match f.as_slice() {
                [d, s, seed, history, _probe] => Some((
                    (d.to_string(), s.to_string(), seed.parse().ok()?),
                    history.to_string(),
                )),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn jumping_gives_the_tick_by_tick_history_in_every_cell() {
    let seeds = seeds_from_env("LOCKSIM_STEPPING_SEEDS", 1);
    let jumped = jumped_digests();
    let mut work = Vec::new();
    for s in catalog::catalog() {
        for (i, d) in lock_impl::DESIGNS
            .iter()
            .filter(|d| s.applies_to(d.backend, d.masters))
            .enumerate()
        {
            for seed in 0..seeds {
                // The first design of each scenario also jumps here, to count the
                // steps saved; the rest compare with the golden file's digest of
                // the same run jumping (the golden suite checks that digest).
                let digest = jumped
                    .get(&(d.name.to_string(), s.name.to_string(), seed))
                    .filter(|_| i > 0)
                    .cloned();
                work.push((s.clone(), d.name, seed, digest));
            }
        }
    }
    assert!(
        work.iter().filter(|w| w.3.is_some()).count() > 700,
        "the golden file has the jumped histories of most cells"
    );
    // Every cell tick by tick is most of this suite's time: the cells are shared out
    // over two threads (the machine's cores), each run on its own, so the comparison
    // is the same whatever thread runs it.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let saved = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((s, name, seed, digest)) = work.get(i) else {
                        break;
                    };
                    saved.fetch_add(
                        compare_one(s, name, *seed, digest.as_deref()),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
            });
        }
    });
    assert!(
        work.len() > 200,
        "every cell of the catalog: {}",
        work.len()
    );
    assert!(saved.into_inner() > 0, "no step saved anywhere");
}

/// One cell's seed tick by tick, and jumping (or the digest of its jumping history
/// from the golden file): the same history, no unhinted timer, somebody held the
/// lock, and no more steps jumping; the steps saved (0 when not jumped here).
fn compare_one(s: &catalog::Scenario, name: &str, seed: u64, jumped: Option<&str>) -> u64 {
    let mut cfg = config(&design(name), s, seed);
    cfg.stepping = Stepping::Tick;
    let tick = sim::world::run(&cfg).expect("run");
    let at = format!("design={name} scenario={} seed={seed}", s.name);
    // The run did something: somebody held the lock (a world of 70 s holds,
    // `renewal-blip`, records only a few dozen events in all).
    assert!(
        tick.events.iter().any(|e| matches!(&e.kind,
            EventKind::Op(op) if op.f == OpF::Acquire && op.phase == Phase::Ok)),
        "{at}: nobody ever held the lock"
    );
    if let Some(want) = jumped {
        let json = serde_json::to_vec(&tick).expect("a history serializes");
        if sha1_smol::Sha1::from(&json).digest().to_string() == want {
            return 0;
        }
    }
    cfg.stepping = Stepping::Jump;
    let jump = sim::world::run(&cfg).expect("run");
    assert_eq!(jump.stats.unhinted_wakes, 0, "{at}: a timer was not hinted");
    if let Some(diff) = first_difference(&tick, &jump) {
        panic!("{at}: the histories differ (tick-by-tick, then jumping): {diff}");
    }
    assert!(
        jumped.is_none(),
        "{at}: tick by tick gives the jumping history, but not the golden file's: run the \
         golden_histories suite"
    );
    assert!(jump.stats.steps <= tick.stats.steps, "{at}: more steps");
    tick.stats.steps - jump.stats.steps
}

/// Where two histories first part, in a few lines (the whole JSON of both is too
/// long to read); `None` when they are byte for byte the same.
fn first_difference(a: &sim::history::History, b: &sim::history::History) -> Option<String> {
    if serde_json::to_string(a).unwrap() == serde_json::to_string(b).unwrap() {
        return None;
    }
    fn json(e: &sim::history::Event) -> String {
        serde_json::to_string(e).unwrap()
    }
    let Some(i) = (0..a.events.len().max(b.events.len()))
        .find(|&i| a.events.get(i).map(json) != b.events.get(i).map(json))
    else {
        return Some("same events; the rest of the history differs".into());
    };
    let show = |h: &sim::history::History| {
        h.events[i.saturating_sub(2)..(i + 2).min(h.events.len())]
            .iter()
            .map(json)
            .collect::<Vec<_>>()
            .join("\n    ")
    };
    Some(format!("at event {i}:\n  {}\n  vs\n  {}", show(a), show(b)))
}

/// A timer armed with tokio directly, not through `turmoil::time`, is seen: it fires
/// inside a jump, and the simulation counts it. (What a user's design does if it
/// sleeps on tokio instead of `Deps::clock`; `sim::world::run` then runs it again tick
/// by tick.)
#[test]
fn an_unhinted_timer_is_counted() {
    let mut sim = turmoil::Builder::new()
        .tick_duration(std::time::Duration::from_millis(1))
        .build();
    sim.host("sleeper", || async {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(7)).await;
        }
    });
    sim.host("hinted", || async {
        loop {
            turmoil::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    while sim.elapsed() < std::time::Duration::from_secs(1) {
        let until = sim.idle_until();
        if until > sim.elapsed() + std::time::Duration::from_millis(1) {
            let by = until.min(std::time::Duration::from_secs(1)) - sim.elapsed();
            sim.step_by(by).unwrap();
        } else {
            sim.step().unwrap();
        }
    }
    // The hinted host bounds every jump to 50 ms; the sleeper wakes about 7 times in
    // each.
    assert!(sim.unhinted_wakes() > 100, "{}", sim.unhinted_wakes());
}
