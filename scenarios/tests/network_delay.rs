//! Replies delayed beyond the lease: the client believes a lock that already expired.

mod common;

use common::expect_invalid;

#[test]
fn every_expiring_design_gives_two_holders_when_replies_are_delayed_beyond_the_lease() {
    for d in lock_impl::DESIGNS.iter().filter(|d| d.expires) {
        expect_invalid(d.name, "network-delay", "mutual-exclusion");
    }
}
