//! The design registry (`lock_impl::DESIGNS`): one record per design, built by its
//! record's name, no name twice, and every system's designs found by filtering it.

use std::collections::BTreeSet;
use std::sync::Arc;

use lock_impl::{
    Backend, Clock, Conn, Connector, DESIGNS, Deps, Dial, OsEntropy, ReconnectPolicy, TokioClock,
    TokioSpawner,
};

/// A connector that reaches nothing: building a design dials nothing, so the registry
/// tests need no server.
struct Nowhere;

impl Connector for Nowhere {
    fn server(&self) -> &str {
        "nowhere"
    }

    fn connect(&self) -> Dial<'_, redis::aio::MultiplexedConnection> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "nowhere",
            )))
        })
    }

    fn pubsub(&self) -> Dial<'_, redis::aio::PubSub> {
        Box::pin(async {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "nowhere",
            )))
        })
    }
}

fn deps() -> Deps {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let conn = Conn::new(Arc::new(Nowhere), clock.clone(), ReconnectPolicy::default());
    Deps::new(
        conn.clone(),
        vec![conn; lock_impl::REDLOCK_MASTERS],
        clock,
        Arc::new(OsEntropy),
        Arc::new(TokioSpawner),
    )
}

#[tokio::test]
async fn every_record_builds_a_design_that_answers_to_the_records_name() {
    for info in DESIGNS {
        let by_record = (info.build)(deps());
        assert_eq!(
            by_record.name(),
            info.name,
            "the record {} builds a design that calls itself {}",
            info.name,
            by_record.name()
        );
        let by_name = lock_impl::build(info.name, deps()).expect("a registered name");
        assert_eq!(by_name.name(), info.name, "build({:?})", info.name);
        let found = lock_impl::design(info.name).expect("a registered name");
        assert!(
            std::ptr::eq(found, info),
            "design({:?}) found another record",
            info.name
        );
    }
}

#[test]
fn no_two_records_share_a_name() {
    let mut seen = BTreeSet::new();
    for info in DESIGNS {
        assert!(seen.insert(info.name), "{} is registered twice", info.name);
    }
}

#[tokio::test]
async fn an_unknown_name_is_refused_naming_every_registered_design() {
    let err = lock_impl::build("setnx-everything", deps())
        .err()
        .expect("no such design");
    let text = err.to_string();
    assert!(text.contains("setnx-everything"), "{text}");
    for info in DESIGNS {
        assert!(
            text.contains(info.name),
            "{} not among the allowed: {text}",
            info.name
        );
    }
    let err = lock_impl::design("").expect_err("no design is called ''");
    assert!(err.to_string().contains("set-nx-px-lua"), "{err}");
}

#[test]
fn the_designs_on_each_system_are_the_records_of_that_system_in_registry_order() {
    let mut total = 0;
    for &system in Backend::ALL {
        let on: Vec<&str> = lock_impl::designs_on(system).map(|d| d.name).collect();
        let expected: Vec<&str> = DESIGNS
            .iter()
            .filter(|d| d.backend == system)
            .map(|d| d.name)
            .collect();
        assert_eq!(on, expected, "{}", system.name());
        assert!(!on.is_empty(), "no design on {}", system.name());
        total += on.len();
    }
    assert_eq!(total, DESIGNS.len(), "a record on no listed system");
}

#[test]
fn a_design_on_another_system_locks_on_no_redis_master() {
    for info in DESIGNS {
        let redis = info.backend == Backend::Redis;
        assert_eq!(
            info.masters > 0,
            redis,
            "{}: masters {} on {}",
            info.name,
            info.masters,
            info.backend.name()
        );
    }
}

#[test]
fn every_system_in_the_table_says_its_name_and_promise_and_seeds_one_of_its_own_designs() {
    assert_eq!(Backend::ALL.first(), Some(&Backend::Redis));
    for (i, &system) in Backend::ALL.iter().enumerate() {
        let info = system.info();
        assert!(!info.name.is_empty());
        assert!(
            info.promise.starts_with(&format!("{}: ", info.name)),
            "{}'s promise names it first: {}",
            info.name,
            info.promise
        );
        let seed = lock_impl::design(info.seed_design).expect("a built-in design");
        assert_eq!(seed.backend, system, "{}'s seed design", info.name);
        assert!(
            Backend::ALL[..i].iter().all(|b| b.name() != info.name),
            "{} twice",
            info.name
        );
    }
}

