//! Measurement tools, each a subcommand: the memory-to-drive benchmark and modeled
//! positioning (`benchdrive`), the dataset generator (`gen`) and its data patterns
//! (`pattern`), and the read-rate assessment (`readrate`), which reads sources as a
//! backup would, with the backup's own walker.

pub mod benchdrive;
pub mod gen;
pub mod pattern;
pub mod plan;
pub mod readrate;
