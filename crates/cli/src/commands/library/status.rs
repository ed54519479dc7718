//! `library status`: drives, slots and cartridges, with what the catalog knows.

use crate::error::OpsResult;
use crate::output::{self, Output};
use anyhow::Result;
use tapeloom_engine::{escape_controls, Home};
pub use tapeloom_ops::library::Status;

/// The library's drives, slots and cartridges.
pub fn run(home: &Home) -> Result<Status> {
    tapeloom_ops::library::status(home).ops()
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
