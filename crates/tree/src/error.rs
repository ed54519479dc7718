//! What packing, placing and decoding a tree can fail on, without a catalog or a
//! drive: a file system operation on a path, bytes that do not decode, a key. The
//! engine's error wraps each in its variant of the same name, with the same
//! message.

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

/// The result of packing, placing or decoding a tree.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps a file system result with what was being done.
pub fn io<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|source| Error::Io {
        what: what(),
        source,
    })
}
