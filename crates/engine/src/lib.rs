//! The tapeloom engine: backup, restore and verify data paths, and the policy that
//! chooses, labels and spans volumes.
//!
//! Backup is a pipeline of threads: per stream, a walker lists the source in a fixed
//! order, readers fetch metadata and small files in parallel, and a packer turns them
//! into records and blocks (compressing them when asked); per drive, one writer thread
//! owns the drive and its own catalog connection and weaves the streams it holds.
//! Restore and verify read a job's blocks in tape order, positioning by logical block
//! from the catalog.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backup;
pub mod clock;
mod compress;
mod crypt;
mod error;
mod expire;
#[doc(hidden)]
pub mod fuzzing;
mod home;
mod media;
mod rebuild;
mod recover;
mod restore;
mod sampler;
pub mod stage;
pub mod tools;
mod verify;

pub use backup::{
    backup, backup_received, pack_streams, resume_job, unfinished_staged_jobs, BackupOptions,
    BackupReport, Begun, BlockCheck, Closed, Despool, DespoolOrder, DriveReport, DriveSet, Inlet,
    Outgoing, Piece, Progress, RemotePlan, RemoteStream, StreamReport, Via, DEFAULT_EXTENT_BYTES,
};
pub use backup::{
    choose_set, BaseRow, BaseTree, Deletions, ReceivedChanges, Scan, ScanFigures, SetChoice,
};
pub use compress::Compress;
pub use crypt::{create_key_file, job_data_key, open_key_file, read_key_file, write_key_file};
pub use error::{
    ChunkHeaderProblem, CryptError, Error, HomeError, JobError, MediaError, OptionsError,
    PlaceError, ReceiveError, Result, StageError, ToolError,
};
pub use expire::{expire, expiries, job_expiry, ExpireReport, ExpiredVolume};
pub use home::{
    default_home, Home, Library, ScsiLibraryConfig, DEFAULT_CAPACITY, DEFAULT_DRIVES, DEFAULT_SLOTS,
};
pub use media::policy::{clean_drive, label, load_cartridge, unload_drives, Labelled};
pub use rebuild::{rebuild, RebuildReport};
pub use recover::{recover, RecoverReport};
pub use restore::{
    normalize, read_blocks, read_set_blocks, restore, restore_set, set_job, set_tree, BlockRestore,
    BlockSink, Expect, Kept, Overwrite, RestoreOptions, RestoreReport, SetBlockRestore,
    SetBlockSink, SetJob, SetSelection, SkipBy, Source,
};
pub use restore::{BlockVerify, Listed};
pub use sampler::{Latest, Live, Series};
pub use verify::{verify, VerifyReport};

/// Renders raw path bytes for people and JSON: UTF-8 as it is, other bytes as `\xNN`.
pub fn display_path(p: &[u8]) -> String {
    let mut s = String::with_capacity(p.len());
    for chunk in p.utf8_chunks() {
        s.push_str(chunk.valid());
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_display_losslessly() {
        assert_eq!(super::display_path(b"a/b c"), "a/b c");
        assert_eq!(super::display_path(b"caf\xe9/x"), "caf\\xe9/x");
    }
}
