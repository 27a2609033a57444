//! The broken-design catalog (`scenarios::broken`): every broken design is caught by
//! its checker within its seed bound, in a run where the scenario's fault happened,
//! and the same checker never flags its correct parent on those seeds, so each catch
//! is the bug's doing and not the scenario's.

use crate::common;

use scenarios::broken::{self, Broken};
use scenarios::sweep::{DesignSpec, first_invalid, replay_command, sweep};

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn check(b: &Broken) -> Result<String, String> {
    let scenario = common::scenario(b.scenario);
    let spec = b.spec();
    let caught = first_invalid(&spec, &scenario, b.checker, 0..b.seeds)
        .map_err(|e| format!("{}: run failed: {e}", spec.name))?
        .ok_or_else(|| {
            format!(
                "{} under {} was never Invalid on {} in seeds 0..{}",
                spec.name, b.scenario, b.checker, b.seeds
            )
        })?;
    let Some(fault) = &caught.fault_seen else {
        return Err(format!(
            "{} was caught at seed {} in a run without the scenario's fault: not evidence",
            spec.name, caught.seed
        ));
    };
    let summary = caught
        .verdict(b.checker)
        .and_then(|v| v.evidence())
        .map(|e| e.summary.clone())
        .unwrap_or_default();
    // The parent on every seed of the bound: the checker must stay quiet on it.
    let parent = DesignSpec::builtin(b.parent).map_err(|e| format!("parent: {e}"))?;
    let runs = sweep(&parent, &scenario, 0..b.seeds, threads(), false, &|_, _| {})
        .map_err(|e| format!("{}: run failed: {e}", b.parent))?;
    if let Some(r) = runs
        .iter()
        .find(|r| r.verdict(b.checker).is_some_and(|v| v.is_invalid()))
    {
        return Err(format!(
            "{}'s parent {} is also Invalid on {} under {} (seed {}): the catch is not attributable to the bug\n  replay: {}",
            spec.name,
            b.parent,
            b.checker,
            b.scenario,
            r.seed,
            replay_command(b.parent, b.scenario, r.seed)
        ));
    }
    Ok(format!(
        "{:<36} caught by {:<16} in {:<19} at seed {} ({fault}); {} clean on 0..{}\n    {summary}\n    replay: {}",
        spec.name,
        b.checker,
        b.scenario,
        caught.seed,
        b.parent,
        b.seeds,
        replay_command(&spec.name, b.scenario, caught.seed)
    ))
}

#[test]
fn every_broken_design_is_caught_by_its_checker_and_its_parent_is_not() {
    let catalog = broken::catalog();
    assert!(
        catalog.len() >= 12,
        "the catalog keeps at least 12 broken designs, has {}",
        catalog.len()
    );
    let mut failures = Vec::new();
    for b in &catalog {
        match check(b) {
            Ok(line) => println!("{line}"),
            Err(why) => failures.push(why),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_catalog_entry_names_a_real_parent_scenario_and_checker() {
    let checkers = scenarios::checkers::all_names();
    for b in broken::catalog() {
        assert!(
            DesignSpec::builtin(b.parent).is_ok(),
            "{}: parent {}",
            b.name,
            b.parent
        );
        assert!(
            scenarios::catalog::find(b.scenario).is_ok(),
            "{}: scenario {}",
            b.name,
            b.scenario
        );
        assert!(
            checkers.contains(&b.checker),
            "{}: checker {}",
            b.name,
            b.checker
        );
        assert!(
            b.seeds > 0 && !b.bug.is_empty(),
            "{}: a seed bound and a sentence",
            b.name
        );
        assert_eq!(
            broken::find(&format!("broken/{}", b.name)).map(|x| x.name),
            Some(b.name),
            "found by its command-line name"
        );
    }
}

/// The read-write entries are copies of Redisson's `RReadWriteLock` with one script
/// edited. The copy with none edited, on the same scenario and seeds, is never caught:
/// what the copy leaves out of Redisson (the watchdog, waiting on the unlock message)
/// is not what the checker catches.
#[test]
fn the_unedited_copy_of_the_read_write_lock_is_never_caught() {
    use std::sync::Arc;

    use scenarios::broken::designs::{RedissonRwCopy, RwEdit};
    let copy = DesignSpec {
        name: "copy/redisson-rw".into(),
        factory: Arc::new(|d| {
            Arc::new(RedissonRwCopy::new("copy/redisson-rw", d, RwEdit::Verbatim))
        }),
        masters: 1,
        backend: lock_impl::Backend::Redis,
    };
    let entries: Vec<Broken> = broken::catalog()
        .into_iter()
        .filter(|b| b.parent == "redisson-rw")
        .collect();
    assert!(
        entries.len() >= 2,
        "the read-write bug classes are in the catalog"
    );
    for b in entries {
        let scenario = common::scenario(b.scenario);
        let runs = sweep(&copy, &scenario, 0..b.seeds, threads(), false, &|_, _| {})
            .expect("the copy's runs complete");
        for r in &runs {
            let verdict = r.verdict(b.checker).expect("judged");
            assert!(
                verdict.is_valid(),
                "the unedited copy is {verdict:?} on {} under {} (seed {})",
                b.checker,
                b.scenario,
                r.seed
            );
            assert!(r.fault_seen.is_some(), "seed {}: contention seen", r.seed);
        }
    }
}

/// Each read-write bug edits its script: the edited copy differs from the verbatim one
/// where the bug says (moved here from the design's module).
#[test]
fn every_read_write_edit_applies_to_the_verbatim_script() {
    use scenarios::broken::designs::RwEdit;
    assert!(RwEdit::Verbatim.scripts().is_none());
    let (verbatim, edited) = RwEdit::WriteIgnoresReaders.scripts().unwrap();
    assert_eq!(verbatim, lock_impl::designs::REDISSON_WRITE_LOCK);
    assert_ne!(edited, verbatim);
    assert!(edited.contains("if (mode ~= 'write') then"));
    let (verbatim, edited) = RwEdit::ReadUnlockDeletesHash.scripts().unwrap();
    assert_eq!(verbatim, lock_impl::designs::REDISSON_READ_UNLOCK);
    assert_ne!(edited, verbatim);
    assert!(!edited.contains("hlen"));
    let (verbatim, edited) = RwEdit::ReadRenewalSkipsTimeouts.scripts().unwrap();
    assert_eq!(verbatim, lock_impl::designs::REDISSON_READ_RENEW);
    assert_ne!(edited, verbatim);
    assert!(!edited.contains("hlen"));
}
