//! The measuring tools of tapeloom, each a subcommand of the binary: the window
//! planner (`plan`), the memory-to-drive benchmark and modeled positioning
//! (`benchdrive`), the dataset generator (`gen`) and its data patterns (`pattern`),
//! and the read-rate assessment (`readrate`), which reads sources as a backup
//! would, with the backup's own walker.
//!
//! The crate sits above the engine and uses it; the engine never uses this crate.
//! Where the engine needs the generator (a backup of a generator source,
//! `gen:PRESET:SIZE`, and the blocks of a library that keeps no payload made again
//! from it), it asks through its trait `tapeloom_engine::Generator`, which
//! [`gen::Generator`] implements and the binary installs with
//! `tapeloom_engine::install_generator`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod benchdrive;
pub mod benchorder;
mod error;
pub mod gen;
pub mod pattern;
pub mod plan;
pub mod readrate;

pub use error::{Error, Result, ToolError};
