//! What packing, placing and decoding a tree can fail on, without a catalog or a
//! drive: a file system operation on a path, bytes that do not decode, a key. The
//! engine's error wraps each in its variant of the same name, with the same
//! message.

use crate::escape_controls;
use std::path::PathBuf;
use thiserror::Error;

/// A failure of packing, placing or decoding a tree.
#[derive(Debug, Error)]
pub enum Error {
    /// Bytes could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tapeloom_format::FormatError),
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done ("read /x/y").
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A key file, or a job's key.
    #[error(transparent)]
    Crypt(#[from] CryptError),
    /// Options that cannot be carried out.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A restored object that cannot be placed safely.
    #[error(transparent)]
    Place(#[from] PlaceError),
    /// A job's description (a backup packed on another machine) that no job can
    /// be run from.
    #[error("the job's description: {0}")]
    BadPlan(&'static str),
}

/// An encrypted job without its key, or a key file that does not open.
#[derive(Debug, Error)]
pub enum CryptError {
    /// The job is encrypted and no key was given.
    #[error("job {job} is encrypted with key {fingerprint}; no key was given")]
    NoKey {
        /// The job's id (or tag, before it is in the catalog).
        job: String,
        /// Short fingerprint of the job's key.
        fingerprint: String,
    },
    /// The job is encrypted with another key than the one given.
    #[error("job {job} is encrypted with key {fingerprint}, not with the given key {given}")]
    WrongKey {
        /// The job's id (or tag).
        job: String,
        /// Short fingerprint of the job's key.
        fingerprint: String,
        /// Short fingerprint of the key given.
        given: String,
    },
    /// A key file could not be decoded or unlocked.
    #[error("key file {}: {source}", path.display())]
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: tapeloom_format::FormatError,
    },
}

/// Options of a backup or benchmark that cannot be carried out.
#[derive(Debug, Error)]
pub enum OptionsError {
    /// No source given.
    #[error("nothing to back up: give at least one source")]
    NoSources,
    /// A generator source (`gen:PRESET:SIZE[:SEED][@RATE]`) that cannot be read.
    #[error("generator source '{spec}': {why} (write gen:PRESET:SIZE[:SEED][@RATE], for example gen:hp-typical:100G or gen:hp-typical:100G:2@150MB)")]
    GenSource {
        /// The source as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// A rate limit of zero, negative or not a number.
    #[error("a stream's rate limit must be above 0 bytes per second, not {rate}")]
    RateLimit {
        /// The limit given.
        rate: f64,
    },
    /// A stream name that cannot be a folder name.
    #[error("stream name '{}' is not a valid folder name", escape_controls(name))]
    StreamName {
        /// The name.
        name: String,
    },
    /// Two streams of one name.
    #[error("two streams are named '{}'", escape_controls(name))]
    DuplicateStream {
        /// The name.
        name: String,
    },
    /// Streams woven in turn with what would leave their order to timing.
    #[error("streams woven in turn need {needs}")]
    InTurn {
        /// What the options lack: "a fixed concurrency", "one drive", ...
        needs: &'static str,
    },
    /// More sources than a job may have streams (FORMAT.md 1).
    #[error("{count} sources: a job may have at most {} (back up their parent folders, or split the job)", tapeloom_format::MAX_STREAMS)]
    TooManyStreams {
        /// The sources given.
        count: usize,
    },
    /// More drives than the library has.
    #[error("the job asks for {asked} drives; the library has {have}")]
    TooManyDrives {
        /// Drives asked for.
        asked: usize,
        /// Drives in the library.
        have: usize,
    },
    /// A drive index past the library's drives.
    #[error("the library has no drive {drive} (it has {have})")]
    NoSuchDrive {
        /// The index asked for.
        drive: usize,
        /// Drives in the library.
        have: usize,
    },
    /// One drive listed twice.
    #[error("drive {drive} is listed twice")]
    DriveTwice {
        /// The index.
        drive: usize,
    },
    /// An empty drive list.
    #[error("the job has no drive to write with")]
    NoDrive,
    /// A drive set that does not parse.
    #[error("not a number, all, or a list like 0,2: '{given}'")]
    DriveSet {
        /// What was given.
        given: String,
    },
    /// A compression mode that does not parse.
    #[error("not none, zstd or auto: '{given}'")]
    Compress {
        /// What was given.
        given: String,
    },
}

/// A restored object that cannot be placed under the restore root safely.
#[derive(Debug, Error)]
pub enum PlaceError {
    /// A directory stands where a file goes.
    #[error("cannot restore {}: a directory is in the way", escape_controls(path))]
    DirectoryInTheWay {
        /// The entry.
        path: String,
    },
    /// A symlink among the parents: following it could leave the root.
    #[error(
        "refusing to restore {}: {} is a symlink on the way",
        escape_controls(path),
        escape_controls(parent)
    )]
    SymlinkOnTheWay {
        /// The entry.
        path: String,
        /// The parent that is a symlink.
        parent: String,
    },
    /// A parent that is not a directory.
    #[error(
        "cannot restore {}: {} is not a directory",
        escape_controls(path),
        escape_controls(parent)
    )]
    NotADirectory {
        /// The entry.
        path: String,
        /// The parent.
        parent: String,
    },
    /// A hard link whose target was not restored.
    #[error(
        "cannot restore hard link {}: its target {} was not restored",
        escape_controls(path),
        escape_controls(target)
    )]
    LinkTargetMissing {
        /// The link.
        path: String,
        /// Its target.
        target: String,
    },
}

/// The result of packing, placing or decoding a tree.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps a file system result with what was being done.
pub fn io<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|source| Error::Io {
        what: what(),
        source,
    })
}

/// Wraps the result of a system call made through nix as [`io`] wraps std's: its
/// errno becomes a `std::io::Error`, so that a failure reads the same whichever
/// way the call was made ("create PATH: Read-only file system (os error 30)").
pub fn sys<T>(r: nix::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    io(r.map_err(std::io::Error::from), what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_the_same_through_nix_and_std() {
        let errno = nix::errno::Errno::EROFS;
        let through_nix = sys::<()>(Err(errno), || "create /x".into()).unwrap_err();
        let through_std = io::<()>(Err(std::io::Error::from_raw_os_error(errno as i32)), || {
            "create /x".into()
        })
        .unwrap_err();
        assert_eq!(through_nix.to_string(), through_std.to_string());
        assert!(
            through_nix.to_string().ends_with("(os error 30)"),
            "{through_nix}"
        );
    }
}
