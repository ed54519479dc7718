//! What drives said about cartridges, and a backup's or restore's line per drive.

use serde::Serialize;
use tapeloom_device::{DriveHealth, VolumeStatistics};

/// What a drive said about one cartridge at the end of its mount.
#[derive(Serialize)]
pub struct CartridgeHealth {
    /// The cartridge.
    pub barcode: String,
    /// The TapeAlert flags raised; null when the drive has no TapeAlert page.
    pub tape_alerts: Option<Vec<String>>,
    /// The volume statistics page; null when the drive has none.
    pub volume_statistics: Option<VolumeStatistics>,
}

/// What a drive said about each cartridge at the end of its mount.
pub fn cartridges(health: &[(String, DriveHealth)]) -> Vec<CartridgeHealth> {
    health
        .iter()
        .map(|(barcode, h)| CartridgeHealth {
            barcode: barcode.clone(),
            tape_alerts: h.tape_alerts.clone(),
            volume_statistics: h.volume_statistics.clone(),
        })
        .collect()
}

/// The TapeAlert flags a drive raised during a job, over all its mounts, each once;
/// None when the drive has no TapeAlert page.
pub fn tape_alerts(health: &[(String, DriveHealth)]) -> Option<Vec<String>> {
    let mut all: Option<Vec<String>> = None;
    for (_, h) in health {
        if let Some(flags) = &h.tape_alerts {
            let all = all.get_or_insert_with(Vec::new);
            for f in flags {
                if !all.contains(f) {
                    all.push(f.clone());
                }
            }
        }
    }
    all
}
