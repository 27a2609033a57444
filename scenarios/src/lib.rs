//! Workloads, the scenario catalog, checkers, and the `cargo test` suites that assert
//! what theory predicts for each design under each fault.

// No function over 150 lines (the limit is clippy.toml's): a reader holds one whole.
#![warn(clippy::too_many_lines)]

pub mod adaptive;
pub mod broken;
pub mod catalog;
pub mod checkers;
pub mod explore;
pub mod family;
pub mod params;
pub mod place;
pub mod plancheck;
pub mod planfile;
pub mod shrink;
pub mod stats;
pub mod sweep;
