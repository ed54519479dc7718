//! What can go wrong in hierarchical storage.

use std::path::PathBuf;

/// An error of hierarchical storage, in one line.
#[derive(Debug, thiserror::Error)]
pub enum HsmError {
    /// A file or folder operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The engine (a backup, a verify or a restore) failed.
    #[error(transparent)]
    Engine(#[from] tapeloom_engine::Error),
    /// A path outside every managed folder.
    #[error("{} is in no managed folder (add one with hsm manage DIR)", .0.display())]
    NotManaged(PathBuf),
    /// No folder is managed yet.
    #[error("no folder is managed yet: add one with hsm manage DIR")]
    NothingManaged,
    /// A folder to manage that is not one.
    #[error("{} is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// A file's record that does not read.
    #[error("the record of {} does not read: {why}", path.display())]
    BadStamp {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A migration's job that did not end ok.
    #[error("the migration's job {job} ended {status}: nothing was marked as on tape")]
    JobFailed {
        /// The job.
        job: i64,
        /// How it ended.
        status: String,
    },
    /// A migration's job whose read-back found damage.
    #[error("the migration's job {job} did not verify: nothing was marked as on tape")]
    NotVerified {
        /// The job.
        job: i64,
    },
    /// An operation's rule refused (a managed folder that overlaps another), or
    /// its step failed (the catalog, the pool's key).
    #[error(transparent)]
    Ops(#[from] tapeloom_ops::OpsError),
    /// A migration's job that its pool's copy pool did not take.
    #[error("the migration's job {job} could not be copied to pool {pool}: {source}; nothing was marked as on tape")]
    NotCopied {
        /// The job.
        job: i64,
        /// The copy pool.
        pool: String,
        /// Why the copy failed.
        source: Box<tapeloom_engine::Error>,
    },
    /// The daemon refused or did not answer a request.
    #[error("the hsm daemon did not {request} {}: {why}", path.display())]
    Daemon {
        /// `mark` or `unmark`.
        request: &'static str,
        /// The file.
        path: PathBuf,
        /// Its answer, or why none came.
        why: String,
    },
    /// Watermarks that are not percentages with low under high.
    #[error("--high and --low take percentages from 1 to 100, --low under --high")]
    BadMarks,
}

/// A result of hierarchical storage.
pub type Result<T> = std::result::Result<T, HsmError>;

/// An I/O error with what was being done to `path`.
pub(crate) fn io<T>(r: std::io::Result<T>, what: &str, path: &std::path::Path) -> Result<T> {
    r.map_err(|source| HsmError::Io {
        what: format!("{what} {}", path.display()),
        source,
    })
}
