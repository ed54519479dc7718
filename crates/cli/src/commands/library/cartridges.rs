//! `library load`, `unload`, `move` and `label`: one cartridge (or a few) at a time.

use crate::error::OpsResult;
use crate::output::Output;
use anyhow::{Context, Result};
use serde::Serialize;
use tapeloom_engine::{escape_controls, Home};
use tapeloom_ops::library::Moved;

#[derive(clap::Args)]
pub struct LoadArgs {
    /// The cartridge's barcode.
    barcode: String,
    /// The drive (default: an empty one).
    #[arg(long, value_parser = crate::commands::usize_in(..=crate::commands::MAX_INDEX))]
    drive: Option<usize>,
}

/// A cartridge and the drive it is loaded in.
#[derive(Serialize)]
pub struct Loaded {
    barcode: String,
    drive: usize,
}

pub fn load(a: LoadArgs, home: &Home) -> Result<Loaded> {
    let drive = tapeloom_engine::load_cartridge(home, &a.barcode, a.drive)?;
    Ok(Loaded {
        barcode: a.barcode,
        drive,
    })
}

impl Output for Loaded {
    fn print(&self) {
        outln!(
            "{} loaded in drive {}",
            escape_controls(&self.barcode),
            self.drive
        );
    }
}

#[derive(clap::Args)]
pub struct UnloadArgs {
    /// The drive.
    #[arg(long, value_parser = crate::commands::usize_in(..=crate::commands::MAX_INDEX))]
    drive: Option<usize>,
}

/// The cartridges taken out of drives.
#[derive(Serialize)]
pub struct Unloaded {
    unloaded: Vec<Loaded>,
}

pub fn unload(a: UnloadArgs, home: &Home) -> Result<Unloaded> {
    let moved = tapeloom_engine::unload_drives(home, a.drive)?;
    let unloaded = (moved.into_iter())
        .map(|(drive, barcode)| Loaded { barcode, drive })
        .collect();
    Ok(Unloaded { unloaded })
}

impl Output for Unloaded {
    fn print(&self) {
        if self.unloaded.is_empty() {
            outln!("no cartridge to unload");
        }
        for u in &self.unloaded {
            outln!(
                "{} unloaded from drive {}",
                escape_controls(&u.barcode),
                u.drive
            );
        }
    }
}

#[derive(clap::Args)]
pub struct CleanArgs {
    /// The drive.
    #[arg(value_parser = crate::commands::usize_in(..=crate::commands::MAX_INDEX))]
    drive: usize,
}

/// A cleaning done.
#[derive(Serialize)]
pub struct Cleaned {
    #[serde(flatten)]
    done: tapeloom_device::Cleaned,
    /// The cartridge put back first.
    put_back: Option<String>,
}

pub fn clean(a: CleanArgs, home: &Home) -> Result<Cleaned> {
    let (done, put_back) = tapeloom_engine::clean_drive(home, a.drive)?;
    Ok(Cleaned { done, put_back })
}

impl Output for Cleaned {
    fn print(&self) {
        if let Some(b) = &self.put_back {
            outln!(
                "{} unloaded from drive {}",
                escape_controls(b),
                self.done.drive
            );
        }
        let left = self
            .done
            .uses_left
            .map(|n| format!(" ({n} cleanings left on it)"))
            .unwrap_or_default();
        outln!(
            "drive {} cleaned with {}{left}",
            self.done.drive,
            escape_controls(&self.done.barcode)
        );
    }
}

#[derive(clap::Args)]
pub struct MoveArgs {
    /// The cartridge's barcode.
    barcode: String,
    /// The slot's or mail slot's address, as `library inventory` lists it.
    #[arg(value_parser = crate::commands::usize_in(..=crate::commands::MAX_INDEX))]
    slot: usize,
}

/// A cartridge from a drive or slot into an empty slot.
pub fn move_cartridge(a: MoveArgs, home: &Home) -> Result<Moved> {
    tapeloom_ops::library::move_cartridge(home, a.barcode, a.slot).ops()
}

impl Output for Moved {
    fn print(&self) {
        outln!(
            "{} is in slot {}",
            escape_controls(&self.barcode),
            self.slot
        );
    }
}

#[derive(clap::Args)]
pub struct LabelArgs {
    /// The cartridges' barcodes.
    #[arg(required = true)]
    barcodes: Vec<String>,
    /// The pool the volumes belong to.
    #[arg(long, default_value = "default")]
    pool: String,
    /// Overwrite foreign data, or a volume and its jobs.
    #[arg(long)]
    force: bool,
}

/// The cartridges labelled, and for which pool.
#[derive(Serialize)]
pub struct Labelled {
    labelled: Vec<Label>,
    pool: String,
}

/// One cartridge labelled: what it held before.
#[derive(Serialize)]
struct Label {
    barcode: String,
    was: String,
    jobs_forgotten: Vec<i64>,
}

pub fn label(a: LabelArgs, home: &Home) -> Result<Labelled> {
    let mut labelled = Vec::new();
    let block_size = tapeloom_format::DEFAULT_BLOCK_SIZE as u32;
    for b in &a.barcodes {
        let l = tapeloom_engine::label(home, b, &a.pool, block_size, a.force)
            .with_context(|| format!("label {b}"))?;
        labelled.push(Label {
            barcode: l.barcode,
            was: l.was,
            jobs_forgotten: l.jobs_forgotten,
        });
    }
    // Cartridges go back to their slots.
    tapeloom_engine::unload_drives(home, None)?;
    Ok(Labelled {
        labelled,
        pool: a.pool,
    })
}

impl Output for Labelled {
    fn print(&self) {
        for l in &self.labelled {
            outln!(
                "{} labelled for pool {} (was {}{})",
                escape_controls(&l.barcode),
                escape_controls(&self.pool),
                escape_controls(&l.was),
                if l.jobs_forgotten.is_empty() {
                    String::new()
                } else {
                    format!("; jobs forgotten: {:?}", l.jobs_forgotten)
                }
            );
        }
    }
}
