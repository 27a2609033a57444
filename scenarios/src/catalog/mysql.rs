//! MySQL's own faults: a holder's connection dropped under its `GET_LOCK`.

use sim::faults::{Fault, FaultKind, Target};
use sim::world::{MySqlSpec, Workload};

use super::{Def, Draw};
use crate::checkers::probes;

/// A world of one MySQL server (`mysql-1`, the MariaDB 10.11 model) and no Redis
/// server; a critical section lasts five leases, so a holder whose connection drops
/// keeps working long after the server released what the connection held.
fn mysql_world(base: &Workload) -> Workload {
    Workload {
        servers: Vec::new(),
        work_ms: base.lease_ms * 5,
        mysql: Some(MySqlSpec::default()),
        ..base.clone()
    }
}

pub(super) static MYSQL_CONNECTION_DROP: Def = Def {
    name: "mysql-connection-drop",
    description: "the holder's connections to the MySQL server are reset (a proxy, a firewall, a pool recycling them) four times while it works for 5 leases",
    fault_about: "the server ended the holder's connection (and with it whatever the connection held: a GET_LOCK) while the holder believed it held the lock",
    world: mysql_world,
    quantities: &[],
    plan: holder_resets,
    probe: |h, _| probes::connection_closed_during_a_hold(h),
};

/// Four resets of the holder's connections.
fn holder_resets(d: &mut Draw) -> Vec<Fault> {
    (0..4)
        .map(|_| Fault {
            at_ms: d.at(),
            kind: FaultKind::ResetConnections {
                target: Target::Holder,
            },
        })
        .collect()
}
