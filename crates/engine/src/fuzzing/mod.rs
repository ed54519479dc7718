//! Entry points for fuzzing: one function per decoder of bytes that come from tape,
//! from a disk stage or from a server ([`handoff`]), and [`read_path`], which runs a whole mutated cartridge through
//! restore, verify, listing and catalog rebuild.
//!
//! The cargo-fuzz targets in `fuzz/` and the corpus test in
//! `crates/engine/tests/fuzz_corpus.rs` call the same functions, so a stable build
//! replays every input the fuzzer kept. A function returns `Err` only for a broken
//! promise that is not a panic (a file written outside the restore target, a value
//! that does not survive encoding again, a worker thread that panicked); decoding
//! errors are the expected outcome and are dropped.
//!
//! Inputs are structure-aware where a checksum would stop a mutation: a leading
//! flags byte asks for CRCs and magic numbers to be set right, so the bytes after it
//! reach the field decoders.

mod decoders;
mod handoff;
mod tape;

pub use decoders::{block, chunk, codec, crypt, entry, expand, index, job, label, records};
pub use handoff::handoff;
pub use tape::{read_path, ReadPath};

/// A promise the code under test broke without panicking.
#[derive(Debug)]
pub struct Violation(pub String);

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a fuzz entry point returns.
pub type Outcome = std::result::Result<(), Violation>;

/// A fuzz entry point.
pub type Target = fn(&[u8]) -> Outcome;

/// Every entry point by name, as the fuzz targets and the corpus test know them.
pub const TARGETS: &[(&str, Target)] = &[
    ("block", block),
    ("records", records),
    ("entry", entry),
    ("label", label),
    ("job", job),
    ("index", index),
    ("expand", expand),
    ("codec", codec),
    ("chunk", chunk),
    ("crypt", crypt),
    ("handoff", handoff),
    ("read_path", read_path),
];
