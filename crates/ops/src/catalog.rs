//! The catalog as a whole: its consistency check, and a copy of it into another
//! database (a move from SQLite to PostgreSQL).

use crate::error::Result;
use tapeloom_catalog::Catalog;
pub use tapeloom_catalog::{CatalogError, CheckReport, Copied};
use tapeloom_engine::Home;

/// The home's catalog checked: every problem it finds between its tables.
pub fn check(home: &Home) -> Result<CheckReport> {
    Ok(home.catalog.check()?)
}

/// Copies the home's catalog into the empty catalog at `url` (a password in the
/// URL is refused: it belongs in the environment), recording this home as its
/// host; what was copied, and the copy's check.
pub fn copy(home: &Home, url: &str) -> Result<(Copied, CheckReport)> {
    tapeloom_engine::refuse_password(url)?;
    let mut dest = Catalog::connect(url)?;
    dest.set_host(&tapeloom_engine::home_name(home.dir())?);
    let copied = home.catalog.copy_into(&dest)?;
    let report = dest.check()?;
    Ok((copied, report))
}
