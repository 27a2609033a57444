//! The documentation against the registries: the design and scenario catalogs in
//! `docs/` name exactly what `locksim list` lists (`lock_impl::DESIGNS`,
//! `scenarios::broken::catalog`, `scenarios::catalog::SCENARIOS`), every link in the
//! README and `docs/` reaches a file, and the README keeps the fresh-machine commands
//! CI and newcomers run first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds the reports crate")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names a catalog file lists: the first cell of every table row that is one name
/// in backquotes (`| `name` | …`), outside code blocks.
fn row_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let Some(rest) = line.strip_prefix("| `") else {
            continue;
        };
        let Some((name, after)) = rest.split_once('`') else {
            continue;
        };
        if after.trim_start().starts_with('|') {
            names.insert(name.to_string());
        }
    }
    names
}

/// What a catalog file should list against what it lists: the names missing from it
/// and the rows naming nothing the registry knows.
fn compare(file: &str, registry: &BTreeSet<String>) -> Vec<String> {
    let listed = row_names(&read(file));
    let mut problems = Vec::new();
    for name in registry.difference(&listed) {
        problems.push(format!(
            "{file}: no row for `{name}`, which `locksim list` lists"
        ));
    }
    for name in listed.difference(registry) {
        problems.push(format!(
            "{file}: a row for `{name}`, which `locksim list` does not know"
        ));
    }
    problems
}

#[test]
fn docs_designs_has_a_row_for_every_design_locksim_lists_and_none_other() {
    let mut registry: BTreeSet<String> = lock_impl::DESIGNS
        .iter()
        .map(|d| d.name.to_string())
        .collect();
    assert!(registry.len() > 20, "{registry:?}");
    // The broken catalog's designs, listed by `locksim list` under `broken/`.
    registry.extend(
        scenarios::broken::catalog()
            .iter()
            .map(|b| b.name.to_string()),
    );
    let problems = compare("docs/designs.md", &registry);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn docs_scenarios_has_a_row_for_every_scenario_locksim_lists_and_none_other() {
    let registry: BTreeSet<String> = scenarios::catalog::SCENARIOS
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert!(registry.len() > 20, "{registry:?}");
    let problems = compare("docs/scenarios.md", &registry);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every Markdown file the README links to, and every file they link to in turn.
fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    let docs = root().join("docs");
    let mut names: Vec<String> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    files.extend(names.into_iter().map(|n| format!("docs/{n}")));
    files
}

/// The links of a Markdown text: `](target)` outside code blocks, and every
/// backquoted or bare `docs/…` path anywhere.
fn links(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code {
            let mut rest = line;
            while let Some(i) = rest.find("](") {
                rest = &rest[i + 2..];
                let end = rest.find(')').unwrap_or(rest.len());
                out.push((rest[..end].to_string(), true));
                rest = &rest[end..];
            }
        }
        // Paths named in prose: `docs/x.md`, relative to the repository's root.
        let mut rest = line;
        while let Some(i) = rest.find("docs/") {
            let before = rest[..i].chars().last();
            rest = &rest[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches('.');
            if matches!(before, Some('`') | Some(' ') | Some('(') | None)
                && path.len() > "docs/".len()
                && !path.contains("://")
            {
                out.push((path.to_string(), false));
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_link_in_the_readme_and_docs_reaches_a_file() {
    let root = root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for (target, markdown) in links(&text) {
            let target = target.split('#').next().unwrap_or("").to_string();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            // A Markdown link is relative to its file; a path in prose (`docs/…`)
            // to the repository's root, whatever file names it.
            let path = if markdown {
                root.join(dir).join(&target)
            } else {
                root.join(&target)
            };
            checked += 1;
            if !path.exists() {
                broken.push(format!(
                    "{file}: {target} ({} does not exist)",
                    path.display()
                ));
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_readme_opens_with_the_fresh_machine_commands_and_stays_short() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() < 300, "README.md has {} lines", lines.len());
    let first = |needle: &str| {
        lines
            .iter()
            .position(|l| l.trim() == needle)
            .unwrap_or_else(|| panic!("README.md lacks the line `{needle}`"))
    };
    let main_job = first("cargo run --release --bin locksim");
    // The test line: what `.ci/run` reads (the line after `# the tests`) and runs as
    // written. It installs nextest where a stock toolchain lacks it.
    let tests = lines
        .iter()
        .position(|l| l.starts_with("# the tests"))
        .expect("README.md lacks the `# the tests` comment")
        + 1;
    assert_eq!(
        lines[tests],
        "(cargo nextest --version >/dev/null 2>&1 || cargo install --locked cargo-nextest) \
         && cargo nextest run --workspace && cargo test --workspace --doc"
    );
    assert!(main_job < tests && tests < 40, "{main_job}, {tests}");
    let block = &lines[..tests + 20];
    for package in [
        "redis-server",
        "redis-sentinel",
        "zookeeper",
        "mariadb-server",
        "etcd-server",
        "chromium",
        "fonts-dejavu-core",
    ] {
        assert!(
            block.iter().any(|l| l.contains(package)),
            "the fresh-machine section does not name {package}"
        );
    }
    // The build needs nothing but cargo: no protoc to install first.
    assert!(
        !block.iter().any(|l| l.contains("protobuf-compiler")),
        "the fresh-machine section asks for protoc"
    );
    let ci = read(".ci/run");
    assert!(
        ci.contains("sed -n '/^# the tests/{n;p;q}' README.md"),
        ".ci/run does not read the README's test line"
    );
    assert!(!ci.contains("protobuf-compiler"), ".ci/run installs protoc");
    let heading = |h: &str| {
        lines
            .iter()
            .position(|l| *l == h)
            .unwrap_or_else(|| panic!("README.md lacks `{h}`"))
    };
    assert!(heading("## Test your own lock") < 150);
    assert!(heading("## Gate your lock in CI") < 150);
}

/// No doc is named by when it was written (a stop number), only by its subject.
#[test]
fn no_doc_is_named_by_when_it_was_written() {
    for file in markdown_files() {
        let name = Path::new(&file)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(
            !name.contains("stop-") && !name.contains("stop_"),
            "{file} is named by when it was written, not its subject"
        );
    }
}
