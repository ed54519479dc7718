//! `library attach` and `library detach`: a SCSI library as the home's library, or
//! back to the virtual one.

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_device::scsi::{ssc::ScsiDrive, ScsiLibrary, ScsiLibraryConfig};
use tapeloom_device::TapeDrive;
use tapeloom_engine::{escape_controls, Home};

#[derive(clap::Args)]
pub struct AttachArgs {
    /// The media changer.
    #[arg(long, value_name = "DEV")]
    changer: String,
    /// A tape drive, in the order of the changer's drive elements (repeat).
    #[arg(long = "drive", value_name = "DEV", required = true)]
    drives: Vec<String>,
    /// Attach even though the current library holds jobs.
    #[arg(long)]
    force: bool,
}

/// The changer and drives attached.
#[derive(Serialize)]
pub struct Attached {
    changer: String,
    drives: Vec<Drive>,
    slots: usize,
}

/// One attached drive and the changer's element it was matched to.
#[derive(Serialize)]
struct Drive {
    index: usize,
    device: String,
    description: String,
    serial: Option<String>,
    element: u16,
}

/// Records a changer and its drives as the home's library.
pub fn attach(a: AttachArgs, home: &Home) -> Result<Attached> {
    let cfg = ScsiLibraryConfig {
        changer: a.changer.clone(),
        drives: a.drives.clone(),
    };
    // Everything must answer before the home is changed.
    let mut lib = ScsiLibrary::open(&cfg).with_context(|| format!("open changer {}", a.changer))?;
    let mut drives = Vec::new();
    for (index, dev) in a.drives.iter().enumerate() {
        // Looked at, not used: a drive that cannot tell its position is not rewound.
        let d = ScsiDrive::open_for_status(dev).with_context(|| format!("open drive {dev}"))?;
        drives.push(Drive {
            index,
            device: dev.clone(),
            description: d.describe(),
            serial: d.serial.clone(),
            element: lib.drive_element(index)?,
        });
    }
    let inv = tapeloom_device::Changer::inventory(&mut lib)?;
    tapeloom_ops::library::attach(home, &cfg, a.force).ops()?;
    Ok(Attached {
        changer: a.changer,
        drives,
        slots: inv.slots.len(),
    })
}

impl Output for Attached {
    fn print(&self) {
        outln!(
            "attached changer {} ({} slots) with {} drives",
            escape_controls(&self.changer),
            self.slots,
            self.drives.len()
        );
        for d in &self.drives {
            outln!(
                "drive {}: {} ({})",
                d.index,
                escape_controls(&d.device),
                escape_controls(&d.description)
            );
        }
    }
}

#[derive(clap::Args)]
pub struct DetachArgs {
    /// Detach even though the library holds jobs.
    #[arg(long)]
    force: bool,
}

/// The virtual library in use again.
#[derive(Serialize)]
pub struct Detached {
    library: PathBuf,
    barcodes: Vec<String>,
}

/// Goes back to the home's virtual library.
pub fn detach(a: DetachArgs, home: &Home) -> Result<Detached> {
    let barcodes = tapeloom_ops::library::detach(home, a.force).ops()?;
    Ok(Detached {
        library: home.library_dir(),
        barcodes,
    })
}

impl Output for Detached {
    fn print(&self) {
        outln!("using the virtual library {}", self.library.display());
    }
}
