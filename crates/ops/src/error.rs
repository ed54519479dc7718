//! Why an operation was refused or failed.

/// The result of an operation.
pub type Result<T> = std::result::Result<T, OpsError>;

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The catalog could not be read or written.
    #[error(transparent)]
    Catalog(#[from] tapeloom_catalog::CatalogError),
    /// The engine failed (the job, the library, the home).
    #[error(transparent)]
    Engine(#[from] Box<tapeloom_engine::Error>),
    /// The pool's key could not be had (not held by a server, or its key file
    /// could not be unlocked).
    #[error("pool {pool}: its key {short}: {source}")]
    PoolKey {
        /// The pool.
        pool: String,
        /// The key's fingerprint, its first 16 hex digits.
        short: String,
        /// Why the key could not be had.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The key file a pool names holds another key than the pool's.
    #[error("key file {file} of pool {pool} holds key {held}, not the pool's {wanted}")]
    WrongPoolKey {
        /// The pool.
        pool: String,
        /// The key file the pool names.
        file: String,
        /// The short fingerprint of the key the file holds.
        held: String,
        /// The fingerprint the pool was given.
        wanted: String,
    },
    /// The library or a drive failed.
    #[error(transparent)]
    Device(#[from] tapeloom_device::DeviceError),
    /// The library failed at a step of an operation.
    #[error("{what}: {source}")]
    Library {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: Box<tapeloom_device::DeviceError>,
    },
    /// `library export` with no empty import/export element left.
    #[error("cartridge {barcode}: the library has no empty mail slot (import/export element) left; take the exported cartridges out first")]
    NoFreeMailSlot {
        /// The cartridge that could not go.
        barcode: String,
    },
    /// `library import` of a cartridge that is in no mail slot.
    #[error(
        "cartridge {barcode} is in no mail slot of the library: put it into one, then import it"
    )]
    NotInMailSlot {
        /// The cartridge.
        barcode: String,
    },
    /// `library import` with no empty storage slot left.
    #[error("cartridge {barcode}: the library has no empty slot to take it")]
    NoFreeSlot {
        /// The cartridge.
        barcode: String,
    },
    /// A cartridge the catalog does not know.
    #[error("the catalog knows no cartridge {0}")]
    NoCartridge(String),
    /// A pool the catalog does not know.
    #[error("no pool {0} in the catalog")]
    NoPool(String),
    /// `library exercise` on a library it cannot exercise.
    #[error("the library needs a cartridge in a slot and a drive to exercise")]
    NothingToExercise,
    /// A name that does not fit what it names.
    #[error("{what} must be 1 to 64 letters, digits, '.', '_' or '-': '{name}' is not")]
    BadName {
        /// What the name is for.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// A file or folder could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A sealed secret could not be opened with the home's key file.
    #[error("{what}: it does not open with {}: was the file replaced?", file.display())]
    Unseal {
        /// What was being opened.
        what: String,
        /// The key file.
        file: std::path::PathBuf,
    },
    /// The system gave no random bytes.
    #[error("read random bytes: {0}")]
    Random(String),
    /// A pool's copy pool must be another pool that exists.
    #[error("pool {pool}: its copy pool {copy_pool} must be another pool that exists (`tapeloom pool create {copy_pool}` first)")]
    BadCopyPool {
        /// The pool being made.
        pool: String,
        /// The copy pool it names.
        copy_pool: String,
    },
    /// A folder to manage inside another managed folder, or around one.
    #[error("{} overlaps the managed folder {}", folder.display(), managed.display())]
    ManagedOverlap {
        /// The folder to manage.
        folder: std::path::PathBuf,
        /// The managed folder it overlaps.
        managed: std::path::PathBuf,
    },
    /// A job names a pool that does not exist.
    #[error("no pool {pool}")]
    UnknownPool {
        /// The pool named.
        pool: String,
    },
    /// A client's job names a set that holds other clients' jobs.
    #[error("set {set} holds jobs that are not this client's: give another --set")]
    OthersSet {
        /// The set named.
        set: String,
    },
}

impl From<tapeloom_engine::Error> for OpsError {
    fn from(e: tapeloom_engine::Error) -> Self {
        OpsError::Engine(Box::new(e))
    }
}

impl OpsError {
    /// The engine's error, when the engine failed.
    pub fn engine(&self) -> Option<&tapeloom_engine::Error> {
        match self {
            OpsError::Engine(e) => Some(e),
            _ => None,
        }
    }
}
