//! The measuring tools' errors: their own refusals ([`ToolError`]), the engine's
//! errors as the engine gave them, and file system failures.

use std::path::PathBuf;
use thiserror::Error;

/// A measuring tool's error.
#[derive(Debug, Error)]
pub enum Error {
    /// The engine failed (the home, its library, a drive).
    #[error(transparent)]
    Engine(#[from] Box<tapeloom_engine::Error>),
    /// A tool's input that cannot be used.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done ("create /x/y").
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread panicked.
    #[error("{what} panicked")]
    Panicked {
        /// Which thread ("a read-rate stream").
        what: &'static str,
    },
}

impl From<tapeloom_engine::Error> for Error {
    fn from(e: tapeloom_engine::Error) -> Self {
        Error::Engine(Box::new(e))
    }
}

impl From<tapeloom_device::DeviceError> for Error {
    fn from(e: tapeloom_device::DeviceError) -> Self {
        tapeloom_engine::Error::from(e).into()
    }
}

impl From<tapeloom_catalog::CatalogError> for Error {
    fn from(e: tapeloom_catalog::CatalogError) -> Self {
        tapeloom_engine::Error::from(e).into()
    }
}

/// The measuring tools' result.
pub type Result<T> = std::result::Result<T, Error>;

/// A measuring tool's input that cannot be used.
#[derive(Debug, Error)]
pub enum ToolError {
    /// No such drive model.
    #[error("no drive model '{name}' (try lto1 .. lto10)")]
    NoModel {
        /// The name given.
        name: String,
    },
    /// A scale that is not a positive number.
    #[error("scale {scale} must be a positive number")]
    Scale {
        /// The scale.
        scale: f64,
    },
    /// A block size out of range.
    #[error("block size {size} is out of range (1 byte to 8 MiB)")]
    BlockSize {
        /// The size.
        size: u64,
    },
    /// The modeled drive kept no statistics.
    #[error("the modeled drive kept no statistics")]
    NoStatistics,
    /// An offset past the cartridge.
    #[error("offset {offset} is beyond the {capacity_gb} GB of an {model} cartridge")]
    BeyondCartridge {
        /// The offset.
        offset: u64,
        /// The cartridge's capacity in GB.
        capacity_gb: f64,
        /// The model.
        model: String,
    },
    /// Reading through backwards.
    #[error("reading through goes forward only")]
    ReadBackwards,
    /// Spacing backwards or over empty files.
    #[error("spacing over files goes forward, over files of at least 1 byte")]
    SpaceBackwards,
    /// A source rate on a library drive, which runs at its own pace.
    #[error("a source rate works with a drive model only, not with a library drive")]
    SourceRateOnLibrary,
    /// No folder given to read.
    #[error("no directories to read")]
    NoDirectories,
    /// No such dataset preset.
    #[error("no dataset preset '{name}' (presets: {presets})")]
    NoPreset {
        /// The name given.
        name: String,
        /// The presets there are.
        presets: String,
    },
    /// File sizes that are not powers of two in order.
    #[error("file sizes {min} to {max}: both must be powers of two (at least 1 byte), the first no larger than the second")]
    SizeClasses {
        /// Smallest.
        min: u64,
        /// Largest.
        max: u64,
    },
    /// A compressibility below 1 or above 100.
    #[error("ratio {ratio} must be a number from 1 to 100")]
    Ratio {
        /// The ratio.
        ratio: f64,
    },
    /// A tree too large.
    #[error("a tree of depth {depth} and breadth {breadth} has more than {max} directories")]
    TooManyDirs {
        /// Depth.
        depth: u32,
        /// Breadth.
        breadth: u32,
        /// The limit.
        max: u64,
    },
    /// The dataset's folder is a file.
    #[error("{} exists and is not a directory", dir.display())]
    NotADirectory {
        /// The folder.
        dir: PathBuf,
    },
    /// The dataset's folder holds something.
    #[error("{} is not empty: the dataset needs an empty or new directory", dir.display())]
    NotEmpty {
        /// The folder.
        dir: PathBuf,
    },
    /// The requested total is smaller than one file of the smallest class.
    #[error("a total of {total} bytes is less than the smallest file ({min} bytes)")]
    TotalTooSmall {
        /// The total asked for.
        total: u64,
        /// The smallest file size.
        min: u64,
    },
}

/// Wraps an I/O result with what was being done.
pub(crate) fn io<T>(r: std::io::Result<T>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|source| Error::Io {
        what: what(),
        source,
    })
}
