//! A MongoDB 7.0 replica-set model: members speaking the wire protocol's `OP_MSG`
//! (the codec is `lock_impl::mongo`, shared with the client) for the commands the lock
//! designs send (`hello`, `findAndModify`, `insert`, `delete`, `find`) and the ones
//! members send each other (`replSetHeartbeat`, `replSetRequestVotes`,
//! `replSetUpdatePosition`, oplog reads), answering with mongod's replies and errors.
//!
//! No `mongod` can be installed on the machines this project is built on (MongoDB is
//! not packaged by Debian, and its own repository is not reachable here), so the model
//! is written from the server's documentation and source and tested against the
//! published specifications' examples (BSON, `OP_MSG`) and the rules' own cases, not
//! against a live server; see [`member`] for every simplification.
//!
//! Layout: [`query`] (filters and updates), [`member`] (one member as a state machine
//! without I/O: commands, replication, elections, rollback), [`driver`] (the same
//! core over turmoil or tokio TCP, with its background tasks).

pub mod driver;
pub mod member;
pub mod query;
pub mod record;

pub use driver::{
    SharedMember, TokioPeers, serve_connection, spawn_tokio_set, start_background, wait_for_primary,
};
pub use member::{
    Durable, Entry, Handled, Member, MemberEvent, MongoConfig, Op, OpTime, Origin, Role,
};

/// The port `mongod` serves on.
pub const MONGO_PORT: u16 = lock_impl::mongo::MONGO_PORT;
