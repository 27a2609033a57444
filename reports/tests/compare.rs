//! The comparison by system (the lock-service comparison's table): families, worst class per fault class,
//! the seed's and the best design, and its width.

use lock_impl::Backend;
use reports::compare::{Comparison, Role, Tally, for_terminal, render_markdown};
use reports::table::{CellResult, NO_FAULT};
use scenarios::catalog::{self, FaultClass, Scenario, Topology};
use scenarios::family::Family;

/// The catalog's scenarios of `class` that run a design on `backend` with `masters`
/// masters in a world that is (or is not) replicated.
fn scenarios_of(
    class: FaultClass,
    backend: Backend,
    masters: usize,
    replicated: bool,
) -> Vec<Scenario> {
    catalog::catalog()
        .into_iter()
        .filter(|s| {
            s.class == class
                && s.applies_to(backend, masters)
                && (s.topology() == Topology::Replicated) == replicated
        })
        .collect()
}

/// A cell of `runs` runs, `classes` as (class name, runs).
fn cell(design: &str, scenario: &str, runs: u64, classes: &[(&str, usize)]) -> CellResult {
    let mut c = CellResult::new(design, scenario);
    c.runs = runs;
    for (k, n) in classes {
        c.classes.insert((*k).to_string(), *n);
    }
    c
}

fn row(c: &Comparison, family: Family, role: Role) -> &reports::compare::Row {
    c.rows
        .iter()
        .find(|r| r.family == family && r.role == role)
        .unwrap_or_else(|| panic!("no {role:?} row for {family:?}: {c:#?}"))
}

fn column(c: &Comparison, class: FaultClass) -> usize {
    c.classes
        .iter()
        .position(|k| *k == class)
        .unwrap_or_else(|| panic!("no column {class:?}: {:?}", c.classes))
}

fn tally(mark: char, count: usize, runs: u64) -> Option<Tally> {
    Some(Tally { mark, count, runs })
}

