//! `library status`: drives, slots and cartridges, with what the catalog knows.

use crate::output::{self, Output};
use anyhow::{Context, Result};
use serde::Serialize;
use tapeloom_device::{DriveHealth, VolumeStatistics};
use tapeloom_engine::{escape_controls, Home};

/// The library's drives, slots and cartridges.
#[derive(Serialize)]
pub struct Status {
    library: String,
    drives: Vec<Drive>,
    slots: Vec<super::inventory::Slot>,
    cartridges: Vec<Cartridge>,
    /// Cartridges exported (`library export`) and not imported since.
    offsite: Vec<Offsite>,
    bytes_used: u64,
    /// The slots, drives and cartridge capacity, for the heading.
    #[serde(skip)]
    capacity: Option<u64>,
}

/// A cartridge offsite: since when, and whether it still waits in a mail slot.
#[derive(Serialize)]
struct Offsite {
    barcode: String,
    since: String,
    mail_slot: Option<usize>,
}

/// A drive, its cartridge, and what it says of its health.
#[derive(Serialize)]
struct Drive {
    index: usize,
    device: String,
    loaded: Option<String>,
    tape_alerts: Option<Vec<String>>,
    volume_statistics: Option<VolumeStatistics>,
}

/// A cartridge: where it is, what the catalog knows of it, and how full it is.
#[derive(Serialize)]
struct Cartridge {
    barcode: String,
    location: String,
    state: String,
    jobs: u64,
    bytes_used: Option<u64>,
    capacity: Option<u64>,
    write_protected: bool,
    /// Its label's generation (one more each time it was recycled); none for a
    /// cartridge tapeloom has not labelled.
    generation: Option<u32>,
    /// Why it is suspect, and other events of its life the catalog noted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

pub use tapeloom_ops::library::cartridge_state;

pub fn run(home: &Home) -> Result<Status> {
    let mut lib = home.library().context("open the library")?;
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
        drives.push(Drive {
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
        slots: super::inventory::slots(&inv.slots),
        bytes_used: cartridges.iter().filter_map(|c| c.bytes_used).sum(),
        cartridges,
        capacity,
    })
}

impl Output for Status {
    fn print(&self) {
        outln!(
            "{}: {} drives, {} slots{}",
            escape_controls(&self.library),
            self.drives.len(),
            self.slots.len(),
            self.capacity
                .map(|c| format!(", cartridges of {}", output::bytes(c)))
                .unwrap_or_default()
        );
        for d in &self.drives {
            outln!(
                "drive {}: {}{}",
                d.index,
                escape_controls(d.loaded.as_deref().unwrap_or("empty")),
                match &d.tape_alerts {
                    Some(a) if !a.is_empty() => format!("  TapeAlert: {a:?}"),
                    _ => String::new(),
                }
            );
        }
        for c in &self.cartridges {
            outln!(
                "{}  {:<8} {:<8} {:>10} used  {} jobs{}",
                escape_controls(&c.barcode),
                c.location,
                c.state,
                c.bytes_used
                    .map(output::bytes)
                    .unwrap_or_else(|| "?".into()),
                c.jobs,
                match c.generation {
                    Some(g) if g > 0 => format!("  generation {g}"),
                    _ => String::new(),
                }
            );
            if let Some(n) = c.notes.last() {
                outln!("  {}", escape_controls(n));
            }
        }
        for o in &self.offsite {
            let at = match o.mail_slot {
                Some(s) => format!(", in mail slot {s}"),
                None => String::new(),
            };
            outln!(
                "{}  offsite since {}{at}",
                escape_controls(&o.barcode),
                o.since
            );
        }
    }
}
