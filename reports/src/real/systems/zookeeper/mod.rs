//! ZooKeeper in a real run: Debian's `zookeeper`, one standalone server or an
//! ensemble. Only the clients' links go through the fault proxy; the ensemble's own
//! links (quorum and election ports) do not, so a partition between its servers, or a
//! machine crash of one, is refused. Its record is read off the servers' logs and
//! four-letter words ([`record`]).

mod record;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_impl::Backend;
use lock_impl::testing::servers as launch;
use lock_impl::testing::{ZkEnsembleServers, ZkOptions, ZkServer};
use sim::faults::{FaultKind, FaultPlan, Target};
use sim::history::Event;
use sim::world::Workload;

use crate::real::system::{
    ClientCtx, DepsFuture, RealServers, RealSystem, Sink, StartCtx, Started, Watcher,
};

/// ZooKeeper.
pub(crate) struct ZooKeeper;

impl RealSystem for ZooKeeper {
    fn backend(&self) -> Backend {
        Backend::ZooKeeper
    }

    fn refuses_plan(&self, _design: &str, w: &Workload, plan: &FaultPlan) -> Vec<String> {
        let Some(spec) = &w.systems.zookeeper else {
            return Vec::new();
        };
        let mut why = Vec::new();
        let owner_faults = plan.faults.iter().any(|f| {
            f.kind
                .targets()
                .into_iter()
                .any(|t| matches!(t, Target::LockOwner))
        });
        if owner_faults {
            why.push(
                "target LockOwner reads the lock's value off a Redis server or a MariaDB row; \
                 a ZooKeeper node is not mapped to its client yet"
                    .into(),
            );
        }
        // The proxy carries the clients' links; an ensemble's own links (quorum and
        // election ports) do not go through it.
        if spec.names().len() > 1 {
            let zk = |t: &Target| match t {
                Target::Host(h) => h.starts_with("zk"),
                Target::Leader
                | Target::BusiestFollower
                | Target::LeaderAfterLockCreate { .. }
                | Target::AllServers
                | Target::LockServer
                | Target::Rest => true,
                _ => false,
            };
            if plan.faults.iter().any(|f| match &f.kind {
                FaultKind::Partition { a, b, .. } => a.iter().any(zk) && b.iter().any(zk),
                // A dead machine must drop its links to the other servers too.
                FaultKind::MachineCrash { target, .. } => zk(target),
                _ => false,
            }) {
                why.push(
                    "a partition between ZooKeeper servers, or a machine crash of one, needs \
                     the ensemble's own links behind the proxy (quorum and election ports), \
                     not made real yet"
                        .into(),
                );
            }
        }
        why
    }

    fn start(&self, w: &Workload, _ctx: &StartCtx) -> Result<Started, String> {
        let spec = w
            .systems
            .zookeeper
            .as_ref()
            .ok_or("a ZooKeeper world without its spec")?;
        let opts = ZkOptions {
            tick_time_ms: spec.tick_time_ms,
            extra_config: Vec::new(),
        };
        let names = spec.names();
        let mut addrs = BTreeMap::new();
        let servers = if names.len() == 1 {
            let server = ZkServer::start_with(&opts).map_err(|e| e.to_string())?;
            addrs.insert(names[0].clone(), server.addr());
            Zk::Standalone(names[0].clone(), server)
        } else {
            let mut ensemble =
                ZkEnsembleServers::start_with(names.len(), &opts).map_err(|e| e.to_string())?;
            ensemble
                .wait_serving(Duration::from_secs(30))
                .map_err(|e| e.to_string())?;
            for (n, a) in names.iter().zip(ensemble.addrs()) {
                addrs.insert(n.clone(), a);
            }
            Zk::Ensemble(names, ensemble)
        };
        Ok(Started {
            servers: Box::new(ZkServers {
                zk: servers,
                expiries: Arc::new(Mutex::new(Vec::new())),
            }),
            addrs,
            net: None,
            precut_ids: Vec::new(),
        })
    }

    fn client_deps<'a>(&'a self, w: &'a Workload, ctx: ClientCtx<'a>) -> DepsFuture<'a> {
        Box::pin(async move {
            let zk = w
                .systems
                .zookeeper
                .as_ref()
                .ok_or("a ZooKeeper world without its spec")?;
            let servers = zk
                .names()
                .iter()
                .map(|n| ctx.addr(n).map(|a| (a.ip().to_string(), a.port())))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(lock_impl::zookeeper_deps(
                lock_impl::zk::ZkEnsemble {
                    servers,
                    dialer: Arc::new(lock_impl::zk::TokioDialer),
                    session_timeout_ms: zk.session_timeout_ms,
                    scale: ctx.scale,
                },
                ctx.clock,
                ctx.entropy,
                ctx.spawner,
            ))
        })
    }
}

