//! Media: what is on a cartridge and which one a job may use (`policy`), the writer
//! that lands a drive's blocks and spans cartridges (`writer`), and the reader that
//! reads a job back in tape order (`reader`).

pub(crate) mod policy;
pub(crate) mod reader;
pub(crate) mod scan;
pub(crate) mod segment;
pub mod shared;
pub(crate) mod trim;
pub(crate) mod writer;

use crate::error::{Error, Result};
use tapeloom_catalog::Catalog;
use tapeloom_device::DriveHealth;

/// A fresh random UUID (version 4), for volume labels and job tags.
pub(crate) fn random_uuid() -> [u8; 16] {
    *uuid::Uuid::new_v4().as_bytes()
}

/// Stores what each drive said about each cartridge at the end of its mounts, in
/// place of what an earlier run of the same operation stored.
pub(crate) fn save_health<'a>(
    cat: &Catalog,
    job_id: i64,
    op: &str,
    per_drive: impl IntoIterator<Item = (usize, &'a [(String, DriveHealth)])>,
) -> Result<()> {
    cat.clear_drive_health(job_id, op)?;
    for (drive, health) in per_drive {
        for (barcode, h) in health {
            let text = serde_json::to_string(h).map_err(|source| Error::Json {
                what: format!("encode the health of {barcode}"),
                source,
            })?;
            cat.add_drive_health(job_id, op, drive as i64, barcode, &text)?;
        }
    }
    Ok(())
}
