//! `library protect`: a cartridge's write protection, set or cleared through the
//! library (a virtual library keeps it in `library.json`; on a SCSI library the tab
//! is slid by hand, and the library says it cannot).

use crate::output::Output;
use anyhow::{Context as _, Result};
use serde::Serialize;
use tapeloom_engine::Home;

#[derive(clap::Args)]
pub struct Args {
    /// The cartridges' barcodes.
    #[arg(required = true)]
    barcodes: Vec<String>,
    /// Clear the protection instead (the cartridges become writable again).
    #[arg(long)]
    off: bool,
}

/// The cartridges whose protection was set or cleared.
#[derive(Serialize)]
pub struct Protected {
    barcodes: Vec<String>,
    write_protected: bool,
}

pub fn run(a: Args, home: &Home) -> Result<Protected> {
    let mut lib = home.library()?;
    for b in &a.barcodes {
        lib.set_write_protected(b, !a.off)
            .with_context(|| format!("protect {b}"))?;
    }
    Ok(Protected {
        barcodes: a.barcodes,
        write_protected: !a.off,
    })
}

impl Output for Protected {
    fn print(&self) {
        let what = if self.write_protected {
            "write protected"
        } else {
            "writable"
        };
        for b in &self.barcodes {
            outln!("{}: {what}", tapeloom_engine::escape_controls(b));
        }
    }
}
