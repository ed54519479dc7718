//! Encode and decode everything tapeloom writes on tape, as specified in
//! `docs/FORMAT.md`. This crate does no I/O: it turns values into bytes and bytes into
//! values, and every decoder returns an error instead of panicking on bad input.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod block;
mod codec;
mod crypt;
mod decode;
mod expand;
mod label;
mod pack;
mod record;

pub use block::{block_len, block_stream, BlockHeader, BLOCK_HEADER_LEN, BLOCK_MAGIC, NO_RECORD};
pub use crypt::{
    open_block, DataKey, Fingerprint, JobKey, KdfParams, KeyFile, MasterKey, CRYPT_TAIL_LEN,
    KEY_FILE_LEN, KEY_FILE_MAGIC,
};
pub use decode::{Event, RecordDecoder};
pub use expand::expand_block;
pub use label::{VolumeLabel, LABEL_LEN, LABEL_MAGIC, LABEL_WRITE_VERSION};
pub use pack::{PackedBlock, StreamPacker};
pub use record::{
    CopyStart, Entry, EntryType, Facts, FileEnd, FileStatus, IndexEntry, IndexFacts, JobEnd,
    JobStart, JobStatus, Kind, Level, Pos, RecordHeader, SetInfo, StreamEnd, StreamInfo, Timestamp,
    RECORD_HEADER_LEN,
};

