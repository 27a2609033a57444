//! The tests of `lock-impl/src/zk/client/mod.rs` (once its `#[cfg(test)]` module).

use lock_impl::zk::internals::*;
use lock_impl::zk::proto::Stat;
use lock_impl::zk::*;
use lock_impl::{SeededEntropy, TimeScale, TokioClock};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

fn ensemble(dialer: Arc<Scripted>, scale: TimeScale) -> ZkEnsemble {
    ZkEnsemble {
        servers: vec![("zk-1".into(), 2181)],
        dialer,
        session_timeout_ms: 400,
        scale,
    }
}

fn start(dialer: &Arc<Scripted>, scale: TimeScale) -> ZkClient {
    ZkClient::start(
        &ensemble(dialer.clone(), scale),
        Arc::new(TokioClock::new()),
        Arc::new(SeededEntropy::new(1, "client")),
    )
}

/// Waits until the session was connected and then lost its connection (also Curator's
/// tests, `zk_curator.rs`).
pub(crate) async fn connected_then_lost(c: &ZkClient) {
    let mut changes = c.state_changes();
    let mut seen = false;
    loop {
        match &*changes.borrow_and_update() {
            SessionState::Connected { .. } => seen = true,
            SessionState::Connecting if seen => return,
            _ => {}
        }
        changes.changed().await.expect("driver alive");
    }
}

/// A request made while reconnecting, answered once the gated dial is let through.
async fn queued_request(then: Step) -> Result<Option<Stat>, ZkError> {
    let (open, gate) = oneshot::channel();
    let dialer = Scripted::new(vec![
        (None, Step::Drop),
        (Some(gate), then),
        (None, Step::Serve),
    ]);
    // The catalog's scale: the reconnect pauses last a few ms.
    let c = start(&dialer, TimeScale::for_lease(200));
    connected_then_lost(&c).await;
    let c2 = c.clone();
    let req = tokio::spawn(async move { c2.exists("/x").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !req.is_finished(),
        "a request made while reconnecting waits in the outgoing queue, got {:?}",
        req.await
    );
    let _ = open.send(());
    req.await.unwrap()
}

#[tokio::test]
async fn a_request_made_while_reconnecting_goes_out_on_the_next_connection() {
    assert_eq!(queued_request(Step::Serve).await, Ok(None));
}

#[tokio::test]
async fn a_request_queued_while_reconnecting_fails_as_session_expired_when_the_server_says_so() {
    assert_eq!(
        queued_request(Step::Expired).await,
        Err(ZkError::SessionExpired)
    );
}

#[tokio::test]
async fn a_request_queued_while_a_connect_attempt_fails_is_a_connection_loss_never_sent() {
    let r = queued_request(Step::Refuse).await;
    assert!(
        matches!(r, Err(ZkError::ConnectionLoss { sent: false, .. })),
        "{r:?}"
    );
}

#[tokio::test]
async fn reconnect_pauses_follow_the_worlds_scale() {
    // One server: the reconnect comes back to the last connected server, so it
    // pauses for the list turn (1 s real) and the jitter (below 1 s real).
    for (scale, least, most) in [
        (TimeScale::REAL, 1_000, 2_000),
        (TimeScale::for_lease(200), 6, 12),
    ] {
        let dialer = Scripted::new(vec![(None, Step::Drop), (None, Step::Serve)]);
        let c = start(&dialer, scale);
        connected_then_lost(&c).await;
        let lost = tokio::time::Instant::now();
        while dialer.dials().len() < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let gap = (tokio::time::Instant::now() - lost).as_millis() as u64;
        // Real time on a busy machine: a little late is fine, early is not.
        assert!(
            (least..=most + 60).contains(&gap),
            "{}: reconnected {gap} ms after the loss, expected {least}..={most}",
            scale.describe()
        );
    }
}

#[tokio::test]
async fn an_injected_expiry_ends_the_session_and_fails_queued_requests_as_expired() {
    let dialer = Scripted::new(vec![(None, Step::Drop), (None, Step::Hang)]);
    let c = start(&dialer, TimeScale::for_lease(200));
    connected_then_lost(&c).await;
    let c2 = c.clone();
    let req = tokio::spawn(async move { c2.exists("/x").await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    c.inject_session_expiration();
    assert_eq!(req.await.unwrap(), Err(ZkError::SessionExpired));
    assert_eq!(c.state(), SessionState::Expired);
    assert_eq!(c.exists("/x").await, Err(ZkError::SessionExpired));
}

#[test]
fn pings_follow_client_cnxn_arithmetic() {
    // 30 s session: read timeout 20 s, ping after 9 s of idle send.
    assert_eq!(ping_after_ms(20_000), 9_000);
    // 4 s session (2 × tickTime 2000): read timeout 2666 ms, ping after 1001 ms.
    assert_eq!(ping_after_ms(2_666), 1_001);
    assert_eq!(ping_after_ms(1_000), 500);
}
