//! The engine's error type.

use std::fmt;

/// An engine error: what was being done, and why it failed.
#[derive(Debug)]
pub enum Error {
    /// A device (drive or changer) failed.
    Device(tapeloom_device::DeviceError),
    /// The catalog failed.
    Catalog(tapeloom_catalog::CatalogError),
    /// Bytes from tape could not be decoded.
    Format(tapeloom_format::FormatError),
    /// A file system operation failed.
    Io(String, std::io::Error),
    /// Anything else, said in words.
    Msg(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Device(e) => write!(f, "{e}"),
            Error::Catalog(e) => write!(f, "{e}"),
            Error::Format(e) => write!(f, "{e}"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
            Error::Msg(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<tapeloom_device::DeviceError> for Error {
    fn from(e: tapeloom_device::DeviceError) -> Self {
        Error::Device(e)
    }
}
impl From<tapeloom_catalog::CatalogError> for Error {
    fn from(e: tapeloom_catalog::CatalogError) -> Self {
        Error::Catalog(e)
    }
}
impl From<tapeloom_format::FormatError> for Error {
    fn from(e: tapeloom_format::FormatError) -> Self {
        Error::Format(e)
    }
}

/// Result of engine operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O result with what was being done.
pub(crate) fn io<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|e| Error::Io(what(), e))
}
