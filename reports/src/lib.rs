//! Reports: latency histograms, text timelines, sequence diagrams and the design ×
//! scenario table.
//!
//! Everything here reads histories and verdicts and never changes them; none of it
//! knows how runs are executed.

pub mod bench;
pub mod commands;
pub mod diagram;
pub mod latency;
pub mod table;
pub mod timeline;
