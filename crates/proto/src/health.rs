//! What drives said about cartridges, as a backup's or restore's document gives
//! it per drive and `tapeloom report` per cartridge.

use serde::{Deserialize, Serialize};

/// What a drive said about one cartridge at the end of its mount.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CartridgeHealth {
    /// The cartridge.
    pub barcode: String,
    /// The TapeAlert flags raised; null when the drive has no TapeAlert page.
    pub tape_alerts: Option<Vec<String>>,
    /// The volume statistics page; null when the drive has none.
    pub volume_statistics: Option<VolumeStatistics>,
}

/// The Volume Statistics log page (17h, SSC-4) of a cartridge: counters the drive
/// keeps in the cartridge memory. Each is left out when the drive leaves it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeStatistics {
    /// Times the cartridge was mounted (0001h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mounts: Option<u64>,
    /// Data sets written over the cartridge's life (0002h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub datasets_written: Option<u64>,
    /// Write errors the drive recovered from by rewriting (0003h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recovered_write_errors: Option<u64>,
    /// Write errors it could not recover from (0004h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unrecovered_write_errors: Option<u64>,
    /// Data sets read over the cartridge's life (0007h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub datasets_read: Option<u64>,
    /// Read errors recovered (0008h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub recovered_read_errors: Option<u64>,
    /// Read errors not recovered (0009h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unrecovered_read_errors: Option<u64>,
    /// Megabytes (10^6 bytes) written during the last mount (000Eh).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_mount_mb_written: Option<u64>,
    /// Megabytes read during the last mount (000Fh).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_mount_mb_read: Option<u64>,
    /// Megabytes written over the cartridge's life (0010h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lifetime_mb_written: Option<u64>,
    /// Megabytes read over the cartridge's life (0011h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lifetime_mb_read: Option<u64>,
    /// The drive's compression ratio for writes since the last load (0012h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_load_write_compression_ratio: Option<f64>,
    /// Native capacity, megabytes (0016h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub native_capacity_mb: Option<u64>,
    /// Native capacity used, megabytes (0017h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub used_native_capacity_mb: Option<u64>,
    /// The cartridge's serial number from its memory (0040h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub volume_serial: Option<String>,
    /// Write protected (0080h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub write_protected: Option<bool>,
    /// A WORM cartridge (0081h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub worm: Option<bool>,
    /// Passes over the beginning of the medium (0101h).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub beginning_of_medium_passes: Option<u64>,
    /// Passes over the middle of the medium (0102h): the wear figure.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub middle_of_medium_passes: Option<u64>,
}
