//! What the `locksim` subcommands do, one module per front end: `matrix` (the catalog
//! matrix and `merge`), `list`, `run`, `replay` (`replay`, `shrink`), `sweep`,
//! `report` and `parity`; `cli` only parses arguments, and `gate` and `explore` have
//! modules of their own.
//!
//! The front ends sit on top: they call `report`, `shard` and `sweeps`, which with
//! them build on the core ([`crate::cells`], [`crate::input`], [`crate::seeds`],
//! [`crate::exit`]), and nothing below imports a front end back.

mod list;
mod matrix;
mod parity;
mod replay;
mod report;
mod run;
mod sweep;

pub use crate::seeds::Seeds;
pub use list::{list, time_scale_table, unfit_cells_table};
pub use matrix::{adaptive_footer, catalog_table, matrix_footer, merge_files, rate_lines};
pub use parity::parity;
pub use replay::{DiagramTarget, diagram_target, replay_one, shrink};
pub use report::report;
pub use run::run;
pub use sweep::{SweepOutput, sweep_cmd};
