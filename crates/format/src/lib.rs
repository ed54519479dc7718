//! Encode and decode everything tapeloom writes on tape, as specified in
//! `docs/FORMAT.md`. This crate does no I/O: it turns values into bytes and bytes into
//! values, and every decoder returns an error instead of panicking on bad input.
#![deny(missing_docs)]

mod block;
mod codec;
mod decode;
mod label;
mod pack;
mod record;

pub use block::{BlockHeader, BLOCK_HEADER_LEN, BLOCK_MAGIC, NO_RECORD};
pub use decode::{Event, RecordDecoder};
pub use label::{VolumeLabel, LABEL_LEN, LABEL_MAGIC};
pub use pack::{PackedBlock, StreamPacker};
pub use record::{
    Entry, EntryType, FileEnd, FileStatus, IndexEntry, JobEnd, JobStart, JobStatus, Kind, Pos,
    RecordHeader, StreamEnd, StreamInfo, Timestamp, RECORD_HEADER_LEN,
};

/// The format version this code writes.
pub const WRITE_VERSION: u16 = 2;
/// The newest format version this code reads.
pub const READ_VERSION: u16 = 2;
/// The smallest block size a job may use.
pub const MIN_BLOCK_SIZE: usize = 64 * 1024;
/// The largest block size a job may use.
pub const MAX_BLOCK_SIZE: usize = 8 * 1024 * 1024;
/// The block size used when a job does not choose one.
pub const DEFAULT_BLOCK_SIZE: usize = 256 * 1024;
/// The stream that carries job start, continuation, index and job end records.
pub const CONTROL_STREAM: u16 = 0;
/// The stream id of the stand-alone blocks that hold `Continuation` records.
pub const CONTINUATION_STREAM: u16 = u16::MAX;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The bytes end before the structure does.
    Truncated(&'static str),
    /// A magic number did not match.
    BadMagic(&'static str),
    /// A checksum did not match.
    BadCrc {
        /// What was being checked.
        what: &'static str,
        /// The CRC stored in the data.
        stored: u32,
        /// The CRC computed over the data.
        computed: u32,
    },
    /// The item needs a newer reader.
    UnsupportedVersion {
        /// What carried the version.
        what: &'static str,
        /// The read version it asks for.
        version: u16,
    },
    /// A field holds a value the format does not allow.
    Invalid(String),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Truncated(what) => write!(f, "{what} is truncated"),
            FormatError::BadMagic(what) => write!(f, "{what} has a bad magic number"),
            FormatError::BadCrc {
                what,
                stored,
                computed,
            } => write!(
                f,
                "{what} checksum mismatch (stored {stored:08x}, computed {computed:08x})"
            ),
            FormatError::UnsupportedVersion { what, version } => write!(
                f,
                "{what} needs format read version {version}, this tapeloom reads up to {READ_VERSION}"
            ),
            FormatError::Invalid(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for FormatError {}

/// Result of decoding.
pub type Result<T> = std::result::Result<T, FormatError>;

/// Checks that `size` is a block size a job may use.
pub fn check_block_size(size: usize) -> Result<()> {
    if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&size) || !size.is_multiple_of(4096) {
        return Err(FormatError::Invalid(format!(
            "block size {size} must be a multiple of 4096 from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE}"
        )));
    }
    Ok(())
}

/// Checks that a path read from tape is relative, clean and safe to join under a
/// restore directory: no leading `/`, no empty, `.` or `..` components (except the
/// namespace root `.` itself), no NUL byte.
pub fn check_relative_path(path: &[u8]) -> Result<()> {
    if path == b"." {
        return Ok(());
    }
    if path.is_empty() || path[0] == b'/' || path.contains(&0) {
        return Err(FormatError::Invalid(format!(
            "unsafe path {:?} on tape",
            String::from_utf8_lossy(path)
        )));
    }
    for comp in path.split(|&b| b == b'/') {
        if comp.is_empty() || comp == b"." || comp == b".." {
            return Err(FormatError::Invalid(format!(
                "unsafe path {:?} on tape",
                String::from_utf8_lossy(path)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn relative_paths() {
        for ok in [&b"."[..], b"a", b"a/b", b"a b/\xff\n-x"] {
            assert!(check_relative_path(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            &b""[..],
            b"/etc",
            b"a/../b",
            b"..",
            b"a//b",
            b"a/./b",
            b"a/",
            b"a\0b",
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn block_sizes() {
        assert!(check_block_size(DEFAULT_BLOCK_SIZE).is_ok());
        assert!(check_block_size(MAX_BLOCK_SIZE).is_ok());
        assert!(check_block_size(MIN_BLOCK_SIZE - 4096).is_err());
        assert!(check_block_size(MAX_BLOCK_SIZE + 4096).is_err());
        assert!(check_block_size(100_000).is_err());
    }
}
