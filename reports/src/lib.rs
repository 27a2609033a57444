//! Reports: latency histograms, text timelines, sequence diagrams, the design ×
//! scenario table and the regression gate.
//!
//! Everything here reads histories and verdicts and never changes them; none of it
//! knows how runs are executed.

pub mod bench;
pub mod cells;
pub mod commands;
pub mod diagram;
pub mod exit;
pub mod explore;
pub mod gate;
pub mod input;
pub mod latency;
pub mod plot;
pub mod report;
pub mod shard;
pub mod sweeps;
pub mod table;
pub mod timeline;
