//! The world's step, a floor below the world and the models that time their work by
//! it (etcd's raft ticks): simulated time advances by it, and a host is woken at the
//! first step at or after what it waits for.

use std::time::Duration;

/// The world's step.
pub const STEP: Duration = Duration::from_millis(1);
