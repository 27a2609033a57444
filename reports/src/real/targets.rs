//! Where a fault lands in a real run: the moment a waiting target waits for, by the
//! servers' own answers and the history, and the hosts a target names then, each asked
//! of the servers by role (the server holding the lock, the lock's owner, the leader).

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use sim::faults::{FaultKind, Target};
use sim::history::EventKind;

use super::{Moment, Run};

impl Run {
    /// Waits for the moment `kind`'s target waits for, if any (`None`: its wait ran
    /// out, the fault is a no-op), by the servers' own answers and the history, polled
    /// every millisecond.
    pub(super) fn moment(&self, kind: &FaultKind) -> Option<Moment> {
        let waiting = kind.targets().into_iter().find_map(|t| match t {
            Target::UnreplicatedLockMaster { within_ms }
            | Target::FreshLockMaster { within_ms }
            | Target::LockServerOf { within_ms, .. }
            | Target::LeaderAfterLockCreate { within_ms } => Some((t.clone(), *within_ms)),
            _ => None,
        });
        let Some((target, within_ms)) = waiting else {
            return Some(Moment::default());
        };
        let key = self.cfg.workload.key.clone();
        let deadline = self.now_us() + within_ms * 1000;
        let (grants0, acquires0) = (
            self.grants.load(Ordering::Relaxed),
            self.acquires.load(Ordering::Relaxed),
        );
        let mut zxid0: Option<(String, u64)> = None;
        while self.now_us() <= deadline && !self.over.load(Ordering::Relaxed) {
            let found = match &target {
                Target::UnreplicatedLockMaster { .. } => self
                    .servers
                    .lock()
                    .expect("servers")
                    .unreplicated_lock_master(&key)
                    .map(|(host, detail)| Moment {
                        host: Some(host),
                        detail,
                    }),
                Target::FreshLockMaster { .. } if self.grants.load(Ordering::Relaxed) > grants0 => {
                    let servers = self.servers.lock().expect("servers");
                    self.recorder.holders().into_iter().find_map(|c| {
                        let owner = self.recorder.holder_owner(&c)?;
                        let m = servers.lock_master(&key)?;
                        servers
                            .server_holding(&key, &owner)
                            .filter(|s| *s == m)
                            .map(|m| Moment {
                                host: Some(m),
                                detail: format!("a fresh grant to {c}, owner={owner}"),
                            })
                    })
                }
                Target::LockServerOf { client, .. } => {
                    self.recorder.holder_owner(client).and_then(|owner| {
                        let server = self
                            .servers
                            .lock()
                            .expect("servers")
                            .server_holding(&key, &owner)?;
                        Some(Moment {
                            host: Some(server),
                            detail: format!("{client} holds the lock, owner={owner}"),
                        })
                    })
                }
                Target::LeaderAfterLockCreate { .. }
                    if self.acquires.load(Ordering::Relaxed) > acquires0 =>
                {
                    // The leader's last committed write moves past its mark at the
                    // acquire: the lock's first write is committed.
                    let servers = self.servers.lock().expect("servers");
                    servers
                        .leader_commit()
                        .and_then(|(leader, z, detail)| match &zxid0 {
                            None => {
                                zxid0 = Some((leader, z));
                                None
                            }
                            Some((l, z0)) if *l == leader && z > *z0 => Some(Moment {
                                detail,
                                host: Some(leader),
                            }),
                            Some(_) => None,
                        })
                }
                _ => None,
            };
            if let Some(m) = found {
                return Some(Moment {
                    detail: format!(" ({})", m.detail),
                    ..m
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// The hosts `target` names now.
    pub(super) fn resolve(
        &self,
        target: &Target,
        rng: &mut ChaCha8Rng,
        moment: &Moment,
    ) -> Vec<String> {
        let mut pick = |c: Vec<String>| {
            if c.is_empty() {
                Vec::new()
            } else {
                vec![c[rng.random_range(0..c.len())].clone()]
            }
        };
        if *target == Target::Holder {
            return pick(self.next_holders());
        }
        let servers = self.servers.lock().expect("servers");
        match target {
            Target::Host(h) => {
                let known = self.clients.lock().expect("clients").contains_key(h)
                    || servers.names().contains(h);
                if known { vec![h.clone()] } else { Vec::new() }
            }
            Target::Acquirer => pick(self.recorder.acquirers()),
            Target::AllClients => self
                .clients
                .lock()
                .expect("clients")
                .keys()
                .cloned()
                .collect(),
            Target::AllServers => servers.lock_servers.clone(),
            Target::LockServer => servers
                .lock_server(&self.cfg.workload.key)
                .into_iter()
                .collect(),
            Target::LockOwner => {
                // A system whose answer is the server's record of the lock at this
                // moment (a lock row's owner) records it: what the crash probes read.
                let owner = servers.lock_owner(&self.cfg.workload.key);
                if let Some((host, event)) = owner.record {
                    self.recorder
                        .record_at(self.now_us(), &host, EventKind::Server(event));
                }
                let live = |c: &String| self.clients.lock().expect("clients").contains_key(c);
                // A foreign client's value that names no client: the client it was
                // granted to (a built-in client's names it, or the system says whose).
                let foreign = matches!(self.exe, super::Clients::Foreign(_));
                let granted = || {
                    if !foreign {
                        return None;
                    }
                    let key = &self.cfg.workload.key;
                    let owners = self.owners.lock().expect("owners");
                    servers
                        .lock_servers
                        .iter()
                        .filter_map(|s| servers.value_of(s, key))
                        .find_map(|v| owners.get(&v).cloned())
                };
                owner
                    .client
                    .or_else(granted)
                    .filter(live)
                    .into_iter()
                    .collect()
            }
            Target::Leader => servers.leader().into_iter().collect(),
            Target::UnreplicatedLockMaster { .. }
            | Target::FreshLockMaster { .. }
            | Target::LockServerOf { .. }
            | Target::LeaderAfterLockCreate { .. } => moment.host.iter().cloned().collect(),
            Target::Rest => {
                // The clients, the lock servers, then the helpers.
                let mut all: Vec<String> = self
                    .clients
                    .lock()
                    .expect("clients")
                    .keys()
                    .cloned()
                    .collect();
                all.extend(servers.names());
                all
            }
            _ => Vec::new(),
        }
    }

    /// The clients that hold the lock now or, if none does, the first to hold it within a
    /// lease and before the workload ends (polled every millisecond; nothing after that
    /// end is part of the run): a fault aimed at the holder that comes between
    /// two holds waits for the next grant. In the simulator that gap is a round trip,
    /// and a fault at a seed-drawn time nearly always finds a holder; here it is the
    /// clients' and the runner's own latency, which a loaded machine stretches to many
    /// milliseconds. Beside the simulation suite, a `gc-pause` run's first pause found
    /// no holder and its three others all stopped the one holder whose release was
    /// already on its way: no stale write, where the simulator's same seed had one.
    fn next_holders(&self) -> Vec<String> {
        let w = &self.cfg.workload;
        let deadline = (self.now_us() + w.lease_ms * 1000).min((w.duration_ms + w.drain_ms) * 1000);
        loop {
            let holders = self.recorder.holders();
            if !holders.is_empty() || self.now_us() > deadline || self.over.load(Ordering::Relaxed)
            {
                return holders;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// One side of a partition: the hosts its targets name, sorted, once each.
    pub(super) fn side(
        &self,
        targets: &[Target],
        rng: &mut ChaCha8Rng,
        moment: &Moment,
    ) -> Vec<String> {
        let mut hosts: Vec<String> = targets
            .iter()
            .flat_map(|t| self.resolve(t, rng, moment))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }
}
