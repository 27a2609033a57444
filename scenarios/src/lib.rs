//! Scenario catalog.

pub mod checkers;
