//! The tests of `lock-impl/src/testing/servers/mod.rs` (once its `#[cfg(test)]` module).

use lock_impl::testing::servers::internals::{mariadb_install_named, zookeeper_install_from};
use lock_impl::testing::servers::*;
use std::path::Path;

#[test]
fn a_missing_server_is_named_with_the_debian_package_to_install() {
    let zk = zookeeper_install_from(Path::new("/nonexistent/zookeeper.jar")).unwrap_err();
    assert!(
        matches!(
            zk,
            LaunchError::Missing {
                package: "zookeeper",
                ..
            }
        ),
        "{zk:?}"
    );
    assert_eq!(
        zk.to_string(),
        "ZooKeeper is not installed (/nonexistent/zookeeper.jar is missing); install it \
         with `apt-get install -y zookeeper` (Debian)"
    );
    let db = mariadb_install_named("locksim-no-such-mariadbd").unwrap_err();
    assert!(
        db.to_string().contains(
            "locksim-no-such-mariadbd is missing); install it with \
             `apt-get install -y mariadb-server`"
        ),
        "{db}"
    );
}

#[test]
fn free_ports_are_distinct() {
    let ports = free_ports(9);
    let mut sorted = ports.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 9, "{ports:?}");
}
