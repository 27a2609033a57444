//! The system families the lock-service comparison "常见分布式锁方案对比" sets side by
//! side (docs/designs.md, "Where the designs come from"; its table: a MySQL unique
//! index, MongoDB `findAndModify`, ZooKeeper, Redis), with Redis split the way it is
//! deployed: one master, a master with replicas under Sentinel, and Redlock's
//! independent masters. A family is a system and the shape of its world, so one Redis
//! design falls in "Redis single" in a single-master scenario and in "Redis + Sentinel"
//! in a replicated one.
//!
//! The comparison by system (`reports::compare`) has two rows per family: the design
//! the seeds name for it ([`Family::seed_design`]) and the family's best design, which
//! the results decide.

use lock_impl::{Backend, designs};

use crate::catalog::{Scenario, Topology};

/// A row group of the comparison by system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// A single-master Redis design in a world of one master (no replicas).
    RedisSingle,
    /// A single-master Redis design in a world with replicas and Sentinels
    /// ([`Topology::Replicated`]).
    RedisSentinel,
    /// A Redis design that locks on several independent masters (`masters > 1`).
    Redlock,
    /// A design on another system than Redis (ZooKeeper, MySQL / MariaDB, a MongoDB
    /// replica set...): one family per system, named after it. Never Redis.
    System(Backend),
}

impl Family {
    /// Every family, in the comparison's row order: Redis's three, then one per other
    /// system in [`Backend::ALL`]'s order.
    pub fn all() -> Vec<Family> {
        let redis = [Family::RedisSingle, Family::RedisSentinel, Family::Redlock];
        let others = Backend::ALL
            .iter()
            .filter(|b| **b != Backend::Redis)
            .map(|b| Family::System(*b));
        redis.into_iter().chain(others).collect()
    }

    /// Its row heading.
    pub fn name(self) -> &'static str {
        match self {
            Family::RedisSingle => "Redis single",
            Family::RedisSentinel => "Redis + Sentinel",
            Family::Redlock => "Redlock",
            Family::System(backend) => backend.name(),
        }
    }

    /// The system it locks on.
    pub fn backend(self) -> Backend {
        match self {
            Family::RedisSingle | Family::RedisSentinel | Family::Redlock => Backend::Redis,
            Family::System(backend) => backend,
        }
    }

    /// The family of a design on `backend` that locks on `masters` independent masters,
    /// run in a world of `topology`.
    pub fn of(backend: Backend, masters: usize, topology: Topology) -> Option<Family> {
        if backend == Backend::Redis {
            return Some(if masters > 1 {
                Family::Redlock
            } else if topology == Topology::Replicated {
                Family::RedisSentinel
            } else {
                Family::RedisSingle
            });
        }
        Some(Family::System(backend))
    }

    /// The family of the built-in design `design` in `scenario`'s world; `None` for a
    /// design that is not built in (its system is not known by name).
    pub fn of_cell(design: &str, scenario: &Scenario) -> Option<Family> {
        let info = lock_impl::DESIGNS.iter().find(|d| d.name == design)?;
        Family::of(info.backend, info.masters, scenario.topology())
    }

    /// The design the lock-service comparison names for this family (its table
    /// "常见分布式锁方案对比"; docs/designs.md, "Where the designs come from"):
    /// - Redis single and Redis + Sentinel: `set-nx-px-lua`, the table's row "基于redis
    ///   Lua脚本能力" (`SET lock_name random_value EX seconds NX`, release by the Lua
    ///   compare-and-delete it quotes), the one it calls fit for production "apart from
    ///   the single point" (除了单点问题): the same design is what a Sentinel deployment
    ///   runs to answer that point. The table's other Redis row, SETNX then EXPIRE with
    ///   a plain DELETE (`setnx-expire`), the table itself discounts (not atomic,
    ///   deletes another's lock); Redisson's RLock, which its note explains after the
    ///   table, is a library, not a row of the comparison.
    /// - Redlock: the comparison names none; `redlock`, the algorithm as the Redis docs'
    ///   "Distributed Locks with Redis" page states it (N = 5 masters, majority, validity = lease − elapsed).
    /// - Another system: its record's [`lock_impl::BackendInfo::seed_design`], which
    ///   quotes the table's row for it (ZooKeeper: `zk-curator`; MySQL:
    ///   `mysql-unique-index`; MongoDB: `mongo-find-and-modify`).
    pub fn seed_design(self) -> &'static str {
        match self {
            Family::RedisSingle | Family::RedisSentinel => designs::SetNxPxLua::NAME,
            Family::Redlock => designs::Redlock::NAME,
            Family::System(backend) => backend.info().seed_design,
        }
    }
}
