//! `library export` and `library import`: cartridges leave the library through
//! its mail slots (import/export elements) to be kept offsite, and come back the
//! same way. The catalog keeps which are offsite and since when; writers never
//! choose a cartridge that is not in the library, and a restore that needs one
//! says which to bring back.

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::{escape_controls, Home};
pub use tapeloom_ops::library::Rotated;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The cartridges' barcodes.
    #[arg(required = true)]
    barcodes: Vec<String>,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The cartridges' barcodes (default: every cartridge in a mail slot).
    barcodes: Vec<String>,
}

/// Moves each cartridge into an empty mail slot, and marks it offsite.
pub fn export(a: ExportArgs, home: &Home) -> Result<Rotated> {
    tapeloom_ops::library::export(home, a.barcodes).ops()
}

/// Moves each cartridge from its mail slot into an empty storage slot, and
/// marks it back onsite.
pub fn import(a: ImportArgs, home: &Home) -> Result<Rotated> {
    tapeloom_ops::library::import(home, a.barcodes).ops()
}

impl Output for Rotated {
    fn print(&self) {
        let (verb, place) = match self.op {
            "export" => ("exported", "mail slot"),
            _ => ("imported", "slot"),
        };
        for c in &self.cartridges {
            outln!(
                "{} {verb}: in {place} {}",
                escape_controls(&c.barcode),
                c.slot
            );
        }
    }
}
