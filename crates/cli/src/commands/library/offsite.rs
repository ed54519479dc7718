//! `library export` and `library import`: cartridges leave the library through
//! its mail slots (import/export elements) to be kept offsite, and come back the
//! same way. The catalog keeps which are offsite and since when; writers never
//! choose a cartridge that is not in the library, and a restore that needs one
//! says which to bring back.

use crate::error::CliError;
use crate::output::Output;
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::{escape_controls, Home, MediaError};

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

/// The cartridges moved, and where to.
#[derive(Serialize)]
pub struct Rotated {
    /// `export` or `import`.
    op: &'static str,
    cartridges: Vec<Placed>,
}

/// One cartridge and the slot or mail slot it is in now.
#[derive(Serialize)]
struct Placed {
    barcode: String,
    slot: usize,
}

/// Moves each cartridge (from its slot, or its drive after an unload) into an
/// empty mail slot, and marks it offsite.
pub fn export(a: ExportArgs, home: &Home) -> Result<Rotated> {
    let mut lib = home.library()?;
    let mut cartridges = Vec::new();
    for barcode in a.barcodes {
        let inv = lib.inventory()?;
        let Some(to) = (inv.import_export.iter())
            .find(|m| m.barcode.is_none())
            .map(|m| m.address)
        else {
            return Err(CliError::NoFreeMailSlot { barcode }.into());
        };
        if let Some(d) = inv.drive_of(&barcode) {
            lib.unload(d, None)?;
        }
        let inv = lib.inventory()?;
        let Some(from) = inv.slot_of(&barcode) else {
            return Err(tapeloom_engine::Error::Media(MediaError::NotInLibrary { barcode }).into());
        };
        lib.transfer(from, to)?;
        let now = tapeloom_engine::clock::now()?.as_nanos();
        home.catalog.set_offsite(&barcode, now)?;
        cartridges.push(Placed { barcode, slot: to });
    }
    Ok(Rotated {
        op: "export",
        cartridges,
    })
}

/// Moves each cartridge from its mail slot into an empty storage slot, and
/// marks it back onsite.
pub fn import(a: ImportArgs, home: &Home) -> Result<Rotated> {
    let mut lib = home.library()?;
    let barcodes = match a.barcodes.is_empty() {
        true => (lib.inventory()?.import_export.iter())
            .filter_map(|m| m.barcode.clone())
            .collect(),
        false => a.barcodes,
    };
    let mut cartridges = Vec::new();
    for barcode in barcodes {
        let inv = lib.inventory()?;
        let Some(from) = inv.mail_slot_of(&barcode) else {
            return Err(CliError::NotInMailSlot { barcode }.into());
        };
        // A slot a loaded cartridge came from is kept for its way back.
        let held: Vec<usize> = inv.drives.iter().filter_map(|d| d.from_slot).collect();
        let Some(to) = (inv.slots.iter())
            .find(|s| s.barcode.is_none() && !held.contains(&s.address))
            .map(|s| s.address)
        else {
            return Err(CliError::NoFreeSlot { barcode }.into());
        };
        lib.transfer(from, to)?;
        home.catalog.clear_offsite(&barcode)?;
        cartridges.push(Placed { barcode, slot: to });
    }
    Ok(Rotated {
        op: "import",
        cartridges,
    })
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
