//! A MySQL / MariaDB client over any byte stream, for the MySQL lock designs: the
//! client/server protocol's packets ([`proto`]) and one connection ([`client`]).
//!
//! Why written here rather than a published crate: `mysql_async` dials its own
//! `tokio::net::TcpStream` (or Unix socket) from `Opts`, spawns nothing but reads the
//! machine's clock for its timeouts and pool, and cannot be handed a stream;
//! `mysql_common` has the packet types without a runtime, but pulls in a large
//! dependency tree (big decimals, date-time crates, compression) for the handful of
//! packets the lock recipes need, and is not in this workspace's offline registry.
//! locksim must give a client turmoil's simulated streams and the host's [`Clock`]
//! (so a paused or drifting client times out late), so the protocol is written against
//! [`crate::zk::StreamDialer`] and [`Clock`], following MariaDB's protocol
//! documentation (<https://mariadb.com/kb/en/clientserver-protocol/>).
//!
//! What it speaks: packet framing with sequence ids; Handshake V10 (with MariaDB's
//! extended capabilities) and HandshakeResponse41 with `mysql_native_password`
//! (`SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw)))`); `COM_QUERY` with the text
//! protocol (OK, ERR with error number, SQLSTATE and message, EOF, text resultsets);
//! `COM_PING`; `COM_QUIT`. Not: TLS, compression, prepared statements, other auth
//! plugins (an auth switch request is refused with a clear error), `LOCAL INFILE`,
//! multi-statements, packets of 16 MiB or more.
//!
//! [`Clock`]: crate::Clock

pub mod client;
pub mod proto;

use std::sync::Arc;

use crate::system::{production_system_deps, system_deps};
use crate::{Clock, Deps, Entropy, Spawner};

pub use client::{MySqlConn, MySqlError, MySqlServer, describe, quote, scalar};
pub use proto::{Column, EofPacket, ErrPacket, OkPacket, Reply, ResultSet};

/// A MySQL design's handle in [`crate::Deps`]: the server.
impl crate::SystemHandle for MySqlServer {
    const BACKEND: crate::Backend = crate::Backend::MySql;
}

/// MySQL's record ([`crate::Backend::MySql`]).
pub const SYSTEM: crate::BackendInfo = crate::BackendInfo {
    name: "MySQL",
    promise: "MySQL: a row under a unique key is durable and never expires (a dead \
              holder's row stays until someone deletes it), and a GET_LOCK belongs to \
              its connection: the server releases it the moment the connection drops, \
              whatever the client still believes",
    // The row "基于mysql 表唯一索引": INSERT to lock (a duplicate key error means
    // held), DELETE to unlock, no expiry.
    seed_design: "mysql-unique-index",
};

/// Dependencies for the MySQL designs: the server, and `clock`, `entropy` and
/// `spawner` as given; [`Deps::conn`] reaches no Redis and no other system's
/// handle is set.
pub fn mysql_deps(
    server: MySqlServer,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    spawner: Arc<dyn Spawner>,
) -> Deps {
    system_deps(server, clock, entropy, spawner)
}

/// Production dependencies for the MySQL designs: `server` (over tokio TCP, see
/// [`MySqlServer`]) with tokio's clock and OS randomness.
pub fn production_mysql_deps(server: MySqlServer) -> Deps {
    production_system_deps(server)
}
