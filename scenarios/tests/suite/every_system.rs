//! The server faults reach every system, each run shows its fault, and the known results
//! hold: Curator's lock survives a ZooKeeper leader paused past the lease (the ensemble
//! elects a new leader and the sessions move to it), and its ensemble keeps the lock
//! through a crash of its leader and a leader cut off from its quorum; a MongoDB lease
//! on client clocks breaks when those clocks disagree; MySQL's connection-owned locks
//! die with a restarted server while a holder works on.

use crate::common;

use common::{expect_invalid, expect_never_invalid};

#[test]
fn curator_keeps_mutual_exclusion_when_the_zookeeper_leader_pauses_past_the_lease() {
    for d in ["zk-curator", "zk-curator-fenced"] {
        expect_never_invalid(
            d,
            "server-pause",
            &["mutual-exclusion", "lost-update", "ownership"],
            8,
            6,
        );
    }
}

#[test]
fn curator_keeps_mutual_exclusion_when_the_zookeeper_leader_crashes_holding_the_lock() {
    expect_never_invalid(
        "zk-curator",
        "server-restart",
        &["mutual-exclusion", "lost-update", "ownership"],
        8,
        6,
    );
}

#[test]
fn curator_keeps_mutual_exclusion_when_the_leader_is_cut_off_from_its_quorum() {
    expect_never_invalid(
        "zk-curator",
        "server-isolated",
        &["mutual-exclusion", "lost-update", "ownership"],
        8,
        4,
    );
}

#[test]
fn a_mongodb_lease_on_client_clocks_breaks_when_the_clocks_disagree() {
    let run = expect_invalid(
        "mongo-find-and-modify-majority",
        "client-clocks-apart",
        "mutual-exclusion",
    );
    assert!(run.fault_seen.is_some());
}

#[test]
fn a_restarted_mysql_server_frees_a_get_lock_while_its_holder_works() {
    let run = expect_invalid("mysql-get-lock", "server-restart", "mutual-exclusion");
    assert!(
        run.fault_seen
            .as_deref()
            .is_some_and(|f| f.contains("mysql-1")),
        "{:?}",
        run.fault_seen
    );
}

#[test]
fn a_unique_index_row_survives_a_mysql_restart() {
    // The row is committed and flushed (innodb_flush_log_at_trx_commit 1): the restarted
    // server still has it, and nobody else takes the lock.
    expect_never_invalid(
        "mysql-unique-index",
        "server-restart",
        &["mutual-exclusion", "lost-update"],
        8,
        6,
    );
}
