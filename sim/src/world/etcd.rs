//! The world's etcd member: one host running the model of `crate::etcd` (its gRPC
//! services on every accepted connection, wrapped by the link-fault registry as a
//! Redis server's are, and its lessor), under its pause gate and on its clock; what it
//! keeps across a crash; and the observation that moves its record into the history.
//!
//! The record, in the terms every checker reads: the lock is the key under
//! `<key>/` with the lowest create revision (`concurrency.Mutex`'s owner; the
//! `v3lock` service's too); its value is that etcd key (`<key>/<lease in hex>`, the
//! design's owner value). `Written` by the client host whose put created it when it
//! becomes the lowest; `Removed` when it goes: `command` by the client whose delete
//! (or lease revoke) removed it, `expired` (by `expiry`) when the lessor revoked its
//! lease after the TTL ran out on the member's clock.
//!
//! A crash keeps the key space and the leases (etcd syncs its WAL before it answers);
//! the restarted member's lessor gives every lease a full TTL again from its start,
//! as a new leader's `Promote` does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::SimClock;
use crate::etcd::{Change, DeleteCause, ETCD_PORT, EtcdMember, LocalExec, SharedEtcd, Store};
use crate::history::{EventKind, ServerEvent};
use crate::pause::PauseGate;
use crate::recorder::Recorder;
use crate::system::Capability;

use super::system::{Build, LockSystem, SystemInfo, SystemSpec};
use serde::{Deserialize, Serialize};

/// The world's etcd (the v3.4 model of `crate::etcd`): one member, at real time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// The member's host name (`etcd-1`).
    pub name: String,
    /// The lessor's minimum TTL, seconds: 2, etcd's at its default election timeout
    /// (1 s: `ceil(1.5 × 1 s)`).
    pub min_lease_ttl_s: i64,
    /// How long etcd's second is in this world, µs: 1,000,000 at real time; a world
    /// that shrinks the lease shrinks it alike (`EtcdSpec::for_lease`), so lease TTLs,
    /// the lessor's half-second pass and the client's constants keep their proportions
    /// (`lock_impl::scale::ETCD_SECOND`).
    pub second_us: u64,
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            name: "etcd-1".into(),
            min_lease_ttl_s: crate::etcd::MIN_LEASE_TTL,
            second_us: 1_000_000,
        }
    }
}

impl EtcdSpec {
    /// The member of a world whose lease is `lease_ms`: etcd's second at that world's
    /// scale (`lock_impl::TimeScale::for_lease`).
    pub fn for_lease(lease_ms: u64) -> EtcdSpec {
        let second = lock_impl::TimeScale::for_lease(lease_ms).exact(
            std::time::Duration::from_millis(lock_impl::scale::ETCD_SECOND.real_ms),
        );
        EtcdSpec {
            second_us: second.as_micros().max(1) as u64,
            ..EtcdSpec::default()
        }
    }
}

/// What an etcd world has (see [`crate::system`]): a member that pauses, crashes and
/// restarts, serving from the run's start.
pub const ETCD_CAPABILITIES: &[Capability] = &[Capability::LockServer, Capability::ServingAtStart];

/// The member's host and what the observer has seen.
pub(crate) struct EtcdCtl {
    name: String,
    /// The running member (the last one, after a crash: its store is what the restart
    /// reads back).
    slot: Arc<Mutex<Option<SharedEtcd>>>,
    gate: PauseGate,
    /// The prefix of the lock's keys (`<key>/`) and the key as the history names it.
    prefix: String,
    key: String,
    /// Every live key under the prefix: its create revision and its writer host.
    keys: BTreeMap<String, (i64, String)>,
    /// The lock's holder by the record: (etcd key, writer host).
    holder: Option<(String, String)>,
}

impl EtcdCtl {
    fn new(spec: &EtcdSpec, key: &str) -> Self {
        EtcdCtl {
            name: spec.name.clone(),
            slot: Arc::default(),
            gate: PauseGate::new(),
            prefix: format!("{key}/"),
            key: key.to_string(),
            keys: BTreeMap::new(),
            holder: None,
        }
    }

