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
pub mod size;
pub mod stage;
pub use stage::StageSet;
mod verify;
pub mod walk;

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
pub use compress::Compress;
pub use copy::{copy_job, CopyOptions, CopyReport};
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
pub use restore::{
    normalize, read_blocks, read_set_blocks, restore, restore_files, restore_files_in_order,
    restore_set, set_job, set_jobs_read, set_tree, BlockRestore, BlockSink, Expect, Kept,
    Overwrite, ReadOrder, RestoreOptions, RestoreReport, SetBlockRestore, SetBlockSink, SetJob,
    SetSelection, SkipBy, Source,
};
pub use restore::{BlockVerify, Listed};
pub use sampler::{Latest, Live, Series};
pub use verify::{read_back_due, verify, verify_as, verify_copy_as, VerifyReport};

use std::borrow::Cow;

/// Renders raw path bytes for people and JSON: UTF-8 as it is, other bytes as `\xNN`.
/// For people, `escape_controls` then escapes its control characters.
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

/// Makes a name safe to print for people, as GNU `ls --quoting-style=escape` does
/// for control characters: tab, newline and carriage return become `\t`, `\n` and
/// `\r`, and every other control character (C0, DEL and C1, which terminals take as
/// commands) becomes `\xNN` for each of its UTF-8 bytes (ESC is `\x1b`), the form
/// `display_path` gives bytes that are not UTF-8. Anything else, spaces and
/// backslashes too, is left as it is, so a plain name prints unchanged. JSON output
/// keeps names as `display_path` gives them, without this.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{display_path, escape_controls};

    #[test]
    fn paths_display_losslessly() {
        assert_eq!(display_path(b"a/b c"), "a/b c");
        assert_eq!(display_path(b"caf\xe9/x"), "caf\\xe9/x");
    }

    #[test]
    fn control_characters_are_escaped_for_people() {
        assert!(matches!(
            escape_controls("plain name, caf\u{e9} \\ 1.txt"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(escape_controls("\x1b[2J"), "\\x1b[2J");
        assert_eq!(escape_controls("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape_controls("del\x7f"), "del\\x7f");
        // A C1 control (CSI) is escaped byte by byte.
        assert_eq!(escape_controls("c1\u{9b}2J"), "c1\\xc2\\x9b2J");
        // Bytes that are not UTF-8 and control characters come out alike.
        assert_eq!(
            escape_controls(&display_path(b"\xff\xfe\x1b")),
            "\\xff\\xfe\\x1b"
        );
        assert!(!escape_controls("\x1b\x07\x00")
            .chars()
            .any(char::is_control));
    }
}
