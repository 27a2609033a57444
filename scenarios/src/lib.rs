//! Scenario catalog.
