//! Connection resets: a client's connections to the lock servers are cut by a reset.

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Resets every connection between each host `target` names and the lock servers.
pub(super) fn start(cx: &mut Cx, target: &Target) {
    let servers = cx.world.server_names();
    for host in cx.resolve(target) {
        let n = cx.world.net.reset_between(&host, &servers);
        cx.record(
            &host,
            FaultPhase::Start,
            format!(
                "{host}'s connections to {} reset ({n} connection ends)",
                servers.join(", ")
            ),
        );
    }
}
