//! The library's cartridges and drives as the catalog knows them: what is where
//! (inventory, status), moving a cartridge, its write protection, and cartridges
//! leaving for and coming back from offsite through the mail slots.

use crate::error::{OpsError, Result};
use serde::Serialize;
use tapeloom_catalog::Volume;
use tapeloom_device::{DriveHealth, SlotElement, VolumeStatistics};
use tapeloom_device::{LibraryConfig, VirtualLibrary};
use tapeloom_engine::{Home, MediaError};

/// Makes the home's virtual library anew from `cfg`, and forgets the volumes of
/// cartridges it no longer has that hold no job (on a shared catalog, only
/// among this library's old and new cartridges). The library made.
pub fn create(home: &Home, cfg: LibraryConfig) -> Result<VirtualLibrary> {
    let before = home.site_barcodes();
    let lib = home.create_library(cfg)?;
    match before {
        Some(mut own) => {
            own.extend(lib.all_barcodes());
            home.catalog.forget_unused_volumes_among(&own)?;
        }
        None => {
            home.catalog.forget_unused_volumes()?;
        }
    }
    Ok(lib)
}

/// Uses the SCSI library `cfg` describes from now on (`force`: even though the
/// library in use holds jobs), and forgets the volumes that hold no job.
pub fn attach(home: &Home, cfg: &tapeloom_engine::ScsiLibraryConfig, force: bool) -> Result<()> {
    home.attach(cfg, force)?;
    home.catalog.forget_unused_volumes()?;
    Ok(())
}

/// Goes back to the home's virtual library (`force`: even though the SCSI
/// library holds jobs); the virtual library's barcodes.
pub fn detach(home: &Home, force: bool) -> Result<Vec<String>> {
    let lib = home.virtual_library()?;
    home.detach(force)?;
    Ok(lib.all_barcodes())
}

/// Drives, slots and mail slots, with their cartridges.
#[derive(Serialize)]
pub struct Inventory {
    /// The drives.
    pub drives: Vec<Drive>,
    /// The storage slots.
    pub slots: Vec<Slot>,
    /// The mail slots (import/export elements).
    pub import_export: Vec<Slot>,
    /// The library's description, for the heading.
    #[serde(skip)]
    pub library: String,
}

/// A drive and the cartridge in it.
#[derive(Serialize)]
pub struct Drive {
    /// The drive's index, from 0.
    pub index: usize,
    /// The drive's device (a path, or the virtual drive's name).
    pub device: String,
    /// The barcode of the cartridge in it, if any.
    pub loaded: Option<String>,
}

