//! The code's shape, held by tests (docs/layout.md, "Rooms a reader can hold"): no
//! source file a reader must hold whole is over 800 lines, every module opens with a
//! short comment, and the code outside a system's own folders names no system. Function
//! length (150 lines) is clippy's `too_many_lines`, which every crate's root denies.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds the reports crate")
        .to_path_buf()
}

/// The library sources of the workspace's crates: every `.rs` under a crate's `src/`,
/// but not test modules kept in files of their own (`tests.rs`, `tests/`).
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for krate in ["lock-impl", "sim", "scenarios", "reports", "locksim"] {
        walk(&root().join(krate).join("src"), &mut out);
    }
    assert!(out.len() > 100, "found only {} sources", out.len());
    out
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_source_file_is_over_800_lines() {
    let over: Vec<String> = sources()
        .iter()
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p).ok()?.lines().count();
            (lines > 800).then(|| format!("{} ({lines} lines)", rel(p)))
        })
        .collect();
    assert!(
        over.is_empty(),
        "split these along their seams (800 lines at most): {over:?}"
    );
}

#[test]
fn every_module_comment_is_short() {
    let long: Vec<String> = sources()
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let lines = text.lines().take_while(|l| l.starts_with("//!")).count();
            (lines >= 40).then(|| format!("{} ({lines} lines)", rel(p)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "a module comment says what the module is and what a reader must know, in under \
         40 lines; move the rest to the items or to docs/: {long:?}"
    );
}

/// The system-neutral rooms: the nemesis, the fault plan, the real runner's core, the
/// timeline and the time-ordered checkers reach systems through their plugins' traits
/// and the history's neutral facts, so none of them names a system in code.
const NEUTRAL: &[&str] = &[
    "sim/src/faults.rs",
    "sim/src/world/nemesis",
    "sim/src/world/system.rs",
    "reports/src/timeline.rs",
    "reports/src/real/mod.rs",
    "reports/src/real/system.rs",
    "reports/src/real/servers.rs",
    "reports/src/real/faults.rs",
    "reports/src/real/targets.rs",
    "reports/src/real/refuse.rs",
    "scenarios/src/checkers/mutual_exclusion.rs",
    "scenarios/src/checkers/liveness.rs",
    "scenarios/src/checkers/server_probes.rs",
];

/// What names a system: its name, its spec's field, its own history events.
const SYSTEM_WORDS: &[&str] = &[
    "ZkSession",
    "ZkNode",
    "ZkFollowerLag",
    "MySqlConnection",
    "MySqlRestart",
    "MongoRollback",
    "zookeeper",
    "mysql",
    "mariadb",
    "mongo",
    "etcd",
    "sentinel",
    "redis",
];

#[test]
fn the_neutral_rooms_name_no_system() {
    let mut files = Vec::new();
    for place in NEUTRAL {
        let path = root().join(place);
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(&path)
                .expect("a folder of the list")
                .map(|e| e.expect("an entry").path())
                .collect();
            entries.sort();
            files.extend(entries);
        } else {
            assert!(path.is_file(), "{place} is in the list but not in the tree");
            files.push(path);
        }
    }
    let mut named = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let lower = code.to_lowercase();
            for word in SYSTEM_WORDS {
                if lower.contains(&word.to_lowercase()) {
                    named.push(format!("{}:{}: {word}", rel(file), n + 1));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "ask the system's plugin or the history's neutral fact instead: {named:?}"
    );
}
