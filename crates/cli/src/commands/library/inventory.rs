//! `library inventory`: what is in each drive, slot and mail slot.

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::{escape_controls, Home};
pub use tapeloom_ops::library::Inventory;

#[derive(clap::Args)]
pub struct Args {
    /// Have the changer scan its slots and barcodes again first.
    #[arg(long)]
    rescan: bool,
}

/// What is in each drive, slot and mail slot.
pub fn run(a: Args, home: &Home) -> Result<Inventory> {
    tapeloom_ops::library::inventory(home, a.rescan).ops()
}

impl Output for Inventory {
    fn print(&self) {
        // Barcodes come from the changer and the cartridges' labels: escaped.
        let shown =
            |b: &Option<String>| escape_controls(b.as_deref().unwrap_or("empty")).into_owned();
        outln!("{}", escape_controls(&self.library));
        for d in &self.drives {
            outln!(
                "drive {} ({}): {}",
                d.index,
                escape_controls(&d.device),
                shown(&d.loaded)
            );
        }
        for s in &self.slots {
            outln!("slot {:>4}: {}", s.address, shown(&s.barcode));
        }
        for s in &self.import_export {
            outln!("mail slot {:>4}: {}", s.address, shown(&s.barcode));
        }
    }
}
