//! The library as a server finds it when it starts, and the drives and
//! cartridges its status page shows.
//!
//! The status page looks at the library as `library status` does but without the
//! home's lock (a client's backup may hold it): its inventory only, nothing that
//! moves a tape.

use crate::access::Catalogued;
use crate::library::cartridge_state;
use crate::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};
use tapeloom_device::{Inventory, TapeLibrary, VirtualLibrary};
use tapeloom_engine::{Home, ScsiLibraryConfig};

/// The library of a home as a server that starts finds it.
pub struct AtStart {
    /// Its drives (one when the inventory could not be read).
    pub drives: usize,
    /// The speed of the slowest drive's lowest step, in MB/s, where known.
    pub lowest_mb_s: Option<f64>,
    /// The cartridges in it (none when the inventory could not be read).
    pub barcodes: Vec<String>,
}

/// The library of `home` as a server that starts finds it.
pub fn at_start(home: &Home) -> Result<AtStart> {
    let mut lib = home.library()?;
    let inventory = lib.inventory().ok();
    Ok(AtStart {
        drives: inventory.as_ref().map_or(1, |i| i.drives.len()),
        lowest_mb_s: lib.lowest_speed_mb_s(),
        barcodes: inventory.map(|i| i.barcodes()).unwrap_or_default(),
    })
}

/// The library's drives and cartridges, or why it could not be looked at.
#[derive(Serialize, Default, Clone)]
pub struct Status {
    /// What it is (`virtual library in ...`, `SCSI library ...`).
    pub description: Option<String>,
    /// Why the library could not be looked at.
    pub error: Option<String>,
    /// Its drives.
    pub drives: Vec<Drive>,
    /// Its cartridges.
    pub cartridges: Vec<Cartridge>,
}

/// A drive and the cartridge in it.
#[derive(Serialize, Clone)]
pub struct Drive {
    /// Its index.
    pub index: usize,
    /// Its device, for people.
    pub device: String,
    /// The barcode of the cartridge in it.
    pub loaded: Option<String>,
}

/// A cartridge and what the catalog knows of it.
#[derive(Serialize, Clone)]
pub struct Cartridge {
    /// Its barcode.
    pub barcode: String,
    /// `slot N` or `drive N`.
    pub location: String,
    /// As `library status` says: its volume's state, blank, foreign, cleaning.
    pub state: String,
    /// Its pool, labelled or assigned.
    pub pool: Option<String>,
    /// Bytes written on it, where the library knows without loading it.
    pub bytes_used: Option<u64>,
    /// Its capacity, where known.
    pub capacity: Option<u64>,
}

/// Why the library could not be opened.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is damaged: {source}")]
    Devices {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Device(#[from] tapeloom_device::DeviceError),
}

/// The library of the home at `home` without its lock: the SCSI devices attached
/// to it, else the virtual one.
fn open_unlocked(home: &Path) -> std::result::Result<Box<dyn TapeLibrary>, OpenError> {
    // The file `Home::attached` reads; the home is not opened, so as not to wait
    // for its lock.
    let path = home.join("devices.json");
    match std::fs::read(&path) {
        Ok(text) => {
            let cfg: ScsiLibraryConfig = serde_json::from_slice(&text)
                .map_err(|source| OpenError::Devices { path, source })?;
            Ok(Box::new(tapeloom_device::scsi::ScsiLibrary::open(&cfg)?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(Box::new(VirtualLibrary::open(&home.join("library"))?))
        }
        Err(source) => Err(OpenError::Read { path, source }),
    }
}

/// The drives and cartridges of the library of the home at `home`, with what
/// the catalog `at` knows of each cartridge; the library's error in the status
/// when it cannot be looked at.
pub fn status(home: &Path, at: &impl Catalogued) -> Result<Status> {
    let looked = open_unlocked(home).and_then(|mut lib| {
        let inv = lib.inventory()?;
        Ok((lib, inv))
    });
    let (lib, inv) = match looked {
        Ok(l) => l,
        Err(e) => {
            return Ok(Status {
                error: Some(e.to_string()),
                ..Status::default()
            })
        }
    };
    Ok(Status {
        description: Some(lib.describe()),
        error: None,
        drives: (inv.drives.iter())
            .map(|d| Drive {
                index: d.index,
                device: lib.drive_device(d.index),
                loaded: d.loaded.clone(),
            })
            .collect(),
        cartridges: cartridges(lib.as_ref(), &inv, at)?,
    })
}

fn cartridges(
    lib: &dyn TapeLibrary,
    inv: &Inventory,
    at: &impl Catalogued,
) -> Result<Vec<Cartridge>> {
    let cat = at.ops_catalog();
    let vols = cat.volumes()?;
    let mut out = Vec::new();
    for b in inv.barcodes() {
        let used = lib.cartridge_bytes(&b);
        let v = vols.iter().find(|v| v.barcode == b);
        let location = match (inv.slot_of(&b), inv.drive_of(&b)) {
            (Some(s), _) => format!("slot {s}"),
            (_, Some(d)) => format!("drive {d}"),
            _ => "?".into(),
        };
        out.push(Cartridge {
            state: cartridge_state(&b, v, used),
            pool: match v {
                Some(v) => Some(v.pool.clone()),
                None => cat.pool_of_barcode(&b)?,
            },
            barcode: b,
            location,
            bytes_used: used,
            capacity: lib.capacity(),
        });
    }
    Ok(out)
}
