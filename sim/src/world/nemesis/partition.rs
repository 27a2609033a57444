//! Partitions: messages between two sides of hosts held (one way or both) until the
//! network heals, then delivered in order.

use crate::faults::Target;
use crate::history::FaultPhase;

use super::cx::Cx;

/// Cuts the hosts `a` names off from those `b` names (`Rest`: every host not on the
/// other side) for `duration_ms`; a no-op if either side is empty.
pub(super) fn start(cx: &mut Cx, a: &[Target], b: &[Target], one_way: bool, duration_ms: u64) {
    let side = |cx: &mut Cx, targets: &[Target]| {
        let mut hosts: Vec<String> = targets.iter().flat_map(|t| cx.resolve(t)).collect();
        hosts.sort();
        hosts.dedup();
        hosts
    };
    let mut side_a = side(cx, a);
    let mut side_b = side(cx, b);
    crate::faults::disjoint_sides(a, &mut side_a, &mut side_b);
    if side_a.is_empty() || side_b.is_empty() {
        return;
    }
    cx.world.net.hold(cx.fault, &side_a, &side_b);
    if !one_way {
        cx.world.net.hold(cx.fault, &side_b, &side_a);
    }
    let arrow = if one_way { "->" } else { "<->" };
    let detail = format!("[{}] {arrow} [{}]", side_a.join(", "), side_b.join(", "));
    // Recorded on every host of side `a`: the side a fault is aimed at (the holder cut
    // off from the servers).
    for host in &side_a {
        cx.record_cut(
            host,
            FaultPhase::Start,
            format!("partition {detail} for {duration_ms} ms{}", cx.moment),
            side_b.clone(),
        );
    }
    cx.end_after(duration_ms, move |cx| {
        cx.world.net.release(cx.fault);
        for host in &side_a {
            cx.record(host, FaultPhase::End, format!("partition heals: {detail}"));
        }
    });
}