    fn member(&self) -> Option<SharedEtcd> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn add_host(&self, b: &mut Build<'_, '_>, spec: &EtcdSpec) {
        let clock = (b.clock_of)(&self.name, b.server_clock);
        let (slot, net, name, gate) = (
            self.slot.clone(),
            b.net.clone(),
            self.name.clone(),
            self.gate.clone(),
        );
        let min_ttl = spec.min_lease_ttl_s;
        let second = Duration::from_micros(spec.second_us);
        b.sim.host(self.name.as_str(), move || {
            let (slot, net, name, gate, clock) = (
                slot.clone(),
                net.clone(),
                name.clone(),
                gate.clone(),
                clock.clone(),
            );
            gate.clone().wrap(async move {
                let clock: Arc<dyn lock_impl::Clock> = Arc::new(SimClock::new(clock));
                // What the member had on disk: its whole store; a first start has an
                // empty one.
                let store = slot
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|m| m.with(|s| s.clone()));
                let store = match store {
                    Some(mut s) => {
                        s.promote(clock.now());
                        s
                    }
                    None => Store::new(0x8e9e_05c5_2164_694d, min_ttl, second),
                };
                let member = EtcdMember::new(store, clock);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(member.clone());
                let g = gate.clone();
                let exec = LocalExec(std::rc::Rc::new(move |fut| {
                    tokio::task::spawn_local(g.wrap(fut));
                }));
                tokio::task::spawn_local(gate.wrap(member.clone().run_lessor()));
                let routes = crate::etcd::router(&member);
                let listener =
                    turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, ETCD_PORT))
                        .await?;
                loop {
                    let Ok((stream, addr)) = listener.accept().await else {
                        continue;
                    };
                    let peer =
                        turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
                    let stream = net.wrap(stream, &name, &peer);
                    tokio::task::spawn_local(gate.wrap(crate::etcd::serve_connection(
                        stream,
                        peer,
                        routes.clone(),
                        exec.clone(),
                    )));
                }
            })
        });
    }

    /// Moves the member's changes into the history at `now`.
    fn drain_changes(&mut self, recorder: &Recorder, now: Duration) {
        let Some(member) = self.member() else {
            return;
        };
        let at = now.as_micros() as u64;
        for change in member.with(|s| s.take_changes()) {
            match change {
                Change::Put {
                    key,
                    create_revision,
                    by,
                    ..
                } if key.starts_with(&self.prefix) => {
                    self.keys.entry(key).or_insert((create_revision, by));
                    self.update_holder(recorder, at, "command", "");
                }
                Change::Delete { key, cause, .. } if key.starts_with(&self.prefix) => {
                    self.keys.remove(&key);
                    let (cause, by) = match cause {
                        DeleteCause::Command(h) | DeleteCause::Revoked(h) => ("command", h),
                        DeleteCause::Expired => ("expired", "expiry".to_string()),
                    };
                    self.update_holder(recorder, at, cause, &by);
                }
                _ => {}
            }
        }
    }

    /// Records a change of the lowest key as the lock's removal and write.
    fn update_holder(&mut self, recorder: &Recorder, at: u64, cause: &str, by: &str) {
        let lowest = self
            .keys
            .iter()
            .min_by_key(|(k, (rev, _))| (*rev, (*k).clone()))
            .map(|(k, (_, host))| (k.clone(), host.clone()));
        if lowest == self.holder {
            return;
        }
        if let Some((value, _)) = self.holder.take() {
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Removed {
                    by: by.to_string(),
                    key: self.key.clone(),
                    value,
                    cause: cause.into(),
                }),
            );
        }
        if let Some((value, host)) = &lowest {
            recorder.record_at(
                at,
                &self.name,
                EventKind::Server(ServerEvent::Written {
                    by: host.clone(),
                    key: self.key.clone(),
                    value: value.clone(),
                }),
            );
        }
        self.holder = lowest;
    }
}

impl SystemSpec for EtcdSpec {
    fn build(&self, b: &mut Build<'_, '_>) -> Box<dyn LockSystem> {
        let ctl = EtcdCtl::new(self, b.key);
        ctl.add_host(b, self);
        Box::new(ctl)
    }

    fn client_deps(&self, deps: &mut lock_impl::Deps, reach: &super::client::SystemReach) {
        // A call's deadline is the service's reply timeout, the world's (it scales
        // with the lease, as the MySQL and MongoDB clients' do).
        deps.systems.insert(lock_impl::etcd::EtcdServer {
            request_timeout: Duration::from_millis(reach.response_timeout_ms),
            ..lock_impl::etcd::EtcdServer::new(&self.name, ETCD_PORT, reach.dialer.clone())
        });
    }
}

impl LockSystem for EtcdCtl {
    fn hosts(&self) -> Vec<String> {
        vec![self.name.clone()]
    }

    fn gate(&self, host: &str) -> Option<PauseGate> {
        (host == self.name).then(|| self.gate.clone())
    }

    fn lock_owner(&self, _key: &str) -> Option<String> {
        self.holder.as_ref().map(|(_, h)| h.clone())
    }

    fn lock_server(&self, _key: &str) -> Option<String> {
        self.holder.as_ref().map(|_| self.name.clone())
    }

    fn lock_writers(&self, _key: &str) -> Vec<String> {
        self.holder.iter().map(|(_, h)| h.clone()).collect()
    }

    fn crashed(&mut self, _host: &str, _machine: bool, _now: Duration, _recorder: &Recorder) {
        // The store is read back from the last run at the restart.
    }

    fn drain(&mut self, recorder: &Recorder, now: Duration) {
        self.drain_changes(recorder, now);
    }
}

/// etcd's record: `SystemSpecs::etcd` (the workload's `etcd`), by default
/// [`EtcdSpec::for_lease`] the workload's lease.
pub(crate) static SYSTEM: SystemInfo = SystemInfo {
    backend: lock_impl::Backend::Etcd,
    capabilities: ETCD_CAPABILITIES,
    spec: |w| {
        w.systems
            .etcd
            .as_ref()
            .map(|s| Box::new(s.clone()) as Box<dyn SystemSpec>)
    },
    install: |w| {
        if w.systems.etcd.is_none() {
            w.systems.etcd = Some(EtcdSpec::for_lease(w.lease_ms));
        }
    },
    remove: |w| w.systems.etcd = None,
    validate: |w| {
        let Some(e) = &w.systems.etcd else {
            return Ok(());
        };
        if e.name.is_empty() {
            return Err("workload.etcd.name is empty: name the member's host (etcd-1)".into());
        }
        if e.second_us == 0 {
            return Err(
                "workload.etcd.second_us is 0: etcd's second must last (1000000 at real time)"
                    .into(),
            );
        }
        if e.min_lease_ttl_s < 1 {
            return Err(format!(
                "workload.etcd.min_lease_ttl_s is {}: it must be at least 1 (etcd's default is 2)",
                e.min_lease_ttl_s
            ));
        }
        Ok(())
    },
};
