//! How a client's outcomes are recorded: one rule for the simulator's client and the
//! real runner's client processes, so that both histories say the same thing for the
//! same answer.

use lock_impl::{Acquire, Guard, LockError, Release};

use crate::history::Phase;

/// An acquisition's phase, guard and detail. An error after a command may have taken
/// the lock is an unknown outcome (Jepsen's `info`); only an error raised before
/// anything was sent is a `fail`.
pub fn acquired(outcome: Result<Acquire, LockError>) -> (Phase, Option<Guard>, Option<String>) {
    match outcome {
        Ok(Acquire::Acquired(g)) => (Phase::Ok, Some(g), None),
        Ok(Acquire::NotAcquired) => (Phase::Fail, None, None),
        Ok(Acquire::Unknown(why)) => (Phase::Info, None, Some(why)),
        Err(e) if e.nothing_sent() => (Phase::Fail, None, Some(e.to_string())),
        Err(e) => (Phase::Info, None, Some(e.to_string())),
    }
}

/// A release's phase and detail (`removed`, `not-found`, `held-by-other`,
/// `not-removed`, `still-held count=N`, or why it is unknown or failed).
pub fn released(outcome: Result<Release, LockError>) -> (Phase, String) {
    match outcome {
        Ok(Release::Removed) => (Phase::Ok, "removed".to_string()),
        Ok(Release::NotFound) => (Phase::Fail, "not-found".into()),
        Ok(Release::HeldByOther) => (Phase::Fail, "held-by-other".into()),
        Ok(Release::NotRemoved) => (Phase::Fail, "not-removed".into()),
        Ok(Release::StillHeld { count }) => (Phase::Ok, format!("still-held count={count}")),
        Ok(Release::Unknown(why)) => (Phase::Info, why),
        Err(e) => (Phase::Fail, e.to_string()),
    }
}
