//! The tests of `lock-impl/src/designs/zk_curator.rs` (once its `#[cfg(test)]` module).

use lock_impl::designs::ZkCurator;
use lock_impl::designs::internals::{fix_for_sorting, zk_curator_handle, zk_curator_retrying};
use lock_impl::zk::internals::{Scripted, Step};
use lock_impl::zk::*;
use lock_impl::{SeededEntropy, TimeScale, TokioClock, TokioSpawner};
use std::sync::Arc;
use std::time::Duration;

fn curator(dialer: Arc<Scripted>, scale: TimeScale) -> ZkCurator {
    let mut deps = lock_impl::zookeeper_deps(
        ZkEnsemble {
            servers: vec![("zk-1".into(), 2181)],
            dialer,
            session_timeout_ms: 400,
            scale: TimeScale::REAL,
        },
        Arc::new(TokioClock::new()),
        Arc::new(SeededEntropy::new(3, "client")),
        Arc::new(TokioSpawner),
    );
    deps.scale = scale;
    ZkCurator::new(deps)
}

#[tokio::test]
async fn a_session_timeout_spent_disconnected_expires_the_handle_and_starts_a_new_session() {
    // Connected (session 7, 400 ms), then every server hangs: ConnectionStateManager
    // injects an expiry 400 ms after the disconnect, and ConnectionState.reset
    // dials with a new session (id 0) instead of the old one.
    let steps = std::iter::once((None, Step::Drop))
        .chain((0..8).map(|_| (None, Step::Hang)))
        .collect();
    let dialer = Scripted::new(steps);
    let design = curator(dialer.clone(), TimeScale::for_lease(200));
    let first = zk_curator_handle(&design).unwrap();
    crate::zk_client::connected_then_lost(&first).await;
    let lost = dialer.dials()[0].at;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(first.state(), SessionState::Expired);
    let dials = dialer.dials();
    let renewed: Vec<Duration> = dials
        .iter()
        .skip(1)
        .filter(|d| d.request.as_ref().is_some_and(|r| r.session_id == 0))
        .map(|d| d.at)
        .collect();
    let first_new = *renewed
        .first()
        .unwrap_or_else(|| panic!("no new session dialled: {dials:?}"));
    assert!(
        first_new >= lost + Duration::from_millis(400)
            && first_new < lost + Duration::from_millis(1_000),
        "the new session was dialled at {first_new:?}; the connection was lost at about {lost:?}"
    );
}

#[tokio::test]
async fn the_retry_loop_waits_for_a_connection_then_retries_at_the_worlds_scale() {
    // Nothing answers: callWithRetry waits the connection timeout (15 s real, 100 ms
    // at the catalog's 1/150), then tries four times (each queued until its
    // connect attempt times out, 400 ms) with backoffs of up to 1, 3 and 7 bases
    // (6 ms each here) between them.
    for (scale, least, most) in [(TimeScale::for_lease(200), 100, 100 + 4 * 450 + 11 * 6 + 200)] {
        let dialer = Scripted::new((0..40).map(|_| (None, Step::Hang)).collect());
        let design = curator(dialer, scale);
        let start = tokio::time::Instant::now();
        let r = zk_curator_retrying(&design, |c| async move { c.exists("/x").await }).await;
        let took = (tokio::time::Instant::now() - start).as_millis() as u64;
        assert!(matches!(r, Err(ZkError::ConnectionLoss { .. })), "{r:?}");
        assert!(
            (least..=most).contains(&took),
            "{}: gave up after {took} ms, expected {least}..={most}",
            scale.describe()
        );
    }
}

#[test]
fn children_sort_by_their_sequence_not_their_uuid() {
    let mut v = vec![
        "_c_ffff-lock-0000000002".to_string(),
        "_c_0000-lock-0000000010".to_string(),
        "_c_8888-lock-0000000001".to_string(),
    ];
    v.sort_by(|a, b| fix_for_sorting(a).cmp(fix_for_sorting(b)));
    assert_eq!(
        v,
        [
            "_c_8888-lock-0000000001",
            "_c_ffff-lock-0000000002",
            "_c_0000-lock-0000000010"
        ]
    );
}
