//! A MongoDB client over any byte stream, for the MongoDB lock designs: BSON
//! ([`bson`]), the wire protocol's `OP_MSG` ([`wire`]) and one connection
//! ([`client`]).
//!
//! Why written here rather than the official `mongodb` crate: the driver owns its
//! runtime. It resolves hosts itself (DNS, SRV), opens `tokio::net`/`async-std`
//! sockets from a connection string, spawns its own background tasks (a monitor per
//! server sending `hello` every `heartbeatFrequencyMS`, a connection pool with its own
//! maintenance task) and times everything on the machine's clock; none of it can be
//! handed turmoil's simulated streams, the host's [`Clock`] (so a paused or drifting
//! client times out late) or the client's pause gate (so its monitors freeze with it).
//! Neither it nor the `bson` crate is in this workspace's offline registry either. So
//! the protocol is written against [`crate::zk::StreamDialer`] and [`Clock`],
//! following the wire-protocol reference
//! (<https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/>), the BSON
//! specification (<https://bsonspec.org/spec.html>) and the drivers' `OP_MSG`
//! specification.
//!
//! What it speaks: BSON's common types, `OP_MSG` with kind 0 and kind 1 sections,
//! commands with `$db`, and the reply shapes (`ok`, `errmsg`, `code`, `codeName`,
//! `writeErrors`, `writeConcernError`). Not: the legacy `OP_QUERY`/`OP_REPLY`
//! handshake (servers since 3.6 take `hello` over `OP_MSG`), compression, TLS,
//! authentication (SCRAM), sessions and retryable writes (`lsid`, `txnNumber`: a write
//! whose reply is lost is reported as unknown, never retried), server monitoring
//! (SDAM: the designs find the primary with `hello` when they need one).
//!
//! [`Clock`]: crate::Clock

pub mod bson;
pub mod client;
pub mod wire;

use std::sync::Arc;

use crate::system::{production_system_deps, system_deps};
use crate::{Clock, Deps, Entropy, Spawner};

pub use bson::{BsonError, Document, Value};
pub use client::{
    CommandError, MONGO_PORT, MongoConn, MongoError, MongoServer, first_write_error, is_ok,
    write_concern_error,
};
pub use wire::{Message, WireError};

/// A MongoDB design's handle in [`crate::Deps`]: the replica set's members.
impl crate::SystemHandle for MongoServer {
    const BACKEND: crate::Backend = crate::Backend::MongoDb;
}

/// MongoDB's record ([`crate::Backend::MongoDb`]).
pub const SYSTEM: crate::BackendInfo = crate::BackendInfo {
    name: "MongoDB",
    promise: "MongoDB: a lock document acknowledged with w:\"majority\" survives any \
              failover, one acknowledged with w:1 is only on the primary and is rolled \
              back if a member elected without it takes over; the lease is a date the \
              clients write and compare with their own clocks",
    // The row "基于MongoDB findAndModify原子操作", at the driver's default write
    // concern (w:1).
    seed_design: "mongo-find-and-modify",
};

/// Dependencies for the MongoDB designs: the replica set's members, and `clock`,
/// `entropy` and `spawner` as given; [`Deps::conn`] reaches no Redis.
pub fn mongo_deps(
    server: MongoServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    system_deps(server, clock, entropy, spawner)
}

/// Production dependencies for the MongoDB designs: `server` (over tokio TCP) with
/// tokio's clock and OS randomness.
pub fn production_mongo_deps(server: MongoServer) -> Deps {
    production_system_deps(server)
}