/// A system's handle in `Deps` is one slot keyed by its type's system: read back by its
/// type, invisible as another system's, replaced by a second of its kind.
#[test]
fn a_systems_handle_is_read_back_by_its_type_from_its_one_slot_in_deps() {
    let server = |host: &str| lock_impl::mysql::MySqlServer {
        host: host.into(),
        port: 3306,
        user: "u".into(),
        password: "p".into(),
        database: "d".into(),
        dialer: Arc::new(lock_impl::zk::TokioDialer),
        timeout_ms: 1_000,
    };
    let plain = deps();
    assert!(plain.system::<lock_impl::mysql::MySqlServer>().is_none());
    assert_eq!(plain.systems.backends().count(), 0);
    let deps = deps().with_system(server("a")).with_system(server("b"));
    let got = deps
        .system::<lock_impl::mysql::MySqlServer>()
        .expect("the MySQL slot");
    assert_eq!(
        got.host, "b",
        "a second handle of a system replaces the first"
    );
    assert!(deps.system::<lock_impl::zk::ZkEnsemble>().is_none());
    assert!(deps.system::<lock_impl::mongo::MongoServer>().is_none());
    assert_eq!(
        deps.systems.backends().collect::<Vec<_>>(),
        vec![Backend::MySql]
    );
    assert_eq!(format!("{:?}", deps.systems), r#"{"MySQL"}"#);
}

/// A design on another system, built over `Deps` without its system's handle, refuses
/// to run with an error naming that system, as before the handles shared one slot.
#[tokio::test]
async fn a_design_without_its_systems_handle_refuses_naming_the_system() {
    let options = lock_impl::AcquireOptions::new(100, 0).unwrap();
    for info in DESIGNS.iter().filter(|d| d.backend != Backend::Redis) {
        let design = (info.build)(deps());
        let outcome = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            design.acquire("k", options),
        )
        .await
        .unwrap_or_else(|_| panic!("{} waited for a server it was never given", info.name));
        let err = outcome.expect_err(info.name).to_string();
        assert!(
            err.contains(info.backend.name()) && err.contains(info.name),
            "{}: {err}",
            info.name
        );
    }
}

/// Where a system other than Redis may be named by its `Backend` variant: its own
/// modules (by these path stems, in every crate), a design's record (`backend:` in
/// `DESIGNS`) and tests. Anywhere else a match arm or a list over systems by hand is
/// a place a new system must be added to; those read the systems table
/// (`Backend::ALL`, `Backend::info`) and sim's registry instead.
const OWN_MODULES: &[(&str, &[&str])] = &[
    ("ZooKeeper", &["zk", "zookeeper"]),
    ("MySql", &["mysql", "mariadb"]),
    ("MongoDb", &["mongo"]),
    ("Etcd", &["etcd"]),
];

#[test]
fn no_source_outside_a_systems_own_modules_names_it_by_hand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for krate in ["lock-impl", "sim", "scenarios", "reports", "locksim"] {
        let mut dirs = vec![root.join(krate).join("src")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    assert!(files.len() > 50, "found the sources: {}", files.len());
    assert_eq!(
        OWN_MODULES.len() + 1,
        Backend::ALL.len(),
        "a stem per system"
    );
    let mut strays = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let stems: Vec<&str> = rel.split(['/', '.', '_', '-']).collect();
        let text = std::fs::read_to_string(path).unwrap();
        for (variant, own) in OWN_MODULES {
            if own.iter().any(|o| stems.contains(o)) {
                continue;
            }
            let needle = format!("Backend::{variant}");
            for (n, line) in text.lines().enumerate() {
                let t = line.trim_start();
                if t.contains(&needle) && !t.starts_with("backend: ") && !t.starts_with("//") {
                    strays.push(format!("{rel}:{}: {t}", n + 1));
                }
            }
        }
    }
    assert!(
        strays.is_empty(),
        "a system named by hand outside its own modules:\n{}",
        strays.join("\n")
    );
}

/// A new system's designs ask for their handle with `Deps::require`, whose error names
/// the design and the system without a variant of the system's own.
#[test]
fn requiring_a_missing_handle_names_the_design_and_the_system() {
    let err = deps()
        .require::<lock_impl::zk::ZkEnsemble>("some-design")
        .expect_err("no handle was given");
    assert!(
        matches!(
            err,
            lock_impl::LockError::NoSystem {
                design: "some-design",
                system: "ZooKeeper"
            }
        ),
        "{err:?}"
    );
    assert!(err.nothing_sent());
}

/// Every `tokio::select!` in the code that runs inside a simulation (the clients, the
/// models, the world) is `biased;`: an unbiased one picks among ready branches with
/// tokio's own thread-local random number generator, which the run's seed does not
/// set, so the same seed would not give the same history (found in the etcd client's
/// lease keeper, whose histories differed run to run).
#[test]
fn every_select_in_simulated_code_is_biased() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("lock-impl/src"), root.join("sim/src")];
    let mut unbiased = Vec::new();
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if line.contains("tokio::select! {") {
                    seen += 1;
                    if lines.get(i + 1).is_none_or(|l| l.trim() != "biased;") {
                        unbiased.push(format!("{}:{}", path.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(seen > 10, "found the selects: {seen}");
    assert!(unbiased.is_empty(), "unbiased tokio::select!: {unbiased:?}");
}

/// No server model or world code waits on a `tokio::sync::watch` channel: it spreads
/// its waiters over eight lists picked with tokio's unseeded random numbers, so
/// waiters woken together run in a different order every run (found in the etcd
/// model, whose replies after a pause came out in a different order each run). A
/// client's stop signal, with one waiter, is another matter: `lock-impl` may.
#[test]
fn no_simulated_server_waits_on_a_watch_channel() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sim/src");
    let mut dirs = vec![root];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs")
                && std::fs::read_to_string(&path)
                    .unwrap()
                    .contains("sync::watch")
            {
                found.push(path.display().to_string());
            }
        }
    }
    assert!(found.is_empty(), "tokio::sync::watch in {found:?}");
}
