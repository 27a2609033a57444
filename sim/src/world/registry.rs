//! The one list of the simulator's lock-server systems ([`PLUGINS`]), and what reads a
//! workload through it: which systems a workload names, their specs for the world's
//! build, the workload's checks, and `Workload::on_system`. No system imports this
//! module; everything else reaches a system through it and the traits of
//! [`super::system`].
//!
//! A new system is its own modules (its model under `sim/src/`, its world module
//! under `world/`, which implements [`WorkloadPart`] for its spec and holds its
//! [`SystemInfo`]) plus, outside them, these lines (and its row in `lock_impl`'s
//! systems table):
//!
//! ```text
//! // lib.rs (its model)
//! +pub mod toy;
//! // world/mod.rs (its world module)
//! +mod toy;
//! // world/config.rs, SystemSpecs
//! +    #[serde(default, skip_serializing_if = "Option::is_none")]
//! +    pub toy: Option<super::toy::ToySpec>,
//! // world/registry.rs, PLUGINS
//! +    part!(toy, super::toy::SYSTEM),
//! ```

use lock_impl::Backend;

use super::config::{RunError, Workload};
use super::system::{SystemInfo, SystemSpec, WorkloadPart};

/// One system as the registry knows it: its record, and how it reads and writes its
/// part of a workload.
pub(crate) struct Plugin {
    /// The system's record.
    pub info: &'static SystemInfo,
    /// Its spec in a workload, as the world builds it, if the workload names it.
    pub spec: fn(&Workload) -> Option<Box<dyn SystemSpec + '_>>,
    /// Puts its default for the workload's lease in the workload, unless the workload
    /// names its own.
    pub install: fn(&mut Workload),
    /// Takes it out of the workload.
    pub remove: fn(&mut Workload),
    /// Checks its part of the workload: the error names the field and what is allowed.
    pub validate: fn(&Workload) -> Result<(), String>,
}

/// The spec of a system whose part is one optional field of [`super::config::SystemSpecs`].
fn boxed<S: WorkloadPart>(part: &Option<S>) -> Option<Box<dyn SystemSpec + '_>> {
    part.as_ref()
        .map(|s| Box::new(s.clone()) as Box<dyn SystemSpec>)
}

fn install<S: WorkloadPart>(part: &mut Option<S>, lease_ms: u64) {
    if part.is_none() {
        *part = Some(S::default_for_lease(lease_ms));
    }
}

fn validate<S: WorkloadPart>(part: &Option<S>) -> Result<(), String> {
    part.as_ref().map_or(Ok(()), S::validate)
}

/// The plugin of a system whose part is the field `$field` of `Workload::systems`.
macro_rules! part {
    ($field:ident, $info:expr) => {
        Plugin {
            info: &$info,
            spec: |w| boxed(&w.systems.$field),
            install: |w| install(&mut w.systems.$field, w.lease_ms),
            remove: |w| w.systems.$field = None,
            validate: |w| validate(&w.systems.$field),
        }
    };
}

/// Every system the simulator models, one line each, in world order (the order a
/// world builds them and `Backend::ALL`'s).
pub(crate) static PLUGINS: &[Plugin] = &[
    Plugin {
        info: &super::redis::SYSTEM,
        spec: |w| {
            super::redis::RedisSpec::of(&w.servers, w.sentinel.as_ref())
                .map(|s| Box::new(s) as Box<dyn SystemSpec>)
        },
        install: |_| {},
        remove: |w| {
            w.servers.clear();
            w.sentinel = None;
        },
        validate: |w| super::redis::spec::validate(&w.servers, w.sentinel.as_ref()),
    },
    part!(zookeeper, super::zookeeper::SYSTEM),
    part!(mysql, super::mysql::SYSTEM),
    part!(mongo, super::mongo::SYSTEM),
    part!(etcd, super::etcd::SYSTEM),
];

/// The plugin of the system behind `backend`, if the simulator models it.
fn plugin(backend: Backend) -> Option<&'static Plugin> {
    PLUGINS.iter().find(|p| p.info.backend == backend)
}

/// The lock-server systems this workload names, in world order ([`PLUGINS`]). The
/// one place a world learns which systems it has.
pub(crate) fn systems_of(w: &Workload) -> Vec<Box<dyn SystemSpec + '_>> {
    PLUGINS.iter().filter_map(|p| (p.spec)(w)).collect()
}

/// The systems other than the default one (the first of [`PLUGINS`]) this workload
/// names, by name.
fn other_systems(w: &Workload) -> Vec<&'static str> {
    w.systems()
        .into_iter()
        .filter(|b| *b != PLUGINS[0].info.backend)
        .map(|b| b.name())
        .collect()
}

impl Workload {
    /// The names of every server host the workload's systems add (servers and helpers
    /// such as Sentinels), in world order: the hosts besides its clients a fault may
    /// name.
    pub fn server_hosts(&self) -> Vec<String> {
        systems_of(self)
            .iter()
            .flat_map(|s| s.host_names())
            .collect()
    }

    /// This workload with the system behind `backend` in the lock's place: every other
    /// system goes, and the world gets that system's default for its lease unless it
    /// names its own (a ZooKeeper ensemble of three at the lease's `tickTime`, a MySQL
    /// server, a MongoDB replica set). The client faults and targets (`lock-server`,
    /// `all-servers`...) then reach that system instead of the one Redis master. A
    /// Redis workload is returned as it is.
    pub fn on_system(mut self, backend: Backend) -> Workload {
        if backend == PLUGINS[0].info.backend {
            return self;
        }
        for other in PLUGINS {
            if other.info.backend != backend {
                (other.remove)(&mut self);
            }
        }
        if let Some(p) = plugin(backend) {
            (p.install)(&mut self);
        }
        self
    }

    /// The lock-server systems this workload names, in world order (the order the world
    /// builds them): Redis if it names Redis servers or Sentinels, then each other
    /// system whose field it sets.
    pub fn systems(&self) -> Vec<Backend> {
        PLUGINS
            .iter()
            .filter(|p| (p.spec)(self).is_some())
            .map(|p| p.info.backend)
            .collect()
    }

    /// Checks the knobs and every system's part, naming the field and what is allowed.
    pub fn validate(&self) -> Result<(), RunError> {
        self.validate_knobs().map_err(RunError::Config)?;
        let others = other_systems(self);
        if self.segments.is_some() && !others.is_empty() {
            return Err(RunError::Config(format!(
                "workload.segments needs Redis servers: the {} world follows one lock key",
                others.join(" and ")
            )));
        }
        if self.servers.is_empty() && others.is_empty() {
            return Err(RunError::Config(
                "workload.servers must name at least one Redis server".into(),
            ));
        }
        for p in PLUGINS {
            (p.validate)(self).map_err(RunError::Config)?;
        }
        Ok(())
    }
}

/// What the system behind `backend` has (nothing, for a system the simulator does
/// not model).
pub fn capabilities(backend: Backend) -> &'static [crate::system::Capability] {
    plugin(backend).map_or(&[], |p| p.info.capabilities)
}

/// The first of `needs` that the system behind `backend` lacks.
pub fn missing(
    backend: Backend,
    needs: &[crate::system::Capability],
) -> Option<crate::system::Capability> {
    let has = capabilities(backend);
    needs.iter().copied().find(|n| !has.contains(n))
}
