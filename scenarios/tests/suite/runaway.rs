//! A run that never finishes ends as Unknown with its reason, never as a hang and
//! never as Valid. (Its own test binary: the abandoned run's thread spins until the
//! process exits.)

use std::sync::Arc;
use std::time::Duration;

use lock_impl::{Acquire, AcquireOptions, Guard, LockDesign, LockError, Release};
use scenarios::catalog::find;
use scenarios::sweep::{DesignSpec, run_seed_within};

/// A user's design with a bug that spins without ever awaiting.
struct Spinner;

#[async_trait::async_trait]
impl LockDesign for Spinner {
    fn name(&self) -> &str {
        "spinner"
    }

    async fn acquire(&self, _key: &str, _options: AcquireOptions) -> Result<Acquire, LockError> {
        loop {
            std::hint::spin_loop();
        }
    }

    async fn release(&self, _guard: &Guard) -> Result<Release, LockError> {
        Ok(Release::NotFound)
    }
}

#[test]
fn a_design_that_spins_forever_gives_unknown_verdicts_with_the_reason() {
    let design = DesignSpec {
        name: "spinner".into(),
        factory: Arc::new(|_deps| Arc::new(Spinner) as Arc<dyn LockDesign>),
        masters: 1,
        backend: lock_impl::Backend::Redis,
    };
    let scenario = find("no-faults").expect("catalog");
    let summary = run_seed_within(&design, &scenario, 0, false, Duration::from_secs(2))
        .expect("a runaway run is a verdict, not an error");
    assert!(!summary.verdicts.is_empty());
    for (checker, verdict) in &summary.verdicts {
        match verdict {
            scenarios::checkers::Verdict::Unknown { reason } => assert!(
                reason.contains("wall-clock budget"),
                "{checker}: the reason must say which budget: {reason}"
            ),
            other => panic!("{checker} judged a run that never finished: {other:?}"),
        }
    }
}