/// Hand-built cells: per family, the worst class over a design's runs in each fault
/// class's scenarios, with its count; the best design decided by the shares of bad
/// runs, not by name; one row when the seed's design is the best; a Redis design's
/// replicated-world cells go to Redis + Sentinel, not Redis single.
#[test]
fn each_cell_is_the_worst_class_over_a_designs_runs_and_the_best_row_has_the_fewest_bad_runs() {
    let pauses = scenarios_of(FaultClass::ClientPause, Backend::Redis, 1, false);
    assert!(pauses.len() >= 2, "two client-pause scenarios for Redis");
    let (p1, p2) = (pauses[0].name, pauses[1].name);
    let delay = scenarios_of(FaultClass::NetworkDelay, Backend::Redis, 1, false)[0].name;
    let crash = scenarios_of(FaultClass::ClientCrash, Backend::Redis, 1, false)[0].name;
    let failover = scenarios_of(FaultClass::Failover, Backend::Redis, 1, true)[0].name;
    let restart = scenarios_of(FaultClass::ServerCrash, Backend::Redis, 5, false)[0].name;
    let zk = catalog::catalog()
        .into_iter()
        .find(|s| s.applies_to(Backend::ZooKeeper, 0))
        .expect("a ZooKeeper scenario");
    let mysql = catalog::catalog()
        .into_iter()
        .find(|s| s.applies_to(Backend::MySql, 0))
        .expect("a MySQL scenario");

    // Unsafe, but only before the fault began: lower case.
    let mut early = cell("set-nx-px-lua", crash, 4, &[("unsafe", 1), ("safe", 3)]);
    early.before_fault.insert("unsafe".into(), 1);
    let cells = vec![
        // Redis single: the seed's design is unsafe in 2 of 6 pause runs; fenced is
        // fenced in 3 and never saw the delay; setnx-del is unsafe in every pause run.
        cell("setnx-del", p1, 3, &[("unsafe", 3)]),
        cell("set-nx-px-lua", p1, 3, &[("unsafe", 2), ("safe", 1)]),
        cell("set-nx-px-lua", p2, 3, &[("safe", 3)]),
        cell("set-nx-px-lua", delay, 3, &[("safe", 3)]),
        early,
        cell("fenced", p1, 3, &[("fenced", 3)]),
        cell("fenced", p2, 3, &[("safe", 3)]),
        cell("fenced", delay, 3, &[(NO_FAULT, 3)]),
        // Redis + Sentinel: the seed's design is safe, wait-synced is not: one row.
        cell("set-nx-px-lua", failover, 3, &[("safe", 3)]),
        cell("wait-synced", failover, 3, &[("unsafe", 1), ("safe", 2)]),
        // Redlock: the seed's redlock loses to redsync.
        cell("redlock", restart, 3, &[("unsafe", 1), ("safe", 2)]),
        cell("redsync", restart, 3, &[("overlap", 3)]),
        // ZooKeeper: the seed's design did not run; the best is all there is.
        cell(
            "zk-curator-fenced",
            zk.name,
            3,
            &[("fenced", 1), ("safe", 2)],
        ),
        // MySQL: a tie goes to the seed's design, though another came first.
        cell("mysql-get-lock", mysql.name, 3, &[("safe", 3)]),
        cell("mysql-unique-index", mysql.name, 3, &[("safe", 3)]),
        // Not built in: left out.
        cell("my-own-lock", p1, 3, &[("unsafe", 3)]),
    ];
    let c = Comparison::of(&cells);

    // Columns: the classes that have cells, in FaultClass::ALL's order.
    let expected: Vec<FaultClass> = FaultClass::ALL
        .iter()
        .copied()
        .filter(|k| {
            [
                FaultClass::ClientPause,
                FaultClass::ClientCrash,
                FaultClass::NetworkDelay,
                FaultClass::Failover,
                FaultClass::ServerCrash,
                zk.class,
                mysql.class,
            ]
            .contains(k)
        })
        .collect();
    assert_eq!(c.classes, expected);
    let (pause, delay_col, crash_col, failover_col) = (
        column(&c, FaultClass::ClientPause),
        column(&c, FaultClass::NetworkDelay),
        column(&c, FaultClass::ClientCrash),
        column(&c, FaultClass::Failover),
    );

    let seed = row(&c, Family::RedisSingle, Role::Seed);
    assert_eq!(seed.design, "set-nx-px-lua");
    assert_eq!(
        seed.tallies[pause],
        tally('U', 2, 6),
        "worst over two cells"
    );
    assert_eq!(seed.tallies[delay_col], tally('S', 3, 3));
    assert_eq!(
        seed.tallies[crash_col],
        tally('u', 1, 4),
        "broke before the fault"
    );
    assert_eq!(
        seed.tallies[failover_col], None,
        "its replicated-world cell is Redis + Sentinel's"
    );
    let best = row(&c, Family::RedisSingle, Role::Best);
    assert_eq!(best.design, "fenced", "no unsafe run: least bad");
    assert_eq!(best.tallies[pause], tally('F', 3, 6));
    assert_eq!(best.tallies[delay_col], tally('n', 3, 3));
    assert_eq!(best.tallies[crash_col], None);
    assert_eq!(c.rows.iter().filter(|r| r.design == "setnx-del").count(), 0);

    let sentinel: Vec<_> = c
        .rows
        .iter()
        .filter(|r| r.family == Family::RedisSentinel)
        .collect();
    assert_eq!(sentinel.len(), 1, "{sentinel:?}");
    assert_eq!(sentinel[0].role, Role::SeedAndBest);
    assert_eq!(sentinel[0].design, "set-nx-px-lua");
    assert_eq!(sentinel[0].tallies[failover_col], tally('S', 3, 3));
    assert_eq!(sentinel[0].tallies[pause], None);

    assert_eq!(row(&c, Family::Redlock, Role::Seed).design, "redlock");
    let redsync = row(&c, Family::Redlock, Role::Best);
    assert_eq!(redsync.design, "redsync");
    assert_eq!(
        redsync.tallies[column(&c, FaultClass::ServerCrash)],
        tally('O', 3, 3)
    );

    let zk_rows: Vec<_> = c
        .rows
        .iter()
        .filter(|r| r.family == Family::System(Backend::ZooKeeper))
        .collect();
    assert_eq!(zk_rows.len(), 1);
    assert_eq!(
        (zk_rows[0].role, zk_rows[0].design.as_str()),
        (Role::Best, "zk-curator-fenced")
    );
    assert_eq!(zk_rows[0].tallies[column(&c, zk.class)], tally('F', 1, 3));

    let mysql_rows: Vec<_> = c
        .rows
        .iter()
        .filter(|r| r.family == Family::System(Backend::MySql))
        .collect();
    assert_eq!(mysql_rows.len(), 1);
    assert_eq!(
        (mysql_rows[0].role, mysql_rows[0].design.as_str()),
        (Role::SeedAndBest, "mysql-unique-index")
    );
    assert!(
        !c.rows
            .iter()
            .any(|r| r.family == Family::System(Backend::MongoDb))
    );
    assert!(!c.rows.iter().any(|r| r.design == "my-own-lock"));

    // The Markdown: full class names, `U 2/6` cells, `·` where nothing ran, every
    // system's promise once.
    let md = render_markdown(&c);
    assert!(md.contains("| client pause |"), "{md}");
    assert!(
        md.contains("| Redis single | seed | set-nx-px-lua |"),
        "{md}"
    );
    assert!(md.contains(" U 2/6 |") && md.contains(" · |"), "{md}");
    for b in [Backend::Redis, Backend::ZooKeeper, Backend::MySql] {
        assert_eq!(md.matches(b.promise()).count(), 1, "{md}");
    }
    assert!(!md.contains(Backend::MongoDb.promise()), "{md}");
}

/// The comparison the main job prints after its matrix fits 120 columns with every
/// built-in design in every scenario that runs it, three-digit counts included.
#[test]
fn the_comparison_after_the_main_jobs_matrix_fits_120_columns() {
    let catalog = catalog::catalog();
    let mut cells = Vec::new();
    for d in lock_impl::DESIGNS {
        for s in catalog
            .iter()
            .filter(|s| s.applies_to(d.backend, d.masters))
        {
            cells.push(cell(d.name, s.name, 300, &[("unsafe", 123), ("safe", 177)]));
        }
    }
    let c = Comparison::of(&cells);
    let text = for_terminal(&c);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}\n{text}",
            line.chars().count()
        );
    }
    for f in Family::all() {
        assert!(
            text.lines().any(|l| l.starts_with(f.name())),
            "a row for {}: {text}",
            f.name()
        );
    }
    assert!(
        text.contains("U+"),
        "the table itself, not a pointer: {text}"
    );
    for b in c.backends() {
        // Wrapped, but every word of every promise is there.
        let words: Vec<&str> = text.split_whitespace().collect();
        let promise: Vec<&str> = b.promise().split_whitespace().collect();
        assert!(
            words
                .windows(promise.len())
                .any(|w| w == promise.as_slice()),
            "{}'s promise quoted: {text}",
            b.name()
        );
    }
}
