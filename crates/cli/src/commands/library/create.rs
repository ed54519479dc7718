//! `library create`: a new layout for the home's virtual library.

use crate::commands::ClockArg;
use crate::error::CliError;
use crate::error::OpsResult;
use crate::output::{self, Output};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use tapeloom_device::{LibraryConfig, MAX_CLEANING, MAX_DRIVES, MAX_SLOTS, MIN_CAPACITY};
use tapeloom_engine::Home;

#[derive(clap::Args)]
pub struct Args {
    /// Number of drives (1 to 256).
    #[arg(
        long,
        default_value_t = tapeloom_engine::DEFAULT_DRIVES,
        value_parser = crate::commands::usize_in(1..=MAX_DRIVES as u64)
    )]
    drives: usize,
    /// Number of slots, each with a cartridge (1 to 9999).
    #[arg(
        long,
        default_value_t = tapeloom_engine::DEFAULT_SLOTS,
        value_parser = crate::commands::usize_in(1..=MAX_SLOTS as u64)
    )]
    slots: usize,
    /// Capacity of each cartridge (for example 64M, 1T; at least 4M). Default:
    /// with --model, the generation's native capacity times --scale (the
    /// smallest of a list's generations: its cartridges fit every drive), else
    /// 1T.
    #[arg(long, value_parser = size::within(MIN_CAPACITY, size::MAX))]
    capacity: Option<u64>,
    /// Give the drives the timing of an LTO generation (lto1 .. lto10), or one
    /// per drive separated by commas (lto5,lto9: the last for the drives the list
    /// does not reach).
    #[arg(long)]
    model: Option<String>,
    /// virtual (add up modeled time) or real (take that long), with --model.
    #[arg(long, requires = "model")]
    clock: Option<ClockArg>,
    /// Multiply the model's rates, buffers and capacity by this, with --model
    /// (0.001 to 1000; down to 0.000001 with --clock virtual).
    #[arg(long, requires = "model", value_parser = size::library_scale)]
    scale: Option<f64>,
    /// Cleaning cartridges (CLN001L1 ...; 0 to 999), each in a slot of its own
    /// after the data slots; each cleans 50 times.
    #[arg(
        long,
        default_value_t = 0,
        value_parser = crate::commands::usize_in(..=MAX_CLEANING as u64)
    )]
    cleaning: usize,
    /// The first two characters of the cartridges' barcodes (capital letters or
    /// digits; default TL): each library of servers that share a catalog needs
    /// its own.
    #[arg(long, value_parser = prefix)]
    prefix: Option<String>,
    /// Mail slots (import/export elements; 0 to 64), empty when made: where
    /// `library export` puts cartridges that go offsite.
    #[arg(
        long,
        default_value_t = 0,
        value_parser = crate::commands::usize_in(..=tapeloom_device::MAX_MAIL_SLOTS as u64)
    )]
    mail_slots: usize,
    /// What the cartridges keep of each data block: all (a library to back up to)
    /// or none (labels, the index and each block's header only: for experiments at
    /// full scale, whose drives write faster than this machine's disk; nothing
    /// written to it can be restored).
    #[arg(long, value_enum, default_value_t = Payload::All)]
    payload: Payload,
}

/// What a virtual library's cartridges keep of each data block.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    /// Every byte.
    All,
    /// The header alone.
    None,
}

fn prefix(s: &str) -> std::result::Result<String, String> {
    if tapeloom_device::valid_prefix(s) {
        Ok(s.to_string())
    } else {
        Err("a barcode prefix is two capital letters or digits (not CL)".into())
    }
}

/// The new library's layout and cartridges.
#[derive(Serialize)]
pub struct Created {
    drives: usize,
    slots: usize,
    capacity: u64,
    model: Option<String>,
    clock: Option<tapeloom_device::Clock>,
    scale: Option<f64>,
    payload: Payload,
    barcodes: Vec<String>,
    /// Where it lives, for people.
    #[serde(skip)]
    dir: PathBuf,
}

/// The capacity of a cartridge when none is given: the native capacity of the
/// smallest generation `model` names, times `scale`; 1 TiB without a model.
fn default_capacity(model: Option<&str>, scale: Option<f64>) -> u64 {
    let native = (model.unwrap_or("").split(','))
        .filter_map(|m| tapeloom_device::lto::generation(m.trim()))
        .map(|p| p.capacity_bytes)
        .reduce(f64::min);
    match native {
        Some(bytes) => ((bytes * scale.unwrap_or(1.0)) as u64).max(MIN_CAPACITY),
        None => 1 << 40,
    }
}

pub fn run(a: Args, home: &Home) -> Result<Created> {
    let real = matches!(a.clock, Some(ClockArg::Real));
    if let Some(scale) = a.scale.filter(|f| *f < size::SCALE.0 && real) {
        let floor = size::SCALE.0;
        return Err(CliError::ScaleNeedsVirtualClock { scale, floor }.into());
    }
    let capacity = (a.capacity).unwrap_or_else(|| default_capacity(a.model.as_deref(), a.scale));
    let cfg = LibraryConfig {
        drives: a.drives,
        slots: a.slots,
        capacity,
        model: a.model.clone(),
        clock: a.clock.map(Into::into),
        scale: a.scale,
        cleaning: a.cleaning,
        prefix: a.prefix.clone(),
        mail_slots: a.mail_slots,
        headers_only: a.payload == Payload::None,
    };
    let lib = tapeloom_ops::library::create(home, cfg).ops()?;
    Ok(Created {
        drives: a.drives,
        slots: a.slots,
        capacity,
        model: a.model,
        clock: lib.config().clock,
        scale: lib.config().scale,
        payload: a.payload,
        barcodes: lib.all_barcodes(),
        dir: home.library_dir(),
    })
}

impl Output for Created {
    fn print(&self) {
        outln!(
            "library with {} drives and {} cartridges of {} in {}",
            self.drives,
            self.slots,
            output::bytes(self.capacity),
            self.dir.display()
        );
        if self.payload == Payload::None {
            outln!("its cartridges keep block headers only: for experiments, never for backups");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_cartridge_holds_its_generations_native_capacity() {
        assert_eq!(default_capacity(None, None), 1 << 40);
        assert_eq!(default_capacity(Some("lto3"), None), 400_000_000_000);
        assert_eq!(default_capacity(Some("lto9"), Some(0.001)), 18_000_000_000);
        // A list's cartridges fit its smallest generation.
        assert_eq!(default_capacity(Some("lto5,lto9"), None), 1_500_000_000_000);
        // A scale that would make it too small gives the least a cartridge holds.
        assert_eq!(default_capacity(Some("lto1"), Some(0.000001)), MIN_CAPACITY);
    }
}
