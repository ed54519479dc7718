//! `library inventory`: what is in each drive, slot and mail slot.

use crate::output::Output;
use anyhow::{Context, Result};
use serde::Serialize;
use tapeloom_device::SlotElement;
use tapeloom_engine::{escape_controls, Home};

#[derive(clap::Args)]
pub struct Args {
    /// Have the changer scan its slots and barcodes again first.
    #[arg(long)]
    rescan: bool,
}

/// Drives, slots and mail slots, with their cartridges.
#[derive(Serialize)]
pub struct Inventory {
    drives: Vec<Drive>,
    slots: Vec<Slot>,
    import_export: Vec<Slot>,
    /// The library's description, for the heading.
    #[serde(skip)]
    library: String,
}

/// A drive and the cartridge in it.
#[derive(Serialize)]
struct Drive {
    index: usize,
    device: String,
    loaded: Option<String>,
}

/// A slot (or mail slot) and the cartridge in it.
#[derive(Serialize)]
pub struct Slot {
    address: usize,
    barcode: Option<String>,
}

/// The slots of an inventory.
pub fn slots(s: &[SlotElement]) -> Vec<Slot> {
    s.iter()
        .map(|s| Slot {
            address: s.address,
            barcode: s.barcode.clone(),
        })
        .collect()
}

pub fn run(a: Args, home: &Home) -> Result<Inventory> {
    let mut lib = home.library()?;
    if a.rescan {
        lib.rescan().context("rescan the changer")?;
    }
    let inv = lib.inventory()?;
    let drives = (inv.drives.iter())
        .map(|d| Drive {
            index: d.index,
            device: lib.drive_device(d.index),
            loaded: d.loaded.clone(),
        })
        .collect();
    Ok(Inventory {
        drives,
        slots: slots(&inv.slots),
        import_export: slots(&inv.import_export),
        library: lib.describe(),
    })
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