/// A standalone server or an ensemble, by world name.
enum Zk {
    Standalone(String, ZkServer),
    Ensemble(Vec<String>, ZkEnsembleServers),
}

/// A world's ZooKeeper servers.
struct ZkServers {
    zk: Zk,
    /// The session expiries its watcher read.
    expiries: record::Expiries,
}

impl ZkServers {
    /// Every server by world name, with its client address and its log.
    fn servers(&self) -> Vec<(String, std::net::SocketAddr, PathBuf)> {
        match &self.zk {
            Zk::Standalone(n, z) => vec![(n.clone(), z.addr(), z.log_path().to_path_buf())],
            Zk::Ensemble(names, e) => names
                .iter()
                .zip(e.members())
                .map(|(n, m)| (n.clone(), m.addr(), m.log_path().to_path_buf()))
                .collect(),
        }
    }

    /// Server `name`, if it is one.
    fn server_mut(&mut self, name: &str) -> Option<&mut ZkServer> {
        match &mut self.zk {
            Zk::Standalone(n, z) => (n == name).then_some(z),
            Zk::Ensemble(names, e) => {
                let i = names.iter().position(|n| n == name)?;
                Some(e.member_mut(i))
            }
        }
    }

    /// A server's last zxid by its own `srvr` answer.
    fn zxid(&self, name: &str) -> Option<u64> {
        let (_, addr, _) = self.servers().into_iter().find(|(n, _, _)| n == name)?;
        let reply = launch::four_letter_word(addr, "srvr")?;
        let z = reply
            .lines()
            .find_map(|l| l.strip_prefix("Zxid:"))?
            .trim()
            .trim_start_matches("0x");
        u64::from_str_radix(z, 16).ok()
    }
}

impl RealServers for ZkServers {
    fn lock_servers(&self) -> Vec<String> {
        match &self.zk {
            Zk::Standalone(n, _) => vec![n.clone()],
            Zk::Ensemble(names, _) => names.clone(),
        }
    }

    fn pid(&self, name: &str) -> Option<u32> {
        match &self.zk {
            Zk::Standalone(n, z) => (n == name).then(|| z.pid()),
            Zk::Ensemble(names, e) => {
                let i = names.iter().position(|n| n == name)?;
                Some(e.members()[i].pid())
            }
        }
    }

    fn kill(&mut self, name: &str) -> bool {
        self.server_mut(name).map(ZkServer::kill).is_some()
    }

    fn restart(&mut self, name: &str) -> Option<Result<(), String>> {
        Some(self.server_mut(name)?.restart().map_err(|e| e.to_string()))
    }

    /// An ensemble's leader; a standalone server itself.
    fn lock_server(&self, _key: &str) -> Option<String> {
        match &self.zk {
            Zk::Standalone(n, _) => Some(n.clone()),
            Zk::Ensemble(..) => self.leader(),
        }
    }

    fn logs(&self) -> Vec<(String, PathBuf)> {
        self.servers()
            .into_iter()
            .map(|(n, _, log)| (n, log))
            .collect()
    }

    fn leader(&self) -> Option<String> {
        let Zk::Ensemble(names, e) = &self.zk else {
            return None;
        };
        e.leader().map(|i| names[i].clone())
    }

    /// The leader's last zxid: past its value at an acquire, the lock node's create
    /// (the acquire's first write) is committed.
    fn leader_commit(&self) -> Option<(String, u64, String)> {
        let leader = self.leader()?;
        let z = self.zxid(&leader)?;
        Some((
            leader,
            z,
            format!("a lock node's create committed at zxid 0x{z:x}"),
        ))
    }

    /// An ensemble's roles are asked on their own thread, which never waits for the
    /// servers' lock: a member's restart holds it while its JVM starts (seconds on a
    /// loaded machine), and the roles elected meanwhile are what a leader crash's
    /// probe reads. Its sessions' expiries are read on another.
    fn watchers(&self, _key: &str) -> Vec<Watcher> {
        let servers = self.servers();
        let mut out: Vec<Watcher> = Vec::new();
        if let Zk::Ensemble(..) = &self.zk {
            let members: Vec<(String, std::net::SocketAddr)> =
                servers.iter().map(|(n, a, _)| (n.clone(), *a)).collect();
            out.push(Box::new(move |sink: &dyn Sink| {
                record::watch_roles(sink, &members);
            }));
        }
        let expiries = self.expiries.clone();
        out.push(Box::new(move |sink: &dyn Sink| {
            record::watch_sessions(sink, &servers, &expiries);
        }));
        out
    }

    fn finish(&self, events: &mut Vec<Event>) {
        record::record_expiries(&self.expiries, events);
    }
}
