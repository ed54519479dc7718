//! `library trim`: cut what failed jobs left at the end of cartridges, and forget
//! those jobs. On a virtual library this gives their disk space back.

use crate::output::{bytes, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::Home;

#[derive(clap::Args)]
pub struct Args {
    /// The cartridges to trim (default: every cartridge of the catalog).
    barcodes: Vec<String>,
    /// Say what would be cut, and cut nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The cartridges trimmed.
#[derive(Serialize)]
pub struct Trimmed {
    dry_run: bool,
    cartridges: Vec<Cartridge>,
}

/// What was cut from one cartridge.
#[derive(Serialize)]
struct Cartridge {
    barcode: String,
    /// Its data now ends before this block.
    from_block: u64,
    /// Bytes its file gave back (a virtual cartridge; none in a dry run).
    bytes_freed: Option<u64>,
    /// The failed jobs whose data was cut, now forgotten.
    jobs: Vec<i64>,
}

pub fn run(a: Args, home: &mut Home) -> Result<Trimmed> {
    let cut = tapeloom_engine::trim(home, &a.barcodes, a.dry_run)?;
    Ok(Trimmed {
        dry_run: a.dry_run,
        cartridges: cut
            .into_iter()
            .map(|t| Cartridge {
                barcode: t.barcode,
                from_block: t.from_block,
                bytes_freed: t.bytes_freed,
                jobs: t.jobs,
            })
            .collect(),
    })
}

impl Output for Trimmed {
    fn print(&self) {
        if self.cartridges.is_empty() {
            outln!("no cartridge ends with data of failed jobs");
        }
        let verb = if self.dry_run { "would cut" } else { "cut" };
        for c in &self.cartridges {
            let jobs: Vec<String> = c.jobs.iter().map(|j| j.to_string()).collect();
            let freed = c
                .bytes_freed
                .map(|b| format!(", {} freed", bytes(b)))
                .unwrap_or_default();
            outln!(
                "{}: {verb} from block {} (failed jobs {}){freed}",
                c.barcode,
                c.from_block,
                jobs.join(", ")
            );
        }
    }
}
