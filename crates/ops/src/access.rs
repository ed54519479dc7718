//! How an operation reaches the catalog: through a home a front end opened (the
//! command line, the HSM) or through a connection of its own ([`Conn`], the
//! server's requests, which run beside each other without the home's lock).
//! Front ends hold one of the two and pass it on; they never call the catalog
//! themselves (`scripts/layers.py` checks that).

use std::path::{Path, PathBuf};
use tapeloom_catalog::Catalog;
use tapeloom_engine::Home;

/// A connection to a home's catalog that takes no lock, for a server's request.
/// The home must have been opened once with `Home::open`.
pub struct Conn(Catalog, PathBuf);

impl Conn {
    /// Connects to the catalog of home `dir`.
    pub fn open(dir: &Path) -> crate::Result<Conn> {
        Ok(Conn(Home::open_catalog_unlocked(dir)?, dir.to_path_buf()))
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for tapeloom_engine::Home {}
    impl Sealed for super::Conn {}
}

/// What holds a catalog an operation may use: a [`Home`] or a [`Conn`].
pub trait Catalogued: sealed::Sealed {
    /// The catalog, for the operations of this crate only.
    #[doc(hidden)]
    fn ops_catalog(&self) -> &Catalog;
    /// The home's folder, for the operations of this crate only.
    #[doc(hidden)]
    fn ops_dir(&self) -> &Path;
}

impl Catalogued for Home {
    fn ops_catalog(&self) -> &Catalog {
        &self.catalog
    }
    fn ops_dir(&self) -> &Path {
        self.dir()
    }
}

impl Catalogued for Conn {
    fn ops_catalog(&self) -> &Catalog {
        &self.0
    }
    fn ops_dir(&self) -> &Path {
        &self.1
    }
}
