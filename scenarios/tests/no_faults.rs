//! Without faults every design keeps every promise, under real contention.

mod common;

use common::{assert_every_design_valid, scenario};

#[test]
fn every_design_is_valid_on_every_checker_over_200_seeds_without_faults() {
    assert_every_design_valid(&scenario("no-faults"), 0..200, true);
}
