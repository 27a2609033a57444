//! Reports: latency histograms, text timelines, sequence diagrams, the design ×
//! scenario table and the regression gate.
//!
//! Everything here reads histories and verdicts and never changes them; none of it
//! knows how runs are executed.
//!
//! The `locksim` command's modules go one way: the parser (`cli`, which a user's own
//! binary also runs, with the user's designs), the front ends (`commands`, one per
//! subcommand, and `gate`, `explore`) use `report`, `shard` and `sweeps` where they
//! need them, and all of them stand on the core: `cells` (running cells), `input`
//! (bad input and the argument helpers several commands share), `seeds` (fixed or
//! adaptive seeds) and `exit` (exit codes). The core imports no command module.

// No function over 150 lines (the limit is clippy.toml's): a reader holds one whole.
#![warn(clippy::too_many_lines)]

pub mod bench;
pub mod cells;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod completeness;
pub mod diagram;
pub mod exit;
pub mod explore;
pub mod gate;
pub mod input;
pub mod latency;
pub mod parity;
pub mod plot;
pub mod real;
pub mod report;
pub mod seeds;
pub mod shard;
pub mod sweeps;
pub mod table;
pub mod timeline;