/// The format version this code writes.
pub const WRITE_VERSION: u16 = 4;
/// The newest format version this code reads.
pub const READ_VERSION: u16 = 4;
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
/// The most data streams a job may have (FORMAT.md 1): writers refuse more sources,
/// and readers refuse a `JobStart` or `Continuation` that names more.
pub const MAX_STREAMS: usize = 4096;
/// The longest `JobStart` or `Continuation` body a reader takes (FORMAT.md 5.1): the
/// stream table of [`MAX_STREAMS`] streams, each named with 255 bytes and a source
/// path of 4096, is about 18 MB.
pub const MAX_START_LEN: u64 = 32 << 20;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The bytes end before the structure does.
    #[error("{0} is truncated")]
    Truncated(&'static str),
    /// A magic number did not match.
    #[error("{0} has a bad magic number")]
    BadMagic(&'static str),
    /// A checksum did not match.
    #[error("{what} checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    BadCrc {
        /// What was being checked.
        what: &'static str,
        /// The CRC stored in the data.
        stored: u32,
        /// The CRC computed over the data.
        computed: u32,
    },
    /// The item needs a newer reader.
    #[error(
        "{what} needs format read version {version}, this tapeloom reads up to {READ_VERSION}"
    )]
    UnsupportedVersion {
        /// What carried the version.
        what: &'static str,
        /// The read version it asks for.
        version: u16,
    },
    /// A block header gives another header length than the format's.
    #[error("block header length {0} is not {BLOCK_HEADER_LEN}")]
    HeaderLength(u16),
    /// A block sets flag bits its read version does not define.
    #[error("block flags {0:#06x} are not known")]
    UnknownBlockFlags(u16),
    /// A block's payload length is larger than the block.
    #[error("block payload length {0} exceeds the block")]
    PayloadTooLong(u32),
    /// A compressed block's payload length is larger than any block's payload.
    #[error("compressed block payload length {0} exceeds any block")]
    CompressedPayloadTooLong(u32),
    /// A compressed block's frame is damaged, or would expand to more than the
    /// payload length its header states.
    #[error("compressed block payload does not expand ({0})")]
    BadFrame(&'static str),
    /// A compressed block's frame expands to fewer bytes than its header states.
    #[error("compressed block payload expands to {got} bytes, not {want}")]
    ExpandedLength {
        /// Bytes the frame expanded to.
        got: usize,
        /// The payload length the header states.
        want: usize,
    },
    /// A compressed block, read by a build without the `zstd` feature.
    #[error("compressed block payload needs zstd, which this build of tapeloom lacks")]
    NoZstd,
    /// An encrypted block's ciphertext, header or tag was changed (or it was
    /// decrypted with another job's key): it is damaged like a block whose CRC fails.
    #[error("block authentication tag mismatch (ciphertext damaged)")]
    BadTag,
    /// An encrypted block, and no data key to read it with.
    #[error("block is encrypted and no key was given")]
    NoKey,
    /// A job's data key is wrapped by another master key than the one given.
    #[error("job is encrypted with key {job}, not with key {given}")]
    WrongKey {
        /// Fingerprint of the job's key.
        job: String,
        /// Fingerprint of the key given.
        given: String,
    },
    /// A wrapped data key does not unwrap (damaged).
    #[error("the job's wrapped data key is damaged")]
    KeyUnwrap,
    /// A key file's passphrase is wrong (or the file was changed).
    #[error("wrong passphrase for the key file (or the key file is damaged)")]
    WrongPassphrase,
    /// A key file asks for an Argon2 cost outside the limits.
    #[error("key file has Argon2 parameters outside the limits")]
    KdfParams,
    /// A line of a key's paper form is missing or fails its check.
    #[error("line {0} of the key's paper form is missing or does not match its check")]
    PaperLine(usize),
    /// A block's first-record offset lies outside its payload.
    #[error("block first record offset {0} is outside its payload")]
    FirstRecordOutside(u32),
    /// A code (record kind, entry type, file or job status) the format does not define.
    #[error("unknown {what} {value}")]
    UnknownCode {
        /// What the code stands for, e.g. `record kind`.
        what: &'static str,
        /// The code found.
        value: u16,
    },
    /// A time's nanoseconds are not below one second.
    #[error("nanoseconds {0} out of range")]
    Nanoseconds(u32),
    /// An entry sets flag bits the format does not define.
    #[error("entry has unknown flags {0:#x}")]
    UnknownEntryFlags(u8),
    /// A sparse file's extents overlap, are out of order or end past its size.
    #[error("entry has overlapping or out-of-range sparse extents")]
    SparseExtents,
    /// Bytes are left after the last item of a record that must hold nothing else.
    #[error("{0} has trailing bytes")]
    TrailingBytes(&'static str),
    /// A record other than `Data` is larger than a decoder buffers.
    #[error("{kind:?} record of {len} bytes is larger than allowed")]
    RecordTooLarge {
        /// The record's kind.
        kind: Kind,
        /// Its body length.
        len: u64,
    },
    /// A name that must be UTF-8 is not.
    #[error("{what} holds a name that is not UTF-8")]
    NotUtf8 {
        /// What holds the name.
        what: &'static str,
        /// The conversion's error.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// Reserved bytes are not zero.
    #[error("{0} has non-zero reserved bytes")]
    NonZeroReserved(&'static str),
    /// A block size a job may not use.
    #[error("block size {0} must be a multiple of 4096 from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE}")]
    BlockSize(usize),
    /// A job start that names more streams than a job may have.
    #[error("job start names {0} streams, more than the {MAX_STREAMS} a job may have")]
    TooManyStreams(usize),
    /// A path from tape that is absolute, not clean or holds a NUL byte.
    #[error("unsafe path {:?} on tape", String::from_utf8_lossy(.0))]
    UnsafePath(Vec<u8>),
}

/// Result of decoding.
pub type Result<T> = std::result::Result<T, FormatError>;

/// Checks that `size` is a block size a job may use.
pub fn check_block_size(size: usize) -> Result<()> {
    if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&size) || !size.is_multiple_of(4096) {
        return Err(FormatError::BlockSize(size));
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
        return Err(FormatError::UnsafePath(path.to_vec()));
    }
    for comp in path.split(|&b| b == b'/') {
        if comp.is_empty() || comp == b"." || comp == b".." {
            return Err(FormatError::UnsafePath(path.to_vec()));
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
    fn messages_keep_their_wording() {
        assert_eq!(
            FormatError::Truncated("block").to_string(),
            "block is truncated"
        );
        assert_eq!(
            FormatError::BadMagic("volume label").to_string(),
            "volume label has a bad magic number"
        );
        let crc = FormatError::BadCrc {
            what: "block",
            stored: 0xab,
            computed: 0x1234_5678,
        };
        assert_eq!(
            crc.to_string(),
            "block checksum mismatch (stored 000000ab, computed 12345678)"
        );
        let version = FormatError::UnsupportedVersion {
            what: "block",
            version: 9,
        };
        assert_eq!(
            version.to_string(),
            format!("block needs format read version 9, this tapeloom reads up to {READ_VERSION}")
        );
    }

    #[test]
    fn faults_keep_their_wording() {
        let cases: Vec<(FormatError, &str)> = vec![
            (
                FormatError::HeaderLength(32),
                "block header length 32 is not 64",
            ),
            (
                FormatError::UnknownBlockFlags(6),
                "block flags 0x0006 are not known",
            ),
            (
                FormatError::PayloadTooLong(9),
                "block payload length 9 exceeds the block",
            ),
            (
                FormatError::CompressedPayloadTooLong(9),
                "compressed block payload length 9 exceeds any block",
            ),
            (
                FormatError::FirstRecordOutside(5),
                "block first record offset 5 is outside its payload",
            ),
            (
                FormatError::UnknownCode {
                    what: "record kind",
                    value: 99,
                },
                "unknown record kind 99",
            ),
            (
                FormatError::Nanoseconds(2_000_000_000),
                "nanoseconds 2000000000 out of range",
            ),
            (
                FormatError::UnknownEntryFlags(6),
                "entry has unknown flags 0x6",
            ),
            (
                FormatError::SparseExtents,
                "entry has overlapping or out-of-range sparse extents",
            ),
            (
                FormatError::TrailingBytes("index record"),
                "index record has trailing bytes",
            ),
            (
                FormatError::RecordTooLarge {
                    kind: Kind::Index,
                    len: 7,
                },
                "Index record of 7 bytes is larger than allowed",
            ),
            (
                FormatError::NonZeroReserved("entry record"),
                "entry record has non-zero reserved bytes",
            ),
            (
                FormatError::BlockSize(100),
                "block size 100 must be a multiple of 4096 from 65536 to 8388608",
            ),
            (
                FormatError::UnsafePath(b"/etc".to_vec()),
                "unsafe path \"/etc\" on tape",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn a_name_that_is_not_utf8_keeps_the_conversion_error_as_its_source() {
        use std::error::Error;
        let e = VolumeLabel {
            uuid: [1; 16],
            barcode: "TL0001L9".into(),
            pool: "default".into(),
            created: Timestamp::default(),
            block_size: DEFAULT_BLOCK_SIZE as u32,
            generation: 0,
        };
        let mut block = e.encode();
        // The pool name's first byte, then the label's CRC over bytes 0..1020.
        block[64] = 0xff;
        let crc = crc32c::crc32c(&block[..1020]);
        block[1020..].copy_from_slice(&crc.to_le_bytes());
        let err = VolumeLabel::decode(&block).unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume label holds a name that is not UTF-8"
        );
        let source = err.source().expect("a cause");
        assert!(source.is::<std::string::FromUtf8Error>(), "{source}");
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
