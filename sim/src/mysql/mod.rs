//! A MariaDB 10.11 model: one server speaking the MySQL client/server protocol (the
//! codec is `lock_impl::mysql::proto`, shared with the client), with the `locks` table
//! the lock tables with transactions and row locks, and the connection-scoped user locks
//! the MySQL lock designs use, answering with MariaDB's own replies and errors.
//!
//! Layout: [`sql`] (the statements, parsed strictly), [`server`] (the server as a state
//! machine without I/O: connections, user locks; its rules and simplifications),
//! [`innodb`] (tables, transactions, row locks), `types.rs` (what both speak of: a
//! connection's id, the server's events), [`driver`] (the same core over turmoil or
//! tokio TCP).

pub mod driver;
pub mod innodb;
pub mod record;
pub mod server;
pub mod sql;
mod types;

pub use driver::{MYSQL_PORT, SharedMySql, serve_connection, serve_tokio, spawn_tokio_mysql};
pub use server::{ConnId, MySqlConfig, MySqlModel, Output, ServerEvent, WaitKind, Waiting};