/// A slot (or mail slot) and the cartridge in it.
#[derive(Serialize)]
pub struct Slot {
    /// The slot's element address.
    pub address: usize,
    /// The cartridge's barcode.
    pub barcode: Option<String>,
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

/// What is in each drive, slot and mail slot; the changer scans its slots and
/// barcodes again first when `rescan`.
pub fn inventory(home: &Home, rescan: bool) -> Result<Inventory> {
    let mut lib = home.library()?;
    if rescan {
        lib.rescan().map_err(|e| OpsError::Library {
            what: "rescan the changer".into(),
            source: e.into(),
        })?;
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

/// The cartridges whose protection was set or cleared.
#[derive(Serialize)]
pub struct Protected {
    /// The cartridges' barcodes.
    pub barcodes: Vec<String>,
    /// Whether the cartridge is write protected.
    pub write_protected: bool,
}

/// Sets (`on`) or clears the write protection of each cartridge.
pub fn protect(home: &Home, barcodes: Vec<String>, on: bool) -> Result<Protected> {
    let mut lib = home.library()?;
    for b in &barcodes {
        lib.set_write_protected(b, on)
            .map_err(|e| OpsError::Library {
                what: format!("protect {b}"),
                source: e.into(),
            })?;
    }
    Ok(Protected {
        barcodes,
        write_protected: on,
    })
}

/// A cartridge and the slot it is in now.
#[derive(Serialize)]
pub struct Moved {
    /// The cartridge's barcode.
    pub barcode: String,
    /// The slot (or mail slot) it is in now.
    pub slot: usize,
}

/// A cartridge from a drive or slot into an empty slot.
pub fn move_cartridge(home: &Home, barcode: String, to: usize) -> Result<Moved> {
    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    if let Some(d) = inv.drive_of(&barcode) {
        lib.unload(d, Some(to))?;
    } else if let Some(s) = inv.slot_of(&barcode).or(inv.mail_slot_of(&barcode)) {
        if s != to {
            lib.transfer(s, to)?;
        }
    } else {
        return Err(tapeloom_engine::Error::Media(MediaError::NotInLibrary { barcode }).into());
    }
    Ok(Moved { barcode, slot: to })
}

/// The cartridges moved, and where to.
#[derive(Serialize)]
pub struct Rotated {
    /// `export` or `import`.
    pub op: &'static str,
    /// The cartridges.
    pub cartridges: Vec<Placed>,
}

/// One cartridge and the slot or mail slot it is in now.
#[derive(Serialize)]
pub struct Placed {
    /// The cartridge's barcode.
    pub barcode: String,
    /// The slot (or mail slot) it is in now.
    pub slot: usize,
}

/// Moves each cartridge (from its slot, or its drive after an unload) into an
/// empty mail slot, and marks it offsite.
pub fn export(home: &Home, barcodes: Vec<String>) -> Result<Rotated> {
    let mut lib = home.library()?;
    let mut cartridges = Vec::new();
    for barcode in barcodes {
        let inv = lib.inventory()?;
        let Some(to) = (inv.import_export.iter())
            .find(|m| m.barcode.is_none())
            .map(|m| m.address)
        else {
            return Err(OpsError::NoFreeMailSlot { barcode });
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
pub fn import(home: &Home, barcodes: Vec<String>) -> Result<Rotated> {
    let mut lib = home.library()?;
    let barcodes = match barcodes.is_empty() {
        true => (lib.inventory()?.import_export.iter())
            .filter_map(|m| m.barcode.clone())
            .collect(),
        false => barcodes,
    };
    let mut cartridges = Vec::new();
    for barcode in barcodes {
        let inv = lib.inventory()?;
        let Some(from) = inv.mail_slot_of(&barcode) else {
            return Err(OpsError::NotInMailSlot { barcode });
        };
        // A slot a loaded cartridge came from is kept for its way back.
        let held: Vec<usize> = inv.drives.iter().filter_map(|d| d.from_slot).collect();
        let Some(to) = (inv.slots.iter())
            .find(|s| s.barcode.is_none() && !held.contains(&s.address))
            .map(|s| s.address)
        else {
            return Err(OpsError::NoFreeSlot { barcode });
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

/// The library's drives, slots and cartridges.
#[derive(Serialize)]
pub struct Status {
    /// The library's description.
    pub library: String,
    /// The drives.
    pub drives: Vec<DriveStatus>,
    /// The storage slots.
    pub slots: Vec<Slot>,
    /// The cartridges.
    pub cartridges: Vec<Cartridge>,
    /// Cartridges exported (`library export`) and not imported since.
    pub offsite: Vec<Offsite>,
    /// Bytes on the cartridges, where the library knows without loading them.
    pub bytes_used: u64,
    /// The slots, drives and cartridge capacity, for the heading.
    #[serde(skip)]
    pub capacity: Option<u64>,
}

/// A cartridge offsite: since when, and whether it still waits in a mail slot.
#[derive(Serialize)]
pub struct Offsite {
    /// The cartridge's barcode.
    pub barcode: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// The mail slot it still waits in, if any.
    pub mail_slot: Option<usize>,
}

/// A drive, its cartridge, and what it says of its health.
#[derive(Serialize)]
pub struct DriveStatus {
    /// The drive's index, from 0.
    pub index: usize,
    /// The drive's device (a path, or the virtual drive's name).
    pub device: String,
    /// The barcode of the cartridge in it, if any.
    pub loaded: Option<String>,
    /// The drive's TapeAlert flags, when it reports them.
    pub tape_alerts: Option<Vec<String>>,
    /// The drive's volume statistics, when it reports them.
    pub volume_statistics: Option<VolumeStatistics>,
}

/// A cartridge: where it is, what the catalog knows of it, and how full it is.
#[derive(Serialize)]
pub struct Cartridge {
    /// The cartridge's barcode.
    pub barcode: String,
    /// Where it is: `slot N` or `drive N`.
    pub location: String,
    /// What the catalog knows of it (`blank`, `append`, `full`, `suspect`, `cleaning`, ...).
    pub state: String,
    /// How many jobs it holds.
    pub jobs: u64,
    /// Bytes on the cartridges, where the library knows without loading them.
    pub bytes_used: Option<u64>,
    /// A cartridge's capacity in bytes, when the library knows it.
    pub capacity: Option<u64>,
    /// Whether the cartridge is write protected.
    pub write_protected: bool,
    /// Its label's generation (one more each time it was recycled); none for a
    /// cartridge tapeloom has not labelled.
    pub generation: Option<u32>,
    /// Why it is suspect, and other events of its life the catalog noted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The library's drives, slots and cartridges, with what the catalog knows of
/// each.
pub fn status(home: &Home) -> Result<Status> {
    let mut lib = home.library()?;
    let inv = lib.inventory()?;
    let capacity = lib.capacity();
    let vols = home.catalog.volumes()?;
    let mut cartridges = Vec::new();
    for b in inv.barcodes() {
        let used = lib.cartridge_bytes(&b);
        let v = vols.iter().find(|v| v.barcode == b);
        let state = cartridge_state(&b, v, used);
        let jobs = match v {
            Some(v) => home.catalog.jobs_on_volume(v.id)?,
            None => 0,
        };
        let location = match (inv.slot_of(&b), inv.drive_of(&b)) {
            (Some(s), _) => format!("slot {s}"),
            (_, Some(d)) => format!("drive {d}"),
            _ => "?".into(),
        };
        let notes = match v {
            Some(v) => home.catalog.volume_notes(v.id)?,
            None => Vec::new(),
        };
        cartridges.push(Cartridge {
            notes: notes.into_iter().map(|(_, n)| n).collect(),
            write_protected: lib.is_write_protected(&b),
            generation: v.map(|v| v.generation),
            barcode: b,
            location,
            state,
            jobs,
            bytes_used: used,
            capacity,
        });
    }
    let mut drives = Vec::new();
    for d in &inv.drives {
        let h: DriveHealth = lib.drive_health(d.index).unwrap_or_default();
        drives.push(DriveStatus {
            index: d.index,
            device: lib.drive_device(d.index),
            loaded: d.loaded.clone(),
            tape_alerts: h.tape_alerts,
            volume_statistics: h.volume_statistics,
        });
    }
    let offsite = (home.catalog.offsite()?.into_iter())
        .map(|(barcode, since)| Offsite {
            mail_slot: inv.mail_slot_of(&barcode),
            since: tapeloom_proto::fmt::time(since),
            barcode,
        })
        .collect();
    Ok(Status {
        offsite,
        library: lib.describe(),
        drives,
        slots: slots(&inv.slots),
        bytes_used: cartridges.iter().filter_map(|c| c.bytes_used).sum(),
        cartridges,
        capacity,
    })
}

/// What a cartridge is: cleaning, its volume's state when the catalog knows it,
/// else blank or foreign by the bytes on it (`used`), or unknown.
pub fn cartridge_state(barcode: &str, v: Option<&Volume>, used: Option<u64>) -> String {
    match (v, used) {
        _ if tapeloom_device::is_cleaning(barcode) => "cleaning".into(),
        (Some(v), _) => v.status.to_string(),
        (None, Some(0)) => "blank".into(),
        (None, Some(_)) => "foreign".into(),
        (None, None) => "unknown".into(),
    }
}
