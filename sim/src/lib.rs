//! The deterministic world.
