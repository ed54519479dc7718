//! `library protect`: a cartridge's write protection, set or cleared through the
//! library (a virtual library keeps it in `library.json`; on a SCSI library the tab
//! is slid by hand, and the library says it cannot).

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::Result;
use tapeloom_engine::Home;
pub use tapeloom_ops::library::Protected;

#[derive(clap::Args)]
pub struct Args {
    /// The cartridges' barcodes.
    #[arg(required = true)]
    barcodes: Vec<String>,
    /// Clear the protection instead (the cartridges become writable again).
    #[arg(long)]
    off: bool,
}

/// Sets or clears the write protection of each cartridge.
pub fn run(a: Args, home: &Home) -> Result<Protected> {
    tapeloom_ops::library::protect(home, a.barcodes, !a.off).ops()
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
