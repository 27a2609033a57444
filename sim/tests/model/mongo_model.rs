//! The MongoDB designs against the replica-set model on real loopback ports (real
//! clock): the conformance bodies of `lock_impl::testing` on a set of one member and
//! on a set of three (where `w: "majority"` waits for a secondary), and the model's
//! replies to the commands the designs send.

use std::sync::Arc;
use std::time::Duration;

use lock_impl::mongo::{Document, MongoConn, MongoServer, Value, is_ok};
use lock_impl::testing::{Factory, MongoBackend, run_all};
use lock_impl::{Acquire, AcquireOptions, Release};
use sim::mongo::{spawn_tokio_set, wait_for_primary};

async fn set_of(members: usize) -> (MongoServer, Vec<sim::mongo::SharedMember>) {
    let (addrs, shared) = spawn_tokio_set(members, 50, 300, 7).await.unwrap();
    wait_for_primary(&shared, Duration::from_secs(10))
        .await
        .expect("the set elects a primary");
    let server = MongoServer {
        seeds: addrs
            .iter()
            .map(|a| (a.ip().to_string(), a.port()))
            .collect(),
        database: "locksim".into(),
        dialer: Arc::new(lock_impl::zk::TokioDialer),
        timeout_ms: 5_000,
    };
    (server, shared)
}

async fn conformance(name: &'static str, members: usize) {
    let info = lock_impl::designs_on(lock_impl::Backend::MongoDb)
        .find(|d| d.name == name)
        .expect("a MongoDB design");
    let (server, _set) = set_of(members).await;
    let backend = MongoBackend { server };
    let factory: Factory = Arc::new(move |deps| (info.build)(deps));
    run_all(&backend, &factory, info.expires, info.release_checks_owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_find_and_modify_passes_the_conformance_bodies_on_a_set_of_one() {
    conformance("mongo-find-and-modify", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_find_and_modify_majority_passes_the_conformance_bodies_on_a_set_of_three() {
    conformance("mongo-find-and-modify-majority", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_find_and_modify_fenced_passes_the_conformance_bodies_on_a_set_of_three() {
    conformance("mongo-find-and-modify-fenced", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_design_hands_out_increasing_tokens_across_releases() {
    let (server, _set) = set_of(3).await;
    let lock = lock_impl::build(
        "mongo-find-and-modify-fenced",
        lock_impl::production_mongo_deps(server),
    )
    .unwrap();
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let Acquire::Acquired(g) = lock.acquire("fenced-k", opts).await.unwrap() else {
            panic!("a free lock is granted");
        };
        tokens.push(g.token.expect("a token"));
        assert_eq!(lock.release(&g).await.unwrap(), Release::Removed);
    }
    assert_eq!(tokens, vec![1, 2, 3]);
}

/// A majority write is acknowledged only once a secondary has it: the secondaries'
/// own records hold the lock document when the primary's reply arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_write_is_on_a_secondary_when_it_is_acknowledged() {
    let (server, set) = set_of(3).await;
    let lock = lock_impl::build(
        "mongo-find-and-modify-majority",
        lock_impl::production_mongo_deps(server),
    )
    .unwrap();
    let Acquire::Acquired(g) = lock
        .acquire("maj-k", AcquireOptions::new(10_000, 0).unwrap())
        .await
        .unwrap()
    else {
        panic!("a free lock is granted");
    };
    let holding = set
        .iter()
        .filter(|m| {
            m.read(|m| {
                m.document("locksim.locks", &Value::from("maj-k"))
                    .is_some_and(|d| d.get_str("owner") == Some(g.owner.as_str()))
            })
        })
        .count();
    assert!(holding >= 2, "a majority holds the lock: {holding} of 3");
}

/// The replies the designs read, field by field, from a member that is primary and
/// from one that is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_and_not_primary_replies_have_mongods_fields() {
    let (server, set) = set_of(3).await;
    let primary = set
        .iter()
        .position(|m| m.read(|m| m.role() == sim::mongo::Role::Primary))
        .unwrap();
    let secondary = (primary + 1) % 3;
    // The secondary learns who is primary from its next heartbeat.
    for _ in 0..100 {
        if set[secondary].read(|m| m.primary() == Some(primary)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let clock: Arc<dyn lock_impl::Clock> = Arc::new(lock_impl::TokioClock::new());
    let (h, p) = &server.seeds[secondary];
    let mut conn = MongoConn::connect(server.dialer.as_ref(), h, *p, clock, 2_000)
        .await
        .unwrap();
    let hello = conn
        .command("admin", Document::new().with("hello", 1))
        .await
        .unwrap();
    assert!(is_ok(&hello));
    assert_eq!(hello.get("isWritablePrimary"), Some(&Value::Bool(false)));
    assert_eq!(hello.get_str("setName"), Some("rs0"));
    assert_eq!(hello.get_array("hosts").map(<[Value]>::len), Some(3));
    let (ph, pp) = &server.seeds[primary];
    assert_eq!(
        hello.get_str("primary"),
        Some(format!("{ph}:{pp}").as_str())
    );
    let write = conn
        .command(
            "locksim",
            Document::new().with("insert", "locks").with(
                "documents",
                vec![Value::Document(Document::new().with("_id", "x"))],
            ),
        )
        .await
        .unwrap();
    assert!(!is_ok(&write));
    assert_eq!(write.get_i64("code"), Some(10107));
    assert_eq!(write.get_str("codeName"), Some("NotWritablePrimary"));
}
