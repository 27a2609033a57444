//! `sim::recorder`'s own tests (moved from the module): who holds the lock.

use sim::history::{Op, OpF, Phase};
use sim::recorder::Recorder;

#[test]
fn a_reentrant_holder_holds_until_its_outermost_release() {
    let r = Recorder::new();
    let owned = |op: &mut Op| op.owner = Some("o1".into());
    for _ in 0..3 {
        let id = r.invoke("client-1", OpF::Acquire, |_| {});
        r.complete("client-1", id, OpF::Acquire, Phase::Ok, owned);
    }
    for left in [2, 1] {
        let id = r.invoke("client-1", OpF::Release, owned);
        r.complete("client-1", id, OpF::Release, Phase::Ok, |_| {});
        assert_eq!(r.holders(), ["client-1"], "{left} holds left");
        assert_eq!(r.holder_owner("client-1").as_deref(), Some("o1"));
    }
    let id = r.invoke("client-1", OpF::Release, owned);
    r.complete("client-1", id, OpF::Release, Phase::Ok, |_| {});
    assert!(
        r.holders().is_empty(),
        "the outermost release ends the hold"
    );
}
