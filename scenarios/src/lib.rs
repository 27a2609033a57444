//! Workloads, the scenario catalog, checkers, and the `cargo test` suites that assert
//! what theory predicts for each design under each fault.

pub mod adaptive;
pub mod broken;
pub mod catalog;
pub mod checkers;
pub mod explore;
pub mod family;
pub mod params;
pub mod plancheck;
pub mod planfile;
pub mod shrink;
pub mod stats;
pub mod sweep;
