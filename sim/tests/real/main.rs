//! The models against Debian's real servers (`redis-server`, `redis-sentinel`,
//! ZooKeeper, MariaDB), each started privately on free loopback ports: one test
//! binary, so the code they share is compiled and linked once. The name `real` puts
//! its tests with the other real-server tests in `.config/nextest.toml` (they wait on
//! real time, beside the simulations).

mod common;

mod differential;
mod etcd_real;
mod lua_libs_real;
mod mysql_real;
mod persistence_real;
mod replication_real;
mod sentinel_real;
mod zk_real;
