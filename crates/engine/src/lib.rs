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
mod copy;
mod cpu;
mod crypt;
mod error;
mod expire;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod home;
mod media;
mod migrate;
mod rebuild;
mod recover;
mod regen;
mod restore;
mod sampler;
pub mod stage;
pub use stage::StageSet;
mod verify;

pub use backup::{
    backup, drop_staged_job, install_generator, name_unstaged_streams, pack_streams,
    receive_staged, resume_job, resume_job_on, unfinished_staged_jobs, BackupOptions, BackupReport,
    BlockCheck, Checked, Closed, Despool, DespoolOrder, DriveReport, DriveSet, Inlet, Interleave,
    Only, Outgoing, Piece, Progress, ReceiveStop, Receiving, RemotePlan, RemoteStream,
    StreamReport, Via, DEFAULT_EXTENT_BYTES,
};
pub use backup::{choose_set, BaseRow, BaseTree, Deletions, Scan, ScanFigures, SetChoice};
pub use backup::{GeneratedFile, GeneratedTree, Generator};
pub use backup::{DEFAULT_BUFFERS, DEFAULT_HIGH_WATER, DRY_SHARE, HIGH_WATER_WAIT, JUDGE_WINDOW};
pub use copy::{copy_job, CopyOptions, CopyReport, DriveFigures};
pub use crypt::{create_key_file, job_data_key, open_key_file, read_key_file, write_key_file};
pub use error::{
    ChunkHeaderProblem, CopyError, CryptError, Error, HomeError, JobError, MediaError,
    OptionsError, PlaceError, ReceiveError, Result, StageError,
};
pub use expire::{expire, expiries, job_expiry, ExpireReport, ExpiredVolume};
pub use home::{
    catalog_file, catalog_url, default_home, home_name, refuse_password, use_catalog, Home,
    Library, ScsiLibraryConfig, DEFAULT_CAPACITY, DEFAULT_DRIVES, DEFAULT_SLOTS,
};
pub use media::policy::{
    clean_drive, is_blank, label, load_cartridge, mount, unload_drives, Labelled,
};
pub use media::trim::{trim, Trimmed};
pub use migrate::{move_job, reclaim_candidates, repack, Candidate, MoveOptions, Moved, Repacked};
pub use rebuild::{rebuild, RebuildReport, Unusable};
pub use recover::{recover, RecoverReport};
pub use restore::order::{study_order, OrderStudy};
pub use restore::{
    normalize, read_blocks, read_set_blocks, restore, restore_files, restore_files_in_order,
    restore_set, set_job, set_jobs_read, set_tree, BlockRestore, BlockSink, Expect, Kept,
    Overwrite, ReadOrder, RestoreOptions, RestoreReport, SetBlockRestore, SetBlockSink, SetJob,
    SetSelection, SkipBy, Source,
};
pub use restore::{BlockVerify, Listed};
pub use sampler::{Latest, Live, Series};
pub use tapeloom_tree::pack::Compress;
pub use verify::{read_back_due, verify, verify_as, verify_copy_as, VerifyReport};

pub use tapeloom_tree::{display_path, escape_controls, size, walk};
